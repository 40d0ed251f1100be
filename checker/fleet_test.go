package checker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// A control group that still lists a node its group removed fails; one
// that names every group's latest voters, in any order, passes; a node
// missing from it fails too.
func TestControlMembers(t *testing.T) {
	latest := []MembershipChange{{Index: 4, Voters: []dial.NodeID{1, 2, 3}}, {Index: 9, Voters: []dial.NodeID{4, 5}}}
	var rec Record
	judged := ControlMembers(&rec, latest, []NodeControl{
		{Name: "a", Members: []dial.NodeID{5, 4, 3, 2, 1}},
		{Name: "b", Members: []dial.NodeID{1, 2, 3, 4, 5, 6}},
		{Name: "c", Members: []dial.NodeID{1, 2, 3, 4}},
	})
	require.Equal(t, 3, judged)
	require.Len(t, rec.Failures, 2)
	require.Contains(t, rec.Failures[0], "b's control group")
	require.Contains(t, rec.Failures[1], "c's control group")
}
