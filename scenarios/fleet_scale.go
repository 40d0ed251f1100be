package scenarios

import (
	"fmt"
	"io"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// FleetLoad is what MeasureFleet measures: a fleet of Groups raft groups
// of three whose nodes' steps each cost StepCost of their one core,
// called for Window after a warm-up, everything drawn from Seed. With
// OwnGroup, each node's clients call only the flows its own group holds,
// as a balancer that knew the table would send them; without it, flows
// of every group, as one that spreads callers over the fleet does.
type FleetLoad struct {
	Groups   int
	StepCost time.Duration
	Window   time.Duration
	Seed     uint64
	OwnGroup bool
}

// FleetScale is what MeasureFleet measured of one fleet.
type FleetScale struct {
	FleetLoad
	Nodes int
	// Ops is the operations answered ok in the window, Failed those that
	// failed in it; Cross the ok ones a node of another group than the
	// flow's took (each a hop between groups).
	Ops, Failed, Cross int
	// Busy is the share of the nodes' cores the window kept busy (steps
	// taken times StepCost, over the nodes' time): near 1, the fleet was
	// measured at its capacity, not at what the clients asked.
	Busy float64
}

// PerSecond is the fleet's throughput: ok operations per virtual second.
func (s FleetScale) PerSecond() float64 { return float64(s.Ops) / s.Window.Seconds() }

func (s FleetScale) String() string {
	return fmt.Sprintf("groups=%d nodes=%d step=%v own-group=%t ops/virtual-s=%.0f per-node=%.0f ok=%d failed=%d cross-group=%d%% busy=%.0f%%",
		s.Groups, s.Nodes, s.StepCost, s.OwnGroup, s.PerSecond(), s.PerSecond()/float64(s.Nodes), s.Ops, s.Failed, 100*s.Cross/max(s.Ops, 1), 100*s.Busy)
}

// Measurement knobs (MeasureFleet). flowsPerGroup flows per group spread
// each group's load over its three owners about evenly (with a handful,
// one owner would hold most of them and cap its group). clientsPerNode
// closed-loop clients per node keep every core busy: each waits on a few
// network hops, so one per node would leave the cores idle and measure
// latency, not capacity. The warm-up covers the elections and each
// flow's first adoption (AdoptWait on a fresh cluster).
const (
	flowsPerGroup  = 64
	clientsPerNode = 24
	scaleWarmUp    = 4 * time.Second
)

// MeasureFleet measures how much a fleet of load.Groups raft groups of
// three serves when every node has one core of its own on which each step
// of its code (a frame, a timer, a client call) costs load.StepCost
// (sim.Machine.SetStepCost): the simulator's answer to how throughput
// scales with G, which one machine's real processes cannot give (they
// share its cores). The network is healthy (netsim.DefaultConfig), the
// disks never fail, and nothing crashes. Every node runs clientsPerNode
// closed-loop clients, half reads and half increments, on flows of every
// group (most calls in a fleet of several groups then take a hop to
// another group) or, with OwnGroup, of the node's own. It counts the
// operations answered ok in the window, after a warm-up.
//
// Everything is drawn from the seed, so a measurement replays exactly.
func MeasureFleet(load FleetLoad) (FleetScale, error) {
	groups, stepCost, window := load.Groups, load.StepCost, load.Window
	if err := partition.Compatible(groups); err != nil {
		return FleetScale{}, err
	}
	if stepCost <= 0 || window <= 0 {
		return FleetScale{}, fmt.Errorf("a measurement needs a step cost and a window above 0 (got %v and %v)", stepCost, window)
	}
	k := sim.New(load.Seed)
	defer k.InstallCryptoRand()()
	k.SetMaxEventRate(1 << 40) // a saturated fleet of many nodes runs far past the storm bound
	k.SetMaxEvents(1 << 40)
	end := scaleWarmUp + window
	run := &Run{Kernel: k, Duration: end, out: io.Discard, bugs: map[string]bool{}, result: &Result{}}
	disk := sim.DefaultDiskConfig
	disk.TornWriteProb = 0
	f := buildFleet(run, fleetShape{groups: groups, size: 3, grow: -1, calm: 0, net: netsim.DefaultConfig, disk: disk}, flow.Config{})
	for _, n := range f.nodes {
		n.SetStepCost(stepCost)
		n.Start()
	}
	flows := scaleFlows(groups)
	res := FleetScale{FleetLoad: load, Nodes: len(f.nodes)}
	for ni, n := range f.nodes {
		h := f.groups[f.member[n.ID()]]
		calls := flows
		if load.OwnGroup {
			g := f.member[n.ID()]
			calls = flows[g*flowsPerGroup : (g+1)*flowsPerGroup]
		}
		for c := range clientsPerNode {
			r := k.Stream(fmt.Sprintf("measure/client/%d/%d", ni, c))
			var step func()
			step = func() {
				if k.Now() >= end {
					return
				}
				fl := calls[r.IntN(len(calls))]
				req := flow.Request{Flow: fl, Op: flow.OpGet, Key: "k"}
				if r.IntN(2) == 0 {
					req = flow.Request{Flow: fl, Op: flow.OpIncr, Key: "n", Delta: 1}
				}
				store := h.flows[n.Name()]
				n.Exec(func() {
					store.Do(req, func(_ flow.Response, err error) {
						if now := k.Now(); now >= scaleWarmUp && now < end {
							switch {
							case err != nil:
								res.Failed++
							default:
								res.Ops++
								if f.dir.Resolve(fl).Group != f.member[n.ID()] {
									res.Cross++
								}
							}
						}
						// The next call a moment later: on the node's
						// loop now, it would run inside this step.
						k.After(0, sim.EvClient, uint64(ni*clientsPerNode+c), step)
					})
				})
			}
			k.At(sim.Between(r, 2*time.Second, 2500*time.Millisecond), sim.EvClient, uint64(ni*clientsPerNode+c), step)
		}
	}
	steps := func() (n uint64) {
		for _, m := range f.nodes {
			n += m.Steps()
		}
		return n
	}
	var before uint64
	k.At(scaleWarmUp, sim.EvCheck, 0, func() { before = steps() })
	if err := k.RunUntil(end); err != nil {
		return res, err
	}
	res.Busy = float64(steps()-before) * stepCost.Seconds() / (float64(len(f.nodes)) * window.Seconds())
	if res.Ops == 0 {
		return res, fmt.Errorf("a fleet of %d groups served nothing in %v (%d failed)", groups, window, res.Failed)
	}
	return res, nil
}

// scaleFlows are flowsPerGroup flows held by each of groups groups,
// group by group.
func scaleFlows(groups int) []string {
	byGroup := make([][]string, groups)
	for i, n := 0, 0; n < flowsPerGroup*groups; i++ {
		key := ring.ImposterKey(8080, fmt.Sprintf("scale-%d", i))
		if g := partition.GroupOf(key, groups); len(byGroup[g]) < flowsPerGroup {
			byGroup[g] = append(byGroup[g], key)
			n++
		}
	}
	var out []string
	for _, fs := range byGroup {
		out = append(out, fs...)
	}
	return out
}
