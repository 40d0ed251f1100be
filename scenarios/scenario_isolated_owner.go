package scenarios

import (
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:     "isolated-owner",
		Summary:  "the leader and flow owners cut off, in every combination, with clients on both sides",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-d17", Window: 30, MinCaught: 20},
			{Name: "tick-window", Window: 60, MinCaught: 4},
		},
		Floors:     []Floor{{"flow-ops-ok", 15}, {"cuts", 3}},
		DiskStalls: true,
		Checkers:   flowCheckers,
		Run:        runIsolatedOwner,
	})
}

// runIsolatedOwner cuts off, in turn, the leader alone, a flow owner
// alone, the leader with an owner, and a minority holding both, with
// clients pinned on both sides.
func runIsolatedOwner(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{})
	for _, n := range h.nodes {
		n.Start()
	}
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.holdForFlowOps(calm)
	h.startChecks(100 * time.Millisecond)
	r := k.Stream("faults")
	shapes := []string{"leader", "owner", "leader+owner", "minority"}
	var cut func(i int)
	cut = func(i int) {
		if k.Now() >= calm {
			return
		}
		shape := shapes[i%len(shapes)]
		var leader *sim.Machine
		for _, n := range h.nodes {
			if cn := h.node(n); cn != nil && cn.BelievesSelfLeader() {
				leader = n
			}
		}
		owner := h.ownerOf(hot[r.IntN(len(hot))])
		side := map[dial.NodeID]bool{}
		switch shape {
		case "leader":
			if leader != nil {
				side[leader.ID()] = true
			}
		case "owner":
			if owner != nil {
				side[owner.ID()] = true
			}
		case "leader+owner":
			if leader != nil {
				side[leader.ID()] = true
			}
			if owner != nil {
				side[owner.ID()] = true
			}
		default:
			for _, n := range h.nodes[:(voters-1)/2] {
				side[n.ID()] = true
			}
		}
		ord := run.Fault()
		if len(side) > 0 && len(side) < voters {
			var a, b []dial.NodeID
			var desc []string
			for _, n := range h.nodes {
				if side[n.ID()] {
					a = append(a, n.ID())
					desc = append(desc, n.Name())
				} else {
					b = append(b, n.ID())
				}
			}
			run.Inject(ord, fmt.Sprintf("cut off %s: %s", shape, strings.Join(desc, ",")), func() {
				h.nw.Heal()
				h.nw.Split(k.Nodes(), a, b)
				run.Did("cuts", 1)
				var cutOff []*sim.Machine
				for _, n := range h.nodes {
					if side[n.ID()] {
						cutOff = append(cutOff, n)
					}
				}
				h.stallDuring(cutOff, time.Second)
			})
		}
		k.After(sim.Between(r, time.Second, 3*time.Second), sim.EvFault, xxhash.Sum64String("heal"), func() {
			h.nw.Heal()
			k.After(sim.Between(r, 500*time.Millisecond, 2*time.Second), sim.EvFault, xxhash.Sum64String("cut"), func() { cut(i + 1) })
		})
	}
	k.After(2*time.Second, sim.EvFault, xxhash.Sum64String("cut"), func() { cut(r.IntN(len(shapes))) })
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		h.nw.Heal()
		h.checkLiveness(h.nodes, 5*time.Second, nil)
		h.checkFlowsServed(h.nodes, hot, 3*time.Second)
	})
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	h.finishFlows(h.nodes, nil)
	return nil
}
