package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// Where the flow checker forgives loss. The design accepts losing a flow's
// acknowledged writes in two cases only: the node that served them crashed
// before they reached a disk or a copy (a restart), and ownership moved on
// while the node that served them last could not hand them over (a handoff
// from an owner that was down, cut off, or whose handover frames were lost,
// or that the new owner's adoption does not even ask). FlowCuts finds those
// instants from the simulator's own record — which node served each
// operation and when, the crash and partition schedule, the committed
// memberships, the frames lost — and never from a node's account of its
// adoptions. CheckFlowsSplit then forgives the flow's content at each cut,
// once, and holds every segment to linearizability.

// FlowService is one answered flow operation as the simulator saw it
// served: which node applied it, and when.
type FlowService struct {
	Flow string
	Node dial.NodeID
	At   time.Duration
}

// MembershipChange is a committed membership and the instant the first
// node applied it.
type MembershipChange struct {
	Index    uint64
	Voters   []dial.NodeID
	Learners []dial.NodeID
	At       time.Duration
}

// Lists reports whether m names id as a voter or a learner.
func (m MembershipChange) Lists(id dial.NodeID) bool {
	return slices.Contains(m.Voters, id) || slices.Contains(m.Learners, id)
}

// FaultRecord is the simulator's record of what could stop a handover.
type FaultRecord interface {
	// Crashed reports whether node crashed or was down at any instant of
	// [from, to], and the first such instant.
	Crashed(node dial.NodeID, from, to time.Duration) (bool, time.Duration)
	// Cut reports whether the link from a to b was blocked at any
	// instant of [from, to].
	Cut(a, b dial.NodeID, from, to time.Duration) bool
	// HandoverLost reports whether a frame of flow's adoption (a request
	// for its copies, or a copy) between a and b, either way, was lost in
	// [from, to], or refused because its target was down: an orderly
	// stop keeps a node's copy on its disk, but an adoption that asks it
	// meanwhile completes without it, by design.
	HandoverLost(flow string, a, b dial.NodeID, from, to time.Duration) bool
	// HandedOver reports whether a copy of flow that a sent in [from,
	// sentBy] (an adoption answer) reached b by to, early enough that b's
	// adoption had to take it in (an adoption may complete without an
	// answer once AdoptWait has passed since it began), and b did not
	// crash between its arrival and to (the adopted copy went with b's
	// memory).
	HandedOver(flow string, a, b dial.NodeID, from, sentBy, to time.Duration) bool
	// Name is a node's name, for the reasons given.
	Name(node dial.NodeID) string
}

// FlowCut is one instant at which a flow's content is forgiven, and why.
type FlowCut struct {
	Flow   string
	At     time.Duration
	Reason string
}

// FlowCuts returns the instants at which each flow's content may have been
// lost, by design, as the record shows. Services are walked in time order,
// flow by flow; between two consecutive services:
//
//   - by the same node, a crash of it in between is a cut at the crash;
//   - by a node that owns the flow under a later membership than the one
//     under which the first node served it (a handoff forward), nothing if
//     the first node's copy, sent after its last service and before any
//     crash of it (a copy sent after a restart carries only what survived
//     the crash), reached the new owner before it served (the handover
//     happened); otherwise a cut at
//     the second service if the first node crashed, the link between them
//     was cut either way, a frame of the flow's handover between them was
//     lost, or the new owner's adoption does not ask the first node (it is
//     in neither the new placement nor the one just before). A new owner
//     that never asked a reachable previous owner is not forgiven;
//   - otherwise, no cut: a service by an older owner after a newer one
//     (a deposed owner still serving), the newer one's services after it,
//     or a service by a node that never owned the flow, is never
//     forgiven. A handoff is forgiven only as ownership first reaches a
//     membership.
func FlowCuts(services []FlowService, ms []MembershipChange, faults FaultRecord) []FlowCut {
	ms = append([]MembershipChange(nil), ms...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Index < ms[j].Index })
	// own is the flow being walked's owner under each of ms (Placement,
	// never package ring: see placement.go).
	own := make([]dial.NodeID, len(ms))
	// epoch is the position in ms of the latest membership in force at t
	// under which node owns the flow, or -1.
	epoch := func(node dial.NodeID, t time.Duration) int {
		best := -1
		for i, m := range ms {
			if m.At <= t && own[i] == node {
				best = i
			}
		}
		return best
	}
	byFlow := map[string][]FlowService{}
	var flows []string
	for _, s := range services {
		if byFlow[s.Flow] == nil {
			flows = append(flows, s.Flow)
		}
		byFlow[s.Flow] = append(byFlow[s.Flow], s)
	}
	sort.Strings(flows)
	var cuts []FlowCut
	for _, f := range flows {
		ss := byFlow[f]
		for i, m := range ms {
			own[i] = OwnerOf(m.Voters, f)
		}
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At < ss[j].At })
		// top is the latest membership (position in ms) under which the
		// flow has been served so far: a handoff is forgiven only as
		// ownership first reaches a membership, never on a later return
		// from a deposed owner to the new one.
		top := epoch(ss[0].Node, ss[0].At)
		for i := 1; i < len(ss); i++ {
			a, b := ss[i-1], ss[i]
			if a.Node == b.Node {
				if crashed, at := faults.Crashed(a.Node, a.At, b.At); crashed {
					// Just after the crash instant: an answer the node gave
					// at that very instant came before the crash (a node
					// answers nothing once down), and the crash may take
					// its write with it.
					cuts = append(cuts, FlowCut{Flow: f, At: at + 1, Reason: faults.Name(a.Node) + " crashed while serving it"})
				}
				continue
			}
			ea, eb := epoch(a.Node, a.At), epoch(b.Node, b.At)
			fresh := eb > top
			top = max(top, eb)
			crashed, crashAt := faults.Crashed(a.Node, a.At, b.At)
			sentBy := b.At
			if crashed {
				sentBy = crashAt
			}
			if eb <= ea || !fresh || faults.HandedOver(f, a.Node, b.Node, a.At, sentBy, b.At) {
				continue
			}
			pa, pb := faults.Name(a.Node), faults.Name(b.Node)
			reason := ""
			if crashed {
				reason = fmt.Sprintf("%s crashed before handing it to %s", pa, pb)
			} else if faults.Cut(a.Node, b.Node, a.At, b.At) || faults.Cut(b.Node, a.Node, a.At, b.At) {
				reason = fmt.Sprintf("%s and %s were cut off from each other", pa, pb)
			} else if faults.HandoverLost(f, a.Node, b.Node, a.At, b.At) {
				reason = fmt.Sprintf("a handover frame between %s and %s was lost", pa, pb)
			} else if !asked(ms, eb, f, a.Node) {
				reason = fmt.Sprintf("%s's adoption does not ask %s", pb, pa)
			}
			if reason != "" {
				cuts = append(cuts, FlowCut{Flow: f, At: b.At, Reason: reason})
			}
		}
	}
	return cuts
}

// asked reports whether an adoption under membership ms[i] asks node:
// it asks the placements under that membership and the one before.
func asked(ms []MembershipChange, i int, flow string, node dial.NodeID) bool {
	for _, j := range []int{i - 1, i} {
		if j < 0 {
			continue
		}
		for _, id := range Placement(ms[j].Voters, classOf(flow), flow) {
			if id == node {
				return true
			}
		}
	}
	return false
}

// CutTimes groups cuts by flow, for linearizability.CheckFlowsSplit.
func CutTimes(cuts []FlowCut) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, c := range cuts {
		out[c.Flow] = append(out[c.Flow], c.At)
	}
	return out
}
