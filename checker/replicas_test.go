package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

func TestReplicaAgreement(t *testing.T) {
	var rec Record
	a := NewReplicaAgreement()
	a.Applied(&rec, "n1", 0, 1) // nothing applied: not judged
	a.Applied(&rec, "n2", 0, 2)
	a.Applied(&rec, "n1", 5, 0xabc)
	a.Applied(&rec, "n2", 5, 0xabc)
	a.Applied(&rec, "n3", 6, 0xdef)
	a.Voters(&rec, "n1", 3, []string{"n1", "n2", "n3"})
	a.Voters(&rec, "n2", 3, []string{"n1", "n2", "n3"})
	require.True(t, rec.OK(), "%v", rec.Failures)

	a.Applied(&rec, "n3", 5, 0xabd)
	a.Voters(&rec, "n3", 3, []string{"n1", "n3"})
	require.Equal(t, []string{
		"replica-agreement: n1 and n3 applied index 5 to different states (0000000000000abc vs 0000000000000abd)",
		"replica-agreement: n3 has voters [n1 n3] at membership index 3; another node had [n1 n2 n3]",
	}, rec.Failures)
}

func TestPromotions(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3", 4: "n4"}[id] }
	held := map[dial.NodeID]uint64{4: 90}
	heldBy := func(id dial.NodeID) (uint64, bool) { v, ok := held[id]; return v, ok }
	var rec Record
	p := NewPromotions()
	// Founders were never learners: never judged.
	require.Equal(t, 0, p.Membership(&rec, 10, nil, []dial.NodeID{1, 2, 3}, 8, heldBy, name))
	require.Equal(t, 0, p.Membership(&rec, 50, []dial.NodeID{4}, []dial.NodeID{1, 2, 3}, 8, heldBy, name))
	// n4 holds to 90; promoted at 99 is within lag 8 of the entry before it.
	require.Equal(t, 1, p.Membership(&rec, 99, nil, []dial.NodeID{1, 2, 3, 4}, 8, heldBy, name))
	require.Equal(t, 0, p.Membership(&rec, 120, nil, []dial.NodeID{1, 2, 3, 4}, 8, heldBy, name), "judged once")
	require.True(t, rec.OK(), "%v", rec.Failures)

	// n4 leaves as a learner again and returns as a voter far behind.
	p.Membership(&rec, 130, []dial.NodeID{4}, []dial.NodeID{1, 2, 3}, 8, heldBy, name)
	require.Equal(t, 1, p.Membership(&rec, 140, nil, []dial.NodeID{1, 2, 3, 4}, 8, heldBy, name))
	require.Equal(t, []string{"promotion: n4 became a voter at index 140 holding the log only to 90: promoted more than 8 entries behind"}, rec.Failures)

	// A node down when promoted is counted, not judged.
	rec = Record{}
	delete(held, 4)
	p.Membership(&rec, 150, []dial.NodeID{4}, []dial.NodeID{1, 2, 3}, 8, heldBy, name)
	require.Equal(t, 1, p.Membership(&rec, 200, nil, []dial.NodeID{1, 2, 3, 4}, 8, heldBy, name))
	require.True(t, rec.OK(), "%v", rec.Failures)
}

func TestReplicaConvergence(t *testing.T) {
	tu := func(v uint64) flow.Tuple { return flow.Tuple{MIdx: 3, V: v, Origin: 1} }
	own := map[string]flow.Value{"a": {Tuple: tu(1)}, "b": {Tuple: tu(2), Tomb: true}}
	same := map[string]flow.Value{"a": {Tuple: tu(1)}, "b": {Tuple: tu(2), Tomb: true}}
	var rec Record
	ReplicaConvergence(&rec, "f", "n1", own, "n2", same)
	require.True(t, rec.OK(), "%v", rec.Failures)

	stale := map[string]flow.Value{"a": {Tuple: tu(1)}, "b": {Tuple: tu(1)}, "z": {Tuple: tu(9)}}
	ReplicaConvergence(&rec, "f", "n1", own, "n2", stale)
	require.Equal(t, []string{
		"replica-convergence: n2's copy of f key b has tuple (3,1,n0000000000000001); the owner n1 has (3,2,n0000000000000001)",
		"replica-convergence: n2's copy of f holds key z (tuple (3,9,n0000000000000001)), which the owner n1 does not",
	}, rec.Failures)

	rec = Record{}
	ReplicaConvergence(&rec, "f", "n1", own, "n3", nil)
	require.Len(t, rec.Failures, 2, "a replica missing every key fails for each")
}

