package scenarios

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// timing is the protocol timings one run draws, within their valid
// ranges, so that no safety argument rests on one coincidence of fixed
// constants (AdoptWait against the election timeout, say). Each run
// prints them as a knob.
type timing struct {
	tick                 time.Duration
	heartbeat, election  int // ticks
	proposal, expiryTick time.Duration
	promoteLag           uint64
	adoptWait, deadline  time.Duration
	isolationTicks       int           // D-17's window in ticks, one to two election timeouts
	isolation            time.Duration // isolation ticks × tick: D-17's window
	bounds               bounds
	callsInFlight        int // consensus MaxPending; 0: the default
}

// bounds are queue and batch bounds a run may draw small, so that the
// workloads reach them: at the defaults (a writer's queue of 65,536
// mutations, batches of 4,096 and 16 MiB) no scenario ever does, and what
// a node does at a bound went unjudged. Half the runs keep the defaults
// (zero: unset). The anti-entropy answer's bound (MaxAEFlows) is drawn
// from 4 up, not from 1: replica-convergence allows 4.5 rounds of quiet,
// which holds while a few rounds' answers carry every flow that diverged
// (one flow per answer fails it, rightly, in a few seeds in a hundred).
// It is drawn after the others above, so their draws for a seed are what they
// were. The anti-entropy partitions (AEPartitions, 64 by default) are
// drawn after it, 8 or 16: at 64 the workloads' few dozen flows leave
// most partitions empty, so a digest taken over the wrong flows made no
// partition differ that held a flow to send. The durability waits a
// shard holds at once (MaxWaiters, 65,536 by default) are drawn last,
// 1 to 4, so that a wait is cut at the bound (shard.ErrWaitTimeout,
// answered as an unknown outcome): the clients wait for each answer, so
// an owner holds a few waits at once, and at 1 to 32 the bound was never
// reached (a cut one wait late, or a cut wait never answered, survived
// 10 seeds of six flow scenarios). The writer's queue is drawn
// from 16 mutations up: from 64 up, no adoption in seeds 1..60 of six
// flow scenarios ever met a full queue, and one that counted a refused
// copy as heard went unseen.
type bounds struct {
	maxPending, maxBatch, maxBatchBytes int
	maxAEFlows, aePartitions            int
	maxWaiters                          int
}

func (b bounds) String() string {
	if b == (bounds{}) {
		return "defaults"
	}
	return fmt.Sprintf("max_pending=%d max_batch=%d max_batch_bytes=%d max_ae_flows=%d ae_partitions=%d max_waiters=%d", b.maxPending, b.maxBatch, b.maxBatchBytes, b.maxAEFlows, b.aePartitions, b.maxWaiters)
}

// drawBounds draws the run's bounds from their own stream (knob bounds).
func drawBounds(run *Run) bounds {
	r := run.Kernel.Stream("knobs/bounds")
	var b bounds
	if r.IntN(2) == 0 {
		b = bounds{maxPending: 16 + r.IntN(496), maxBatch: 1 + r.IntN(16), maxBatchBytes: 64 + r.IntN(1024)}
		b.maxAEFlows = 4 + r.IntN(17)
		b.aePartitions = 8 << r.IntN(2)
		b.maxWaiters = 1 + r.IntN(4)
	}
	run.Knob("bounds", b)
	return b
}

