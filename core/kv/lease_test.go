package kv_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/kv"
)

func TestLeaseRefusalNamesHolder(t *testing.T) {
	r := newReplica(t, kv.Config{})
	got := r.apply(1000, kv.LeaseAcquire("scheduler", "rk-01", 60_000))
	require.NoError(t, got.Err)
	require.Equal(t, kv.Lease{Name: "scheduler", Holder: "rk-01", Token: 1, Version: 1, DeadlineMs: 61_000}, got.Lease)
	require.Equal(t, got.Lease.Version, got.Version)

	for _, who := range []string{"rk-02", "rk-03"} {
		res := r.apply(2000, kv.LeaseAcquire("scheduler", who, 60_000))
		var ref *kv.Refusal
		require.True(t, errors.As(res.Err, &ref), "refusal, got %v", res.Err)
		require.ErrorIs(t, res.Err, kv.ErrLeaseHeld)
		require.Equal(t, kv.Refusal{Name: "scheduler", Holder: "rk-01", UntilMs: 61_000}, *ref)
		require.Equal(t, `lease "scheduler" held by rk-01 until 61000`, res.Err.Error())
		require.Zero(t, res.Version)
	}
	require.Equal(t, uint64(1), r.s.Version(), "refusals change nothing")
}

func TestLeaseAcquireBySameHolderRenews(t *testing.T) {
	r := newReplica(t, kv.Config{})
	first := r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 100)).Lease
	again := r.apply(1050, kv.LeaseAcquire("scheduler", "n1", 100)).Lease
	require.Equal(t, first.Token, again.Token, "one tenure, one fencing token")
	require.Greater(t, again.Version, first.Version)
	require.Equal(t, int64(1150), again.DeadlineMs)
}

func TestLeaseRenewByHolderOnly(t *testing.T) {
	r := newReplica(t, kv.Config{})
	granted := r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 100)).Lease

	res := r.apply(1050, kv.LeaseRenew("scheduler", "n2", 100))
	require.ErrorIs(t, res.Err, kv.ErrLeaseHeld)
	require.Equal(t, `lease "scheduler" held by n1 until 1100`, res.Err.Error())

	res = r.apply(1060, kv.LeaseRenew("scheduler", "n1", 200))
	require.NoError(t, res.Err)
	require.Equal(t, granted.Token, res.Lease.Token)
	require.Equal(t, int64(1260), res.Lease.DeadlineMs)
	l, _ := r.s.Lease("scheduler")
	require.Equal(t, res.Lease, l)

	res = r.apply(1060, kv.LeaseRenew("other", "n1", 200))
	require.ErrorIs(t, res.Err, kv.ErrNotHeld, "renewal cannot create a lease")
	_, held := r.s.Lease("other")
	require.False(t, held)
}

// TestLeaseReleaseByHolderOnly: n1 comes back from a partition still
// believing it is the scheduler, and releases. n2 holds the lease now; n1's
// release must not drop it.
func TestLeaseReleaseByHolderOnly(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 100))
	r.apply(1200, kv.LeaseAcquire("scheduler", "n2", 100)) // n1's lapsed first

	res := r.apply(1210, kv.LeaseRelease("scheduler", "n1"))
	require.ErrorIs(t, res.Err, kv.ErrLeaseHeld)
	l, held := r.s.Lease("scheduler")
	require.True(t, held)
	require.Equal(t, "n2", l.Holder)

	v := r.s.Version()
	res = r.apply(1220, kv.LeaseRelease("scheduler", "n2"))
	require.NoError(t, res.Err)
	require.Equal(t, v+1, res.Version)
	evs := r.eventsAfter(v)
	require.Equal(t, []kv.Event{{Kind: kv.EventDeleted, Space: kv.SpaceLease, Key: "scheduler", Version: v + 1,
		Holder: "n2", Token: l.Token, DeadlineMs: 1300, Index: r.index, AtMs: 1220}}, evs,
		"a release is Deleted, never Expired")

	res = r.apply(1230, kv.LeaseRelease("scheduler", "n2"))
	require.ErrorIs(t, res.Err, kv.ErrNotHeld)
}

