package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// crafted is a fault record built by hand.
type crafted struct {
	crashes map[dial.NodeID]time.Duration // one crash instant per node
	cut     [2]dial.NodeID                // one link cut for the whole run
	lost    bool                          // every handover frame lost
	handed  bool                          // every handover delivered
	sentAt  time.Duration                 // when each handover was sent (0: any time)
}

func (c crafted) HandedOver(_ string, _, _ dial.NodeID, from, sentBy, _ time.Duration) bool {
	return c.handed && (c.sentAt == 0 || (c.sentAt >= from && c.sentAt <= sentBy))
}

func (crafted) Name(id dial.NodeID) string { return id.String() }

func (c crafted) Crashed(node dial.NodeID, from, to time.Duration) (bool, time.Duration) {
	at, ok := c.crashes[node]
	return ok && at >= from && at <= to, at
}

func (c crafted) Cut(a, b dial.NodeID, from, to time.Duration) bool {
	return c.cut == [2]dial.NodeID{a, b}
}

func (c crafted) HandoverLost(string, dial.NodeID, dial.NodeID, time.Duration, time.Duration) bool {
	return c.lost
}

// handoff finds a flow whose owner changes between the voters before and
// after adding a node, so the test does not depend on hash values.
func handoff(t *testing.T, before, after []dial.NodeID) (flow string, from, to dial.NodeID) {
	rb, ra := ring.New(before), ring.New(after)
	for i := 0; i < 1000; i++ {
		f := ring.ImposterKey(8080, string(rune('a'+i%26))+time.Duration(i).String())
		ob, _ := rb.Owner(ring.ClassFlow, f)
		oa, _ := ra.Owner(ring.ClassFlow, f)
		if ob != oa {
			return f, ob, oa
		}
	}
	t.Fatal("no flow changes owner")
	return "", 0, 0
}

func TestFlowCuts(t *testing.T) {
	n1, n2, n3, n4 := dial.IDFromName("n1"), dial.IDFromName("n2"), dial.IDFromName("n3"), dial.IDFromName("n4")
	before := []dial.NodeID{n1, n2, n3}
	after := []dial.NodeID{n1, n2, n3, n4}
	f, p, n := handoff(t, before, after)
	ms := []MembershipChange{{Index: 1, Voters: before}, {Index: 5, Voters: after, At: 10 * time.Second}}
	services := []FlowService{
		{Flow: f, Node: p, At: time.Second},
		{Flow: f, Node: p, At: 9 * time.Second},
		{Flow: f, Node: n, At: 12 * time.Second},
	}
	// A handoff with nothing in its way: nothing forgiven.
	require.Empty(t, FlowCuts(services, ms, crafted{}))

	// The previous owner crashed, was cut off, or its answer was lost:
	// the new owner's first service is a cut.
	for name, rec := range map[string]crafted{
		"crash": {crashes: map[dial.NodeID]time.Duration{p: 10 * time.Second}},
		"cut":   {cut: [2]dial.NodeID{n, p}},
		"lost":  {lost: true},
	} {
		cuts := FlowCuts(services, ms, rec)
		require.Len(t, cuts, 1, name)
		require.Equal(t, 12*time.Second, cuts[0].At, name)
	}

	// A handover that happened forgives nothing, whatever else went on.
	require.Empty(t, FlowCuts(services, ms, crafted{lost: true, handed: true, cut: [2]dial.NodeID{n, p}}))
	// One sent before the previous owner crashed carried everything; one
	// sent after its restart carries only what survived the crash, and
	// the new owner's first service is a cut.
	crash := map[dial.NodeID]time.Duration{p: 10 * time.Second}
	require.Empty(t, FlowCuts(services, ms, crafted{crashes: crash, handed: true, sentAt: 9*time.Second + 500*time.Millisecond}))
	cuts := FlowCuts(services, ms, crafted{crashes: crash, handed: true, sentAt: 11 * time.Second})
	require.Len(t, cuts, 1)
	require.Equal(t, 12*time.Second, cuts[0].At)

	// A restart of the serving node between two of its services is a cut
	// just after the crash: an answer it gave at the crash instant came
	// before the crash, and is forgiven with it.
	cuts = FlowCuts(services[:2], ms, crafted{crashes: map[dial.NodeID]time.Duration{p: 5 * time.Second}})
	require.Equal(t, []FlowCut{{Flow: f, At: 5*time.Second + 1, Reason: cuts[0].Reason}}, cuts)

	// The deposed owner serving after the new one began is never
	// forgiven, whatever the faults: ownership only moves forward.
	deposed := append(append([]FlowService(nil), services...),
		FlowService{Flow: f, Node: p, At: 13 * time.Second}, FlowService{Flow: f, Node: n, At: 14 * time.Second})
	cuts = FlowCuts(deposed, ms, crafted{cut: [2]dial.NodeID{n, p}})
	require.Len(t, cuts, 1, "only the first handoff forward, not the way back nor forward again")
	require.Equal(t, 12*time.Second, cuts[0].At)

	// A node that never owned the flow serving it is never forgiven.
	var stranger dial.NodeID
	for _, id := range after {
		if id != p && id != n {
			stranger = id
		}
	}
	cuts = FlowCuts([]FlowService{services[0], {Flow: f, Node: stranger, At: 2 * time.Second}}, ms, crafted{lost: true})
	require.Empty(t, cuts)
}
