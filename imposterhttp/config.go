package imposterhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/fenceline/fenceline/imposter"
)

// Config is where imposter definitions live. In the node it is the
// cluster's replicated KV: a change is one raft entry that every node
// applies, in the same order, and a node's running imposters follow what
// it applied. The server changes its running imposters only by
// reconciling them with Config, never directly, so the node that took an
// admin call and every other node go through the same code.
type Config interface {
	// Sync returns once List reflects every change committed before the
	// call (a linearizable read); an error means it could not tell.
	Sync(ctx context.Context) error
	// List returns the definitions this node has applied, by port.
	List(ctx context.Context) ([]Definition, error)
	// Apply makes a change atomically if every guard holds, and returns
	// once this node has applied it, with the revision it applied at;
	// ErrConflict if a guard failed. Any other error may leave the change
	// applied or not.
	Apply(ctx context.Context, c Change) (rev uint64, err error)
	// AddRecording stores a recording made for the imposter on port
	// under key (unique to it), unless one is stored there, and returns
	// once this node has applied it. An error may leave it stored or not.
	AddRecording(ctx context.Context, port int, key string, recording []byte) error
	// Revision changes whenever what List returns may have changed.
	Revision(ctx context.Context) (uint64, error)
}

// Definition is one imposter's configuration as stored.
type Definition struct {
	Port int
	// JSON is the definition's bytes (encodeDefinition's).
	JSON []byte
	// Version is the store's version of the change that wrote it; a
	// guard names it. Never 0 for a stored definition.
	Version uint64
	// Recordings are the proxyOnce recordings made for the port, in the
	// order they were made (List fills them in; a change never does).
	Recordings []Recording
}

// Recording is one proxyOnce recording: the claim's key, the bytes
// encodeRecording wrote, and the store's version of it.
type Recording struct {
	Key     string
	JSON    []byte
	Version uint64
}

// recVersion names a definition's recordings: it changes when one is
// added or they are deleted.
func (d Definition) recVersion() (v uint64) {
	for _, r := range d.Recordings {
		v = max(v, r.Version)
	}
	return v + uint64(len(d.Recordings))<<48
}

// A recording, as stored: the scope it was made for (imposter.Stored.Scope:
// the creation and recording generation; a recording of an imposter since
// deleted and created again, or made before DELETE /savedProxyResponses,
// is not placed), where the definition's proxy stub that made it is, its
// mode, and the stub (a proxyOnce recording) or the predicates and
// response (proxyAlways).
type recording struct {
	incarnation string // the scope; stored as "incarnation", which it was before generations
	proxyStub   int
	always      bool
	stub        *imposter.Object
}

func encodeRecording(r recording) []byte {
	o := imposter.NewObject().Set("incarnation", r.incarnation).Set("proxyStub", float64(r.proxyStub))
	if r.always {
		o.Set("mode", imposter.ProxyAlways)
	}
	return imposter.Marshal(o.Set("stub", r.stub), 0)
}

func decodeRecording(b []byte) (recording, error) {
	v, err := imposter.Parse(string(b))
	if err != nil {
		return recording{}, err
	}
	o, _ := v.(*imposter.Object)
	inc, _ := o.Get("incarnation")
	at, _ := o.Get("proxyStub")
	st, _ := o.Get("stub")
	mode, _ := o.Get("mode")
	var r recording
	r.incarnation, _ = inc.(string)
	f, _ := at.(float64)
	r.proxyStub, r.always = int(f), mode == imposter.ProxyAlways
	r.stub, _ = st.(*imposter.Object)
	if r.incarnation == "" || r.stub == nil {
		return recording{}, fmt.Errorf("not a proxy recording")
	}
	return r, nil
}

// Guard holds if the port's definition has Version (0: none).
type Guard struct {
	Port    int
	Version uint64
}

// Change is what one admin call does to the configuration.
type Change struct {
	Guards []Guard
	Put    []Definition // Port and JSON
	Delete []int
	// DeleteRecordings names ports whose proxyOnce recordings go.
	DeleteRecordings []int
}

// ErrConflict is a change whose guards failed: the configuration changed
// since it was read.
var ErrConflict = errors.New("imposter configuration changed concurrently")

// newID names one creation, or one stub: random, so that no two
// members, and no two creations, pick the same.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newIDs is n new ids.
func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newID()
	}
	return ids
}

// MemoryConfig is a Config in memory, for a server alone (this package's
// tests): every call applies at once.
type MemoryConfig struct {
	mu      sync.Mutex
	defs    map[int]Definition
	recs    map[int][]Recording
	version uint64
}

// NewMemoryConfig returns an empty configuration.
func NewMemoryConfig() *MemoryConfig {
	return &MemoryConfig{defs: map[int]Definition{}, recs: map[int][]Recording{}}
}

// record stores a recording for port unless key has one.
func (m *MemoryConfig) record(port int, key string, b []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs[port] {
		if r.Key == key {
			return false
		}
	}
	m.version++
	m.recs[port] = append(m.recs[port], Recording{Key: key, JSON: slices.Clone(b), Version: m.version})
	return true
}

// recorded returns key's recording on port.
func (m *MemoryConfig) recorded(port int, key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs[port] {
		if r.Key == key {
			return r.JSON, true
		}
	}
	return nil, false
}

// Sync implements Config.
func (m *MemoryConfig) Sync(context.Context) error { return nil }

// List implements Config.
func (m *MemoryConfig) List(context.Context) ([]Definition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Definition, 0, len(m.defs))
	for _, d := range m.defs { //fenceline:unordered sorted below
		d.Recordings = slices.Clone(m.recs[d.Port])
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Definition) int { return a.Port - b.Port })
	return out, nil
}

// Apply implements Config.
func (m *MemoryConfig) Apply(_ context.Context, c Change) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range c.Guards {
		if m.defs[g.Port].Version != g.Version {
			return m.version, ErrConflict
		}
	}
	for _, p := range c.Delete {
		delete(m.defs, p)
		m.version++
	}
	for _, p := range c.DeleteRecordings {
		delete(m.recs, p)
		m.version++
	}
	for _, d := range c.Put {
		m.version++
		m.defs[d.Port] = Definition{Port: d.Port, JSON: slices.Clone(d.JSON), Version: m.version}
	}
	return m.version, nil
}

// AddRecording implements Config.
func (m *MemoryConfig) AddRecording(_ context.Context, port int, key string, b []byte) error {
	m.record(port, key, b)
	return nil
}

// Revision implements Config.
func (m *MemoryConfig) Revision(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version, nil
}
