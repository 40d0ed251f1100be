package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func TestVotes(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3"}[id] }
	grants := []VoteGrant{
		{Voter: 1, Candidate: 2, Term: 5, At: time.Second},
		{Voter: 1, Candidate: 2, Term: 5, At: 2 * time.Second}, // the same vote again: fine
		{Voter: 1, Candidate: 3, Term: 6, At: 3 * time.Second}, // a new term: fine
		{Voter: 3, Candidate: 2, Term: 5, At: time.Second},
	}
	var rec Record
	Votes(&rec, grants, name)
	require.True(t, rec.OK(), "%v", rec.Failures)

	grants = append(grants, VoteGrant{Voter: 1, Candidate: 3, Term: 5, At: 4 * time.Second})
	Votes(&rec, grants, name)
	require.Equal(t, []string{"votes: n1 voted for n2 in term 5 at 1s, and for n3 in the same term at 4s"}, rec.Failures)
}
