package scenarios

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// FaultConfig is a fault schedule's shape, drawn once per seed.
type FaultConfig struct {
	GapMin, GapMax             time.Duration // between two faults
	PartitionMin, PartitionMax time.Duration // how long a partition lasts
	DownMin, DownMax           time.Duration // how long a crashed node stays down
	MaxDown                    int           // nodes down at once, at most
	StepMax                    time.Duration // largest clock step, either way
	DriftMaxPPM                int64         // largest drift, either way
	// Weights of the fault kinds.
	Partition, Crash, ClockStep, Drift int
}

// DrawFaults draws a fault schedule for n nodes. MaxDown is a minority, so
// a quorum protocol can make progress between faults.
func DrawFaults(r *rand.Rand, n int) FaultConfig {
	return FaultConfig{
		GapMin:       sim.Between(r, 50*time.Millisecond, 500*time.Millisecond),
		GapMax:       sim.Between(r, time.Second, 4*time.Second),
		PartitionMin: 100 * time.Millisecond,
		PartitionMax: sim.Between(r, 500*time.Millisecond, 5*time.Second),
		DownMin:      50 * time.Millisecond,
		DownMax:      sim.Between(r, 500*time.Millisecond, 5*time.Second),
		MaxDown:      max(1, (n-1)/2),
		StepMax:      sim.Between(r, 0, 2*time.Second),
		DriftMaxPPM:  int64(r.IntN(501)),
		Partition:    r.IntN(4) + 1,
		Crash:        r.IntN(4) + 1,
		ClockStep:    r.IntN(3),
		Drift:        r.IntN(2),
	}
}

func (c FaultConfig) String() string {
	return fmt.Sprintf("gap=%v..%v partition=%v..%v down=%v..%v max_down=%d step_max=%v drift_max=%dppm weights(partition=%d crash=%d step=%d drift=%d)",
		c.GapMin, c.GapMax, c.PartitionMin, c.PartitionMax, c.DownMin, c.DownMax, c.MaxDown,
		c.StepMax, c.DriftMaxPPM, c.Partition, c.Crash, c.ClockStep, c.Drift)
}

// Chaos injects faults into a cluster on a seeded schedule until a time,
// then heals everything and restarts every node so a liveness phase can
// follow. Every fault is a kernel event, so it is in the trace.
type Chaos struct {
	run   *Run
	nw    *netsim.Network
	nodes []*sim.Machine
	cfg   FaultConfig
	// shapes are the partition shapes the run's swarm mix draws from.
	shapes []string
	rng    *rand.Rand
	// orderly draws which stops are orderly restarts (crash).
	orderly *rand.Rand
	until   time.Duration
	// readopt, when set (AimStopsWhileAdopting), draws the orderly
	// restarts aimed at a node that has just come back.
	readopt   *rand.Rand
	adoptWait time.Duration
	waiting   func(*sim.Machine) bool

	// Counters, for the run's report.
	Partitions, Crashes, Steps, Drifts int
}

// StartChaos schedules faults from now until until.
func StartChaos(run *Run, nw *netsim.Network, nodes []*sim.Machine, cfg FaultConfig, until time.Duration) *Chaos {
	c := &Chaos{run: run, nw: nw, nodes: nodes, cfg: run.Swarm().faults(cfg), shapes: run.Swarm().shapes(),
		rng: run.Kernel.Stream("faults"), orderly: run.Kernel.Stream("faults/orderly"), until: until}
	c.next()
	run.Kernel.At(until, sim.EvFault, xxhash.Sum64String("calm"), c.calm)
	return c
}

func (c *Chaos) next() {
	k := c.run.Kernel
	at := k.Now() + sim.Between(c.rng, c.cfg.GapMin, c.cfg.GapMax)
	if at >= c.until {
		return
	}
	k.At(at, sim.EvFault, 0, func() {
		c.inject()
		c.next()
	})
}

