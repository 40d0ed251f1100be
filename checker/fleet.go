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
