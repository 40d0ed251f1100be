package imposterhttp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/imposter"
)

// Claims is proxyOnce's claim protocol as imposters use it (core/
// proxyonce in the node): the first request for a new signature, on any
// node, wins the claim and calls upstream; its recording is stored with
// the imposter's configuration, where every node replays it; the others
// wait for it (bounded) and get 503 if it does not come.
type Claims interface {
	// Acquire answers with the recording, a won claim, or an error (a
	// 503: upstream is not called).
	Acquire(ctx context.Context, key string) (proxyonce.Answer, error)
	// Record stores a won claim's recording; an error means it may not
	// be stored.
	Record(ctx context.Context, key string, t proxyonce.Token, recording []byte) error
	// Release gives a won claim up (the upstream call failed).
	Release(key string, t proxyonce.Token)
}

// UseClaims makes proxyOnce calls claim through c.
func (s *Server) UseClaims(c Claims) { s.claims = c }

// proxy makes a proxy call. A proxyOnce call claims its signature first:
// a recording made anywhere is placed here and matched; a won claim
// calls upstream and records; anything else is a 503 and calls nobody.
// retry asks the caller to match the request again.
func (h *imposterHandler) proxy(wr *wireRequest, c *imposter.ProxyCall) (out imposter.Outcome, retry bool, err error) {
	if c.Signature == "" {
		out, retry, err = h.call(wr, c)
		if err == nil && c.Mode == imposter.ProxyAlways {
			h.storeAlways(c)
		}
		return out, retry, err
	}
	h.sv.mu.Lock()
	once := len(h.sv.def.Recordings) - h.sv.always
	h.sv.mu.Unlock()
	if once >= MaxOnceRecordings {
		// Recording it would pass the bound; calling upstream without
		// recording could call it twice for one signature. Neither.
		return imposter.Outcome{}, false, errBusy{e: &imposter.Error{Code: "busy", Message: fmt.Sprintf(
			"proxyOnce: the imposter holds %d recordings, the most kept: DELETE /imposters/%d/savedProxyResponses to record more", once, h.sv.port)}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), ClaimWait)
	defer cancel()
	ans, err := h.s.claims.Acquire(ctx, c.Signature)
	switch {
	case err != nil:
		return imposter.Outcome{}, false, errBusy{e: &imposter.Error{Code: "busy", Message: "proxyOnce: " + err.Error()}}
	case ans.Recorded != nil:
		if err := h.place(c.Signature, ans.Recorded); err != nil {
			return imposter.Outcome{}, false, errBusy{e: &imposter.Error{Code: "busy", Message: "proxyOnce: the recording cannot be replayed here: " + err.Error()}}
		}
		return imposter.Outcome{}, true, nil
	}
	out, _, err = h.call(wr, c)
	rec := c.Recording()
	if err != nil || rec == nil {
		h.s.claims.Release(c.Signature, ans.Token)
		return out, false, err
	}
	h.sv.mu.Lock()
	b := encodeRecording(recording{incarnation: h.sv.scope, proxyStub: c.ProxyStub(), stub: rec})
	h.sv.mu.Unlock()
	if err := h.s.claims.Record(ctx, c.Signature, ans.Token, b); err != nil {
		// The answer came from upstream and is served; the cluster may
		// not replay it (another node may call upstream once more).
		h.s.log.Warn("proxyOnce recording not stored", "signature", c.Signature, "err", err)
		if !errors.Is(err, proxyonce.ErrAlreadyRecorded) {
			h.s.claims.Release(c.Signature, ans.Token)
			return out, false, nil
		}
	}
	// The recording answers the next matching request, whichever member
	// takes it: not before every member has placed it.
	if missing := h.s.rolloutHere(ctx); len(missing) > 0 {
		out.Headers = append(slices.Clone(out.Headers), imposter.Header{Name: UnconfirmedHeader, Values: []string{strings.Join(missing, ", ")}})
	}
	return out, false, nil
}

// rolloutHere waits until every member serves what this node's
// configuration holds now (a linearizable read, this node's pass, the
// rollout), and returns the members that did not confirm it.
func (s *Server) rolloutHere(ctx context.Context) []string {
	err := s.cfg.Sync(ctx)
	var rev uint64
	if err == nil {
		rev, err = s.cfg.Revision(ctx)
	}
	if err == nil {
		err = s.reconcile(ctx)
	}
	missing := []string{"rollout not confirmed: " + fmt.Sprint(err)}
	if err == nil {
		missing = s.unconfirmed(ctx, rev)
	}
	if len(missing) > 0 {
		s.log.Warn("a recording may not be served by every member yet", "unconfirmed", strings.Join(missing, ", "))
	}
	return missing
}

// place puts a recording made anywhere into this node's imposter.
func (h *imposterHandler) place(key string, b []byte) error {
	rec, err := decodeRecording(b)
	if err != nil {
		return err
	}
	h.sv.mu.Lock()
	defer h.sv.mu.Unlock()
	if rec.incarnation != h.sv.scope {
		return fmt.Errorf("it was made for an earlier imposter on this port, or before its recordings were deleted")
	}
	return h.sv.imp.AddRecording(key, rec.proxyStub, rec.stub)
}