func TestFlowCap(t *testing.T) {
	var rec Record
	c := FlowCap{Cap: 100, Slack: 16}
	ms := time.Millisecond
	n1, n2, n3 := dial.NodeID(1), dial.NodeID(2), dial.NodeID(3)
	c.Sample(n1, 100*ms, 116) // at cap+slack: fine
	c.Sample(n1, 200*ms, 130) // over once: noise
	c.Sample(n2, 200*ms, 130) // another node over once
	c.Sample(n1, 300*ms, 90)  // back under
	c.Sample(n1, 400*ms, 117) // over once again
	c.Sample(n3, 400*ms, 150) // over twice, out of touch the second time
	c.Sample(n3, 500*ms, 150)
	c.Sample(n3, 600*ms, 150) // in touch again: over once since
	c.Sample(n2, 300*ms, 140) // over twice in a row
	c.Sample(n2, 400*ms, 140) // and again: one failure per node
	inTouch := func(node dial.NodeID, at time.Duration) bool { return node != n3 || at != 500*ms }
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	require.Equal(t, 9, c.Judge(&rec, inTouch, name), "every sample but the one out of touch")
	require.Equal(t, 150, c.MaxLive)
	require.Equal(t, []string{"flow-cap: n2 holds 140 live flows at 300ms; the cap is 100"}, rec.Failures)
}

func TestSetAllVersion(t *testing.T) {
	keys := []string{"a", "b", "c"}
	for _, tc := range []struct {
		all     map[string][]byte
		version int
		torn    bool
	}{
		{nil, 0, false},
		{map[string][]byte{"a": []byte("7"), "b": []byte("7"), "c": []byte("7")}, 7, false},
		{map[string][]byte{"a": []byte("7"), "b": []byte("7")}, 0, true},
		{map[string][]byte{"a": []byte("7"), "b": []byte("8"), "c": []byte("7")}, 0, true},
		{map[string][]byte{"a": []byte("0"), "b": []byte("0"), "c": []byte("0")}, 0, true},
		{map[string][]byte{"a": []byte("x"), "b": []byte("x"), "c": []byte("x")}, 0, true},
	} {
		v, torn := SetAllVersion(tc.all, keys)
		require.Equal(t, tc.version, v, "%q", tc.all)
		require.Equal(t, tc.torn, torn, "%q", tc.all)
	}
}

func TestAdversaryRejected(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2"}[id] }
	var rec Record
	AdversaryRejected(&rec, 40, nil, name)
	require.True(t, rec.OK())

	AdversaryRejected(&rec, 0, nil, name)
	require.Equal(t, []string{"adversary: the adversary delivered no frame"}, rec.Unsure)

	rec = Record{}
	AdversaryRejected(&rec, 40, []AdversaryFrame{{Attack: "redirect", To: 2, At: 3 * time.Second}}, name)
	require.Equal(t, []string{"adversary: n2 took a frame the adversary made (redirect) at 3s"}, rec.Failures)

	rec = Record{}
	many := make([]AdversaryFrame, 25)
	for i := range many {
		many[i] = AdversaryFrame{Attack: "forge", To: 1}
	}
	AdversaryRejected(&rec, 40, many, name)
	require.Len(t, rec.Failures, 11)
	require.Equal(t, "adversary: ... and 15 more adversary frames got through", rec.Failures[10])
}
