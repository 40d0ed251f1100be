package proxyonce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/binenc"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// This file: the claim protocol between a node that saw a new signature
// (the requester) and the signature's owner on the ring.
//
//	requester                           owner (ring class proxy)
//	recorded in the KV? answer from it
//	Acquire  ---- claim(m_idx, key) --->  isolated, not owner, other m_idx: refuse
//	                                       recorded in its KV: the answer
//	         <--- won(token) | lost(token) | recorded(answer) | refused
//	won:  call upstream, then
//	Record   ---- record(key, token, answer) ---> stale token: refuse
//	                                       propose to raft (put if absent);
//	         <--- recorded | refused        answer when it commits
//	      or Release (upstream failed)
//	lost: wait, reading the KV, until the answer is there or the wait ends
//
// Every failure is ErrUnavailable (a 503 to the client, and no upstream
// call); Known says whether the request certainly changed nothing.

// FramePrefix is the first byte of every claim frame (raft's are 1, the
// flow store's 2).
const FramePrefix = 3

// Envelope families (data class): claim → claim-resp, record →
// record-resp; a release is one-way. Apart from the flow store's 1..3 and
// raft's 1..4.
const (
	FamilyClaim  = 5
	FamilyRecord = 6
)

// FrameKind says what a claim frame is to the envelope.
func FrameKind(b []byte) (family uint8, reply bool, ok bool) {
	if len(b) < 3 || b[0] != FramePrefix {
		return 0, false, false
	}
	switch b[1] {
	case frameClaim:
		return FamilyClaim, false, true
	case frameClaimResp:
		return FamilyClaim, true, true
	case frameRecord:
		return FamilyRecord, false, true
	case frameRecordResp:
		return FamilyRecord, true, true
	case frameRelease:
		return 0, false, true
	}
	return 0, false, false
}

// Frame kinds.
const (
	frameClaim      = 1
	frameClaimResp  = 2
	frameRecord     = 3
	frameRecordResp = 4
	frameRelease    = 5
)

// Outcomes in a response frame.
const (
	outWon      = 1
	outLost     = 2
	outRecorded = 3
	outRefused  = 4
	outStale    = 5
	outBusy     = 6
	outAlready  = 7 // another recording got there first
)

// Errors. Every one reaches the caller wrapped in ErrUnavailable.
var (
	ErrUnavailable = errors.New("proxyonce: no owner can serialize the claim")
	ErrNoOwner     = errors.New("no owner (no committed membership)")
	ErrRefused     = errors.New("the owner refused (isolated, not the owner, or at another membership)")
	ErrTimeout     = errors.New("timed out")
	ErrSend        = errors.New("send failed")
	ErrWaited      = errors.New("the winner's recording did not come in time")
	// ErrAlreadyRecorded is a recording that found another in place (it
	// lost a race with a later claim's, after a lapse or an ownership
	// move): the answer to serve is the one in the KV.
	ErrAlreadyRecorded = errors.New("proxyonce: another answer is recorded")
)

func unavailable(cause error) error { return fmt.Errorf("%w: %w", ErrUnavailable, cause) }

// KVKey is where a signature's recorded answer lives in the replicated KV.
func KVKey(key string) string { return "proxyonce/" + key }

// Control is what the service needs of the node's consensus part.
type Control interface {
	// Membership is the committed membership in force: its m_idx and its
	// voters, from which the ring is built.
	Membership() (mIdx uint64, voters []dial.NodeID)
	// IsIsolated is D-17: an isolated node serves as no owner.
	IsIsolated() bool
	// Recorded reads a recorded answer from this node's applied KV.
	Recorded(kvKey string) ([]byte, bool)
	// Record proposes the recording: put answer at kvKey unless the key
	// exists (always, if overwrite). done runs once, when the entry is
	// applied here: nil, or ErrAlreadyRecorded if the key existed; or
	// with the proposal's failure.
	Record(kvKey string, answer []byte, overwrite bool, done func(error))
	// Confirm answers once this node has applied everything committed
	// when it was called, as a quorum confirms (a ReadIndex barrier);
	// an error means no confirmation.
	Confirm(done func(error))
}

