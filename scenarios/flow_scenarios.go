package scenarios

import (
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

// The flow-store scenarios: consensus and the flow store on every node,
// clients pinned to nodes doing flow operations, faults, and the flow
// checkers (porcupine per flow, the bridge's promises, replica convergence,
// every flow served after the heal).

func init() {
	Register(Scenario{
		Name:     "flow-ops",
		Summary:  "3–7 nodes, clients on every node on hot and cold flows; partitions, loss, reordering, crashes, clock skew",
		Duration: 40 * time.Second,
		Default:  true,
		Bugs: []Bug{
			{Name: "local-fallback", Window: 50, MinCaught: 30},
		},
		Floors: []Floor{{"flow-ops-ok", 10}, {"faults", 4}},
		Run:    runFlowOps,
	})
	Register(Scenario{
		Name:     "owner-handoff",
		Summary:  "nodes added and removed under load, including an owner removed while partitioned away with clients on its side",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-adoption", Window: 30, MinCaught: 24},
			{Name: "no-fence", Window: 30, MinCaught: 8},
			{Name: "no-d17", Window: 30, MinCaught: 24},
			{Name: "no-adopt-wait", Window: 30, MinCaught: 7},
			{Name: "tick-window", Window: 60, MinCaught: 12},
		},
		Floors: []Floor{{"flow-ops-ok", 50}, {"promotions", 1}},
		Run:    runOwnerHandoff,
	})
	Register(Scenario{
		Name:     "isolated-owner",
		Summary:  "the leader and flow owners cut off, in every combination, with clients on both sides",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-d17", Window: 30, MinCaught: 20},
			{Name: "tick-window", Window: 60, MinCaught: 4},
		},
		Floors: []Floor{{"flow-ops-ok", 15}, {"cuts", 3}},
		Run:    runIsolatedOwner,
	})
	Register(Scenario{
		Name:     "replica-repair",
		Summary:  "replication pushes dropped at a high rate; after the faults heal, anti-entropy converges every copy",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-anti-entropy", Window: 50, MinCaught: 40},
		},
		Floors: []Floor{{"flow-ops-ok", 20}, {"pushes-dropped", 10}},
		Run:    runReplicaRepair,
	})
	Register(Scenario{
		Name:     "bridge-saturation",
		Summary:  "a slow owner and more concurrent stateful calls than permits: calls are shed at once, none outlives the deadline",
		Duration: 20 * time.Second,
		Floors:   []Floor{{"flow-ops-ok", 20}, {"calls-shed", 1000}},
		Run:      runBridgeSaturation,
	})
}

// flowSetup draws what every flow scenario draws and builds the cluster.
func flowSetup(run *Run, voters, extra int, cfg flow.Config) (*flowHarness, []string, []string, time.Duration) {
	k := run.Kernel
	calm := run.Duration * 55 / 100
	netCfg, disk, _ := clusterKnobs(run, voters, calm)
	cold := 5 + k.Stream("knobs/flows").IntN(40)
	perNode := 1 + k.Stream("knobs/clients").IntN(3)
	run.Knob("cold_flows", cold)
	run.Knob("clients_per_node", perNode)
	run.Knob("calm_at", calm)
	cfg.Bugs = run.Bugs()
	if cfg.AntiEntropy == 0 {
		// Every 2s, not the default 5s, so the calm phase holds enough
		// rounds that the network's steady loss cannot starve one pair of
		// nodes of all of them (the convergence bound is in rounds).
		cfg.AntiEntropy = 2 * time.Second
	}
	run.Knob("anti_entropy_every", cfg.AntiEntropy)
	c := newRaftCluster(run, names(voters+extra), voters, netCfg, disk)
	h := startFlowCluster(c, cfg)
	h.calm, h.perNode = calm, perNode
	hot, all := flowIDs(cold)
	return h, hot, all, calm
}

func (h *flowHarness) finishFlows(members []*sim.Machine, chaos *Chaos) {
	h.finish(chaos)
	h.checkFlowLinearizable()
	h.checkD17()
	h.checkBridge()
	h.checkConvergence(members)
	h.report()
}

func runFlowOps(run *Run) error {
	k := run.Kernel
	voters := 3 + k.Stream("knobs/size").IntN(5)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{})
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	run.Knob("faults", faults)
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	return h.runUnderChaos(faults, hot, all, calm)
}

