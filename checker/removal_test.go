package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func removalName(id dial.NodeID) string {
	return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3"}[id]
}

var removalBounds = RemovalBounds{Elect: 100 * ms, Settle: 50 * ms, Adopt: 500 * ms, Persist: 300 * ms}

// calls makes a call every step from from to to through node on flow f,
// served from served on (never, if served is 0).
func callsEvery(node dial.NodeID, f string, from, to, step, served time.Duration) []FlowCall {
	var out []FlowCall
	for at := from; at < to; at += step {
		c := FlowCall{Node: node, Flow: f, Call: at, Return: at + ms, Client: 1, Index: len(out)}
		if served > 0 && at >= served {
			c.Served = true
		} else {
			c.Refused, c.Note = true, "flow not adopted yet at this membership"
		}
		out = append(out, c)
	}
	return out
}

func TestRemovalsFromTheMembershipRecord(t *testing.T) {
	rs := Removals([]MembershipChange{
		{Index: 1, Voters: []dial.NodeID{1, 2, 3}},
		{Index: 9, Voters: []dial.NodeID{1, 3}, At: 2 * time.Second},
		{Index: 12, Voters: []dial.NodeID{1, 3, 4}, At: 5 * time.Second}, // a promotion: no removal
		{Index: 20, Voters: []dial.NodeID{3}, At: 8 * time.Second},
		{Index: 22, Voters: []dial.NodeID{3}, At: 9 * time.Second}, // the removal proposed again: a new m_idx, the same voters
	}, 30*time.Second)
	require.Equal(t, []Removal{
		{Index: 9, At: 2 * time.Second, Removed: []dial.NodeID{2}, Survivors: []dial.NodeID{1, 3}, Until: 5 * time.Second},
		{Index: 20, At: 8 * time.Second, Removed: []dial.NodeID{1, 4}, Survivors: []dial.NodeID{3}, Until: 9 * time.Second},
		{Index: 22, At: 9 * time.Second, Removed: []dial.NodeID{1, 4}, Survivors: []dial.NodeID{3}, Until: 30 * time.Second},
	}, rs)
}

