package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:      "bridge-saturation",
		Summary:   "a slow owner and more concurrent stateful calls than permits: calls are shed at once, none outlives the deadline",
		Duration:  20 * time.Second,
		Floors:    []Floor{{"flow-ops-ok", 20}, {"calls-shed", 1000}},
		Checkers:  plus(clusterCheckers, "bridge", "disk-answer", "tuple-unique", "push-taken"),
		NoAimedIO: true,
		Run:       runBridgeSaturation,
	})
}

// runBridgeSaturation slows every frame to and from one node (the owner of
// the hot flows) and drives more concurrent calls than permits at it.
func runBridgeSaturation(run *Run) error {
	k := run.Kernel
	const voters = 3
	permits := 4 + k.Stream("knobs/permits").IntN(8)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{Permits: permits})
	run.Knob("permits", permits)
	for _, n := range h.nodes {
		n.Start()
	}
	// The slow owner: every frame to or from it takes a good part of the
	// deadline, so its callers' permits stay taken.
	slow := h.nodes[k.Stream("knobs/slow").IntN(voters)]
	lag := sim.Between(k.Stream("knobs/slow-lag"), 200*time.Millisecond, 900*time.Millisecond)
	run.Knob("slow_node", fmt.Sprintf("%s +%v each way", slow.Name(), lag))
	h.nw.Slow(slow.ID(), lag)
	h.startFlowClients(h.nodes, permits+8, hot, all, calm)
	h.startChecks(100 * time.Millisecond)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	// The bridge's promises are this scenario's subject; with this many
	// concurrent clients per flow, porcupine's search would cost minutes,
	// and flow-ops judges linearizability already.
	h.finish(nil)
	h.checkBridge()
	h.checkPushesTaken()
	h.report()
	var shed uint64
	for _, name := range slices.Sorted(maps.Keys(h.flows)) {
		shed += h.flows[name].Shed
	}
	if shed == 0 {
		run.Fail("bridge", "no call was shed with %d clients per node over %d permits: the scenario did not saturate", permits+8, permits)
	}
	return nil
}