// Env is the service's world.
type Env struct {
	ID      dial.NodeID
	Session uint64 // drawn at boot from the node's seeded source
	Clock   clock.Clock
	Net     dial.Sender
	Ctl     Control
}

// ServiceConfig configures the protocol.
type ServiceConfig struct {
	Claims Config
	// Deadline bounds a call to the owner (claim, record). Default 2s.
	Deadline time.Duration
	// Wait bounds how long a loser waits for the winner's recording
	// before it is answered ErrWaited. Default 10s.
	Wait time.Duration
	// Poll is how often a waiting loser reads its KV. Default 20ms.
	Poll time.Duration
	// MaxCalls bounds the calls in flight (claims, records and waits)
	// and the claims this node won and has not yet recorded or released;
	// past it a call is refused at once. Default 4096.
	MaxCalls int
	// MaxWaiters bounds the losers waiting on one signature's recording;
	// past it a loser is refused at once. Default 1024.
	MaxWaiters int
	Bugs       bugs.Set
}

func (c ServiceConfig) withDefaults() ServiceConfig {
	if c.Deadline == 0 {
		c.Deadline = 2 * time.Second
	}
	if c.Wait == 0 {
		c.Wait = 10 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = 20 * time.Millisecond
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = 4096
	}
	if c.MaxWaiters == 0 {
		c.MaxWaiters = 1024
	}
	return c
}

// ErrBusyCalls is a call refused because MaxCalls are in flight, or
// MaxWaiters wait on its signature.
var ErrBusyCalls = errors.New("too many proxyOnce calls in flight")

// Answer is Acquire's: exactly one of Recorded (the answer to serve, no
// upstream call), Won (call upstream with Token, then Record or Release).
// A loser's Acquire answers only once the winner's recording is there.
type Answer struct {
	Recorded []byte
	Won      bool
	Token    Token
}

// Service is one node's side of the protocol: requester and owner.
type Service struct {
	cfg    ServiceConfig
	env    Env
	claims *Claims
	ring   ring.Ring
	ringM  uint64 // the m_idx the ring and the claims were built at; 0: none yet
	nextID uint64
	calls  map[uint64]*call
	active int // calls in flight, waits and held claims
	// held are the claims this node's callers won and have not yet
	// recorded or released: each keeps the call slot its claim took, so
	// that the recording that finishes the work is never refused at the
	// bound by new claims (proxyonce-race seed 228: at MaxCalls 1, three
	// clients' claims took the slot each time a winner's recording asked
	// for it, and nothing was ever recorded). A hold lapses with the
	// claim, so a caller that never comes back does not keep it.
	held map[Token]clock.Timer
	// waiting counts, per signature, the losers waiting on its recording.
	waiting map[string]int
	// waiters holds each waiting loser's answer at Stop, by the turn it
	// began waiting in: a stop answers the losers too, not only the
	// calls in flight (an exiting process runs no next poll).
	waiters map[uint64]func()
	waitSeq uint64
	// swept is when lapsed claims were last let go: serving a request
	// sweeps at most once a Lapse, so no timer runs for it.
	swept   time.Duration
	stopped bool
}

type call struct {
	key   string
	kind  uint8
	done  func(resp response)
	timer clock.Timer
}

// response is a decoded answer frame.
type response struct {
	out   uint8
	token Token
	value []byte
	err   error // set instead of out for local failures
}

