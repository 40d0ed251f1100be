package scenarios

import (
	"time"

	"github.com/fenceline/fenceline/netsim"
)

// Swarm fault mixes (swarm testing: Groce, Zhang, Eide, Chen and Regehr,
// ISSTA 2012). A run that always mixes every kind of fault tests every
// kind a little and each combination the same way: a partition that
// would expose a bug is healed by the crash that follows it, a clock
// fault hides behind the election a partition started. So a seed of a
// scenario that opts in (Scenario.Swarm) first draws its mix, from its
// own stream ("knobs/swarm", so no other draw moves): half the seeds run
// the full mix as before, the rest leave whole kinds out.
type Swarm string

// The mixes.
const (
	SwarmFull         Swarm = "full"          // every kind of fault, as drawn
	SwarmNoPartitions Swarm = "no-partitions" // crashes and clock faults only
	SwarmNoCrashes    Swarm = "no-crashes"    // partitions and clock faults only
	SwarmOneWayOnly   Swarm = "one-way-only"  // partitions only one way (a node that cannot send, or cannot hear)
	SwarmClockOnly    Swarm = "clock-only"    // clock steps and drift only
	SwarmNoLoss       Swarm = "no-loss"       // every fault, on a network that loses, duplicates and reorders nothing
)

// swarmMixes are the restricted mixes, drawn uniformly by the half of
// the seeds that do not run the full one.
var swarmMixes = []Swarm{SwarmNoPartitions, SwarmNoCrashes, SwarmOneWayOnly, SwarmClockOnly, SwarmNoLoss}

// Swarm is the run's fault mix: drawn once, the first time it is asked
// for, and printed as a knob; SwarmFull, unprinted, in a scenario that
// does not opt in.
func (r *Run) Swarm() Swarm {
	if !r.swarmOn {
		return SwarmFull
	}
	if r.swarm == "" {
		s := r.Kernel.Stream("knobs/swarm")
		r.swarm = SwarmFull
		if s.IntN(2) == 1 {
			r.swarm = swarmMixes[s.IntN(len(swarmMixes))]
		}
		r.Knob("swarm", r.swarm)
	}
	return r.swarm
}

// net is the network config c under the mix.
func (s Swarm) net(c netsim.Config) netsim.Config {
	if s == SwarmNoLoss {
		c.Loss, c.Dup, c.Reorder, c.ReorderMax = 0, 0, 0, 0
	}
	return c
}

// faults is the fault schedule c under the mix. A kind the mix keeps
// keeps its drawn weight; the clock-only mix gives both clock kinds a
// weight and steps a size, so that its runs meet faults at all.
func (s Swarm) faults(c FaultConfig) FaultConfig {
	switch s {
	case SwarmNoPartitions:
		c.Partition = 0
	case SwarmNoCrashes:
		c.Crash = 0
	case SwarmClockOnly:
		c.Partition, c.Crash = 0, 0
		c.ClockStep, c.Drift = max(c.ClockStep, 1), max(c.Drift, 1)
		c.StepMax = max(c.StepMax, 500*time.Millisecond)
		c.DriftMaxPPM = max(c.DriftMaxPPM, 100)
	}
	return c
}

// shapes are the partition shapes the mix draws from.
func (s Swarm) shapes() []string {
	if s == SwarmOneWayOnly {
		return []string{netsim.ShapeOneWay, netsim.ShapeOneWayIn}
	}
	return netsim.Shapes
}
