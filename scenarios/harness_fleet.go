package scenarios

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// fleetCheckers are what a fleet of groups is judged by: each group's
// flow checkers, and partition-holder across the fleet.
var fleetCheckers = plus(flowCheckers, "partition-holder")

// fleetHarness is a fleet of raft groups on one network (core/fleet):
// each group a raftCluster with its own flow harness, every node's flow
// store placed in the fleet by the group directory. The groups share one
// flow history: a flow's clients call it through nodes of every group,
// and a node of a group that does not hold the flow's partition sends
// the call to the holder's owner, one hop.
//
// The directory is the simulator's (the control group that will carry it
// is not built yet): each node reads the one the harness installed at it,
// which comes a drawn while after the node first boots, as a new node's
// copy of the control group catches up (until then the node has none,
// and refuses every flow); the harness's record of it, never a node's, is
// what partition-holder judges by.
type fleetHarness struct {
	run    *Run
	k      *sim.Kernel
	nw     *netsim.Network
	groups []*flowHarness
	nodes  []*sim.Machine      // every node of every group, group by group
	dir    *fleet.Directory    // the newest published
	member map[dial.NodeID]int // each node's group
	// published is every directory published, in order; lag bounds how
	// long after a publication each node gets it (0: at once).
	published   []publication
	lag         time.Duration
	publishes   *rand.Rand // publication and installation delays
	lastPublish time.Duration
	grow        int // the group a spare node joins (-1: none)
	// at is the directory each node has, nil until it is installed there.
	at   map[dial.NodeID]*fleet.Directory
	calm time.Duration
}

// fleetPlace is a group's place in the fleet, as its nodes' flow stores
// read it (flow.Fleet): the group's number and the directory the harness
// installed at the node, if any yet.
type fleetPlace struct {
	f     *fleetHarness
	group int
	node  dial.NodeID
}

func (p fleetPlace) Group() int                  { return p.group }
func (p fleetPlace) Directory() *fleet.Directory { return p.f.at[p.node] }

// fleetSetup draws a fleet of groups groups of size voters each (knobs
// groups, grow_group, directory_lag and what every flow scenario draws)
// and builds it: one network, one raft group per group of nodes, the
// directory at epoch 1, where every partition sits where the table puts
// it. In half the runs one group has a spare node, which joins it under
// load (runUnderChaos); every membership a group commits is published to
// the directory.
func fleetSetup(run *Run, groups, size int, cfg flow.Config) (*fleetHarness, []string, []string) {
	k := run.Kernel
	// Calm comes earlier than in one group's scenarios (55%): a fleet's
	// faults can keep a group without a quorum for long stretches, and
	// the clients need healthy time after them to do their floors' work
	// before the quiet the convergence check asks for.
	calm := run.Duration * 45 / 100
	grow := -1
	if kg := k.Stream("knobs/fleet/grow"); kg.IntN(2) == 0 {
		grow = kg.IntN(groups)
	}
	total := groups * size
	if grow >= 0 {
		total++
	}
	netCfg, disk, _ := clusterKnobs(run, total, calm)
	run.Knob("groups", groups)
	run.Knob("grow_group", grow)
	cold, perNode := drawFlowKnobs(run, calm, &cfg)
	f := &fleetHarness{run: run, k: k, nw: netsim.New(k, netCfg), member: map[dial.NodeID]int{}, at: map[dial.NodeID]*fleet.Directory{},
		calm: calm, grow: grow, publishes: k.Stream("fleet/publish")}
	all := names(total)
	own := make([][]string, groups)
	next := 0
	for g := range own {
		n := size
		if g == grow {
			n++ // the spare, last: not a founder
		}
		own[g], next = all[next:next+n], next+n
	}
	entries := make([]fleet.Group, groups)
	for g := range groups {
		for _, name := range own[g][:size] {
			entries[g].Voters = append(entries[g].Voters, fleet.Member{ID: dial.IDFromName(name), HTTP: name + ":8080"})
		}
		entries[g].MIdx = 1 // every group's founding membership
	}
	dir, err := fleet.New(1, entries)
	if err != nil {
		panic(err) // the harness built it: a bug, not input
	}
	f.dir = dir
	keys := drawKeys(run) // one set for every group: their nodes talk to each other
	for g := range groups {
		c := newGroupCluster(run, f.nw, own[g], size, disk, func(id dial.NodeID) flow.Fleet { return fleetPlace{f, g, id} })
		if keys != nil {
			c.seal(*keys)
		}
		c.onNewMembership = func(ms consensus.Membership) { f.publish(g, ms) }
		h := startFlowCluster(c, cfg)
		h.calm, h.perNode, h.clientBase = calm, perNode, 100*g
		if g > 0 {
			h.flowHist = f.groups[0].flowHist // one history: every group's clients call every flow
		}
		f.groups = append(f.groups, h)
		for _, n := range c.nodes {
			f.member[n.ID()] = g
			f.nodes = append(f.nodes, n)
		}
	}
	if disk.SyncFailProb > 0 && !run.noAimedIO {
		// Once over the whole fleet: one draw per group would aim the
		// same instants at the same place in every group.
		aimIOErrors(run, f.nodes, disk.FaultsUntil)
	}
	// Half the runs install each directory everywhere at once; the others
	// at each node up to lag after it is published.
	r := k.Stream("knobs/directory")
	if r.IntN(2) == 0 {
		f.lag = sim.Between(r, 100*time.Millisecond, 3*time.Second)
	}
	run.Knob("directory_lag", f.lag)
	f.install(f.dir)
	hot, cold2 := fleetFlowIDs(groups, cold)
	return f, hot, cold2
}