// NewService returns a node's claim service.
func NewService(cfg ServiceConfig, env Env) *Service {
	cfg = cfg.withDefaults()
	// Call ids start above every id an earlier incarnation used (its
	// session, the boot epoch, is lower): an answer to a call the node
	// made before it restarted, delayed past the restart, must not be
	// taken for the answer to a new call that drew the same id
	// (proxyonce-crash seed 136: a grant for another signature, sent to
	// the node's last incarnation, made a new call's client call
	// upstream for its own signature under the wrong token).
	return &Service{cfg: cfg, env: env, claims: New(cfg.Claims, env.ID, env.Session), calls: map[uint64]*call{}, waiting: map[string]int{}, waiters: map[uint64]func(){},
		held: map[Token]clock.Timer{}, nextID: env.Session << 32}
}

// refresh rebuilds the ring at a new membership and forgets the claims
// this node no longer owns.
func (s *Service) refresh() (uint64, bool) {
	m, voters := s.env.Ctl.Membership()
	if m == 0 || len(voters) == 0 {
		return m, false
	}
	if m != s.ringM {
		s.ring, s.ringM = ring.New(voters), m
		s.claims.Forget(func(key string) bool {
			o, ok := s.ring.Owner(ring.ClassProxy, key)
			return ok && o == s.env.ID
		})
	}
	return m, true
}

// now is the monotonic clock: a claim's lapse is a duration, which a
// wall-clock step must neither shorten nor stretch.
func (s *Service) now() time.Duration { return s.env.Clock.Mono() }

// ErrStopped is a call made to, or in flight in, a stopped service.
var ErrStopped = errors.New("stopped")

// Stop fails every call in flight and refuses new ones: the node is
// going down.
func (s *Service) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	for t, timer := range s.held { //fenceline:unordered timers stopped; nothing is answered
		timer.Stop()
		delete(s.held, t)
		s.active--
	}
	for _, id := range slices.Sorted(maps.Keys(s.calls)) {
		if c := s.calls[id]; c != nil {
			c.done(response{err: unavailable(ErrStopped)})
		}
	}
	if s.cfg.Bugs.StopForgetsWaiters {
		return // the planted bug: the losers wait for a poll that never comes
	}
	for _, id := range slices.Sorted(maps.Keys(s.waiters)) {
		if stop := s.waiters[id]; stop != nil {
			stop()
		}
	}
}

// Acquire asks for key. done runs once, on the node's loop.
func (s *Service) Acquire(key string, done func(Answer, error)) {
	if s.stopped {
		done(Answer{}, unavailable(ErrStopped))
		return
	}
	if v, ok := s.env.Ctl.Recorded(KVKey(key)); ok {
		done(Answer{Recorded: v}, nil)
		return
	}
	if s.cfg.Bugs.NoClaim {
		done(Answer{Won: true}, nil) // the planted bug: no owner asked
		return
	}
	s.toOwner(key, frameClaim, Token{}, nil, func(r response) {
		switch {
		case r.err != nil:
			done(Answer{}, r.err)
		case r.out == outWon:
			s.hold(r.token)
			done(Answer{Won: true, Token: r.token}, nil)
		case r.out == outRecorded:
			done(Answer{Recorded: r.value}, nil)
		case r.out == outLost && s.cfg.Bugs.LoserRefused:
			done(Answer{}, unavailable(ErrRefused)) // the planted bug
		case r.out == outLost:
			s.wait(key, done)
		case r.out == outBusy:
			done(Answer{}, unavailable(ErrBusy))
		default:
			done(Answer{}, unavailable(ErrRefused))
		}
	})
}

// Record records the winner's answer. done(nil) once the recording is in
// raft; any error means it may not be (a timeout: unknown).
func (s *Service) Record(key string, t Token, answer []byte, done func(error)) {
	if s.stopped {
		done(unavailable(ErrStopped))
		return
	}
	s.unhold(t) // its slot is this call's
	s.toOwner(key, frameRecord, t, answer, func(r response) {
		switch {
		case r.err != nil:
			done(r.err)
		case r.out == outRecorded:
			done(nil)
		case r.out == outStale:
			done(unavailable(ErrStale))
		case r.out == outAlready:
			done(unavailable(ErrAlreadyRecorded))
		default:
			done(unavailable(ErrRefused))
		}
	})
}

