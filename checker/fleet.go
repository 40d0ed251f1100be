package checker

import (
	"time"

	"github.com/fenceline/fenceline/dial"
)

// PartitionHolder fails when an operation on a flow took effect at a node
// whose raft group did not hold the flow's partition at that instant
// (checker partition-holder). Each group of a fleet keeps its own copy of
// the flows it holds; an operation applied in another group forks the
// flow there, whatever the two copies happen to hold. services is the
// simulator's record of where and when each operation took effect (as the
// flow checkers read it), groupOf the group each node was built in, and
// holder the group the fleet's directory gave the flow's partition at an
// instant, as the simulator installed it. At most one failure per flow is
// reported. It returns how many services it judged.
func PartitionHolder(rep Reporter, services []FlowService, groupOf func(dial.NodeID) (int, bool),
	holder func(flow string, at time.Duration) int, name func(dial.NodeID) string) int {
	reported := map[string]bool{}
	judged := 0
	for _, s := range services {
		g, ok := groupOf(s.Node)
		if !ok {
			rep.Fail("partition-holder", "flow %s served at %v by %s, a node of no group", s.Flow, s.At, name(s.Node))
			continue
		}
		judged++
		if h := holder(s.Flow, s.At); h != g && !reported[s.Flow] {
			reported[s.Flow] = true
			rep.Fail("partition-holder", "flow %s served at %v by %s of group %d; its partition was group %d's", s.Flow, s.At, name(s.Node), g, h)
		}
	}
	return judged
}

// DirectoryView is what a node's group directory says of one group: the
// membership index it names the group's voters at, and those voters.
type DirectoryView struct {
	MIdx   uint64
	Voters []dial.NodeID
}

// NodeDirectory is one node's directory: what it says of each group, nil
// if the node has none.
type NodeDirectory struct {
	Name   string
	Groups []DirectoryView
}

// DirectoryCurrent fails when, after the run's quiet, a node's directory
// does not name some group's latest committed membership (checker
// directory-current): every membership a group commits is published, and
// every node's copy of the control group catches up, so a node that
// routes by an older one is fenced for good by that group's owners, and
// one with none refuses every flow. latest is each group's newest
// membership, from the run's record of what the groups committed; nodes
// is each node up at the end, with what its directory says of each group.
// It returns how many nodes it judged.
func DirectoryCurrent(rep Reporter, latest []MembershipChange, nodes []NodeDirectory) int {
	judged := 0
	for _, n := range nodes {
		name, view := n.Name, n.Groups
		judged++
		if view == nil {
			rep.Fail("directory-current", "%s has no group directory at the end of the run", name)
			continue
		}
		if len(view) > len(latest) {
			// A group no raft group of the run runs: an admin request
			// the directory should have refused.
			rep.Fail("directory-current", "%s's directory names %d groups; the fleet runs %d", name, len(view), len(latest))
		}
		for g, want := range latest {
			if g >= len(view) {
				rep.Fail("directory-current", "%s's directory names %d groups, not %d", name, len(view), len(latest))
				break
			}
			if got := view[g]; got.MIdx != want.Index || !sameIDs(got.Voters, want.Voters) {
				rep.Fail("directory-current", "%s's directory names group %d's voters %v at m_idx %d; the group committed %v at %d",
					name, g, got.Voters, got.MIdx, want.Voters, want.Index)
			}
		}
	}
	return judged
}

func sameIDs(a, b []dial.NodeID) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[dial.NodeID]bool{}
	for _, id := range a {
		in[id] = true
	}
	for _, id := range b {
		if !in[id] {
			return false
		}
	}
	return true
}

// NodeControl is one node's view of the fleet's control group: every
// member (voter or learner) of the membership its replica applied.
type NodeControl struct {
	Name    string
	Members []dial.NodeID
}

// ControlMembers fails when, after the run's quiet, a node's control
// group is not exactly the nodes the groups' latest memberships name
// (checker control-members): every voter of every group follows the
// control group, and a node removed from its group leaves it too, or it
// would count in the control group's quorum for good, a voter nobody
// runs. latest is each group's newest membership, from the run's record
// of what the groups committed. It returns how many nodes it judged.
func ControlMembers(rep Reporter, latest []MembershipChange, nodes []NodeControl) int {
	var named []dial.NodeID
	for _, m := range latest {
		named = append(named, m.Voters...)
	}
	for _, n := range nodes {
		if !sameIDs(n.Members, named) {
			rep.Fail("control-members", "%s's control group is %v; the groups' latest memberships name %v", n.Name, n.Members, named)
		}
	}
	return len(nodes)
}

// Leftovers is what one node of a fleet held at the end of a run of the
// partitions the record gives other groups (a partition moving to the
// node's own group excepted: it is taking copies of it).
type Leftovers struct {
	Node  dial.NodeID
	Group int
	Held  []string // the flows, sorted
	// Owed is the most such flows the node held at any publication that
	// gave one of its group's partitions away, and Since the last such
	// publication or the node's last start, whichever came later.
	Owed  int
	Since time.Duration
}

// Released fails (checker released) for a node that still holds, at at,
// copies of flows its group gave away: a move's last step is that each
// old voter drops them, at most most a round, every anti-entropy round
// (jittered by a quarter of every). After Since, what it owed drains in
// ceil(Owed/most) rounds; two more rounds, and two periods for a
// directory that reached it late, are the allowance. A node whose
// allowance has not passed by at is not judged. It returns how many
// nodes it judged.
func Released(rep Reporter, at time.Duration, ls []Leftovers, most int, every time.Duration, name func(dial.NodeID) string) int {
	judged := 0
	for _, l := range ls {
		rounds := (l.Owed+most-1)/most + 2
		if at-l.Since < time.Duration(rounds)*every*5/4+2*every {
			continue
		}
		judged++
		if len(l.Held) > 0 {
			rep.Fail("released", "%s (group %d) still holds %d flows of partitions other groups hold (first %s), though it owed at most %d since %v",
				name(l.Node), l.Group, len(l.Held), l.Held[0], l.Owed, l.Since)
		}
	}
	return judged
}
