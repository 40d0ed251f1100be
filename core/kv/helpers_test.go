package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

// replica drives one State the way the raft driver will: consecutive
// indices, entries as encoded bytes, and the full invariant check after
// every step.
type replica struct {
	t     testing.TB
	s     *kv.State
	index uint64
}

func newReplica(t testing.TB, cfg kv.Config) *replica {
	t.Helper()
	s, err := kv.New(cfg)
	require.NoError(t, err)
	return &replica{t: t, s: s}
}

// apply proposes op stamped at atMs and applies it through the encoding,
// the path a committed entry takes. Commands EncodeCommand refuses go in
// decoded, to exercise apply's own checks.
func (r *replica) apply(atMs int64, op kv.Op) kv.Result {
	r.t.Helper()
	cmd := kv.Command{AtMs: atMs, Op: op}
	r.index++
	var res kv.Result
	if data, err := kv.EncodeCommand(cmd); err == nil {
		res = r.s.Apply(r.index, data)
	} else {
		res = r.s.ApplyCommand(r.index, cmd)
	}
	require.NoError(r.t, r.s.CheckInvariants())
	require.Equal(r.t, r.index, res.Index)
	require.Equal(r.t, r.s.Version(), res.Revision)
	return res
}

// applyRaw applies entry bytes as they came off the log.
func (r *replica) applyRaw(data []byte) kv.Result {
	r.t.Helper()
	r.index++
	res := r.s.Apply(r.index, data)
	require.NoError(r.t, r.s.CheckInvariants())
	return res
}

// eventsAfter returns every event after version, failing on compaction.
func (r *replica) eventsAfter(version uint64) []kv.Event {
	r.t.Helper()
	evs, err := r.s.EventsSince(version, 0)
	require.NoError(r.t, err)
	return evs
}

// value reads key, failing if it is absent.
func (r *replica) value(key string) string {
	r.t.Helper()
	e, ok := r.s.Get(key)
	require.True(r.t, ok, "key %q absent", key)
	return string(e.Value)
}

func put(key, value string) kv.Op { return kv.Put(key, []byte(value)) }
