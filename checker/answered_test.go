package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func TestAnswered(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3"}[id] }
	ms := time.Millisecond
	// n2 was down from 5s to 6s.
	down := func(id dial.NodeID, from, to time.Duration) bool {
		return id == 2 && from <= 6*time.Second && to >= 5*time.Second
	}
	asks := []Ask{
		{From: 1, To: 2, Session: 7, ID: 1, Sent: 100 * ms, Taken: 110 * ms},   // answered at once
		{From: 1, To: 2, Session: 7, ID: 2, Sent: 200 * ms, Taken: 210 * ms},   // answered at the bound
		{From: 1, To: 2, Session: 7, ID: 2, Sent: 200 * ms, Taken: 215 * ms},   // a duplicate: the one answer serves both
		{From: 3, To: 2, Session: 7, ID: 1, Sent: 300 * ms, Taken: 310 * ms},   // another caller, same numbers: its own answer
		{From: 1, To: 2, Session: 7, ID: 3, Sent: 4800 * ms, Taken: 4900 * ms}, // the owner went down before its bound
		{From: 1, To: 3, Session: 7, ID: 4, Sent: 9800 * ms, Taken: 9900 * ms}, // too close to the end to judge
	}
	replies := []Reply{
		{From: 2, To: 1, Session: 7, ID: 1, At: 110 * ms},
		{From: 2, To: 1, Session: 7, ID: 2, At: 1210 * ms},
		{From: 2, To: 3, Session: 7, ID: 1, At: 320 * ms},
	}
	var rec Record
	require.Equal(t, 4, Answered(&rec, "request-answered", asks, replies, time.Second, 10*time.Second, down, name))
	require.True(t, rec.OK(), "%v", rec.Failures)

	// An answer one instant past the bound, an answer to another session,
	// and one sent before the request (an old incarnation's, reusing the
	// number) answer nothing.
	for _, r := range []Reply{
		{From: 2, To: 1, Session: 7, ID: 5, At: 1510*ms + 1},
		{From: 2, To: 1, Session: 8, ID: 5, At: 600 * ms},
		{From: 2, To: 1, Session: 7, ID: 5, At: 400 * ms},
	} {
		rec = Record{}
		ask := Ask{From: 1, To: 2, Session: 7, ID: 5, Sent: 500 * ms, Taken: 510 * ms}
		Answered(&rec, "request-answered", []Ask{ask}, []Reply{r}, time.Second, 10*time.Second, down, name)
		require.Equal(t, []string{"request-answered: n2 took n1's request 7/5 at 510ms and sent no answer by 1.51s, up all along"}, rec.Failures, "%+v", r)
	}
	// A caller's second unanswered request at the same node is not
	// reported again.
	rec = Record{}
	Answered(&rec, "request-answered", []Ask{{From: 1, To: 2, ID: 8, Taken: time.Second}, {From: 3, To: 2, ID: 9, Taken: time.Second}}, nil, time.Second, 10*time.Second, down, name)
	require.Len(t, rec.Failures, 1)
}
