package scenarios

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scaleStep is what a step costs in the fleet measurements: in the range
// of what a real node's step costs on this project's 2-core machines
// (flowload's three nodes serve ~12,800 owner-path writes a second on two
// shared cores, ~156µs of core a write, and a write is three to five
// steps), rounded up so that a measurement runs fewer events. The ratios
// between fleets hardly depend on it.
const scaleStep = 50 * time.Microsecond

// TestFleetThroughputScalesWithGroups: with a core per node (the
// simulator's step cost), a fleet of G groups serves about G times what
// one group serves. Calls spread over every node pay a hop between
// groups for most flows and so fall short of G by that hop's share of
// the work; calls sent to a node of the flow's own group do not. Every
// core is busy in every measurement: these are capacities, not what the
// clients happened to ask. Virtual time, so the figures replay exactly.
func TestFleetThroughputScalesWithGroups(t *testing.T) {
	measure := func(groups int, own bool) FleetScale {
		s, err := MeasureFleet(FleetLoad{Groups: groups, StepCost: scaleStep, Window: time.Second, Seed: 1, OwnGroup: own})
		require.NoError(t, err)
		t.Log(s)
		require.Zero(t, s.Failed, "a healthy fleet failed calls")
		require.GreaterOrEqual(t, s.Busy, 0.95, "the cores were not the bound: the measurement measured the clients")
		return s
	}
	one := measure(1, false)
	two, four := measure(2, false), measure(4, false)
	require.Greater(t, two.Cross, two.Ops/3, "calls spread over two groups took no hops between them")
	require.GreaterOrEqual(t, two.PerSecond()/one.PerSecond(), 1.7, "two groups")
	require.GreaterOrEqual(t, four.PerSecond()/one.PerSecond(), 3.2, "four groups")
	ownTwo := measure(2, true)
	require.Zero(t, ownTwo.Cross)
	require.GreaterOrEqual(t, ownTwo.PerSecond()/one.PerSecond(), 1.9, "two groups, each called for its own flows")
}

func TestMeasureFleetRefusesWhatItCannotMeasure(t *testing.T) {
	_, err := MeasureFleet(FleetLoad{Groups: 3, StepCost: scaleStep, Window: time.Second})
	require.Error(t, err, "3 groups do not divide the partition table")
	_, err = MeasureFleet(FleetLoad{Groups: 2, Window: time.Second})
	require.ErrorContains(t, err, "step cost")
}

// BenchmarkFleetCapacity is the simulator's measurement of how a fleet's
// stateful throughput scales with its groups when each node has a core
// of its own (MeasureFleet): operations per virtual second for 1, 2 and
// 4 groups of three, calls spread over every node (spread) or sent to
// the flow's own group (own-group), and the speedup over one group.
// Each iteration measures one seed:
//
//	go test ./scenarios -run XXX -bench FleetCapacity -benchtime 3x
func BenchmarkFleetCapacity(b *testing.B) {
	var base float64 // one group's throughput, seed 1
	for _, own := range []bool{false, true} {
		for _, groups := range []int{1, 2, 4} {
			name := fmt.Sprintf("groups=%d/spread", groups)
			if own {
				name = fmt.Sprintf("groups=%d/own-group", groups)
			}
			b.Run(name, func(b *testing.B) {
				var ops, busy float64
				runs := 0
				for b.Loop() {
					runs++
					s, err := MeasureFleet(FleetLoad{Groups: groups, StepCost: scaleStep, Window: time.Second, Seed: uint64(runs), OwnGroup: own})
					if err != nil || s.Failed > 0 {
						b.Fatalf("%v: %v", s, err)
					}
					ops += s.PerSecond()
					busy += s.Busy
					if groups == 1 && runs == 1 && base == 0 {
						base = s.PerSecond()
					}
				}
				mean := ops / float64(runs)
				b.ReportMetric(mean, "ops/virtual-s")
				b.ReportMetric(mean/float64(3*groups), "ops/virtual-s/node")
				b.ReportMetric(100*busy/float64(runs), "%busy")
				if base > 0 {
					b.ReportMetric(mean/base, "x-one-group")
				}
			})
		}
	}
}
