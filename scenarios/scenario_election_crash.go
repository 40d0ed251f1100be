package scenarios

import (
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// election-crash aims its faults at elections: the leader is cut off
// again and again, so the cluster keeps electing; a node that has just
// granted a vote is crashed a moment later, before anything else it does
// can reach its disk, and comes back within a fraction of a second, in
// time to vote again in the same term; a node that has just started a
// campaign loses power in the middle of its next disk operations. A vote
// is durable before it is sent, so no node may vote twice in one term
// (votes), and the KV history stays linearizable through it all.

func init() {
	Register(Scenario{
		Name:       "election-crash",
		BootFaults: true,
		CallBounds: true,
		Summary:    "leaders cut off again and again; voters crashed right after they vote and back within 50–300ms; candidates losing power mid-campaign",
		Duration:   30 * time.Second,
		Bugs: []Bug{
			{Name: "no-vote-sync", Window: 60, MinCaught: 5},
			{Name: "ack-before-append", Window: 60, MinCaught: 10},
			{Name: "no-hole-check", Window: 60, MinCaught: 8},
		},
		Floors:   []Floor{{"kv-ops-ok", 15}, {"votes", 4}, {"crashes-after-vote", 1}},
		Checkers: plus(clusterCheckers, "kv-refusals"),
		Run:      runElectionCrash,
	})
}

func runElectionCrash(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	calm := run.Duration * 65 / 100
	netCfg, disk, kvClients, _ := raftKnobs(run, voters, false, calm)
	knobs := k.Stream("knobs/elections")
	crashVoter := 0.3 + 0.3*knobs.Float64()
	cutCandidate := 0.05 + 0.15*knobs.Float64()
	run.Knob("calm_at", calm)
	run.Knob("elections", fmt.Sprintf("crash_voter=%.2f cut_candidate=%.2f", crashVoter, cutCandidate))

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	// The leader is cut off for longer than an election timeout, so the
	// rest elect another, and again a moment after the heal.
	iso := c.timing.isolation
	r := k.Stream("faults")
	// The faults aimed at votes draw from their own stream: how many come
	// is the cluster's doing, and must not move the schedule's draws.
	rv := k.Stream("faults/votes")
	down := func() int { return downOrArmed(c.nodes) }
	restartAfter := func(n *sim.Machine, pause time.Duration) {
		k.After(pause, sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
			if !n.Up() {
				n.Start()
			}
		})
	}
	crashes := 0
	c.nw.Watch(func(s netsim.Sending) {
		frame := c.plain(s.Frame)
		if s.Fate != netsim.Sent || k.Now() >= calm || len(frame) == 0 || frame[0] != consensus.FramePrefix {
			return
		}
		info, err := consensus.DecodeFrame(frame)
		if err != nil {
			return
		}
		n := c.byID[s.From]
		switch {
		case info.Kind == consensus.FrameVoteResp && !info.Reject:
			// Crash the voter at the next instant: whatever it did
			// after the vote (a write it did not sync) is lost with it.
			ord, coin, pause := run.AimedFault(), sim.Chance(rv, crashVoter), sim.Between(rv, 50*time.Millisecond, 300*time.Millisecond)
			if !(crashes == 0 || coin) || down() >= (voters-1)/2 {
				return
			}
			k.After(0, sim.EvFault, xxhash.Sum64String("crash "+n.Name()), func() {
				if n.Up() && down() < (voters-1)/2 {
					run.Inject(ord, fmt.Sprintf("crash %s just after it voted in term %d (down %v)", n.Name(), info.Term, pause), func() {
						crashes++
						n.Crash()
						restartAfter(n, pause)
					})
				}
			})
		case info.Kind == consensus.FrameVote:
			ord, coin, ops := run.AimedFault(), sim.Chance(rv, cutCandidate), 1+rv.IntN(3)
			pause := sim.Between(rv, 50*time.Millisecond, 300*time.Millisecond)
			if !coin || down() >= (voters-1)/2 {
				return
			}
			run.Inject(ord, fmt.Sprintf("%s campaigns in term %d: power cut within its next %d disk operations (back %v after)", n.Name(), info.Term, ops, pause), func() {
				n.Disk().CutPowerAfter(ops)
				restartAfterCut(k, n, pause, calm)
			})
		}
	})
	for _, n := range c.nodes {
		n.Start()
	}
	var cut func()
	cut = func() {
		if k.Now() >= calm {
			return
		}
		ord, heal := run.Fault(), sim.Between(r, 3*iso/2, 3*iso)
		for _, n := range c.nodes {
			if cn := c.node(n); cn != nil && cn.BelievesSelfLeader() {
				if c.isolateAs(ord, n, fmt.Sprintf("isolate the leader %s (for %v)", n.Name(), heal)) {
					k.After(heal, sim.EvFault, xxhash.Sum64String("heal"), func() { c.nw.Heal() })
				}
				break
			}
		}
		k.After(3*iso+sim.Between(r, 300*time.Millisecond, time.Second), sim.EvFault, xxhash.Sum64String("cut"), cut)
	}
	k.After(sim.Between(r, 300*time.Millisecond, time.Second), sim.EvFault, xxhash.Sum64String("cut"), cut)
	k.At(calm, sim.EvFault, xxhash.Sum64String("calm"), func() {
		c.nw.Heal()
		for _, n := range c.nodes {
			n.Disk().CancelPowerCut()
			if !n.Up() {
				n.Start()
			}
		}
		c.checkLiveness(c.nodes, 5*time.Second, nil)
	})
	// Clients work through the calm phase too: elections may leave the
	// fault phase little to show, and what follows it is judged as well.
	c.startKVClients(kvClients, run.Duration-time.Second)
	c.startChecks(50 * time.Millisecond)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	cuts := 0
	for _, n := range c.nodes {
		cuts += int(n.Disk().PowerCuts)
	}
	run.Did("crashes-after-vote", crashes)
	c.faults = fmt.Sprintf("crashes-after-vote=%d power-cuts=%d", crashes, cuts)
	c.finish(nil)
	return nil
}
