package kv_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

func TestSnapshotRoundTrip(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(1000, put("b", "2"))
	r.apply(1000, put("a", "1"))
	r.apply(1000, put("empty", ""))
	r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 500))
	r.apply(1001, kv.LeaseAcquire("acme", "n2", 500))
	r.apply(1002, kv.Delete("b"))

	snap := r.s.Snapshot()
	fresh := newReplica(t, kv.Config{})
	require.NoError(t, fresh.s.Restore(snap))
	require.Equal(t, snap, fresh.s.Snapshot())
	require.Equal(t, r.s.Digest(), fresh.s.Digest())
	require.Equal(t, r.s.AppliedIndex(), fresh.s.AppliedIndex())
	require.Equal(t, r.s.AppliedMs(), fresh.s.AppliedMs())
	require.Equal(t, r.s.Version(), fresh.s.Version())
	require.Equal(t, r.s.Leases(), fresh.s.Leases())
	require.Equal(t, []string{"a", "empty"}, fresh.s.Keys(""))
	e, ok := fresh.s.Get("a")
	require.True(t, ok)
	require.Equal(t, kv.Entry{Value: []byte("1"), Version: 2}, e)
}

func TestDigestSeesEveryPart(t *testing.T) {
	base := func() *replica {
		r := newReplica(t, kv.Config{})
		r.apply(1000, put("a", "1"))
		return r
	}
	ref := base().s.Digest()
	require.Equal(t, ref, base().s.Digest())
	for name, change := range map[string]func(r *replica){
		"index": func(r *replica) { r.applyRaw(nil) },
		"time":  func(r *replica) { r.apply(1001, kv.Tick()) },
		"value": func(r *replica) { r.apply(1000, put("a", "2")) },
		"lease": func(r *replica) { r.apply(1000, kv.LeaseAcquire("l", "n1", 5)) },
	} {
		r := base()
		change(r)
		require.NotEqual(t, ref, r.s.Digest(), name)
	}
}

// snapshotBytes hand-writes a snapshot, to feed Restore states that no
// sequence of applies could reach.
type snapshotBytes struct{ b []byte }

func newSnapshot(version, index, ms uint64) *snapshotBytes {
	s := &snapshotBytes{b: []byte{1}}
	return s.u(version).u(index).u(ms)
}

func (s *snapshotBytes) u(v uint64) *snapshotBytes {
	s.b = binary.AppendUvarint(s.b, v)
	return s
}

func (s *snapshotBytes) str(v string) *snapshotBytes {
	s.u(uint64(len(v)))
	s.b = append(s.b, v...)
	return s
}

func TestRestoreRefusesBadSnapshots(t *testing.T) {
	good := newSnapshot(2, 5, 100).u(2).str("a").u(1).str("x").str("b").u(2).str("y").u(0)
	r := newReplica(t, kv.Config{})
	require.NoError(t, r.s.Restore(good.b), "the control case restores")

	for name, snap := range map[string][]byte{
		"empty":          nil,
		"version byte":   append([]byte{2}, good.b[1:]...),
		"trailing":       append(append([]byte{}, good.b...), 0),
		"truncated":      good.b[:len(good.b)-1],
		"keys unsorted":  newSnapshot(2, 5, 100).u(2).str("b").u(1).str("x").str("a").u(2).str("y").u(0).b,
		"duplicate key":  newSnapshot(2, 5, 100).u(2).str("a").u(1).str("x").str("a").u(2).str("y").u(0).b,
		"shared version": newSnapshot(2, 5, 100).u(2).str("a").u(1).str("x").str("b").u(1).str("y").u(0).b,
		"version ahead":  newSnapshot(1, 5, 100).u(2).str("a").u(1).str("x").str("b").u(2).str("y").u(0).b,
		"version zero":   newSnapshot(2, 5, 100).u(1).str("a").u(0).str("x").u(0).b,
		"lapsed lease":   newSnapshot(1, 5, 100).u(0).u(1).str("l").str("n1").u(1).u(1).u(100).b,
		"token > ver":    newSnapshot(2, 5, 100).u(0).u(1).str("l").str("n1").u(2).u(1).u(200).b,
		"no holder":      newSnapshot(1, 5, 100).u(0).u(1).str("l").str("").u(1).u(1).u(200).b,
		"huge count":     newSnapshot(1, 5, 100).u(1 << 40).b,
	} {
		target := newReplica(t, kv.Config{})
		target.apply(7, put("keep", "me"))
		before := target.s.Snapshot()
		err := target.s.Restore(snap)
		require.ErrorIs(t, err, kv.ErrBadSnapshot, name)
		require.Equal(t, before, target.s.Snapshot(), "%s: a failed restore leaves the state alone", name)
	}
}
