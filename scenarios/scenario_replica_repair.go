package scenarios

import (
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:     "replica-repair",
		Summary:  "replication pushes dropped at a high rate; after the faults heal, anti-entropy converges every copy",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-anti-entropy", Window: 10, MinCaught: 8},
		},
		Floors:     []Floor{{"flow-ops-ok", 20}, {"pushes-dropped", 10}},
		DiskStalls: true,
		Checkers:   flowCheckers,
		Swarm:      true,
		Run:        runReplicaRepair,
	})
}

// runReplicaRepair drops most replication pushes; anti-entropy must bring
// every successor's copy to the owner's within a few rounds of the heal.
func runReplicaRepair(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	aeEvery := 2 * time.Second
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{AntiEntropy: aeEvery})
	pushLoss := 0.5 + float64(k.Stream("knobs/push-loss").IntN(50))/100
	run.Knob("push_loss", pushLoss)
	dr := k.Stream("push-loss")
	dropped := 0
	h.nw.DropIf(func(_, _ dial.NodeID, frame []byte) bool {
		// The frame's kind, read by the protocol's own decoder: only
		// replication pushes are dropped.
		if info, err := flow.DecodeFrame(h.plain(frame)); err != nil || info.Kind != flow.FramePush || !sim.Chance(dr, pushLoss) {
			return false
		}
		dropped++
		return true
	})
	defer func() { run.Did("pushes-dropped", dropped) }()
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	faults.Crash = 0 // memory-only copies: a crash is a different story (FlowShard)
	run.Knob("faults", faults)
	return h.runUnderChaos(faults, hot, all, calm)
}