// MaxOnceRecordings bounds the proxyOnce recordings the cluster keeps
// for one imposter (each a raft entry of up to the KV's value bound, in
// every member's state and snapshots): past it a request no recording
// answers is a 503 that calls nobody, until the recordings are deleted.
const MaxOnceRecordings = 1000

// MaxAlwaysRecordings bounds the proxyAlways responses the cluster keeps
// for one creation of an imposter (each a raft entry, kept in every
// member's state and snapshots): past it a proxyAlways stub still
// proxies, and records nothing more (a warning in the log says so).
const MaxAlwaysRecordings = 1000

// alwaysKey marks a proxyAlways recording's key: <port>:always-<id>.
const alwaysKey = ":always-"

// storeAlways stores a proxyAlways response with the imposter's
// configuration, where every member places it in the order stored, and
// returns once it is committed: a read of the imposter through any
// member afterwards shows it. The answer has come from upstream and is
// served whatever happens here.
func (h *imposterHandler) storeAlways(c *imposter.ProxyCall) {
	rec := c.Recording()
	if rec == nil {
		return
	}
	h.sv.mu.Lock()
	port, stored := h.sv.port, h.sv.always
	b := encodeRecording(recording{incarnation: h.sv.scope, proxyStub: c.ProxyStub(), always: true, stub: rec})
	h.sv.mu.Unlock()
	if stored >= MaxAlwaysRecordings {
		h.s.log.Warn(fmt.Sprintf("[http:%d] proxyAlways response not recorded: the imposter holds %d, the most kept", port, stored))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ClaimWait)
	defer cancel()
	key := strconv.Itoa(port) + alwaysKey + newID()
	if err := h.s.cfg.AddRecording(ctx, port, key, b); err != nil {
		h.s.log.Warn(fmt.Sprintf("[http:%d] proxyAlways response may not be recorded: %v", port, err))
	}
}

// Bounds on proxyOnce claims in a server alone (MemoryClaims): signatures
// in flight, requests waiting on one, and how long a request waits for a
// claim's answer (in the node too). Past them a request gets 503 and
// calls nobody.
const (
	MaxClaims      = 10000
	MaxClaimWaiter = 1024
	ClaimWait      = 30 * time.Second
)

// MemoryClaims is the claim protocol within one process, for a server
// alone (this package's tests): recordings go to its MemoryConfig.
type MemoryClaims struct {
	cfg     *MemoryConfig
	mu      sync.Mutex
	pending map[string]*memClaim
	seq     uint64
}

type memClaim struct {
	token   proxyonce.Token
	done    chan struct{}
	waiters int
}

// NewMemoryClaims returns claims recording into cfg.
func NewMemoryClaims(cfg *MemoryConfig) *MemoryClaims {
	return &MemoryClaims{cfg: cfg, pending: map[string]*memClaim{}}
}

func keyPort(key string) int {
	p, _, _ := strings.Cut(key, ":")
	n, _ := strconv.Atoi(p)
	return n
}

// Acquire implements Claims.
func (m *MemoryClaims) Acquire(ctx context.Context, key string) (proxyonce.Answer, error) {
	if b, ok := m.cfg.recorded(keyPort(key), key); ok {
		return proxyonce.Answer{Recorded: b}, nil
	}
	m.mu.Lock()
	cl := m.pending[key]
	switch {
	case cl != nil && cl.waiters >= MaxClaimWaiter:
		m.mu.Unlock()
		return proxyonce.Answer{}, errors.New("too many requests are waiting for this recording")
	case cl != nil:
		cl.waiters++
		m.mu.Unlock()
		select {
		case <-cl.done:
		case <-ctx.Done():
			return proxyonce.Answer{}, errors.New("the recording this request waits for took too long")
		}
		if b, ok := m.cfg.recorded(keyPort(key), key); ok {
			return proxyonce.Answer{Recorded: b}, nil
		}
		return proxyonce.Answer{}, errors.New("the call this request waited for recorded nothing")
	case len(m.pending) >= MaxClaims:
		m.mu.Unlock()
		return proxyonce.Answer{}, fmt.Errorf("%d recordings are in flight", MaxClaims)
	}
	m.seq++
	cl = &memClaim{token: proxyonce.Token{Seq: m.seq}, done: make(chan struct{})}
	m.pending[key] = cl
	m.mu.Unlock()
	return proxyonce.Answer{Won: true, Token: cl.token}, nil
}

// Record implements Claims.
func (m *MemoryClaims) Record(_ context.Context, key string, t proxyonce.Token, recording []byte) error {
	defer m.Release(key, t)
	if !m.cfg.record(keyPort(key), key, recording) {
		return proxyonce.ErrAlreadyRecorded
	}
	return nil
}

// Release implements Claims.
func (m *MemoryClaims) Release(key string, t proxyonce.Token) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cl := m.pending[key]; cl != nil && cl.token == t {
		delete(m.pending, key)
		close(cl.done)
	}
}