// runUnderChaos is the body flow-ops and replica-repair share: start every
// node, inject faults until calm, run the clients and the periodic checks,
// check every flow is served after the heal, and judge the run.
func (h *flowHarness) runUnderChaos(faults FaultConfig, hot, all []string, calm time.Duration) error {
	for _, n := range h.nodes {
		n.Start()
	}
	chaos := StartChaos(h.run, h.nw, h.nodes, faults, calm)
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.startChecks(100 * time.Millisecond)
	h.k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { h.checkFlowsServed(h.nodes, hot, 3*time.Second) })
	if err := h.k.RunUntil(h.run.Duration); err != nil {
		return err
	}
	h.finishFlows(h.nodes, chaos)
	return nil
}

// runOwnerHandoff adds nodes and removes voters under load. One removal
// is of a node partitioned away with its clients: the deposed-owner
// hazard. The flow store's defences: the adoption handshake fences a
// reachable previous owner; D-17 stops an unreachable one within the
// isolation window, and AdoptWait outlasts that window.
func runOwnerHandoff(run *Run) error {
	k := run.Kernel
	const voters, extra = 4, 2
	h, hot, all, calm := flowSetup(run, voters, extra, flow.Config{})
	r := k.Stream("faults")
	for _, n := range h.nodes[:voters] {
		n.Start()
	}
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.startChecks(100 * time.Millisecond)

	member := func(n *sim.Machine) bool { return h.isMember(n.ID()) }
	var addLearner func(n *sim.Machine)
	addLearner = func(n *sim.Machine) {
		if !n.Up() {
			n.Start()
		}
		via := h.nodes[r.IntN(voters)]
		h.call(via, func(cn *consensus.Node) {
			cn.AddLearner(consensus.NewMember(n.Name(), n.Name()+":7000"), func(error) {})
		})
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+n.Name()), func() {
			if !member(n) && k.Now() < calm {
				addLearner(n)
			}
		})
	}
	var remove func(victim *sim.Machine, then func())
	remove = func(victim *sim.Machine, then func()) {
		for _, via := range h.nodes {
			if via != victim && via.Up() {
				h.call(via, func(cn *consensus.Node) { cn.RemoveMember(victim.ID(), func(error) {}) })
				break
			}
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("remove "+victim.Name()), func() {
			if member(victim) && k.Now() < calm {
				remove(victim, then)
			} else if then != nil {
				then()
			}
		})
	}
	// Phase 1: grow by one. Phase 2: partition a founder (and its
	// clients) away and remove it from the majority side. Phase 3: grow
	// by another and remove a second founder in the open.
	t1 := sim.Between(r, 2*time.Second, 4*time.Second)
	t2 := t1 + sim.Between(r, 3*time.Second, 5*time.Second)
	t3 := t2 + sim.Between(r, 4*time.Second, 6*time.Second)
	run.Knob("handoffs", fmt.Sprintf("join n5 at %v; isolate and remove a founder at %v; join n6 and remove another at %v", t1, t2, t3))
	k.At(t1, sim.EvClient, xxhash.Sum64String("phase1"), func() { addLearner(h.nodes[voters]) })
	victim := h.nodes[r.IntN(voters)]
	k.At(t2, sim.EvFault, xxhash.Sum64String("phase2"), func() {
		var rest []dial.NodeID
		for _, n := range h.nodes {
			if n != victim {
				rest = append(rest, n.ID())
			}
		}
		k.Logf("fault isolate %s and remove it", victim.Name())
		h.nw.Split(k.Nodes(), []dial.NodeID{victim.ID()}, rest)
		h.startOwnedClients(victim, 6, calm)
		remove(victim, func() {
			// Its clients keep calling it; after a while the partition
			// heals and the removed node is shut down.
			k.After(sim.Between(r, time.Second, 3*time.Second), sim.EvFault, xxhash.Sum64String("heal"), func() {
				h.nw.Heal()
				victim.Crash()
			})
		})
	})
	// Phase 3's second victim is cut off from the leader only: the new
	// owner can still reach it, so the adoption handshake (the fence) is
	// what stops it; D-17 would take an isolation window longer.
	k.At(t3, sim.EvClient, xxhash.Sum64String("phase3"), func() {
		addLearner(h.nodes[voters+1])
		k.After(2*time.Second, sim.EvClient, xxhash.Sum64String("phase3b"), func() {
			var leader, second *sim.Machine
			for _, n := range h.nodes {
				if cn := h.node(n); cn != nil && cn.BelievesSelfLeader() {
					leader = n
				}
			}
			for _, n := range h.nodes[:voters] {
				if n != victim && n != leader && n.Up() && member(n) {
					second = n
					break
				}
			}
			if second == nil || leader == nil {
				return
			}
			k.Logf("fault cut %s off from the leader %s and remove it", second.Name(), leader.Name())
			h.nw.Block(second.ID(), leader.ID())
			h.nw.Block(leader.ID(), second.ID())
			h.startOwnedClients(second, 6, calm)
			remove(second, func() {
				k.After(sim.Between(r, time.Second, 3*time.Second), sim.EvFault, xxhash.Sum64String("heal"), func() {
					h.nw.Heal()
					second.Crash()
				})
			})
		})
	})
	var members []*sim.Machine
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		h.nw.Heal()
		for _, n := range h.nodes {
			if member(n) {
				if !n.Up() {
					n.Start()
				}
				members = append(members, n)
			}
		}
		h.checkLiveness(members, 5*time.Second, nil)
		h.checkFlowsServed(members, hot, 3*time.Second)
	})
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	h.finishFlows(members, nil)
	return nil
}

