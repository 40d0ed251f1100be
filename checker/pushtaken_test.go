package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// A successor holds what it took, or newer; a value it dropped fails,
// once per flow; a value at or below the last m_idx at which the node
// owned the flow may lie below its merge floor, and is not judged.
func TestPushesTaken(t *testing.T) {
	a, b, c := dial.NodeID(1), dial.NodeID(2), dial.NodeID(3)
	ms := []MembershipChange{{Index: 1, Voters: []dial.NodeID{a, b, c}}, {Index: 5, Voters: []dial.NodeID{a, b}, At: 2e9}}
	// A flow c owned until it was removed, then a.
	var f string
	for i := 0; OwnerOf(ms[0].Voters, f) != c || OwnerOf(ms[1].Voters, f) != a; i++ {
		f = fmt.Sprintf("i4545:%d", i)
	}
	name := func(id dial.NodeID) string { return id.String() }
	at := func(m, v uint64) flow.Value {
		return flow.Value{Data: []byte(fmt.Sprint(v)), Tuple: flow.Tuple{Era: 1, MIdx: m, V: v, Origin: a}}
	}
	push := Push{Flow: f, From: a, To: b, At: 3e9}
	var j PushesTaken
	var rec Record

	j.Judge(&rec, push, map[string]flow.Value{"k": at(5, 2)}, map[string]flow.Value{"k": at(5, 2)}, ms, name)
	j.Judge(&rec, push, map[string]flow.Value{"k": at(5, 2)}, map[string]flow.Value{"k": at(5, 3)}, ms, name)
	require.True(t, rec.OK(), "held, or newer: %v", rec.Failures)

	j.Judge(&rec, push, map[string]flow.Value{"k": at(5, 4), "l": at(5, 4)}, map[string]flow.Value{"k": at(5, 3)}, ms, name)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], `push-taken: n0000000000000002 took n0000000000000001's push of flow `+f)
	require.Contains(t, rec.Failures[0], `"k" at (1:5,4,n0000000000000001) (holds (1:5,3,`)
	require.Contains(t, rec.Failures[0], `"l" at (1:5,4,n0000000000000001) (holds nothing)`)
	j.Judge(&rec, push, map[string]flow.Value{"k": at(5, 9)}, nil, ms, name)
	require.Len(t, rec.Failures, 1, "one failure a flow")

	// b never owned the flow; c did, at m_idx 1: a value stamped at 1
	// pushed to c may lie below its floor, one stamped at 5 may not.
	toC := Push{Flow: f, From: a, To: c, At: 3e9}
	j.Judge(&rec, toC, map[string]flow.Value{"k": at(1, 7)}, nil, ms, name)
	require.Len(t, rec.Failures, 1, "at or below the m_idx c owned it at: not judged")
	var j2 PushesTaken
	j2.Judge(&rec, toC, map[string]flow.Value{"k": at(5, 7)}, nil, ms, name)
	require.Len(t, rec.Failures, 2, "above it: judged")
	require.Equal(t, 5, j.Seen)
	require.Equal(t, 4, j.Judged)
}
