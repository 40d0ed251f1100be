package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// A restarted node must read back from its disk the newest value of each
// key it took at least the window (and any stall) before it next went
// down; a value taken later may have been in memory
// only, unless it went down by an orderly shutdown; a none flow is never
// judged.
func TestReplicaDisk(t *testing.T) {
	const n = dial.NodeID(2)
	window := 100 * time.Millisecond
	v := func(ver uint64) flow.Value { return flow.Value{Tuple: flow.Tuple{Era: 1, MIdx: 1, V: ver}} }
	crashAt3s := downs{n: {{From: 3 * time.Second, To: 4 * time.Second}}}
	took := func() *ReplicaDisk {
		r := &ReplicaDisk{Modes: map[string]shard.Mode{"s": shard.Sync, "a": shard.Async, "none": shard.None}}
		r.Took(n, "s", map[string]flow.Value{"k": v(1)}, 1*time.Second)
		r.Took(n, "s", map[string]flow.Value{"k": v(2)}, 2*time.Second)
		r.Took(n, "s", map[string]flow.Value{"k": v(3)}, 2950*time.Millisecond) // within the window of the crash
		r.Took(n, "none", map[string]flow.Value{"k": v(9)}, time.Second)
		return r
	}
	disk := func(ver uint64) func(string) map[string]flow.Value {
		return func(f string) map[string]flow.Value {
			if f != "s" || ver == 0 {
				return nil
			}
			return map[string]flow.Value{"k": v(ver)}
		}
	}

	var rec Record
	r := took()
	copyOf := disk(2)
	r.Restarted(&rec, n, window, crashAt3s, copyOf)
	require.True(t, rec.OK(), "version 2 was on disk by the crash; 3 may not have been: %v", rec.Failures)
	require.Equal(t, 1, r.Judged, "the newest value old enough, of the sync flow only")

	copyOf = disk(1)
	took().Restarted(&rec, n, window, crashAt3s, copyOf)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], `replica-disk: n0000000000000002 took flow s's "k" at (1:1,2,n0000000000000000) at 2s and went down at 3s`)
	require.Contains(t, rec.Failures[0], "its disk gave back (1:1,1,n0000000000000000)")

	rec = Record{}
	copyOf = disk(0)
	took().Restarted(&rec, n, window, crashAt3s, copyOf)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "its disk gave back nothing")

	// A stall from 1.95s to 2.95s held version 2 in memory past the crash.
	rec = Record{}
	copyOf = disk(1)
	took().Restarted(&rec, n, window, stalled{crashAt3s, map[dial.NodeID][]DownWindow{n: {{From: 1950 * time.Millisecond, To: 2950 * time.Millisecond}}}}, copyOf)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A boot that failed at once: the values are judged against the first
	// time the node went down after taking them.
	rec = Record{}
	twice := downs{n: {{From: 2060 * time.Millisecond, To: 2500 * time.Millisecond}, {From: 2500 * time.Millisecond, To: 4 * time.Second}}}
	copyOf = disk(1)
	took().Restarted(&rec, n, window, twice, copyOf)
	require.True(t, rec.OK(), "version 2 went down 60ms after it was taken, within the window: %v", rec.Failures)

	// An orderly shutdown has no window: Close wrote everything, so
	// version 3, taken 50ms before it, must come back.
	shutdownAt3s := downs{n: {{From: 3 * time.Second, To: 4 * time.Second, Orderly: true}}}
	rec = Record{}
	r = took()
	copyOf = disk(3)
	r.Restarted(&rec, n, window, shutdownAt3s, copyOf)
	require.True(t, rec.OK(), "%v", rec.Failures)
	require.Equal(t, 1, r.Judged)
	copyOf = disk(2)
	took().Restarted(&rec, n, window, shutdownAt3s, copyOf)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "at 2.95s and went down at 3s, in an orderly shutdown, which writes everything held, yet its disk gave back (1:1,2,n0000000000000000)")
}
