package scenarios

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// The consensus scenarios. Each runs a raft group of consensus nodes in
// the simulator under a fault schedule, with KV and lease clients, and
// judges it with the same checkers: porcupine on the KV history, lease
// safety from the holders' beliefs and the watch streams, replica and
// membership agreement, and liveness once the faults stop.

func init() {
	Register(Scenario{
		Name:     "raft-partitions",
		Summary:  "3 or 5 voters; KV and lease clients on every node; partitions of every shape, loss, reordering, crashes, clock skew and steps",
		Duration: 30 * time.Second,
		Bugs: []Bug{
			{Name: "value-guard", Window: 50, MinCaught: 25},
			{Name: "release-any", Window: 50, MinCaught: 30},
			{Name: "expire-late", Window: 50, MinCaught: 14},
		},
		Floors: []Floor{{"kv-ops-ok", 15}, {"lease-grants", 3}, {"faults", 3}},
		Run:    runRaftPartitions,
	})
	Register(Scenario{
		Name:     "lease-clock-jump",
		Summary:  "leases held and lapsing while the leader's clock steps backwards by more than a lease TTL",
		Duration: 30 * time.Second,
		Bugs: []Bug{
			{Name: "no-clock-clamp", Window: 50, MinCaught: 40},
		},
		Floors: []Floor{{"kv-ops-ok", 50}, {"lease-grants", 10}, {"leader-steps-back", 2}},
		Run:    runLeaseClockJump,
	})
	Register(Scenario{
		Name:     "journal-crash",
		Summary:  "power cuts in the middle of journal appends and compactions, torn tails, restarts",
		Duration: 30 * time.Second,
		Bugs: []Bug{
			{Name: "journal-trust-tail", Window: 150, MinCaught: 10},
		},
		Floors: []Floor{{"kv-ops-ok", 25}, {"power-cuts", 2}},
		Run:    runJournalCrash,
	})
	Register(Scenario{
		Name:     "learner-join",
		Summary:  "nodes join as learners under load and are promoted once caught up; founders are removed",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "promote-early", Window: 30, MinCaught: 20},
		},
		Floors: []Floor{{"kv-ops-ok", 30}, {"promotions", 2}},
		Run:    runLearnerJoin,
	})
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
	netCfg := netsim.Draw(run.Kernel.Stream("net-config"))
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