// TestBugReleaseAnyDropsSuccessorsLease proves the "release-any" switch
// switches: the partitioned node's release drops its successor's lease.
func TestBugReleaseAnyDropsSuccessorsLease(t *testing.T) {
	var cfg kv.Config
	require.NoError(t, cfg.Bugs.Enable("release-any"))
	r := newReplica(t, cfg)
	r.apply(1200, kv.LeaseAcquire("scheduler", "n2", 100))
	res := r.apply(1210, kv.LeaseRelease("scheduler", "n1"))
	require.NoError(t, res.Err, "with the bug anyone may release")
	_, held := r.s.Lease("scheduler")
	require.False(t, held, "n2 still believes it is the scheduler; now anyone can take it")
	evs := r.eventsAfter(res.Version - 1)
	require.Equal(t, "n2", evs[0].Holder, "the event names whose lease was dropped")
}

func TestLeaseExpiryIsExpiredNotDeleted(t *testing.T) {
	r := newReplica(t, kv.Config{})
	first := r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 100)).Lease
	// The acquire that finds n1's lease lapsed expires it first, in the
	// same entry, then grants.
	res := r.apply(1100, kv.LeaseAcquire("scheduler", "n2", 100))
	require.NoError(t, res.Err)
	evs := r.eventsAfter(first.Version)
	require.Len(t, evs, 2)
	require.Equal(t, kv.Event{Kind: kv.EventExpired, Space: kv.SpaceLease, Key: "scheduler", Version: 2,
		Holder: "n1", Token: first.Token, DeadlineMs: 1100, Index: 2, AtMs: 1100}, evs[0])
	require.Equal(t, kv.EventPut, evs[1].Kind)
	require.Equal(t, "n2", evs[1].Holder)
	require.Equal(t, uint64(3), res.Lease.Token)
	require.Greater(t, res.Lease.Token, evs[0].Version, "the new tenure's token is newer than the expiry")

	// n1 re-acquiring after expiry starts a new tenure with a new token.
	r.apply(1300, kv.Tick())
	again := r.apply(1300, kv.LeaseAcquire("scheduler", "n1", 100)).Lease
	require.Greater(t, again.Token, res.Lease.Token)
	require.Equal(t, again.Version, again.Token)
}

func TestLeasesExpireInNameOrder(t *testing.T) {
	r := newReplica(t, kv.Config{})
	for _, name := range []string{"c", "a", "b"} {
		r.apply(0, kv.LeaseAcquire(name, "n1", 10))
	}
	r.apply(0, kv.LeaseAcquire("d", "n1", 1000))
	before := r.s.Version()
	r.apply(10, kv.Tick())
	var names []string
	for i, ev := range r.eventsAfter(before) {
		require.Equal(t, kv.EventExpired, ev.Kind)
		require.Equal(t, before+1+uint64(i), ev.Version, "each expiry is a change of its own")
		names = append(names, ev.Key)
	}
	require.Equal(t, []string{"a", "b", "c"}, names)
	require.Equal(t, []kv.Lease{{Name: "d", Holder: "n1", Token: 4, Version: 4, DeadlineMs: 1000}}, r.s.Leases())
}

func TestLeaseTTLBounds(t *testing.T) {
	r := newReplica(t, kv.Config{MaxLeaseTTLMs: 1000})
	for _, ttl := range []int64{0, -1, 1001} {
		res := r.apply(0, kv.LeaseAcquire("x", "n1", ttl))
		require.ErrorIs(t, res.Err, kv.ErrInvalid, "ttl %d", ttl)
	}
	require.NoError(t, r.apply(0, kv.LeaseAcquire("x", "n1", 1000)).Err)
	require.ErrorIs(t, r.apply(0, kv.LeaseAcquire("y", "", 10)).Err, kv.ErrInvalid, "a refusal must be able to name the holder")
}

// A lease lapses at its deadline: an entry applied exactly then finds it
// expired, and a renewal there fails. The planted bug expire-late keeps it
// one millisecond too long.
func TestLeaseLapsesAtItsDeadline(t *testing.T) {
	for _, late := range []bool{false, true} {
		r := newReplica(t, kv.Config{Bugs: bugs.Set{ExpireLate: late}})
		require.NoError(t, r.apply(1000, kv.LeaseAcquire("l", "a", 500)).Err)
		res := r.apply(1500, kv.LeaseRenew("l", "a", 500))
		if late {
			require.NoError(t, res.Err, "the bug renews a lease at its deadline")
		} else {
			require.ErrorIs(t, res.Err, kv.ErrNotHeld, "at its deadline the lease has lapsed")
		}
	}
}