// Release gives a won claim up, so the signature is claimable again.
// Nothing answers it: a lost release lapses.
func (s *Service) Release(key string, t Token) {
	s.unhold(t)
	m, ok := s.refresh()
	if !ok {
		return
	}
	owner, ok := s.ring.Owner(ring.ClassProxy, key)
	if !ok {
		return
	}
	f := frame{kind: frameRelease, m: m, key: key, token: t}
	if owner == s.env.ID {
		s.serveOwner(owner, f)
		return
	}
	_ = s.env.Net.Send(owner, f.encode())
}

// hold keeps the call slot of a claim won for t until the claim is
// recorded, released or lapses. The claim's call has just given its slot
// back, on this same turn, so the count does not pass the bound.
func (s *Service) hold(t Token) {
	if _, dup := s.held[t]; dup {
		return
	}
	s.active++
	s.held[t] = s.env.Clock.AfterFunc(s.claims.cfg.Lapse, func() { s.unhold(t) })
}

// unhold gives a held claim's slot back; nothing if t holds none.
func (s *Service) unhold(t Token) {
	timer, ok := s.held[t]
	if !ok {
		return
	}
	timer.Stop()
	delete(s.held, t)
	s.active--
}

// toOwner sends one request to key's owner (or serves it here) and hands
// the answer to done, bounded by the deadline and MaxCalls.
func (s *Service) toOwner(key string, kind uint8, t Token, value []byte, done func(response)) {
	m, ok := s.refresh()
	if !ok {
		done(response{err: unavailable(ErrNoOwner)})
		return
	}
	owner, ok := s.ring.Owner(ring.ClassProxy, key)
	if !ok {
		done(response{err: unavailable(ErrNoOwner)})
		return
	}
	if s.active >= s.cfg.MaxCalls {
		if !s.cfg.Bugs.SilentBusy {
			done(response{err: unavailable(ErrBusyCalls)})
		}
		return
	}
	s.active++
	s.nextID++
	id := s.nextID
	c := &call{key: key, kind: kind}
	finish := func(r response) {
		if s.calls[id] != c {
			return
		}
		delete(s.calls, id)
		c.timer.Stop()
		s.active--
		done(r)
	}
	c.done = finish
	s.calls[id] = c
	c.timer = s.env.Clock.AfterFunc(s.cfg.Deadline, func() { finish(response{err: unavailable(ErrTimeout)}) })
	f := frame{kind: kind, id: id, m: m, key: key, token: t, value: value}
	if owner == s.env.ID {
		s.serveOwner(s.env.ID, f)
		return
	}
	if err := s.env.Net.Send(owner, f.encode()); err != nil {
		if s.cfg.Bugs.LateSendRefusal {
			return // the planted bug: the deadline answers, an unknown outcome
		}
		finish(response{err: unavailable(fmt.Errorf("%w: %v", ErrSend, err))})
	}
}

// wait reads the KV until the winner's recording is there. It takes the
// call slot its claim's call gave back on this same turn, so only the
// bound on one signature's waiters can refuse it.
func (s *Service) wait(key string, done func(Answer, error)) {
	if s.waiting[key] >= s.cfg.MaxWaiters {
		if !s.cfg.Bugs.SilentBusy {
			done(Answer{}, unavailable(ErrBusyCalls))
		}
		return
	}
	s.active++
	s.waiting[key]++
	s.waitSeq++
	id := s.waitSeq
	var next clock.Timer // the next poll
	end := func(a Answer, err error) {
		delete(s.waiters, id)
		if next != nil {
			next.Stop()
		}
		s.active--
		if s.waiting[key]--; s.waiting[key] <= 0 {
			delete(s.waiting, key)
		}
		done(a, err)
	}
	s.waiters[id] = func() { end(Answer{}, unavailable(ErrStopped)) }
	deadline := s.env.Clock.Mono() + s.cfg.Wait
	var poll func()
	poll = func() {
		if v, ok := s.env.Ctl.Recorded(KVKey(key)); ok {
			end(Answer{Recorded: v}, nil)
			return
		}
		if s.env.Clock.Mono() >= deadline {
			end(Answer{}, unavailable(ErrWaited))
			return
		}
		next = s.env.Clock.AfterFunc(s.cfg.Poll, poll)
	}
	poll()
}

