package kv_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

// abaRead sets up the A -> B -> A hazard: a client reads alias/x = dpl_A,
// then two other writers repoint it to dpl_B and back to dpl_A before the
// client's transaction (the rollback of seed 001) arrives.
func abaRead(t *testing.T, cfg kv.Config) (*replica, kv.Entry) {
	r := newReplica(t, cfg)
	r.apply(1000, put("alias/x", "dpl_A"))
	read, ok := r.s.Get("alias/x")
	require.True(t, ok)
	r.apply(1001, put("alias/x", "dpl_B"))
	r.apply(1002, put("alias/x", "dpl_A"))
	return r, read
}

// repoint is the client's transaction: move alias/x to dpl_C and remember
// what it pointed at, if alias/x is still what the client read.
func repoint(g kv.Guard) kv.Op {
	return kv.Txn([]kv.Guard{g},
		[]kv.Op{put("alias/x", "dpl_C"), put("alias/x/previous", "dpl_A")},
		[]kv.Op{put("alias/x/conflicts", "1")})
}

// TestValueGuardPassesOverABA pins the bug the version guard exists for: a
// value guard sees dpl_A both times and applies the client's change over
// two writes it never saw. The assertion that it SUCCEEDS is deliberate.
func TestValueGuardPassesOverABA(t *testing.T) {
	r, read := abaRead(t, kv.Config{})
	res := r.apply(1003, repoint(kv.ValueIs("alias/x", read.Value)))
	require.NoError(t, res.Err)
	require.True(t, res.Succeeded, "the value guard is blind to A -> B -> A; that is the bug")
	require.Equal(t, "dpl_C", r.value("alias/x"))
}

// TestVersionGuardRefusesABA is the fix: the version read is gone for
// good after the first intervening write, so the guard fails and the
// failure branch runs instead.
func TestVersionGuardRefusesABA(t *testing.T) {
	r, read := abaRead(t, kv.Config{})
	res := r.apply(1003, repoint(kv.Unchanged("alias/x", read, true)))
	require.NoError(t, res.Err)
	require.False(t, res.Succeeded)
	require.Equal(t, "dpl_A", r.value("alias/x"))
	_, moved := r.s.Get("alias/x/previous")
	require.False(t, moved, "the success branch must not have run")
	require.Equal(t, "1", r.value("alias/x/conflicts"))
	require.Equal(t, res.Version, r.s.Version(), "the failure branch's write is the result's version")
}

// TestVersionGuardSucceedsWithoutInterveningWrite shows the version guard
// is not simply always refusing.
func TestVersionGuardSucceedsWithoutInterveningWrite(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(1000, put("alias/x", "dpl_A"))
	read, _ := r.s.Get("alias/x")
	res := r.apply(1001, repoint(kv.Unchanged("alias/x", read, true)))
	require.True(t, res.Succeeded)
	require.Equal(t, "dpl_C", r.value("alias/x"))
	require.Equal(t, "dpl_A", r.value("alias/x/previous"))
}

// TestBugValueGuardTurnsVersionGuardIntoValueGuard proves the planted
// "value-guard" switch switches: the same VersionIs guard that refused
// above now passes over A -> B -> A.
func TestBugValueGuardTurnsVersionGuardIntoValueGuard(t *testing.T) {
	var cfg kv.Config
	require.NoError(t, cfg.Bugs.Enable("value-guard"))
	r, read := abaRead(t, cfg)
	res := r.apply(1003, repoint(kv.Unchanged("alias/x", read, true)))
	require.True(t, res.Succeeded, "with the bug planted the version guard compares values")
	require.Equal(t, "dpl_C", r.value("alias/x"))
}

