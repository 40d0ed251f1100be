package scenarios

import (
	"time"

	"github.com/fenceline/fenceline/core/flow"
)

func init() {
	Register(Scenario{
		Name:     "flow-ops",
		Summary:  "3–7 nodes, clients on every node on hot and cold flows; partitions, loss, reordering, crashes, clock skew",
		Duration: 40 * time.Second,
		Default:  true,
		Bugs: []Bug{
			{Name: "stop-forgets-local", Window: 60, MinCaught: 4},
			{Name: "local-fallback", Window: 10, MinCaught: 7},
			{Name: "silent-refusal", Window: 10, MinCaught: 8},
			{Name: "modulo-owner", Window: 10, MinCaught: 8},
			{Name: "one-push", Window: 10, MinCaught: 8},
			{Name: "ae-no-digests", Window: 10, MinCaught: 8},
			// 12 of seeds 1..60: in the third of the runs that garble frames,
			// where a cut request or copy reaches a read.
			{Name: "lenient-frames", Window: 60, MinCaught: 7},
		},
		Floors:     []Floor{{"flow-ops-ok", 10}, {"faults", 4}},
		DiskStalls: true,
		Checkers:   flowCheckers,
		Run:        runFlowOps,
	})
}

func runFlowOps(run *Run) error {
	k := run.Kernel
	voters := 3 + k.Stream("knobs/size").IntN(5)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{})
	h.stopsWhileAdopting = true
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	run.Knob("faults", faults)
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	return h.runUnderChaos(faults, hot, all, calm)
}
