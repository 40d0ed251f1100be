package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// The checkers' placement is ring's, on the code as written: the same
// owner and successors for any voters, class and key (keys longer than
// ring's stack buffer included).
func TestRendezvousIsRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 1<<20), 0, 9, rapid.ID[uint64]).Draw(t, "voters")
		voters := make([]dial.NodeID, len(ids))
		for i, id := range ids {
			voters[i] = dial.NodeID(id)
		}
		key := rapid.StringN(0, 300, -1).Draw(t, "key")
		class := rapid.SampledFrom([]byte{classFlow, classSequence, ClassProxy}).Draw(t, "class")
		want := ring.New(voters).Placement(ring.Class(class), key).Nodes()
		got := Placement(voters, class, key)
		if len(want) == 0 {
			require.Empty(t, got)
			return
		}
		require.Equal(t, want, got)
		require.Equal(t, byte(ring.ClassOf(key)), classOf(key))
	})
}

// A service by a node that owns the flow under no membership applied by
// then fails; one by a deposed owner, under an older membership, does not.
func TestOwnerPlacement(t *testing.T) {
	a, b, c := dial.NodeID(1), dial.NodeID(2), dial.NodeID(3)
	ms := []MembershipChange{{Index: 1, Voters: []dial.NodeID{a, b, c}}, {Index: 5, Voters: []dial.NodeID{a, b}, At: 2e9}}
	// A flow the removal of c moved: c owned it, and then another did.
	var flow string
	var first, second dial.NodeID
	for i := 0; first == second; i++ {
		flow = fmt.Sprintf("i4545:%d", i)
		first, second = OwnerOf(ms[0].Voters, flow), OwnerOf(ms[1].Voters, flow)
	}
	require.Equal(t, c, first)
	var other dial.NodeID
	for _, id := range []dial.NodeID{a, b, c} {
		if id != first && id != second {
			other = id
		}
	}
	name := func(id dial.NodeID) string { return id.String() }
	var rec Record
	n := OwnerPlacement(&rec, []FlowService{{Flow: flow, Node: first, At: 1e9}, {Flow: flow, Node: first, At: 3e9}, {Flow: flow, Node: second, At: 3e9}}, ms, name)
	require.Equal(t, 3, n)
	require.True(t, rec.OK(), "%v", rec.Failures)
	// The second membership's owner, before that membership was applied.
	OwnerPlacement(&rec, []FlowService{{Flow: flow, Node: second, At: 1e9}}, ms, name)
	require.Len(t, rec.Failures, 1)
	// The node that owned it under neither: one failure for the flow.
	rec = Record{}
	OwnerPlacement(&rec, []FlowService{{Flow: flow, Node: other, At: 3e9}, {Flow: flow, Node: other, At: 4e9}}, ms, name)
	require.Len(t, rec.Failures, 1, "one failure per flow")
	require.Contains(t, rec.Failures[0], "placement: flow "+flow+" served at 3s by "+other.String())
}

// A push goes from an owner to one of its successors under a membership
// applied by then; to anyone else it fails.
func TestReplicaPlacement(t *testing.T) {
	voters := []dial.NodeID{1, 2, 3, 4}
	ms := []MembershipChange{{Index: 1, Voters: voters}}
	flow := "i4545:y"
	pl := Placement(voters, classFlow, flow)
	name := func(id dial.NodeID) string { return id.String() }
	var rec Record
	n := ReplicaPlacement(&rec, []Push{{Flow: flow, From: pl[0], To: pl[1], At: 1}, {Flow: flow, From: pl[0], To: pl[2], At: 2}}, ms, name)
	require.Equal(t, 2, n)
	require.True(t, rec.OK(), "%v", rec.Failures)
	var last dial.NodeID
	for _, id := range voters {
		if id != pl[0] && id != pl[1] && id != pl[2] {
			last = id
		}
	}
	// To the voter ranked fourth, and from a successor: one failure for
	// the flow.
	ReplicaPlacement(&rec, []Push{{Flow: flow, From: pl[0], To: last, At: 3}, {Flow: flow, From: pl[1], To: pl[2], At: 4}}, ms, name)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "placement: "+pl[0].String()+" pushed flow "+flow+" to "+last.String())
	rec = Record{}
	ReplicaPlacement(&rec, []Push{{Flow: flow, From: pl[1], To: pl[2], At: 4}}, ms, name)
	require.Len(t, rec.Failures, 1, "a successor does not push")
}

// A write answered before its owner pushed to both successors fails,
// naming the one it skipped; a push sent outside the call's span does not
// count; a write by a node owning the flow under no membership is
// placement's, not judged here.
func TestPushedWrites(t *testing.T) {
	voters := []dial.NodeID{1, 2, 3, 4}
	ms := []MembershipChange{{Index: 1, At: 0, Voters: voters}}
	flow := "i8080:f"
	pl := Placement(voters, classFlow, flow)
	owner, s1, s2, other := pl[0], pl[1], pl[2], dial.NodeID(0)
	for _, v := range voters {
		if v != owner && v != s1 && v != s2 {
			other = v
		}
	}
	ms10 := 10 * time.Millisecond
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	w := ServedWrite{Flow: flow, Node: owner, Called: ms10, Answered: 2 * ms10}
	both := []Push{{flow, owner, s1, 15 * time.Millisecond}, {flow, owner, s2, 15 * time.Millisecond}}

	var rec Record
	require.Equal(t, 1, PushedWrites(&rec, []ServedWrite{w}, both, ms, name))
	require.True(t, rec.OK(), "%v", rec.Failures)

	rec = Record{}
	PushedWrites(&rec, []ServedWrite{w, w}, both[:1], ms, name)
	require.Equal(t, []string{fmt.Sprintf("replica-push: n%d answered a write on flow %s (called at 10ms, answered at 20ms) without pushing it to its successor [n%d] first", owner, flow, s2)},
		rec.Failures, "one failure a flow")

	rec = Record{}
	late := []Push{both[0], {flow, owner, s2, 25 * time.Millisecond}}
	PushedWrites(&rec, []ServedWrite{w}, late, ms, name)
	require.Len(t, rec.Failures, 1, "a push after the answer is not the write's")

	rec = Record{}
	require.Zero(t, PushedWrites(&rec, []ServedWrite{{Flow: flow, Node: other, Called: ms10, Answered: 2 * ms10}}, nil, ms, name))
	require.True(t, rec.OK(), "a non-owner's write is placement's to judge")
}
