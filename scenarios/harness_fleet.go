package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
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
	nodes  []*sim.Machine // every node of every group, group by group
	dir    *fleet.Directory
	member map[dial.NodeID]int // each node's group
	// at is the directory each node has, nil until it is installed there.
	at map[dial.NodeID]*fleet.Directory
	calm   time.Duration
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
// groups, group_voters and what every flow scenario draws) and builds it:
// one network, one raft group per group of nodes, the directory at epoch
// 1, where every partition sits where the table puts it.
func fleetSetup(run *Run, groups, size int, cfg flow.Config) (*fleetHarness, []string, []string) {
	k := run.Kernel
	calm := run.Duration * 55 / 100
	total := groups * size
	netCfg, disk, _ := clusterKnobs(run, total, calm)
	run.Knob("groups", groups)
	cold := 5 + k.Stream("knobs/flows").IntN(40)
	perNode := 1 + k.Stream("knobs/clients").IntN(3)
	run.Knob("cold_flows", cold)
	run.Knob("clients_per_node", perNode)
	run.Knob("calm_at", calm)
	cfg.Bugs = run.Bugs()
	if cfg.AntiEntropy == 0 {
		cfg.AntiEntropy = 2 * time.Second // as flowSetup, for the convergence bound
	}
	run.Knob("anti_entropy_every", cfg.AntiEntropy)
	f := &fleetHarness{run: run, k: k, nw: netsim.New(k, netCfg), member: map[dial.NodeID]int{}, at: map[dial.NodeID]*fleet.Directory{}, calm: calm}
	all := names(total)
	entries := make([]fleet.Group, groups)
	for g := range groups {
		own := all[g*size : (g+1)*size]
		for _, name := range own {
			entries[g].Voters = append(entries[g].Voters, fleet.Member{ID: dial.IDFromName(name), HTTP: name + ":8080"})
		}
		// Index 1 is every group's founding membership, and no scenario
		// of a fleet changes one yet.
		entries[g].MIdx = 1
	}
	dir, err := fleet.New(1, entries)
	if err != nil {
		panic(err) // the harness built it: a bug, not input
	}
	f.dir = dir
	keys := drawKeys(run) // one set for every group: their nodes talk to each other
	for g := range groups {
		c := newGroupCluster(run, f.nw, all[g*size:(g+1)*size], size, disk, func(id dial.NodeID) flow.Fleet { return fleetPlace{f, g, id} })
		if keys != nil {
			c.seal(*keys)
		}
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
	// Half the runs install the directory everywhere before the first
	// event; the others at each node up to lag after the start.
	r := k.Stream("knobs/directory")
	lag := time.Duration(0)
	if r.IntN(2) == 0 {
		lag = sim.Between(r, 100*time.Millisecond, 3*time.Second)
	}
	run.Knob("directory_lag", lag)
	for _, n := range f.nodes {
		id := n.ID()
		if lag == 0 {
			f.at[id] = f.dir
			continue
		}
		k.At(sim.Between(r, 0, lag), sim.EvFault, xxhash.Sum64String("directory "+n.Name()), func() { f.at[id] = f.dir })
	}
	hot, cold2 := fleetFlowIDs(groups, cold)
	return f, hot, cold2
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
	for _, n := range f.nodes {
		n.Start()
	}
	chaos := StartChaos(f.run, f.nw, f.nodes, faults, f.calm)
	for _, h := range f.groups {
		h.holdForFloors(f.calm, f.short)
		h.startFlowClients(h.nodes, h.perNode, hot, all, f.calm)
		h.startChecks(100 * time.Millisecond)
	}
	f.k.At(f.calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		for _, h := range f.groups {
			h.checkFlowsServed(h.nodes, hot, 3*time.Second)
		}
	})
	if err := f.k.RunUntil(f.run.Duration); err != nil {
		return err
	}
	f.finish(chaos)
	return nil
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
		h.checkAnswered()
		h.checkConvergence(h.nodes)
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
	f.run.Logf("fleet: %d groups, directory epoch %d; %d operations judged by partition-holder, %d served across groups",
		len(f.groups), f.dir.Epoch(), judged, cross)
}

// report is flowHarness.report for the fleet: the one history's counts,
// every group's stores.
func (f *fleetHarness) report() {
	ok, refused, unknown := f.groups[0].flowHist.Count()
	var served, shed, adoptions uint64
	for _, h := range f.groups {
		for _, name := range slices.Sorted(maps.Keys(h.flows)) {
			s := h.flows[name]
			served += s.Served
			shed += s.Shed
			adoptions += s.Adoptions
		}
	}
	f.run.Logf("flow: ops ok=%d refused=%d unknown=%d; served=%d shed=%d adoptions=%d accepted-loss=%d",
		ok, refused, unknown, served, shed, adoptions, len(f.groups[0].cuts))
	f.run.Did("flow-ops-ok", ok)
	f.run.Did("calls-shed", int(shed))
}
