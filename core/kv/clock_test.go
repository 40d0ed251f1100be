package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

// stepBack plays the hazard of a leader whose clock stepped back. Leader 1
// (clock near 1150) grants n1 the scheduler lease and later, on its quiet
// tick, lets it lapse. Leader 2 takes over with a clock 150 ms behind and
// stamps n2's acquire at 1000. Then leader 1's clock rules again (it wins
// the next election, or leader 2's NTP steps forward) and it ticks at 1160.
func stepBack(t *testing.T, cfg kv.Config) (r *replica, n2 kv.Result, afterBack int64) {
	r = newReplica(t, cfg)
	require.NoError(t, r.apply(1000, kv.LeaseAcquire("scheduler", "n1", 100)).Err)
	r.apply(1150, kv.Tick())
	evs := r.eventsAfter(1)
	require.Len(t, evs, 1)
	require.Equal(t, kv.EventExpired, evs[0].Kind, "n1 stopped renewing; leader 1 let the lease lapse")

	// n1 comes back believing it still has a few ms left.
	renew := r.apply(1000, kv.LeaseRenew("scheduler", "n1", 100))
	require.ErrorIs(t, renew.Err, kv.ErrNotHeld, "an expired lease stays expired, whatever the stamp")
	afterBack = r.s.AppliedMs()

	n2 = r.apply(1000, kv.LeaseAcquire("scheduler", "n2", 100))
	require.NoError(t, n2.Err)
	r.apply(1160, kv.Tick())
	return r, n2, afterBack
}

func TestClockClampKeepsTimeMovingForward(t *testing.T) {
	r, n2, afterBack := stepBack(t, kv.Config{})
	require.Equal(t, int64(1150), afterBack, "a stamp from a clock that stepped back does not move applied time")
	require.Equal(t, int64(1150), n2.NowMs)
	require.Equal(t, int64(1250), n2.Lease.DeadlineMs, "the grant's TTL counts from the cluster's time, not the stale stamp")
	l, held := r.s.Lease("scheduler")
	require.True(t, held, "n2 keeps its full TTL when the correct clock returns")
	require.Equal(t, "n2", l.Holder)
	require.Equal(t, int64(1160), r.s.AppliedMs())
}

// TestBugNoClockClampCutsLeasesShort proves the "no-clock-clamp" switch
// switches, and shows what it breaks. Applied time runs back to 1000, n2 is
// granted a lease whose deadline (1100) the cluster already passed, and
// leader 1's next tick expires it at once: n2 believes it holds the
// scheduler for 100 ms, and n3 gets the lease while n2 still believes so.
// (Expiry is eager, so the backward stamp cannot resurrect n1's lease
// itself: what the clamp protects is every lease granted afterwards.)
func TestBugNoClockClampCutsLeasesShort(t *testing.T) {
	var cfg kv.Config
	require.NoError(t, cfg.Bugs.Enable("no-clock-clamp"))
	r, n2, afterBack := stepBack(t, cfg)
	require.Equal(t, int64(1000), afterBack, "with the bug applied time moves back")
	require.Equal(t, int64(1100), n2.Lease.DeadlineMs, "granted with a deadline already in the cluster's past")
	_, held := r.s.Lease("scheduler")
	require.False(t, held, "cut short by the first entry from a correct clock")
	last := r.eventsAfter(r.s.Version() - 1)
	require.Equal(t, kv.EventExpired, last[0].Kind)
	require.Equal(t, "n2", last[0].Holder)

	n3 := r.apply(1161, kv.LeaseAcquire("scheduler", "n3", 100))
	require.NoError(t, n3.Err, "two schedulers: n2's 100 ms are not over by its own reckoning")
}

func TestTickExpiresOnQuietCluster(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(0, kv.LeaseAcquire("vip", "n1", 500))
	r.apply(499, kv.Tick())
	_, held := r.s.Lease("vip")
	require.True(t, held, "one ms before the deadline")
	r.apply(500, kv.Tick())
	_, held = r.s.Lease("vip")
	require.False(t, held, "the deadline itself is lapsed")
	require.Equal(t, int64(500), r.s.AppliedMs())
}