// drawTiming draws the run's timings from its "knobs/timing" stream. The
// ranges keep what the design assumes (see CONTRIBUTING): an election
// timeout of at least five heartbeats, and AdoptWait at least twice the
// isolation window (which also covers the clocks' drift and a membership
// entry's trip to a reachable previous owner).
func drawTiming(run *Run) timing {
	r := run.Kernel.Stream("knobs/timing")
	t := timing{
		tick:       sim.Between(r, 5*time.Millisecond, 15*time.Millisecond),
		heartbeat:  2 + r.IntN(3),
		proposal:   sim.Between(r, time.Second, 3*time.Second),
		expiryTick: sim.Between(r, 100*time.Millisecond, 500*time.Millisecond),
		promoteLag: uint64(4 + r.IntN(13)),
		deadline:   sim.Between(r, time.Second, 3*time.Second),
	}
	t.election = t.heartbeat * (5 + r.IntN(8))
	t.isolationTicks = t.election + r.IntN(t.election+1)
	t.isolation = time.Duration(t.isolationTicks) * t.tick
	t.adoptWait = time.Duration(float64(t.isolation) * (2 + 2*r.Float64()))
	run.Knob("timing", t)
	t.bounds = drawBounds(run)
	// In scenarios that opt in (Scenario.CallBounds), half the runs bound
	// the calls in flight at each consensus node (MaxPending) at 1–9,
	// which the clients reach: a call past it is refused at once
	// (ErrBusy), a path no run took at the default, 1,024. One, the
	// smallest bound Validate accepts, is drawn in a quarter of them: a
	// check that refused it went unseen (drawn as often as 2–9, it came
	// up in none of 50 runs). Its own stream: the draws above are the
	// same.
	if run.callBounds {
		if rc := run.Kernel.Stream("knobs/consensus-bounds"); rc.IntN(2) == 0 {
			t.callsInFlight = 1
			if rc.IntN(4) != 0 {
				t.callsInFlight = 2 + rc.IntN(8)
			}
		}
		run.Knob("calls_in_flight", t.callsInFlight)
	}
	return t
}

func (t timing) String() string {
	return fmt.Sprintf("tick=%v heartbeat=%d election=%d isolation=%d (%v) adopt_wait=%v deadline=%v proposal_timeout=%v expiry_tick=%v promote_lag=%d",
		t.tick, t.heartbeat, t.election, t.isolationTicks, t.isolation, t.adoptWait.Round(time.Millisecond), t.deadline.Round(time.Millisecond),
		t.proposal.Round(time.Millisecond), t.expiryTick.Round(time.Millisecond), t.promoteLag)
}

// applyConsensus sets the consensus timings.
func (t timing) applyConsensus(c *consensus.Config) {
	c.TickInterval, c.HeartbeatTicks, c.ElectionTicks, c.IsolationTicks = t.tick, t.heartbeat, t.election, t.isolationTicks
	c.ProposalTimeout, c.ExpiryTick, c.PromoteLag = t.proposal, t.expiryTick, t.promoteLag
	if t.callsInFlight > 0 {
		c.MaxPending = t.callsInFlight
	}
}

// applyFlow sets the flow store's timings a scenario left unset.
func (t timing) applyFlow(c *flow.Config) {
	if c.AdoptWait == 0 {
		c.AdoptWait = t.adoptWait
	}
	if c.Deadline == 0 {
		c.Deadline = t.deadline
	}
	set := func(v *int, to int) {
		if *v == 0 {
			*v = to
		}
	}
	set(&c.Shard.MaxPending, t.bounds.maxPending)
	set(&c.Shard.MaxBatch, t.bounds.maxBatch)
	set(&c.Shard.MaxBatchBytes, t.bounds.maxBatchBytes)
	set(&c.MaxAEFlows, t.bounds.maxAEFlows)
	set(&c.AEPartitions, t.bounds.aePartitions)
	set(&c.Shard.MaxWaiters, t.bounds.maxWaiters)
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

// clusterKnobs draws what every cluster scenario draws: the network and
// the disk. It returns the "knobs" stream for the caller's further draws.
func clusterKnobs(run *Run, voters int, calm time.Duration) (netsim.Config, sim.DiskConfig, *rand.Rand) {
	knobs := run.Kernel.Stream("knobs")
	netCfg := run.Swarm().net(netsim.Draw(run.Kernel.Stream("net-config")))
	run.Knob("voters", voters)
	run.Knob("net", netCfg)
	disk := drawDisk(run, sim.DefaultDiskConfig, 2e-4, calm)
	return netCfg, disk, knobs
}

// raftKnobs draws what every consensus scenario draws: the cluster's knobs
// and its KV and lease client counts. Both counts are drawn, so that the
// streams stay aligned, but the lease count is printed only by a scenario
// that runs lease clients (withLeases).
func raftKnobs(run *Run, voters int, withLeases bool, calm time.Duration) (netsim.Config, sim.DiskConfig, int, int) {
	netCfg, disk, knobs := clusterKnobs(run, voters, calm)
	kvClients := 2 + knobs.IntN(5)
	leaseClients := 2 + knobs.IntN(3)
	run.Knob("kv_clients", kvClients)
	if withLeases {
		run.Knob("lease_clients", leaseClients)
	} else {
		leaseClients = 0
	}
	return netCfg, disk, kvClients, leaseClients
}