func TestServedAfterRemoval(t *testing.T) {
	lone := []Removal{{Index: 5, At: time.Second, Removed: []dial.NodeID{2}, Survivors: []dial.NodeID{1}, Until: 6 * time.Second}}
	// n1 refuses f until AdoptWait has passed from its first ask, then
	// serves it; g is served at once.
	good := append(callsEvery(1, "f", 1200*ms, 5*time.Second, 40*ms, 1600*ms), callsEvery(1, "g", 1300*ms, 5*time.Second, 70*ms, 1300*ms)...)
	var rec Record
	judged, unjudged, slowest := ServedAfterRemoval(&rec, lone, good, nil, nil, nil, removalBounds, removalName)
	require.True(t, rec.OK(), "%v %v", rec.Failures, rec.Unsure)
	require.Equal(t, 2, judged)
	require.Empty(t, unjudged)
	require.Equal(t, 1561*ms, slowest+1200*ms, "f refused from its first answer, at 1.2s, to its last refusal, answered at 1.561s")

	// The survivor never adopts f: refused for the rest of the span.
	stuck := append(callsEvery(1, "f", 1200*ms, 5*time.Second, 40*ms, 0), callsEvery(1, "g", 1300*ms, 5*time.Second, 70*ms, 1300*ms)...)
	rec = Record{}
	judged, _, _ = ServedAfterRemoval(&rec, lone, stuck, nil, nil, nil, removalBounds, removalName)
	require.Equal(t, 2, judged)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "served-after-removal: n1, left a voter by the removal of n2 at 1s")
	require.Contains(t, rec.Failures[0], "kept refusing 1 flow(s) for over 300ms, 500ms after it first answered: f (first answered at 1.2s;")

	// A blip shorter than Persist past Adopt is not a failure; nor are
	// refusals while the survivor was down (the span is cut there, and
	// judged again from its restart).
	blip := callsEvery(1, "f", 1200*ms, 2*time.Second, 40*ms, 1400*ms)
	blip = append(blip, callsEvery(1, "f", 2*time.Second, 2200*ms, 40*ms, 0)...)
	blip = append(blip, callsEvery(1, "f", 2200*ms, 3*time.Second, 40*ms, 2200*ms)...)
	blip = append(blip, callsEvery(1, "f", 3*time.Second, 4*time.Second, 40*ms, 0)...)       // down from 3s to 4s
	blip = append(blip, callsEvery(1, "f", 4*time.Second, 6*time.Second, 40*ms, 4500*ms)...) // adopted again after its restart
	downs := func(id dial.NodeID) []DownWindow {
		if id == 1 {
			return []DownWindow{{From: 3 * time.Second, To: 4 * time.Second}}
		}
		return nil
	}
	rec = Record{}
	judged, _, _ = ServedAfterRemoval(&rec, lone, blip, nil, downs, nil, removalBounds, removalName)
	require.True(t, rec.OK(), "%v", rec.Failures)
	require.Equal(t, 2, judged, "judged before the crash and after the restart")

	// So are refusals while the removed node's disk stood still: the
	// removal commits only with its write, and the survivor, behind it,
	// refuses until the survivor itself goes down. Without the stall on
	// the record, that is a survivor that stopped serving.
	held := callsEvery(1, "f", 1200*ms, 4*time.Second, 40*ms, 0)
	stalls := func(id dial.NodeID) []DownWindow {
		if id == 2 {
			return []DownWindow{{From: 1900 * ms, To: 3500 * ms}}
		}
		return nil
	}
	crashAt4 := func(id dial.NodeID) []DownWindow {
		if id == 1 {
			return []DownWindow{{From: 4 * time.Second, To: 6 * time.Second}}
		}
		return nil
	}
	rec = Record{}
	_, _, _ = ServedAfterRemoval(&rec, lone, held, nil, crashAt4, nil, removalBounds, removalName)
	require.Len(t, rec.Failures, 1, "without the stall, a survivor that stopped serving")
	rec = Record{}
	judged, unjudged, _ = ServedAfterRemoval(&rec, lone, held, nil, crashAt4, stalls, removalBounds, removalName)
	require.True(t, rec.OK(), "%v", rec.Failures)
	require.Zero(t, judged, "too little left of either piece to judge")
	require.Equal(t, lone, unjudged)

	// Two survivors lead again only once each has heard the other, in
	// the network's record; before that nothing is judged.
	two := []Removal{{Index: 5, At: time.Second, Removed: []dial.NodeID{2}, Survivors: []dial.NodeID{1, 3}, Until: 6 * time.Second}}
	contacts := []Contact{
		{To: 3, From: 2, At: 1100 * ms, FromLeader: true}, // the removed leader's last heartbeat: not a survivor's
		{To: 3, From: 1, At: 3 * time.Second, FromLeader: true},
		{To: 1, From: 3, At: 3 * time.Second, Ack: true},
	}
	early := callsEvery(1, "f", 1200*ms, 3*time.Second, 40*ms, 0)
	early = append(early, callsEvery(1, "f", 3*time.Second, 6*time.Second, 40*ms, 3400*ms)...)
	rec = Record{}
	judged, _, _ = ServedAfterRemoval(&rec, two, early, contacts, nil, nil, removalBounds, removalName)
	require.True(t, rec.OK(), "refusals before the survivors led again are not judged: %v", rec.Failures)
	require.Equal(t, 1, judged)

	// Nothing to judge: the survivors were never heard leading, or no
	// call came late enough.
	rec = Record{}
	judged, unjudged, _ = ServedAfterRemoval(&rec, two, early, nil, nil, nil, removalBounds, removalName)
	require.Zero(t, judged)
	require.Equal(t, two, unjudged)
	require.True(t, rec.OK(), "the caller decides what an unjudged run is")
	judged, unjudged, _ = ServedAfterRemoval(&rec, lone, callsEvery(1, "f", 1200*ms, 1400*ms, 40*ms, 0), nil, nil, nil, removalBounds, removalName)
	require.Zero(t, judged)
	require.Equal(t, lone, unjudged)
}

func TestLastVoter(t *testing.T) {
	msr := []MembershipChange{{Index: 1, Voters: []dial.NodeID{1, 2}}, {Index: 9, Voters: []dial.NodeID{1}, At: time.Second}}
	refused := []LastVoterAsk{{What: "remove the last voter n1", At: 2 * time.Second, Answered: true, Refused: true, Answer: "consensus: refusing to remove the last voter"}}
	var rec Record
	LastVoter(&rec, msr, refused)
	require.True(t, rec.OK())

	LastVoter(&rec, append(msr, MembershipChange{Index: 12, At: 2 * time.Second}), []LastVoterAsk{
		{What: "remove the last voter n1", At: 2 * time.Second},
		{What: "make a learner of the last voter n1", At: 2 * time.Second, Answered: true, Answer: "<nil>"},
	})
	require.Equal(t, []string{
		"last-voter: the membership at index 12, first applied at 2s, has no voter",
		"last-voter: remove the last voter n1 at 2s was never answered",
		`last-voter: make a learner of the last voter n1 at 2s was answered "<nil>", not refused as the last voter`,
	}, rec.Failures)
}