func (c *Chaos) down() int {
	n := 0
	for _, node := range c.nodes {
		if !node.Up() {
			n++
		}
	}
	return n
}

// inject makes one fault attempt: it draws every number the fault needs,
// then injects it through the run's one door (Run.Inject), which may skip
// it. The draws never depend on the cluster's state, so a skipped fault
// leaves the rest of the schedule as it was.
func (c *Chaos) inject() {
	k := c.run.Kernel
	total := c.cfg.Partition + c.cfg.Crash + c.cfg.ClockStep + c.cfg.Drift
	if total == 0 {
		return
	}
	ord := c.run.Fault()
	pick := c.rng.IntN(total)
	node := c.nodes[c.rng.IntN(len(c.nodes))]
	switch {
	case pick < c.cfg.Partition:
		p := c.nw.DrawPartition(c.rng, k.Nodes(), c.shapes)
		last := sim.Between(c.rng, c.cfg.PartitionMin, c.cfg.PartitionMax)
		c.run.Inject(ord, fmt.Sprintf("partition %s (for %v)", p.Desc, last.Round(time.Millisecond)), func() {
			c.Partitions++
			p.Apply()
			if heal := k.Now() + last; heal < c.until {
				k.At(heal, sim.EvFault, xxhash.Sum64String("heal"), func() {
					if c.nw.Shape() == p.Desc { // a later partition replaced it: leave that one
						c.nw.Heal()
					}
				})
			}
		})
	case pick < c.cfg.Partition+c.cfg.Crash:
		c.crash(ord, node)
	case pick < c.cfg.Partition+c.cfg.Crash+c.cfg.ClockStep:
		if c.cfg.StepMax == 0 {
			return
		}
		step := sim.Between(c.rng, -c.cfg.StepMax, c.cfg.StepMax)
		c.run.Inject(ord, fmt.Sprintf("clock step %s %v", node.Name(), step), func() {
			c.Steps++
			node.Clock().Step(step)
		})
	default:
		ppm := sim.Between(c.rng, -c.cfg.DriftMaxPPM, c.cfg.DriftMaxPPM)
		c.run.Inject(ord, fmt.Sprintf("clock drift %s %dppm", node.Name(), ppm), func() {
			c.Drifts++
			node.Clock().SetDrift(ppm)
		})
	}
}

// crash is fault attempt ord: kill node now, if it is up and fewer than
// MaxDown are down, and restart it after a drawn pause (drawn either way).
func (c *Chaos) crash(ord FaultID, node *sim.Machine) {
	k := c.run.Kernel
	down := sim.Between(c.rng, c.cfg.DownMin, c.cfg.DownMax)
	// One stop in three is an orderly restart (an operator's, a rolling
	// upgrade's): the node's Close runs before the process exits, and no
	// checker forgives a loss at it. Drawn from its own stream, so the
	// faults' draws stay as they were, and for every attempt, landed or
	// not, so a skipped fault leaves the rest of the schedule alone.
	orderly := c.orderly.IntN(3) == 0
	if !node.Up() || c.down() >= c.cfg.MaxDown {
		return
	}
	what := "crash"
	if orderly {
		what = "orderly restart of"
	}
	c.run.Inject(ord, fmt.Sprintf("%s %s (down %v)", what, node.Name(), down.Round(time.Millisecond)), func() {
		c.Crashes++
		if orderly {
			node.Shutdown()
		} else {
			node.Crash()
		}
		if back := k.Now() + down; back < c.until {
			k.At(back, sim.EvFault, xxhash.Sum64String("restart "+node.Name()), func() {
				if !node.Up() {
					node.Start()
					c.stopWhileAdopting(node)
				}
			})
		}
	})
}

