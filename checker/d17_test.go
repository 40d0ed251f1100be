package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func TestD17(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3"}[id] }
	ms := []MembershipChange{{Index: 1, Voters: []dial.NodeID{1, 2, 3}}}
	window := 300 * time.Millisecond
	contacts := []Contact{
		{To: 2, From: 1, At: 900 * time.Millisecond, FromLeader: true}, // n2 hears its leader
		{To: 1, From: 3, At: 950 * time.Millisecond, Ack: true},        // n1, leading, hears n3 answer: with itself, a quorum
		{To: 3, From: 2, At: 990 * time.Millisecond},                   // n3 hears only a vote request
	}
	var rec Record
	D17(&rec, []FlowService{{Flow: "f", Node: 2, At: time.Second}, {Flow: "g", Node: 1, At: time.Second}}, contacts, ms, window, name)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// n3 heard no leader and no quorum; n2 heard its leader too long ago.
	D17(&rec, []FlowService{{Flow: "h", Node: 3, At: time.Second}, {Flow: "f", Node: 2, At: 1300 * time.Millisecond}}, contacts, ms, window, name)
	require.Equal(t, []string{
		"d17: n3 served flow h at 1s having heard no leader, and no quorum, within the 300ms before: an isolated owner serving",
		"d17: n2 served flow f at 1.3s having heard no leader, and no quorum, within the 300ms before: an isolated owner serving",
	}, rec.Failures)
}

// A leader cut off just before a membership change that removes it
// commits counts the voters it knew: a quorum of any membership in force
// within the window will do, and one replaced before the window began
// will not.
func TestD17QuorumOfAMembershipInTheWindow(t *testing.T) {
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	window := 300 * time.Millisecond
	ms := []MembershipChange{
		{Index: 1, Voters: []dial.NodeID{1, 2, 3, 4, 5}},
		{Index: 5, At: 900 * time.Millisecond, Voters: []dial.NodeID{2, 3, 4, 5}}, // n1 removed while cut off
	}
	contacts := []Contact{
		{To: 1, From: 2, At: 800 * time.Millisecond, Ack: true},
		{To: 1, From: 3, At: 800 * time.Millisecond, Ack: true},
	}
	var rec Record
	D17(&rec, []FlowService{{Flow: "f", Node: 1, At: time.Second}}, contacts, ms, window, name)
	require.True(t, rec.OK(), "three of the five voters it knew: %v", rec.Failures)

	// Once the old membership was replaced before the window began, the
	// new one alone counts: two of its four voters is no quorum, though
	// it would have been three of the old five.
	contacts = append(contacts,
		Contact{To: 1, From: 2, At: 1000 * time.Millisecond, Ack: true},
		Contact{To: 1, From: 3, At: 1000 * time.Millisecond, Ack: true})
	D17(&rec, []FlowService{{Flow: "g", Node: 1, At: 1250 * time.Millisecond}}, contacts, ms, window, name)
	require.Equal(t, []string{
		"d17: n1 served flow g at 1.25s having heard no leader, and no quorum, within the 300ms before: an isolated owner serving",
	}, rec.Failures)
}

// What a node heard before it came up does not count: it went with the
// crash.
func TestInTouchSince(t *testing.T) {
	ms := []MembershipChange{{Index: 1, Voters: []dial.NodeID{1, 2, 3}}}
	c := NewContacts([]Contact{
		{To: 2, From: 1, At: 900 * time.Millisecond, FromLeader: true},
		{To: 1, From: 3, At: 950 * time.Millisecond, Ack: true},
	}, ms, 300*time.Millisecond)
	require.True(t, c.InTouch(2, time.Second))
	require.True(t, c.InTouchSince(2, time.Second, 900*time.Millisecond), "heard its leader as it came up")
	require.False(t, c.InTouchSince(2, time.Second, 901*time.Millisecond), "the leader's frame came before the restart")
	require.True(t, c.InTouchSince(1, time.Second, 950*time.Millisecond), "a leader's quorum, heard since")
	require.False(t, c.InTouchSince(1, time.Second, 960*time.Millisecond))
	require.False(t, c.InTouch(2, 1300*time.Millisecond), "out of the window")
}