func runRaftPartitions(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	calm := run.Duration * 6 / 10
	netCfg, disk, kvClients, leaseClients := raftKnobs(run, voters, true, calm)
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	ttl := 2 * time.Second
	run.Knob("faults", faults)
	run.Knob("calm_at", calm)
	run.Knob("lease_ttl", ttl)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	DrawClocks(run, c.nodes, 500*time.Millisecond, 200)
	for _, n := range c.nodes {
		n.Start()
	}
	chaos := StartChaos(run, c.nw, c.nodes, faults, calm)
	c.startKVClients(kvClients, calm)
	c.startLeaseClients(leaseClients, ttl, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes, 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(chaos)
	return nil
}

// finish runs the end-of-run checkers and prints the run's figures.
func (c *raftCluster) finish(chaos *Chaos) {
	c.checkNow()
	// Every client call got an answer: applied, refused, or given up on
	// at the client's deadline. A call left hanging is a liveness bug in
	// the client path (a callback lost), whatever the cluster did.
	for _, op := range c.hist.Ops() {
		if op.Return == 0 && op.Call+c.clientDeadline < c.k.Now() {
			c.run.Fail("liveness", "client %d's call on %s at %v never resolved", op.Client, op.Key, op.Call)
		}
	}
	c.checkLinearizable()
	c.checkLeases()
	checker.Votes(c.run, c.votes, func(id dial.NodeID) string { return c.byID[id].Name() })
	c.run.Did("votes", len(c.votes))
	ok, refused, unknown := c.hist.Count()
	if c.kvClients > 0 {
		c.run.Did("kv-ops-ok", ok)
	}
	if c.leaseClients > 0 {
		c.run.Did("lease-grants", c.grants())
	}
	if chaos != nil {
		c.run.Did("faults", chaos.Partitions+chaos.Crashes+chaos.Steps+chaos.Drifts)
	}
	faults := c.faults
	if chaos != nil {
		faults = chaos.String()
	}
	if faults == "" {
		faults = "none"
	}
	kvOps := ""
	if c.hist.Len() > 0 {
		kvOps = fmt.Sprintf("kv ops ok=%d refused=%d unknown=%d; ", ok, refused, unknown)
	}
	c.run.Logf("cluster: %sfaults %s; net sent=%d delivered=%d dropped=%d",
		kvOps, faults, c.nw.Sent, c.nw.Delivered, c.nw.Dropped)
}

// runLeaseClockJump steps the leader's clock back, again and again, by
// more than the lease TTL while holders take, renew and let the lease
// lapse. The clamp in apply is the defence: applied time never goes back.
func runLeaseClockJump(run *Run) error {
	k := run.Kernel
	const voters = 3
	calm := run.Duration * 7 / 10
	netCfg, disk, kvClients, leaseClients := raftKnobs(run, voters, true, calm)
	ttl := time.Duration(500+k.Stream("knobs/ttl").IntN(1500)) * time.Millisecond
	jumpEvery := sim.Between(k.Stream("knobs/jump"), time.Second, 4*time.Second)
	run.Knob("lease_ttl", ttl)
	run.Knob("jump_every", jumpEvery)
	run.Knob("calm_at", calm)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	DrawClocks(run, c.nodes, 50*time.Millisecond, 50)
	for _, n := range c.nodes {
		n.Start()
	}
	r := k.Stream("faults")
	var jump func()
	jump = func() {
		if k.Now() >= calm {
			return
		}
		for _, n := range c.nodes {
			if cn := c.node(n); cn != nil && cn.BelievesSelfLeader() {
				back := ttl + sim.Between(r, ttl/2, 3*ttl)
				k.Logf("fault clock step %s -%v (leader)", n.Name(), back)
				n.Clock().Step(-back)
				run.Did("leader-steps-back", 1)
				break
			}
		}
		k.After(jumpEvery, sim.EvFault, xxhash.Sum64String("jump"), jump)
	}
	k.After(jumpEvery, sim.EvFault, xxhash.Sum64String("jump"), jump)
	c.startKVClients(kvClients, calm)
	c.startLeaseClients(leaseClients, ttl, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes, 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(nil)
	return nil
}

// runJournalCrash cuts power in the middle of disk work: between any two
// steps of an append, a sync or a compaction. Snapshots are taken every
// few entries so compactions are frequent.
func runJournalCrash(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	calm := run.Duration * 7 / 10
	netCfg, disk, kvClients, _ := raftKnobs(run, voters, false, calm)
	disk.TornWriteProb = 1
	run.Knob("disk", diskKnob(disk)+" (torn overridden)")
	snapEvery := uint64(10 + k.Stream("knobs/snap").IntN(40))
	cutEvery := sim.Between(k.Stream("knobs/cut"), 200*time.Millisecond, 2*time.Second)
	run.Knob("snapshot_entries", snapEvery)
	run.Knob("power_cut_every", cutEvery)
	run.Knob("calm_at", calm)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	c.cfg.SnapshotEntries = snapEvery
	for _, n := range c.nodes {
		n.Start()
	}
	r := k.Stream("faults")
	var cut func()
	cut = func() {
		if k.Now() >= calm {
			return
		}
		// A cut armed but not yet landed counts as down: the node will
		// go at its next few disk operations, and it comes back a drawn
		// pause after it went.
		n := c.nodes[r.IntN(len(c.nodes))]
		if n.Up() && downOrArmed(c.nodes) < (voters-1)/2 {
			ops := 1 + r.IntN(12)
			k.Logf("fault power cut %s after %d disk ops", n.Name(), ops)
			n.Disk().CutPowerAfter(ops)
			restartAfterCut(k, r, n, 300*time.Millisecond, 2*time.Second, calm)
		}
		k.After(cutEvery, sim.EvFault, xxhash.Sum64String("cut"), cut)
	}
	k.After(cutEvery, sim.EvFault, xxhash.Sum64String("cut"), cut)
	k.At(calm, sim.EvFault, xxhash.Sum64String("calm"), func() {
		for _, n := range c.nodes {
			n.Disk().CancelPowerCut()
			if !n.Up() {
				n.Start()
			}
		}
		c.checkLiveness(c.nodes, 5*time.Second, nil)
	})
	c.startKVClients(kvClients, calm)
	c.startChecks(50 * time.Millisecond)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	cuts := 0
	for _, n := range c.nodes {
		cuts += int(n.Disk().PowerCuts)
	}
	run.Did("power-cuts", cuts)
	c.faults = fmt.Sprintf("power-cuts=%d", cuts)
	c.finish(nil)
	return nil
}

// runLearnerJoin grows a 3-voter cluster by two learners under load; the
// leader promotes each once it has caught up; then a founder is removed.
func runLearnerJoin(run *Run) error {
	k := run.Kernel
	calm := run.Duration * 6 / 10
	netCfg, disk, kvClients, _ := raftKnobs(run, 3, false, calm)
	r := k.Stream("faults")
	joinAt := sim.Between(r, 2*time.Second, 6*time.Second)
	removeAt := joinAt + sim.Between(r, 6*time.Second, 10*time.Second)
	// A joining node is cut off from everyone for a while as it is
	// added, so it is well behind when it first could be promoted: the
	// leader must wait for it to catch up.
	behind := sim.Between(k.Stream("knobs/behind"), 300*time.Millisecond, 1500*time.Millisecond)
	run.Knob("join_at", joinAt)
	run.Knob("joiner_cut_off", behind)
	run.Knob("remove_at", removeAt)
	run.Knob("calm_at", calm)

	all := names(5)
	c := newRaftCluster(run, all, 3, netCfg, disk)
	for _, n := range c.nodes[:3] {
		n.Start()
	}
	// Joins and removals are retried until the membership shows them: a
	// conf change raft refuses (one is already in flight) answers nobody.
	var addLearner func(n *sim.Machine)
	addLearner = func(n *sim.Machine) {
		if !n.Up() {
			n.Start()
		}
		via := c.nodes[r.IntN(3)]
		c.call(via, func(cn *consensus.Node) {
			cn.AddLearner(consensus.NewMember(n.Name(), n.Name()+":7000"), func(error) {})
		})
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+n.Name()), func() {
			if !c.isMember(n.ID()) {
				addLearner(n)
			}
		})
	}
	cutOff := func(n *sim.Machine) {
		for _, id := range k.Nodes() {
			if id != n.ID() {
				c.nw.Block(id, n.ID())
				c.nw.Block(n.ID(), id)
			}
		}
		k.Logf("fault cut %s off for %v as it joins", n.Name(), behind)
		k.After(behind, sim.EvFault, xxhash.Sum64String("heal "+n.Name()), func() { c.nw.Heal() })
	}
	k.At(joinAt, sim.EvClient, xxhash.Sum64String("join"), func() { addLearner(c.nodes[3]); cutOff(c.nodes[3]) })
	k.At(joinAt+time.Second+behind, sim.EvClient, xxhash.Sum64String("join"), func() { addLearner(c.nodes[4]); cutOff(c.nodes[4]) })
	removed := c.nodes[0]
	var remove func()
	remove = func() {
		via := c.nodes[1+r.IntN(4)]
		c.call(via, func(cn *consensus.Node) { cn.RemoveMember(removed.ID(), func(error) {}) })
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("remove"), func() {
			if c.isMember(removed.ID()) {
				remove()
			} else {
				removed.Crash() // a removed node is shut down
			}
		})
	}
	k.At(removeAt, sim.EvClient, xxhash.Sum64String("remove"), remove)
	c.startKVClients(kvClients, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm+5*time.Second, sim.EvCheck, xxhash.Sum64String("members"), func() {
		ms := c.membership()
		want := fmt.Sprint(all[1:])
		if got := fmt.Sprint(memberNames(ms.Voters)); got != want || len(ms.Learners) != 0 {
			run.Fail("membership", "voters %s learners %d after the joins and removal; want voters %s and no learners", got, len(ms.Learners), want)
		}
	})
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes[1:], 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(nil)
	return nil
}

// membership is the membership of the most advanced live node.
func (c *raftCluster) membership() consensus.Membership {
	var best consensus.Membership
	for _, n := range c.nodes {
		if cn := c.node(n); cn != nil {
			if ms := cn.Membership(); ms.Index > best.Index {
				best = ms
			}
		}
	}
	return best
}

// isMember reports whether id is a voter or learner in the most advanced
// membership any live node has applied.
func (c *raftCluster) isMember(id dial.NodeID) bool {
	ms := c.membership()
	for _, m := range append(ms.Voters, ms.Learners...) {
		if m.ID == id {
			return true
		}
	}
	return false
}