// install hands d to every node, each within the directory lag: a node
// keeps the newest it has been handed (a follower of the control group
// applies its log in order).
func (f *fleetHarness) install(d *fleet.Directory) {
	f.published = append(f.published, publication{epoch: d.Epoch(), at: f.k.Now()})
	for _, n := range f.nodes {
		id := n.ID()
		give := func() {
			if cur := f.at[id]; cur == nil || d.Epoch() > cur.Epoch() {
				f.at[id] = d
			}
		}
		if f.lag == 0 {
			give()
			continue
		}
		f.k.After(sim.Between(f.publishes, 0, f.lag), sim.EvFault, xxhash.Sum64String("directory "+n.Name()), give)
	}
}

// publish is the control group learning a group's new committed
// membership: a drawn while after the first node applied it (a proposal
// through the control group), the directory's next epoch names it, in
// the order the group committed them.
func (f *fleetHarness) publish(g int, ms consensus.Membership) {
	at := max(f.k.Now()+sim.Between(f.publishes, 20*time.Millisecond, 500*time.Millisecond), f.lastPublish)
	f.lastPublish = at
	voters := make([]fleet.Member, len(ms.Voters))
	for i, m := range ms.Voters {
		voters[i] = fleet.Member{ID: m.ID, HTTP: m.Name + ":8080"}
	}
	f.k.At(at, sim.EvFault, xxhash.Sum64String("publish"), func() {
		if ms.Index <= f.dir.Group(g).MIdx {
			return // an older membership, published after a newer one: nothing to say
		}
		d, err := f.dir.WithGroup(g, fleet.Group{MIdx: ms.Index, Voters: voters})
		if err != nil {
			f.run.Fail("run", "publishing group %d's membership %d: %v", g, ms.Index, err)
			return
		}
		f.dir = d
		f.install(d)
	})
}

// publication is one directory the simulator published, and when.
type publication struct {
	epoch uint64
	at    time.Duration
}

// fleetFlowIDs are the fleet's flows: two hot ones held by each group,
// and cold ones wherever the table puts them.
func fleetFlowIDs(groups, cold int) (hot, all []string) {
	per := make([]int, groups)
	for i := 0; len(hot) < 2*groups; i++ {
		key := ring.ImposterKey(8080, fmt.Sprintf("hot-%d", i))
		if g := partition.GroupOf(key, groups); per[g] < 2 {
			per[g]++
			hot = append(hot, key)
		}
	}
	all = append(all, hot...)
	for i := range cold {
		all = append(all, ring.ImposterKey(8080, fmt.Sprintf("user-%d", i)))
	}
	return hot, all
}

// run starts every node, injects faults across the fleet until calm,
// runs every group's clients on every flow, checks every hot flow is
// served through every node after the heal, and judges the run.
func (f *fleetHarness) runUnderChaos(faults FaultConfig, hot, all []string) error {
	for g, h := range f.groups {
		founders := h.nodes
		if g == f.grow {
			founders = founders[:len(founders)-1] // the spare starts when it joins
		}
		for _, n := range founders {
			n.Start()
		}
	}
	chaos := StartChaos(f.run, f.nw, f.nodes, faults, f.calm)
	for _, h := range f.groups {
		h.holdForFloors(f.calm, f.short)
		h.startFlowClients(h.nodes, h.perNode, hot, all, f.calm)
		h.startChecks(100 * time.Millisecond)
	}
	if f.grow >= 0 {
		f.join(f.groups[f.grow], sim.Between(f.k.Stream("fleet/grow"), time.Second, f.calm/3))
	}
	f.k.At(f.calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		for _, h := range f.groups {
			h.checkFlowsServed(f.members(h), hot, 3*time.Second)
		}
	})
	if err := f.k.RunUntil(f.run.Duration); err != nil {
		return err
	}
	f.finish(chaos)
	return nil
}

