package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The checks hold through puts, expiry, purges, evictions over the cap
// and drops, and each kind of broken bookkeeping is named.
func TestInvariantsHoldAndNameWhatBroke(t *testing.T) {
	r := newRig(t, Config{MaxFlows: 4})
	for i := range 10 {
		r.put(fmt.Sprintf("f%d", i), Async, "a", "1", "b", "2")
		require.NoError(t, r.s.CheckInvariants())
	}
	r.s.flush()
	require.NoError(t, r.s.DropKeys("f9", []string{"a", "b"}))
	require.NoError(t, r.s.CheckInvariants())
	r.clk.Advance(time.Hour)
	r.s.purge()
	require.NoError(t, r.s.CheckInvariants())

	for _, c := range []struct {
		name    string
		breakIt func(s *Shard[val])
		want    string
	}{
		{"count", func(s *Shard[val]) { s.count++ }, "in the LRU list"},
		{"disk", func(s *Shard[val]) { s.diskFlows++ }, "on disk"},
		{"deadline", func(s *Shard[val]) { s.flows["f0"].liveUntil++ }, `"f0"'s deadlines`},
		{"heap", func(s *Shard[val]) { s.due[0], s.due[1] = s.due[1], s.due[0] }, "deadline heap"},
		{"marks", func(s *Shard[val]) { s.durable = s.seq + 1 }, "past the last Put"},
		{"unlisted", func(s *Shard[val]) { s.lruRemove(s.flows["f1"]) }, `"f1" is live until`},
		{"bound", func(s *Shard[val]) { s.cfg.MaxPending = 3 }, "6 mutations of 3 Puts in the writer's queue, past its bound 3"},
		{"behind", func(s *Shard[val]) { s.flows["f2"].behindKeys = map[string]bool{"a": true} }, `"f2" is marked behind (true) but listed so (false)`},
		{"behind-key", func(s *Shard[val]) {
			f := s.flows["f2"]
			f.behindKeys, s.behind["f2"], s.seq = map[string]bool{"z": true}, f, s.seq+1
			f.lastSeq = s.seq
		}, `"f2" is behind with a key it does not hold`},
		{"behind-meta", func(s *Shard[val]) { s.flows["f1"].behindMeta = true }, `"f1" has its metadata behind, and is not`},
		{"turn", func(s *Shard[val]) { s.flushT.Stop(); s.flushT = nil }, "6 mutations pending and 0 flows behind, and no writer turn to take them"},
		{"unit", func(s *Shard[val]) { s.units = s.units[:len(s.units)-1] }, "2 mutations pending past the last unit's end, 4"},
		{"queued", func(s *Shard[val]) { s.queued-- }, "no flow behind, yet Put 2 is the last queued of 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, Config{})
			for i := range 3 {
				r.put(fmt.Sprintf("f%d", i), Sync, "a", fmt.Sprint(i))
			}
			require.NoError(t, r.s.CheckInvariants())
			c.breakIt(r.s)
			require.ErrorContains(t, r.s.CheckInvariants(), c.want)
		})
	}
}