func TestGuardsOnAbsentKeys(t *testing.T) {
	r := newReplica(t, kv.Config{})
	create := func(g kv.Guard) kv.Result {
		return r.apply(1000, kv.Txn([]kv.Guard{g}, []kv.Op{put("k", "v")}, nil))
	}
	require.True(t, create(kv.Absent("k")).Succeeded)
	require.False(t, create(kv.Absent("k")).Succeeded, "k exists now")
	require.False(t, create(kv.VersionIs("k", 0)).Succeeded, "version 0 never matches an existing key")
	require.False(t, create(kv.ValueIs("nope", nil)).Succeeded, "a value guard needs the key to exist")
	r.apply(1000, kv.Delete("k"))
	require.True(t, create(kv.VersionIs("k", 0)).Succeeded, "version 0 means absent")
}

func TestTxnIsAllOrNothing(t *testing.T) {
	r := newReplica(t, kv.Config{MaxKeyBytes: 8})
	r.apply(1000, put("a", "1"))
	version := r.s.Version()
	// The second op breaks a bound: nothing may apply, not even the first.
	res := r.apply(2000, kv.Txn([]kv.Guard{kv.Absent("b")},
		[]kv.Op{put("b", "1"), put(strings.Repeat("k", 9), "2")}, nil))
	require.ErrorIs(t, res.Err, kv.ErrInvalid)
	require.Contains(t, res.Err.Error(), "key of 9 bytes, limit 8")
	require.Equal(t, []string{"a"}, r.s.Keys(""))
	require.Equal(t, version, r.s.Version())
	require.Equal(t, int64(1000), r.s.AppliedMs(), "an invalid entry does not even move the clock")
	require.Equal(t, uint64(2), r.s.AppliedIndex(), "but it is applied")

	// A valid txn applies every op, each as its own change.
	res = r.apply(3000, kv.Txn(nil, []kv.Op{put("b", "1"), put("c", "2"), kv.Delete("a"), kv.Delete("zz")}, nil))
	require.NoError(t, res.Err)
	require.True(t, res.Succeeded)
	evs := r.eventsAfter(1)
	require.Len(t, evs, 3, "put b, put c, delete a; deleting an absent key is no change")
	for i, ev := range evs {
		require.Equal(t, uint64(2+i), ev.Version)
		require.Equal(t, uint64(3), ev.Index, "all from the txn's entry")
	}
	require.Equal(t, kv.EventDeleted, evs[2].Kind)
	require.Equal(t, uint64(4), res.Version)
}

func TestVersionsNeverReused(t *testing.T) {
	r := newReplica(t, kv.Config{})
	first := r.apply(1000, put("k", "v")).Version
	del := r.apply(1000, kv.Delete("k"))
	require.True(t, del.Found)
	again := r.apply(1000, put("k", "v")).Version
	require.Greater(t, again, del.Version)
	require.Greater(t, del.Version, first)
	// A guard on the first incarnation's version must not match the
	// second, although key and value are the same.
	res := r.apply(1000, kv.Txn([]kv.Guard{kv.VersionIs("k", first)}, []kv.Op{put("k", "w")}, nil))
	require.False(t, res.Succeeded)

	missing := r.apply(1000, kv.Delete("never"))
	require.False(t, missing.Found)
	require.Zero(t, missing.Version, "deleting an absent key changes nothing")
	require.Equal(t, again, r.s.Version())
}

// TestStateKeepsNoCallerBuffers: an entry's bytes and a command's values
// belong to the caller, who may reuse them; the replicated state must not
// change when they do.
func TestStateKeepsNoCallerBuffers(t *testing.T) {
	r := newReplica(t, kv.Config{})
	value := []byte("v1")
	r.s.ApplyCommand(1, kv.Command{Op: kv.Put("a", value)})
	r.s.ApplyCommand(2, kv.Command{Op: kv.Txn(nil, []kv.Op{kv.Put("b", value)}, nil)})
	data, err := kv.EncodeCommand(kv.Command{Op: kv.Put("c", value)})
	require.NoError(t, err)
	r.s.Apply(3, data)
	value[1] = '2'
	for i := range data {
		data[i] = 0
	}
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, "v1", r.value(k), k)
	}
}