// HandleFrame takes a claim frame from the network.
func (s *Service) HandleFrame(from dial.NodeID, b []byte) {
	if s.stopped {
		return
	}
	f, err := decodeFrame(b)
	if err != nil {
		return // malformed: dropped, as any lost frame
	}
	switch f.kind {
	case frameClaim, frameRecord, frameRelease:
		s.serveOwner(from, f)
	case frameClaimResp, frameRecordResp:
		// An answer is its call's only if it names the call's key and
		// kind too: ids are unique to this incarnation (NewService), so
		// this refuses nothing but a forged or garbled frame.
		if c := s.calls[f.id]; c != nil && c.key == f.key && c.kind+1 == f.kind {
			c.done(response{out: f.out, token: f.token, value: f.value})
		}
	}
}

// serveOwner answers a request as key's owner. A claim is served only
// once this node has confirmed, with a quorum, that its membership is
// current (Control.Confirm): a node that is behind — restarted, or back
// from a partition, before it has applied what was committed meanwhile —
// still believes in the membership under which it owned the signature,
// and D-17 does not stop it once it hears its leader again. Without the
// barrier such a node granted a claim 2.75 s after the signature had
// moved, 25 ms after its restart, beside the new owner's pending claim
// (proxyonce-crash seed 128, once the checker judged a move's grants by
// when the old owner made them).
func (s *Service) serveOwner(from dial.NodeID, f frame) {
	if f.kind != frameClaim || s.cfg.Bugs.UnconfirmedClaim {
		s.serveCurrent(from, f, true)
		return
	}
	s.env.Ctl.Confirm(func(err error) {
		if !s.stopped {
			s.serveCurrent(from, f, err == nil)
		}
	})
}

// serveCurrent is serveOwner once the membership is confirmed (a claim)
// or needs no confirmation (a record, a release); a claim whose
// confirmation failed is refused.
func (s *Service) serveCurrent(from dial.NodeID, f frame, confirmed bool) {
	reply := func(out uint8, t Token, v []byte) {
		if f.kind == frameRelease {
			return // a release is never answered
		}
		if s.cfg.Bugs.SilentRefusal && out == outRefused {
			return // the planted bug: the caller waits out its deadline
		}
		r := frame{kind: f.kind + 1, id: f.id, key: f.key, out: out, token: t, value: v}
		if from == s.env.ID {
			if c := s.calls[f.id]; c != nil {
				c.done(response{out: out, token: t, value: v})
			}
			return
		}
		_ = s.env.Net.Send(from, r.encode())
	}
	m, ok := s.refresh()
	var owner dial.NodeID
	owned := false
	if ok {
		owner, owned = s.ring.Owner(ring.ClassProxy, f.key)
	}
	// D-17, fencing by m_idx, and ownership: refuse, never guess.
	if !confirmed || !ok || (s.env.Ctl.IsIsolated() && !s.cfg.Bugs.UnconfirmedClaim) || f.m != m || !owned || owner != s.env.ID {
		reply(outRefused, Token{}, nil)
		return
	}
	now := s.now()
	if now-s.swept >= s.cfg.Claims.Lapse {
		s.claims.Sweep(now)
		s.swept = now
	}
	switch f.kind {
	case frameClaim:
		if v, ok := s.env.Ctl.Recorded(KVKey(f.key)); ok {
			reply(outRecorded, Token{}, v)
			return
		}
		g, err := s.claims.Claim(f.key, now)
		switch {
		case errors.Is(err, ErrBusy):
			reply(outBusy, Token{}, nil)
		case err != nil:
			reply(outRefused, Token{}, nil)
		case g.Won:
			reply(outWon, g.Token, nil)
		default:
			reply(outLost, g.Token, nil)
		}
	case frameRecord:
		if err := s.claims.CheckRecord(f.key, f.token, now); err != nil && !s.cfg.Bugs.StaleToken {
			reply(outStale, Token{}, nil)
			return
		}
		key, t := f.key, f.token
		early := s.cfg.Bugs.RecordBeforeCommit
		if early {
			// The planted bug: the claim ends and the answer goes before
			// the entry commits.
			s.claims.Recorded(key)
			reply(outRecorded, Token{}, nil)
		}
		s.env.Ctl.Record(KVKey(key), f.value, s.cfg.Bugs.StaleToken, func(err error) {
			if early {
				return
			}
			switch {
			case errors.Is(err, ErrAlreadyRecorded):
				// Done if a copy of this very recording got there first
				// (its frame duplicated on the way): the answer in place
				// is this one. Lost to another's otherwise.
				if !s.recordedAlready(key, f.value) {
					reply(outAlready, Token{}, nil)
					return
				}
			case err != nil:
				reply(outRefused, Token{}, nil)
				return
			}
			if h, ok := s.claims.Holder(key, s.now()); ok && h == t {
				s.claims.Recorded(key)
			}
			reply(outRecorded, Token{}, nil)
		})
	case frameRelease:
		_ = s.claims.Release(f.key, f.token)
	}
}