// runIsolatedOwner cuts off, in turn, the leader alone, a flow owner
// alone, the leader with an owner, and a minority holding both, with
// clients pinned on both sides.
func runIsolatedOwner(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{})
	for _, n := range h.nodes {
		n.Start()
	}
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.startChecks(100 * time.Millisecond)
	r := k.Stream("faults")
	shapes := []string{"leader", "owner", "leader+owner", "minority"}
	var cut func(i int)
	cut = func(i int) {
		if k.Now() >= calm {
			return
		}
		shape := shapes[i%len(shapes)]
		var leader *sim.Machine
		for _, n := range h.nodes {
			if cn := h.node(n); cn != nil && cn.BelievesSelfLeader() {
				leader = n
			}
		}
		owner := h.ownerOf(hot[r.IntN(len(hot))])
		side := map[dial.NodeID]bool{}
		switch shape {
		case "leader":
			if leader != nil {
				side[leader.ID()] = true
			}
		case "owner":
			if owner != nil {
				side[owner.ID()] = true
			}
		case "leader+owner":
			if leader != nil {
				side[leader.ID()] = true
			}
			if owner != nil {
				side[owner.ID()] = true
			}
		default:
			for _, n := range h.nodes[:(voters-1)/2] {
				side[n.ID()] = true
			}
		}
		if len(side) > 0 && len(side) < voters {
			var a, b []dial.NodeID
			var desc []string
			for _, n := range h.nodes {
				if side[n.ID()] {
					a = append(a, n.ID())
					desc = append(desc, n.Name())
				} else {
					b = append(b, n.ID())
				}
			}
			h.nw.Heal()
			h.nw.Split(k.Nodes(), a, b)
			k.Logf("fault cut off %s: %s", shape, strings.Join(desc, ","))
			run.Did("cuts", 1)
		}
		k.After(sim.Between(r, time.Second, 3*time.Second), sim.EvFault, xxhash.Sum64String("heal"), func() {
			h.nw.Heal()
			k.After(sim.Between(r, 500*time.Millisecond, 2*time.Second), sim.EvFault, xxhash.Sum64String("cut"), func() { cut(i + 1) })
		})
	}
	k.After(2*time.Second, sim.EvFault, xxhash.Sum64String("cut"), func() { cut(r.IntN(len(shapes))) })
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		h.nw.Heal()
		h.checkLiveness(h.nodes, 5*time.Second, nil)
		h.checkFlowsServed(h.nodes, hot, 3*time.Second)
	})
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	h.finishFlows(h.nodes, nil)
	return nil
}

// ownerOf is the node that owns flow in the most advanced membership.
func (h *flowHarness) ownerOf(f string) *sim.Machine {
	for _, n := range h.nodes {
		if s := h.flows[n.Name()]; n.Up() && s != nil {
			if id, ok := s.Owner(f); ok {
				return h.byID[id]
			}
		}
	}
	return nil
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
		if info, err := flow.DecodeFrame(frame); err != nil || info.Kind != flow.FramePush || !sim.Chance(dr, pushLoss) {
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
	h.report()
	var shed uint64
	for _, name := range sortedKeys(h.flows) {
		shed += h.flows[name].Shed
	}
	if shed == 0 {
		run.Fail("bridge", "no call was shed with %d clients per node over %d permits: the scenario did not saturate", permits+8, permits)
	}
	return nil
}
