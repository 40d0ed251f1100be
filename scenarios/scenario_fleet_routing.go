package scenarios

import (
	"time"

	"github.com/fenceline/fenceline/core/flow"
)

func init() {
	Register(Scenario{
		Name: "fleet-routing",
		Summary: "a fleet of 2 or 4 raft groups of three on one network; clients on every node call every group's flows, " +
			"another group's sent to its owner in one hop; partitions, loss, crashes, clock skew across the fleet",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "group-blind", Window: 10, MinCaught: 8},
			{Name: "unpublished-membership", Window: 40, MinCaught: 10},
			// 20 of seeds 1..20 (30 of 1..30), by fleet-records-once: each
			// group records its own answer to the probe's signature.
			{Name: "group-claims", Window: 10, MinCaught: 8},
			// 8 of seeds 1..40, by control-members: every run whose spare
			// voted and was removed again (a quarter of the runs draw it).
			{Name: "keep-removed-follower", Window: 40, MinCaught: 4},
		},
		// Seeds 1..1600 serve at least 4 operations across groups (seed
		// 15: a group down or halted through most of the faulted time).
		Floors:     []Floor{{"flow-ops-ok", 10}, {"cross-group-ops", 4}, {"faults", 4}},
		DiskStalls: true,
		Checkers:   fleetCheckers,
		Run:        runFleetRouting,
	})
}

func runFleetRouting(run *Run) error {
	k := run.Kernel
	groups := 2
	if k.Stream("knobs/fleet").IntN(4) == 0 {
		groups = 4
	}
	f, hot, all := fleetSetup(run, groups, 3, flow.Config{})
	faults := DrawFaults(k.Stream("knobs/faults"), len(f.nodes))
	run.Knob("faults", faults)
	DrawClocks(run, f.nodes, 300*time.Millisecond, 100)
	return f.runUnderChaos(faults, hot, all)
}