// recordedAlready reports whether the answer recorded for key is value
// itself, byte for byte: a recording refused because the key exists has
// then found its own copy in place, not another's.
func (s *Service) recordedAlready(key string, value []byte) bool {
	v, ok := s.env.Ctl.Recorded(KVKey(key))
	return ok && bytes.Equal(v, value) && !s.cfg.Bugs.OwnRecordRefused
}

// Sweep lets lapsed claims go; the node calls it now and then.
func (s *Service) Sweep() int { return s.claims.Sweep(s.now()) }

// Pending is how many claims this node holds as an owner.
func (s *Service) Pending() int { return s.claims.Pending() }

// --- frames: a strict binary encoding

type frame struct {
	kind  uint8
	id    uint64
	m     uint64
	out   uint8
	key   string
	token Token
	value []byte
}

// maxValue bounds a recorded answer in a frame, well under dial.MaxFrame.
const maxValue = 8 << 20

func (f frame) encode() []byte {
	b := []byte{FramePrefix, f.kind, f.out}
	for _, v := range [...]uint64{f.id, f.m, uint64(f.token.Owner), f.token.Session, f.token.Seq} {
		b = binary.AppendUvarint(b, v)
	}
	b = binenc.AppendBytes(b, f.key)
	return binenc.AppendBytes(b, f.value)
}

var errFrame = errors.New("proxyonce: malformed frame")

// decodeFrame reads what encode wrote, strictly (core/binenc): a frame
// decodes only if it re-encodes to the same bytes.
func decodeFrame(b []byte) (frame, error) {
	if len(b) < 3 || b[0] != FramePrefix || b[1] < frameClaim || b[1] > frameRelease {
		return frame{}, errFrame
	}
	f := frame{kind: b[1], out: b[2]}
	d := binenc.Decoder{B: b[3:]}
	f.id, f.m = d.Uvarint(), d.Uvarint()
	f.token = Token{Owner: dial.NodeID(d.Uvarint()), Session: d.Uvarint(), Seq: d.Uvarint()}
	f.key = d.Str()
	value := d.Raw()
	d.End()
	switch {
	case d.Err != nil:
		return frame{}, fmt.Errorf("%w: %w", errFrame, d.Err)
	case len(value) > maxValue:
		return frame{}, fmt.Errorf("%w: a %d-byte value", errFrame, len(value))
	}
	if len(value) > 0 {
		f.value = append([]byte(nil), value...)
	}
	return f, nil
}