// join adds h's spare node (its last) to its group as a learner at at,
// asking again each second until it is a member (raft promotes it once
// it has caught up): the group's membership changes twice under load,
// and each change reaches the other groups only through the directory.
func (f *fleetHarness) join(h *flowHarness, at time.Duration) {
	spare := h.nodes[len(h.nodes)-1]
	var ask func()
	ask = func() {
		if h.isMember(spare.ID()) || f.k.Now() >= f.calm {
			return
		}
		if !spare.Up() {
			spare.Start()
		}
		for _, via := range h.nodes[:len(h.nodes)-1] {
			if via.Up() {
				h.call(via, func(cn *consensus.Node) {
					cn.AddLearner(consensus.NewMember(spare.Name(), spare.Name()+":7000"), func(error) {})
				})
				break
			}
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+spare.Name()), ask)
	}
	f.k.At(at, sim.EvClient, xxhash.Sum64String("join "+spare.Name()), ask)
}

// members are h's nodes that are members of its group now.
func (f *fleetHarness) members(h *flowHarness) []*sim.Machine {
	var out []*sim.Machine
	for _, n := range h.nodes {
		if h.isMember(n.ID()) {
			out = append(out, n)
		}
	}
	return out
}

// short reports whether the fleet is under a work floor: the operations
// answered, or those served by a group other than their caller's.
func (f *fleetHarness) short() bool {
	ok, _, _ := f.groups[0].flowHist.Count()
	return ok < f.run.Floor("flow-ops-ok") || f.crossServed() < f.run.Floor("cross-group-ops")
}

// crossServed counts the operations served so far by a node of another
// group than the one whose client called them.
func (f *fleetHarness) crossServed() int {
	n := 0
	for g, h := range f.groups {
		for _, s := range h.services {
			if f.member[s.Node] != g {
				n++
			}
		}
	}
	return n
}

// finish judges the fleet. Each group's raft checks run on its own
// cluster; the flow record is regrouped by the group of the node that
// served each operation (a group's clients' calls may have been served
// by another group), so each group's loss cuts, D-17 and convergence
// read only its own nodes; the one flow history is judged once, cut
// where any group's record says loss was possible.
func (f *fleetHarness) finish(chaos *Chaos) {
	var services []checker.FlowService
	cross := f.crossServed()
	waited := map[int]time.Duration{}
	for g, h := range f.groups {
		if g == 0 {
			h.finish(chaos)
		} else {
			h.finish(nil)
		}
		services = append(services, h.services...)
		maps.Copy(waited, h.waited)
	}
	name := func(id dial.NodeID) string { return f.k.Machine(id).Name() }
	judged := checker.PartitionHolder(f.run, services, func(id dial.NodeID) (int, bool) {
		g, ok := f.member[id]
		return g, ok
	}, func(fl string, _ time.Duration) int {
		g, _ := f.dir.Holder(partition.Of(fl))
		return g
	}, name)
	var cuts []checker.FlowCut
	for g, h := range f.groups {
		h.services = slices.DeleteFunc(slices.Clone(services), func(s checker.FlowService) bool { return f.member[s.Node] != g })
		cuts = append(cuts, checker.FlowCuts(h.services, h.memberships, faultRecord{h})...)
		h.cuts = nil
		h.checkD17()
		h.checkPlacement()
		h.checkAnswered()
		h.checkConvergence(f.members(h))
	}
	first := f.groups[0]
	first.cuts = cuts
	f.run.History("flow-linearizability", first.flowHist)
	f.run.TimeCheck("flow-linearizability", func() {
		checker.FlowLinearizable(f.run, first.flowHist, checker.CutTimes(cuts), f.run.CheckTimeout)
	})
	checker.BridgeSeq(f.run, first.flowHist.All(), waited, first.deadline, 1000, "client deadline", flow.ErrShed.Error())
	f.report()
	f.run.Did("cross-group-ops", cross)
	f.run.Logf("fleet: %d groups, directory epochs 1..%d; %d operations judged by partition-holder, %d served across groups",
		len(f.groups), f.dir.Epoch(), judged, cross)
	for _, p := range f.published[1:] {
		f.k.Logf("directory epoch %d published at %v", p.epoch, p.at)
	}
	if f.grow >= 0 {
		f.run.Did("directory-epochs", len(f.published)-1)
	}
}

// report is flowHarness.report for the fleet: the one history's counts,
// every group's stores.
func (f *fleetHarness) report() {
	flowSummary(f.run, f.groups[0].flowHist, len(f.groups[0].cuts), f.groups...)
}
