package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// A node that showed it knew a membership committed serves only the
// flows it owns under it (or a later one applied by then); before it
// showed so, or after a restart, it is not held to it.
func TestKnownMembership(t *testing.T) {
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	before := []dial.NodeID{1, 2, 3}
	after := []dial.NodeID{1, 2, 3, 4}
	// A flow n1 owns before n4 joins, and n4 after.
	var f string
	for i := 0; f == ""; i++ {
		if g := fmt.Sprintf("f%d", i); OwnerOf(before, g) == 1 && OwnerOf(after, g) == 4 {
			f = g
		}
	}
	ms := []MembershipChange{{Index: 5, Voters: after, At: time.Second}, {Index: 1, Voters: before}}
	shown := []CommitShown{{Node: 1, At: 500 * time.Millisecond, Commit: 4}, {Node: 1, At: 1500 * time.Millisecond, Commit: 5}}
	never := func(dial.NodeID, time.Duration) time.Duration { return 0 }

	var rec Record
	n := KnownMembership(&rec, []FlowService{
		{Flow: f, Node: 1, At: 1400 * time.Millisecond}, // m_idx 5 applied elsewhere, but n1 had not shown it knew
		{Flow: f, Node: 4, At: 1600 * time.Millisecond}, // the new owner
	}, shown, ms, never, name)
	require.True(t, rec.OK(), "%v", rec.Failures)
	require.Equal(t, 1, n, "n1 judged against m_idx 1, the newest it knew; n4 showed nothing")

	KnownMembership(&rec, []FlowService{{Flow: f, Node: 1, At: 1600 * time.Millisecond}}, shown, ms, never, name)
	require.Equal(t, []string{
		fmt.Sprintf("known-membership: n1 served flow %s at 1.6s, having shown at 1.5s that it knew committed m_idx 5, under which it does not own the flow (owner n4): an owner serving by a membership it knew was replaced", f),
	}, rec.Failures)

	// Restarted at 1.55 s: what it showed before is not what it knows.
	var again Record
	restarted := func(dial.NodeID, time.Duration) time.Duration { return 1550 * time.Millisecond }
	KnownMembership(&again, []FlowService{{Flow: f, Node: 1, At: 1600 * time.Millisecond}}, shown, ms, restarted, name)
	require.True(t, again.OK(), "%v", again.Failures)

	// Owning the flow again under a later membership applied by then.
	later := append(ms, MembershipChange{Index: 9, Voters: before, At: 1550 * time.Millisecond})
	KnownMembership(&again, []FlowService{{Flow: f, Node: 1, At: 1600 * time.Millisecond}}, shown, later, never, name)
	require.True(t, again.OK(), "%v", again.Failures)
}