// AimStopsWhileAdopting aims orderly restarts at nodes that have just
// come back: after three in four of the restarts the schedule makes, the
// operator restarts the node again, in order, at the first instant
// within half an AdoptWait (looked at every 5 ms) that waiting says a
// client's call through it is unanswered: mostly a call on a flow it
// owns, waiting while it re-adopts. Its Close must answer every such
// call; only a crash may leave a caller to its deadline. The schedule's
// own stops find a call waiting at a node serving it itself in about one
// run in a hundred. Its own stream; waiting is the clients' record, not
// the node's word.
func (c *Chaos) AimStopsWhileAdopting(adoptWait time.Duration, waiting func(*sim.Machine) bool) {
	c.readopt, c.adoptWait, c.waiting = c.run.Kernel.Stream("faults/readopt-stop"), adoptWait, waiting
	c.run.Knob("stop_while_adopting", adoptWait)
}

func (c *Chaos) stopWhileAdopting(node *sim.Machine) {
	if c.readopt == nil {
		return
	}
	k := c.run.Kernel
	aim := c.readopt.IntN(4) != 0
	down := sim.Between(c.readopt, 100*time.Millisecond, 500*time.Millisecond)
	inc, until := node.Incarnation(), k.Now()+c.adoptWait/2
	if !aim {
		return
	}
	var look func()
	look = func() {
		now := k.Now()
		if !node.Up() || node.Incarnation() != inc || now > until || now+down >= c.until {
			return
		}
		if !c.waiting(node) {
			k.After(5*time.Millisecond, sim.EvFault, xxhash.Sum64String("readopt-stop "+node.Name()), look)
			return
		}
		c.run.Inject(c.run.AimedFault(), fmt.Sprintf("orderly restart of %s while it re-adopts with a call waiting (down %v)", node.Name(), down.Round(time.Millisecond)), func() {
			node.Shutdown()
			k.At(k.Now()+down, sim.EvFault, xxhash.Sum64String("restart "+node.Name()), func() {
				if !node.Up() {
					node.Start()
				}
			})
		})
	}
	look()
}

// Add puts nodes started after the faults began (a group added to a
// running fleet) in the faults' reach from now on.
func (c *Chaos) Add(nodes ...*sim.Machine) { c.nodes = append(c.nodes, nodes...) }

// CrashAt schedules a targeted crash of node (within the fault phase): a
// workload uses it to crash a node at a point that matters to it, such as
// mid-burst while fsyncs are in flight.
func (c *Chaos) CrashAt(node *sim.Machine, at time.Duration) {
	if at >= c.until {
		return
	}
	c.run.Kernel.At(at, sim.EvFault, xxhash.Sum64String("crash "+node.Name()), func() { c.crash(c.run.Fault(), node) })
}

// calm ends the fault phase: the network heals and every node is up.
func (c *Chaos) calm() {
	c.nw.Heal()
	for _, n := range c.nodes {
		if !n.Up() {
			n.Start()
		}
	}
	c.run.Kernel.Logf("fault phase over: healed, all nodes up")
}

func (c *Chaos) String() string {
	return fmt.Sprintf("partitions=%d crashes=%d steps=%d drifts=%d", c.Partitions, c.Crashes, c.Steps, c.Drifts)
}

// DrawClocks gives each node a starting skew and drift, reported as knobs.
func DrawClocks(run *Run, nodes []*sim.Machine, skewMax time.Duration, driftMaxPPM int64) {
	r := run.Kernel.Stream("clocks")
	for _, n := range nodes {
		skew := sim.Between(r, -skewMax, skewMax)
		drift := sim.Between(r, -driftMaxPPM, driftMaxPPM)
		n.Clock().Step(skew)
		n.Clock().SetDrift(drift)
		run.Knob("clock."+n.Name(), fmt.Sprintf("skew=%v drift=%dppm", skew, drift))
	}
}

// ids returns the ids of nodes in the given order.
func ids(nodes []*sim.Machine) []dial.NodeID {
	out := make([]dial.NodeID, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID()
	}
	return out
}
