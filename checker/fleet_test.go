package checker

import (
	"fmt"
	"testing"
	"time"

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

// A directory that names every group's latest membership passes; one
// behind on a group, one missing a group, and one naming a group the
// fleet does not run (an admin request that should have been refused)
// fail; a node with no directory fails.
func TestDirectoryCurrent(t *testing.T) {
	latest := []MembershipChange{{Index: 4, Voters: []dial.NodeID{1, 2, 3}}, {Index: 9, Voters: []dial.NodeID{4, 5}}}
	g0, g1 := DirectoryView{MIdx: 4, Voters: []dial.NodeID{3, 2, 1}}, DirectoryView{MIdx: 9, Voters: []dial.NodeID{5, 4}}
	var rec Record
	judged := DirectoryCurrent(&rec, latest, []NodeDirectory{
		{Name: "a", Groups: []DirectoryView{g0, g1}},
		{Name: "b", Groups: []DirectoryView{g0, {MIdx: 8, Voters: []dial.NodeID{4, 5}}}},
		{Name: "c", Groups: []DirectoryView{g0}},
		{Name: "d", Groups: []DirectoryView{g0, g1, {MIdx: 1, Voters: []dial.NodeID{9}}}},
		{Name: "e"},
	})
	require.Equal(t, 5, judged)
	require.Len(t, rec.Failures, 4)
	require.Contains(t, rec.Failures[0], "b's directory names group 1's voters")
	require.Contains(t, rec.Failures[1], "c's directory names 1 groups, not 2")
	require.Contains(t, rec.Failures[2], "d's directory names 3 groups; the fleet runs 2")
	require.Contains(t, rec.Failures[3], "e has no group directory")
}

// A node that still holds what its group gave away fails once the
// rounds its debt needs, and the allowance, have passed; not before.
func TestReleased(t *testing.T) {
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	every := 2 * time.Second
	// Owed 10 at 4 a round: 3 rounds, plus 2, at 2.5 s, plus 4 s: 16.5 s.
	l := Leftovers{Node: 1, Group: 0, Held: []string{"f1"}, Owed: 10, Since: 10 * time.Second}
	rec := &Record{}
	require.Zero(t, Released(rec, 26*time.Second, []Leftovers{l}, 4, every, name), "within the allowance: not judged")
	require.True(t, rec.OK())
	require.Equal(t, 1, Released(rec, 27*time.Second, []Leftovers{l}, 4, every, name))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "released: n1 (group 0) still holds 1 flows")
	rec = &Record{}
	l.Held = nil
	require.Equal(t, 1, Released(rec, 40*time.Second, []Leftovers{l}, 4, every, name))
	require.True(t, rec.OK(), "a node that dropped all it owed passes")
}
