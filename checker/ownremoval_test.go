package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// A leader of two that appends its own removal fails; one of three, one
// removing the other voter, and one carrying an earlier leader's entry
// pass.
func TestOwnRemoval(t *testing.T) {
	ms := []MembershipChange{
		{Index: 1, Voters: []dial.NodeID{1, 2, 3}},
		{Index: 10, Voters: []dial.NodeID{1, 2}},
	}
	name := func(id dial.NodeID) string { return id.String() }
	ok := []AppendedChange{
		{Leader: 1, Term: 2, Index: 8, EntryTerm: 2, Out: 1, At: time.Second},      // one of three voters
		{Leader: 1, Term: 3, Index: 12, EntryTerm: 3, Out: 2, At: time.Second},     // the other voter
		{Leader: 1, Term: 4, Index: 13, EntryTerm: 3, Out: 1, At: 2 * time.Second}, // appended by the leader of term 3
	}
	var rec Record
	require.Equal(t, 2, OwnRemoval(&rec, ok, ms, name))
	require.True(t, rec.OK(), "%v", rec.Failures)

	bad := AppendedChange{Leader: 2, Term: 5, Index: 14, EntryTerm: 5, Out: 2, At: 3 * time.Second}
	require.Equal(t, 2, OwnRemoval(&rec, []AppendedChange{bad, bad}, ms, name))
	require.Len(t, rec.Failures, 1, "reported once, however often it is sent")
	require.Contains(t, rec.Failures[0], "own-removal: "+name(2)+", leading the two voters of membership 10 in term 5, appended its own removal at index 14")
}
