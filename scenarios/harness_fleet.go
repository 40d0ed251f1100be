package scenarios

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// fleetCheckers are what a fleet of groups is judged by: each group's
// flow checkers, and partition-holder across the fleet.
var fleetCheckers = plus(flowCheckers, "released", "partition-holder", "directory-current", "control-members", "fleet-records-once", "admin-acts", "move-pages")

// fleetHarness is a fleet of raft groups on one network (core/fleet):
// each group a raftCluster with its own flow harness, and every node a
// replica of the fleet's control group too (core/node's fleet.go), which
// holds the group directory: group 0's founders are its voters, every
// other node a learner its data group's leader adds. The groups share one
// flow history: a flow's clients call it through nodes of every group,
// and a node of a group that does not hold the flow's partition sends
// the call to the holder's owner, one hop.
//
// A node has no directory until its control replica has applied the
// founding one (the control group's leader writes it once), so a node
// refuses every flow for a while after it first boots, longer if it is a
// learner its data group's leader has not added yet; each membership a
// group commits reaches the directory only when its leader publishes it.
// No partition moves yet, so where each partition is held is the
// founding directory's word, which the harness wrote and partition-holder
// judges by, never a node's.
type fleetHarness struct {
	run    *Run
	k      *sim.Kernel
	nw     *netsim.Network
	groups []*flowHarness
	nodes  []*sim.Machine      // every node of every group, group by group
	dir    *fleet.Directory    // the founding directory
	member map[dial.NodeID]int // each node's group
	// founding is each group's founding voters; control the control
	// group's configuration, group 0's timing with its founders as
	// voters.
	founding []fleet.Group
	control  consensus.Config
	// published is each directory epoch some node applied, and when the
	// first did (from the nodes' control replicas: a work count, never
	// a verdict).
	published []publication
	// founded is how many groups the fleet was founded with; entries is
	// every group's founding membership, the added groups' too (the
	// founding directory has only the first founded).
	founded int
	entries []fleet.Group
	// badAdmin draws fleet-grow's bad admin requests (adversary).
	badAdmin *rand.Rand
	// operator attests the fleet's admin acts (attest), with the nodes'
	// control key or, amid a rotation, the one they still accept (knob
	// admin_rotation), padded to the bound in some runs (knob
	// attest_padded); lastResize is the last resize it had committed, as
	// it travelled, which fleet-grow's adversary captured and sends again
	// (replay).
	operator
	lastResize *capturedResize
	// spareJoin is the spare's last join as it travelled; joinReplayed:
	// fleet-grow's adversary sent it again (replayJoin).
	spareJoin    *capturedJoin
	joinReplayed bool
	wrongJoined  bool // the spare's join was asked of another group (wrongGroupJoin)
	badJoined    bool // the spare's join was sent with a bad attestation (join)
	joinedAgain  bool // the spare, a member, asked to join again (joinAgain)
	// behind is a founder of the spare's group that hears nothing of its
	// group's log from just before the spare's join until its removal
	// has applied elsewhere (knob join_replay_behind): the replayed join
	// goes to it (replayJoin). nil: none.
	behind     *sim.Machine
	badRemoved bool // the adversary's removals were sent (badRemovals)
	// nd is each node's latest incarnation, by name.
	nd   map[string]*node.Node
	grow int // the group a spare node joins (-1: none)
	calm time.Duration
	// probe is the fleet's proxyOnce probe (fleet-records-once).
	probe *fleetProbe
	// removed: the spare's removal was asked for.
	removed bool
	// alone: the added groups are founded by one node each, and their
	// other nodes join (fleetShape.alone).
	alone bool
	// adminAsks are every admin request sent, the operator's (whose
	// joins and removals each group records: adminAct) and the
	// adversary's (checkUnanswered).
	adminAsks []*adminAsk
	// holdings is, for each partition, the groups that held it in turn
	// and when a node first held the directory that gave it to each:
	// founding at 0, then each publication of a move (partition-holder's
	// word on who held it when). latest is the directory that first
	// held the newest epoch.
	holdings [partition.Count][]holding
	latest   *fleet.Directory
	// owed is, per node, the most flows it held of partitions other
	// groups hold at any publication that gave one of its group's away,
	// and owedSince the last such publication (checker released).
	owed      map[dial.NodeID]int
	owedSince map[dial.NodeID]time.Duration
	// fencedAt is when a node first held the directory that fenced each
	// partition now moving; windows each move's time from its fence to
	// its publication, by the record (the time its partition was
	// unavailable).
	fencedAt [partition.Count]time.Duration
	windows  []time.Duration
	// lagging drops a frame to a node cut off from the control group
	// (fleet-resize's lagControl); nil: none.
	lagging func(to dial.NodeID, frame []byte) bool
	pages   *pageRecord // move-pages' reading of the record
	// onStep is told each step of a move the record shows: "fence" (a
	// batch first moving), "publish" (a batch published), "copy" (its
	// driver asks an old voter for a page), "ingest" (it hands a new
	// voter a page), with the groups the batch moves from and to, and
	// the node the step's frame went to (0 for fence and publish); nil:
	// nobody listens.
	onStep func(step string, from, to int, at dial.NodeID)
	// fenced are told each directory the record shows a batch first
	// moving in (fleet-resize's lagControl).
	fenced []func(d *fleet.Directory)
	// chaos is the run's fault injector, once runUnderChaos starts it.
	chaos *Chaos
	// resized counts the resizes committed (fleet-resize); target is the
	// last one asked for (0: none).
	resized, target int
}

// holding is a group's holding of a partition, from the instant a node
// first held the directory that published it.
type holding struct {
	group int
	at    time.Duration
}

// fleetSetup draws a fleet of groups groups of size voters each (knobs
// groups, grow_group and what every flow scenario draws) and builds it:
// one network, one raft group per group of nodes, and the control group
// over all of them, whose directory is founded at epoch 1 with every
// partition where the table puts it. In half the runs one group has a
// spare node, which joins it under load (runUnderChaos); its leader
// publishes every membership the group commits.
func fleetSetup(run *Run, groups, size int, cfg flow.Config) (*fleetHarness, []string, []string) {
	return fleetSetupAdding(run, groups, 0, size, cfg)
}

// fleetSetupAdding is fleetSetup for a fleet whose last added of its
// groups are added while it runs (addGroups), not founded with it; the
// hot flows are two of each group's, by the table over all groups.
func fleetSetupAdding(run *Run, groups, added, size int, cfg flow.Config) (*fleetHarness, []string, []string) {
	k := run.Kernel
	// Calm comes earlier than in one group's scenarios (55%): a fleet's
	// faults can keep a group without a quorum for long stretches, and
	// the clients need healthy time after them to do their floors' work
	// before the quiet the convergence check asks for.
	calm := run.Duration * 45 / 100
	// A spare in half the runs; in every run of a fleet that grows by
	// added groups (fleet-grow), whose adversary attacks its join and
	// its removal too (admin-refusals, admin-acts).
	grow := -1
	if kg := k.Stream("knobs/fleet/grow"); kg.IntN(2) == 0 || added > 0 {
		grow = kg.IntN(groups - added) // a founded group's spare
	}
	total := groups * size
	if grow >= 0 {
		total++
	}
	netCfg, disk, _ := clusterKnobs(run, total, calm)
	run.Knob("groups", groups)
	run.Knob("grow_group", grow)
	cold, perNode := drawFlowKnobs(run, calm, &cfg)
	if added > 0 {
		run.Knob("added_groups", added)
	}
	// In half the runs of a fleet that grows by added groups, each added
	// group is founded by one node, and its others join it: the binary's
	// way, and a group of one voter, then two, then three.
	alone := false
	if added > 0 {
		alone = k.Stream("knobs/fleet/alone").IntN(2) == 0
		run.Knob("added_founded_alone", alone)
	}
	f := buildFleet(run, fleetShape{groups: groups, added: added, size: size, grow: grow, alone: alone, calm: calm, perNode: perNode, net: netCfg, disk: disk}, cfg)
	hot, cold2 := fleetFlowIDs(groups, cold)
	return f, hot, cold2
}

// fleetShape is what buildFleet builds: groups groups of size voters,
// the last added of them added to the running fleet rather than founded
// with it (fleet-grow), a spare in group grow (-1: none), on a network
// and disks configured so, with perNode clients on each node until calm.
type fleetShape struct {
	groups, added, size, grow, perNode int
	// alone: each added group's raft group is founded by its first node
	// alone, as the binary's founder of an added group does, and its
	// other nodes join it (attested) once they start (addGroups).
	alone bool
	calm  time.Duration
	net   netsim.Config
	disk  sim.DiskConfig
}

// buildFleet builds a fleet of shape's groups (fleetSetup draws the
// shape; MeasureFleet gives a healthy one): one network, one raft group
// per group of nodes, and the control group over all of them. It draws
// the envelope's keys and each group's timing.
func buildFleet(run *Run, shape fleetShape, cfg flow.Config) *fleetHarness {
	k := run.Kernel
	groups, size, grow, calm, perNode, netCfg, disk := shape.groups, shape.size, shape.grow, shape.calm, shape.perNode, shape.net, shape.disk
	founded := groups - shape.added
	total := groups * size
	if grow >= 0 {
		total++
	}
	f := &fleetHarness{run: run, k: k, nw: netsim.New(k, netCfg), member: map[dial.NodeID]int{}, nd: map[string]*node.Node{}, calm: calm, grow: grow, founded: founded}
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
	founders := func(g int) int {
		if shape.alone && g >= founded {
			return 1
		}
		return size
	}
	f.alone = shape.alone
	entries := make([]fleet.Group, groups)
	for g := range groups {
		for _, name := range own[g][:founders(g)] {
			entries[g].Voters = append(entries[g].Voters, fleet.Member{ID: dial.IDFromName(name), Name: name, Peer: name + ":7000", HTTP: name + ":8080"})
		}
		entries[g].MIdx = 1 // every group's founding membership
	}
	dir, err := fleet.New(1, entries[:founded])
	if err != nil {
		panic(err) // the harness built it: a bug, not input
	}
	f.dir, f.founding, f.latest, f.entries = dir, entries[:founded], dir, entries
	for p := range f.holdings {
		g, _ := dir.Holder(partition.Partition(p))
		f.holdings[p] = []holding{{group: g}}
	}
	keys := drawKeys(run) // one set for every group: their nodes talk to each other
	// The control key attests the admin acts. In a third of the runs
	// the fleet is amid a key rotation: its nodes hold a new control key
	// and still accept the old one, which the operator goes on using.
	f.operator = operator{k: k, stream: "fleet/attest", key: make([]byte, transport.KeySize)}
	rk := k.Stream("fleet/control-key")
	if keys != nil {
		copy(f.key, keys.Control)
	} else {
		for i := range f.key {
			f.key[i] = byte(rk.Uint32())
		}
	}
	adminKeys := transport.Keys{Control: f.key}
	rotating := rk.IntN(3) == 0
	run.Knob("admin_rotation", rotating)
	if rotating {
		adminKeys.Control = make([]byte, transport.KeySize)
		for i := range adminKeys.Control {
			adminKeys.Control[i] = byte(rk.Uint32())
		}
		adminKeys.AcceptControl = f.key
	}
	// In a quarter of the runs the operator's attestations are written
	// at the text's bound exactly (the issue time led by zeros): good.
	f.pad = rk.IntN(4) == 0
	run.Knob("attest_padded", f.pad)
	var controlBoot []consensus.Member
	for _, name := range own[0][:size] {
		controlBoot = append(controlBoot, consensus.NewMember(name, name+":7000"))
	}
	for g := range groups {
		c := newGroupCluster(run, f.nw, own[g], founders(g), disk, func(name string, data consensus.Config) *node.FleetConfig {
			ctl := f.control
			ctl.Name, ctl.Addr, ctl.Bootstrap = name, data.Addr, nil
			if g == 0 && slices.Contains(own[0][:size], name) {
				ctl.Bootstrap = controlBoot
			}
			return &node.FleetConfig{Group: g, Founding: f.founding, Added: g >= founded, Control: ctl}
		})
		// The fleet's proxyOnce probe (fleet_proxyonce.go): a grant lost
		// on the way lapses in fleetProxyLapse, and a caller asking again
		// wins afresh.
		c.proxyCfg = proxyonce.ServiceConfig{Claims: proxyonce.Config{Lapse: fleetProxyLapse}, Wait: proxyWait, Deadline: proxyDeadline}
		c.adminKeys = adminKeys
		if g == 0 {
			// The control group runs on group 0's drawn timing.
			f.control = c.cfg
			f.control.Bootstrap, f.control.JournalName = nil, ""
		}
		if keys != nil {
			c.seal(*keys)
		}
		c.onBoot = func(m *sim.Machine, _ *sim.Env, nd *node.Node) {
			f.nd[m.Name()] = nd
			nd.OnControlRevision(func(uint64) { f.sawDirectory(nd) })
			nd.Control.OnMembership(func(ms consensus.Membership) { f.probe.controlApplied(ms.Index) })
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
	if disk.SyncFailProb > 0 && !run.noAimedIO {
		// Once over the whole fleet: one draw per group would aim the
		// same instants at the same place in every group.
		aimIOErrors(run, f.nodes, disk.FaultsUntil)
	}
	aimDiskStalls(run, f.nodes, disk.FaultsUntil)
	f.probe = newFleetProbe(f)
	f.watchPages()
	return f
}

// watchPages judges the pages of every move (checker move-pages), from
// the network's record. A move's driver counts a page only once every new
// voter it handed the page to has acknowledged that very page, and the
// acknowledgement, not refused, has reached it: so it asks a source for
// its next page only then, and a batch is published only once the driver
// that finished it has every page it handed acknowledged (judged at the
// publication: some driver of that batch must). The outcome checkers
// cannot see a driver that counted another acknowledgement (a late one,
// a duplicate, one of an earlier page): every flow comes from each old
// voter and reaches each new voter, so a page skipped once is nearly
// always made good by another, yet the move's promise is that it never
// needs to be. Frames a node sends itself (a driver that is a voter of
// the batch's groups) never touch the network and go unjudged. A driver
// is told apart by its incarnation: a move's numbers start again when a
// node restarts.
func (f *fleetHarness) watchPages() {
	h := f.groups[0]
	f.pages = &pageRecord{handed: map[movePage]map[dial.NodeID]bool{}, acked: map[movePage]map[dial.NodeID]bool{},
		byEra: map[uint64][]moveDriver{}, byDriver: map[moveDriver][]movePage{}}
	pr := f.pages
	f.nw.Watch(func(s netsim.Sending) {
		frame := s.Frame
		switch {
		case s.Fate == netsim.Sent && s.Meant != nil:
			frame = s.Meant // what the driver did, whatever the wire did to it
		case s.Fate != netsim.Sent && s.Fate != netsim.Delivered:
			return
		}
		p := h.plain(frame)
		kind, ok := flow.PeekKind(p)
		if !ok || kind != flow.FrameMoveAsk && kind != flow.FrameIngest && kind != flow.FrameIngestAck {
			return
		}
		info, err := flow.DecodeFrame(p)
		if err != nil {
			return
		}
		switch {
		case s.Fate == netsim.Sent && info.Kind == flow.FrameIngest:
			d := moveDriver{s.From, f.k.Machine(s.From).Incarnation(), info.ID}
			if !slices.Contains(pr.byEra[info.M], d) {
				pr.byEra[info.M] = append(pr.byEra[info.M], d)
			}
			pg := movePage{d, info.Served, info.Session}
			if pr.handed[pg] == nil {
				pr.byDriver[d] = append(pr.byDriver[d], pg)
			}
			pr.note(pr.handed, pg, s.To)
		case s.Fate == netsim.Delivered && info.Kind == flow.FrameIngestAck && info.Refusal == "":
			pr.note(pr.acked, movePage{moveDriver{s.To, f.k.Machine(s.To).Incarnation(), info.ID}, info.Served, info.Session}, s.From)
		case s.Fate == netsim.Sent && info.Kind == flow.FrameMoveAsk && info.Session > 1:
			pg := movePage{moveDriver{s.From, f.k.Machine(s.From).Incarnation(), info.ID}, uint64(s.To), info.Session - 1}
			if v, ok := pr.missing(pg); ok {
				f.failPages("%s asked %s for page %d of move %d at %v before %s's acknowledgement of page %d reached it",
					f.k.Machine(s.From).Name(), f.k.Machine(s.To).Name(), info.Session, info.ID, s.At, f.k.Machine(v).Name(), info.Session-1)
			}
		}
	})
}

// publishedPages judges a batch's publication (move-pages): some driver
// of its era must have every page it handed acknowledged by now.
func (f *fleetHarness) publishedPages(era uint64) {
	pr := f.pages
	if pr == nil || len(pr.byEra[era]) == 0 {
		return // no page of it crossed the network: nothing to judge
	}
	var gap string
	for _, d := range pr.byEra[era] {
		lacking := ""
		for _, pg := range pr.byDriver[d] {
			if v, ok := pr.missing(pg); ok {
				lacking = fmt.Sprintf("%s's acknowledgement of page %d from %s", f.k.Machine(v).Name(), pg.number, f.k.Machine(dial.NodeID(pg.source)).Name())
				break
			}
		}
		if lacking == "" {
			return
		}
		if gap == "" {
			gap = fmt.Sprintf("%s (move %d) lacked %s", f.k.Machine(d.node).Name(), d.move, lacking)
		}
	}
	f.failPages("the batch moving since epoch %d was published at %v, though no driver of it had every page acknowledged: %s", era, f.k.Now(), gap)
}

func (f *fleetHarness) failPages(format string, args ...any) {
	if !f.pages.failed {
		f.pages.failed = true
		f.run.Fail("move-pages", format, args...)
	}
}

// pageRecord is what move-pages reads of the network's record: per page
// of a move, the new voters the driver handed it to and those whose
// acknowledgement of it reached the driver; per batch (by its era), the
// drivers that handed pages of it; per driver, its pages in the order it
// first handed them.
type pageRecord struct {
	handed, acked map[movePage]map[dial.NodeID]bool
	byEra         map[uint64][]moveDriver
	byDriver      map[moveDriver][]movePage
	judged        int // acknowledgements judged
	failed        bool
}

// moveDriver is one move as a driver ran it: the node, its incarnation,
// and the move's number there.
type moveDriver struct {
	node dial.NodeID
	inc  uint64
	move uint64
}

// movePage is one page of a move: its source and number.
type movePage struct {
	driver         moveDriver
	source, number uint64
}

func (pr *pageRecord) note(m map[movePage]map[dial.NodeID]bool, pg movePage, id dial.NodeID) {
	if m[pg] == nil {
		m[pg] = map[dial.NodeID]bool{}
	}
	m[pg][id] = true
}

// missing names the first new voter handed pg whose acknowledgement of it
// has not reached the driver.
func (pr *pageRecord) missing(pg movePage) (dial.NodeID, bool) {
	for _, v := range slices.Sorted(maps.Keys(pr.handed[pg])) {
		pr.judged++
		if !pr.acked[pg][v] {
			return v, true
		}
	}
	return 0, false
}

// sawDirectory records the directory epoch nd's control replica holds,
// the first time any node holds it.
func (f *fleetHarness) sawDirectory(nd *node.Node) {
	d := nd.Directory() // what the node routes by; nil if none decodes
	if d == nil {
		return
	}
	if n := len(f.published); n == 0 || d.Epoch() > f.published[n-1].epoch {
		f.published = append(f.published, publication{epoch: d.Epoch(), at: f.k.Now()})
		if d.Epoch() > f.latest.Epoch() {
			f.record(d)
		}
	}
}

// record notes each partition d gives a group other than the one the
// last directory recorded did (a publication; a partition that is moving
// is still its old group's).
func (f *fleetHarness) record(d *fleet.Directory) {
	fenced, published := [2]int{-1, -1}, [2]int{-1, -1}
	var unfenced []string  // partitions d gives another group without a fence
	lost := map[int]bool{} // the groups d takes a partition from
	for p := range f.holdings {
		g, _ := d.Holder(partition.Partition(p))
		if h := f.holdings[p]; h[len(h)-1].group != g {
			lost[h[len(h)-1].group] = true
			if f.fencedAt[p] == 0 {
				unfenced = append(unfenced, fmt.Sprintf("%d (group %d to %d)", p, h[len(h)-1].group, g))
			}
			if _, _, era, moving := f.latest.Moving(partition.Partition(p)); published[0] < 0 && moving {
				f.publishedPages(era) // the batch's era, as its move was fenced
			}
			published = [2]int{h[len(h)-1].group, g}
			f.holdings[p] = append(h, holding{group: g, at: f.k.Now()})
			f.windows = append(f.windows, f.k.Now()-f.fencedAt[p])
		}
		if from, to, _, moving := d.Moving(partition.Partition(p)); moving && f.fencedAt[p] == 0 {
			f.fencedAt[p] = f.k.Now()
			fenced = [2]int{from, to}
		} else if !moving {
			f.fencedAt[p] = 0
		}
	}
	if len(unfenced) > 0 {
		// A holder changes only at the publication of a move the record
		// saw fenced: the fence is what stops the old group serving, and
		// the copy comes between the two.
		f.run.Fail("moves-fenced", "directory epoch %d (first held at %v) gives %d partitions another group with no fence the record saw: %s",
			d.Epoch(), f.k.Now(), len(unfenced), strings.Join(unfenced[:min(len(unfenced), 4)], ", "))
	}
	f.latest = d
	f.owe(d, lost)
	for _, fn := range f.fenced {
		if fenced[0] >= 0 {
			fn(d)
		}
	}
	if f.onStep != nil && fenced[0] >= 0 {
		f.onStep("fence", fenced[0], fenced[1], 0)
	}
	if f.onStep != nil && published[0] >= 0 {
		f.onStep("publish", published[0], published[1], 0)
	}
}

// watchMoves tells onStep of each move-ask and ingest frame sent (the
// copy's steps), from the network's record.
func (f *fleetHarness) watchMoves() {
	h := f.groups[0]
	f.nw.Watch(func(s netsim.Sending) {
		if s.Fate != netsim.Sent || f.onStep == nil {
			return
		}
		p := h.plain(s.Frame)
		if kind, ok := flow.PeekKind(p); !ok || (kind != flow.FrameMoveAsk && kind != flow.FrameIngest) {
			return
		}
		info, err := flow.DecodeFrame(p)
		if err != nil {
			return
		}
		_, from, to, _ := f.latest.MovingBatch()
		step := "copy"
		if info.Kind == flow.FrameIngest {
			step = "ingest"
		}
		f.onStep(step, from, to, s.To)
	})
}

// addGroups starts the added groups' nodes at at, each group founding
// its own raft group, and asks a member of the fleet to add them, in
// order (node.Node.AddGroup), again each second until the record shows
// every one in the directory. Asking again for a group added already is
// answered as done, so a lost answer costs nothing.
func (f *fleetHarness) addGroups(at time.Duration) {
	var ask func()
	ask = func() {
		g := f.latest.Groups() // the next to add, by the record
		if g >= len(f.groups) {
			f.run.Did("groups-added", g-f.founded)
			return
		}
		var ups []*sim.Machine
		for _, n := range f.nodes {
			if n.Up() && f.nd[n.Name()] != nil && f.member[n.ID()] < g {
				ups = append(ups, n)
			}
		}
		if len(ups) > 0 {
			n := ups[f.k.Stream("fleet/add").IntN(len(ups))]
			nd := f.nd[n.Name()]
			// The requests the fleet must refuse first, each once the
			// one before is answered, then the real one: a node that took
			// a bad one would have it in the log before the real one.
			bad, why := f.badAdd(g)
			// An attack on the attestation too: the real request, with
			// one the fleet must not take.
			forged, how := f.badAttestation(transport.ActAddGroup, node.AddGroupFields(g, f.entries[g]))
			junk, what := f.malformedAttestation(transport.ActAddGroup, node.AddGroupFields(g, f.entries[g]))
			bad = append(bad, badAddition{group: f.entries[g], att: &forged}, badAddition{group: f.entries[g], att: &junk})
			why = append(why, "with "+how, "with "+what)
			if f.adversary().IntN(2) == 0 {
				// The operator's attestation of the real request, on a
				// request whose founder's name takes the first byte of
				// its peer address: the same bytes, run together.
				real := f.attest(transport.ActAddGroup, node.AddGroupFields(g, f.entries[g]))
				moved := f.entries[g]
				moved.Voters = slices.Clone(moved.Voters)
				v := &moved.Voters[0]
				v.Name, v.Peer = v.Name+v.Peer[:1], v.Peer[1:]
				v.ID = dial.IDFromName(v.Name)
				bad = append(bad, badAddition{group: moved, att: &real})
				why = append(why, fmt.Sprintf("founded by %q at %q, with the attestation of the real request", v.Name, v.Peer))
			}
			var next func(i int)
			next = func(i int) {
				if i < len(bad) {
					att := f.attest(transport.ActAddGroup, node.AddGroupFields(g+bad[i].skip, bad[i].group))
					if bad[i].att != nil {
						att = *bad[i].att
					}
					nd.AddGroup(g+bad[i].skip, bad[i].group, att, f.refusal(n, "an added group "+why[i], func() { next(i + 1) }))
					return
				}
				sent := f.asked("admin-acts", n, fmt.Sprintf("the addition of group %d", g))
				nd.AddGroup(g, f.entries[g], f.attest(transport.ActAddGroup, node.AddGroupFields(g, f.entries[g])), func(err error) {
					sent.answered = true
					f.k.Logf("add group %d through %s: %v", g, n.Name(), err)
				})
			}
			n.Exec(func() { next(0) })
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("add group"), ask)
	}
	f.k.At(at, sim.EvClient, xxhash.Sum64String("add group"), func() {
		for g := f.founded; g < len(f.groups); g++ {
			h := f.groups[g]
			for _, n := range h.nodes {
				if !n.Up() {
					n.Start()
				}
			}
			if f.chaos != nil {
				f.chaos.Add(h.nodes...)
			}
			if f.alone {
				for _, n := range h.nodes[1:] {
					f.joinFounded(h, n)
				}
			}
		}
		ask()
	})
}

// badAddition is an AddGroup the fleet must refuse: group numbered skip
// past the next, with attestation att (nil: the operator's, of exactly
// that request).
type badAddition struct {
	group fleet.Group
	skip  int
	att   *string
}

// badAdd returns, for the addition of group g, two requests the fleet
// must refuse, and why: a group out of turn (two past the next, which
// the record may lag by one), and one drawn among a group with a voter
// of a founded group, with no voters, with a voter twice, and at
// membership index 0. Their voters are nodes the run never starts.
func (f *fleetHarness) badAdd(g int) ([]badAddition, []string) {
	stranger := fleet.Member{ID: dial.IDFromName(fmt.Sprintf("x%d", g)), Name: fmt.Sprintf("x%d", g), Peer: fmt.Sprintf("x%d:7000", g)}
	out := []badAddition{{group: fleet.Group{MIdx: 1, Voters: []fleet.Member{stranger}}, skip: 2}}
	why := []string{fmt.Sprintf("numbered %d, out of turn", g+2)}
	switch f.adversary().IntN(4) {
	case 0:
		out = append(out, badAddition{group: fleet.Group{MIdx: 1, Voters: []fleet.Member{f.entries[0].Voters[0]}}})
		why = append(why, "naming a voter of group 0")
	case 1:
		out = append(out, badAddition{group: fleet.Group{MIdx: 1}})
		why = append(why, "with no voters")
	case 2:
		out = append(out, badAddition{group: fleet.Group{MIdx: 1, Voters: []fleet.Member{stranger, stranger}}})
		why = append(why, "naming a voter twice")
	default:
		out = append(out, badAddition{group: fleet.Group{Voters: []fleet.Member{stranger}}})
		why = append(why, "at membership index 0")
	}
	return out, why
}

// adversary is the stream fleet-grow's bad admin requests are drawn
// from: one for the run, so that each request draws afresh.
func (f *fleetHarness) adversary() *rand.Rand {
	if f.badAdmin == nil {
		f.badAdmin = f.k.Stream("fleet/bad-admin")
	}
	return f.badAdmin
}

// refusal is the answer callback of an admin request the fleet must
// refuse, asked of n now (admin-refusals): an error, whichever, and
// then next runs (if any); nil means the fleet took it. Only a refusal
// by a node that holds a directory counts as one judged: a node with
// none refuses everything. A request a node never answers, though it
// stayed up, fails too (checkUnanswered): a chain of requests stops
// there.
func (f *fleetHarness) refusal(n *sim.Machine, what string, next func()) func(error) {
	ask := f.asked("admin-refusals", n, what)
	return func(err error) {
		ask.answered = true
		switch {
		case err == nil:
			f.run.Fail("admin-refusals", "%s asked through %s at %v was accepted", what, n.Name(), f.k.Now())
			return
		case !errors.Is(err, node.ErrNoDirectory):
			f.run.Did("admin-refusals", 1)
		}
		f.k.Logf("%s through %s refused: %v", what, n.Name(), err)
		if next != nil {
			next()
		}
	}
}

// adminAsk is an admin request sent, real or the adversary's: to whom,
// in which incarnation of it, and whether it was answered; judged by
// the checker named.
type adminAsk struct {
	checker  string
	n        *sim.Machine
	inc      uint64
	what     string
	at       time.Duration
	answered bool
}

// asked notes an admin request sent to n now, for checkUnanswered.
func (f *fleetHarness) asked(checker string, n *sim.Machine, what string) *adminAsk {
	ask := &adminAsk{checker: checker, n: n, inc: n.Incarnation(), what: what, at: f.k.Now()}
	f.adminAsks = append(f.adminAsks, ask)
	return ask
}

// checkUnanswered fails each admin request that its node never answered,
// though it has been up since, bar those asked in the run's last 5s,
// where a proposal of theirs could still be in flight (its timeout is
// 2s): its asker waits for good (admin-refusals for the adversary's,
// admin-acts for the operator's).
func (f *fleetHarness) checkUnanswered() {
	for _, a := range f.adminAsks {
		if !a.answered && a.n.Incarnation() == a.inc && a.at < f.k.Now()-5*time.Second {
			f.run.Fail(a.checker, "%s asked through %s at %v was never answered, and %s stayed up", a.what, a.n.Name(), a.at, a.n.Name())
		}
	}
}

// placed reports whether the newest directory the record holds has every
// partition where the table puts it for target groups, none moving.
func (f *fleetHarness) placed(target int) bool {
	if f.latest.Target() != target {
		return false
	}
	ps, _, _ := f.latest.Misplaced(1)
	if len(ps) > 0 {
		return false
	}
	b, _, _, _ := f.latest.MovingBatch()
	return b == nil
}

// owe notes, for every node of a group that d took a partition from,
// what it must now drop (checker released).
func (f *fleetHarness) owe(d *fleet.Directory, lost map[int]bool) {
	if len(lost) == 0 {
		return
	}
	if f.owed == nil {
		f.owed, f.owedSince = map[dial.NodeID]int{}, map[dial.NodeID]time.Duration{}
	}
	for _, h := range f.groups {
		for _, n := range f.members(h) {
			if !lost[f.member[n.ID()]] {
				continue
			}
			f.owedSince[n.ID()] = f.k.Now()
			if st := h.flows[n.Name()]; n.Up() && st != nil {
				f.owed[n.ID()] = max(f.owed[n.ID()], len(f.leftovers(st, f.member[n.ID()], d)))
			}
		}
	}
}

// leftovers are the flows st holds of partitions that, by the record,
// a group other than g holds, and that d does not show moving to g.
func (f *fleetHarness) leftovers(st *flow.Store, g int, d *fleet.Directory) []string {
	var out []string
	for _, fl := range st.Flows() {
		p := partition.Of(fl)
		h := f.holdings[p]
		if _, to, _, moving := d.Moving(p); h[len(h)-1].group != g && !(moving && to == g) {
			out = append(out, fl)
		}
	}
	slices.Sort(out)
	return out
}

// checkReleased holds every node of a group that gave partitions away
// to dropping its copies of them (checker.Released). A node restarted
// since is not judged: what it owed is then what its disk kept.
func (f *fleetHarness) checkReleased() {
	name := func(id dial.NodeID) string { return f.k.Machine(id).Name() }
	for _, h := range f.groups {
		var ls []checker.Leftovers
		for _, n := range f.members(h) {
			since, owed := f.owedSince[n.ID()]
			st := h.flows[n.Name()]
			if !owed || !n.Up() || st == nil || n.UpSince(f.k.Now()) > since {
				continue
			}
			g := f.member[n.ID()]
			ls = append(ls, checker.Leftovers{Node: n.ID(), Group: g, Held: f.leftovers(st, g, f.latest), Owed: f.owed[n.ID()], Since: since})
		}
		judged := checker.Released(f.run, f.k.Now(), ls, h.aeMax, h.aeEvery, name)
		f.run.Logf("released: %d of %d nodes that gave partitions away judged", judged, len(ls))
	}
}

// holder is the group holding flow's partition at at, by the record.
func (f *fleetHarness) holder(fl string, at time.Duration) int {
	h := f.holdings[partition.Of(fl)]
	i := sort.Search(len(h), func(i int) bool { return h[i].at > at }) - 1
	return h[max(i, 0)].group
}

// resize asks a member of the fleet, from at, for a resize to target
// groups (node.Node.Resize), again each second until one commits.
func (f *fleetHarness) resize(target int, at time.Duration) {
	f.target = target
	var ask func()
	tries := 0
	ask = func() {
		if tries++; tries > 60 || f.target != target {
			return // given up, or a later resize was asked for
		}
		var ups []*sim.Machine // members of a group (a spare removed again is none)
		for _, h := range f.groups {
			ups = append(ups, slices.DeleteFunc(f.members(h), func(n *sim.Machine) bool { return !n.Up() || f.nd[n.Name()] == nil })...)
		}
		if len(ups) > 0 {
			n := ups[f.k.Stream("fleet/resize").IntN(len(ups))]
			nd := f.nd[n.Name()]
			answered := false
			// The operator reads the directory's epoch from the node it
			// asks (its status) and attests the resize against it.
			epoch := func() uint64 {
				if d := nd.Directory(); d != nil {
					return d.Epoch()
				}
				return 0
			}
			real := func() {
				e := epoch()
				att := f.attest(transport.ActResize, node.ResizeFields(target, e))
				sent := f.asked("admin-acts", n, fmt.Sprintf("the resize to %d groups", target))
				nd.Resize(target, e, att, func(err error) {
					answered, sent.answered = true, true
					if err == nil {
						f.resized++
						f.lastResize = &capturedResize{target: target, epoch: e, att: att, via: n}
						f.k.Logf("resize to %d groups committed through %s", target, n.Name())
						return
					}
					f.k.Logf("resize to %d groups through %s: %v", target, n.Name(), err)
					f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("resize"), ask)
				})
			}
			n.Exec(func() {
				if f.founded == len(f.groups) {
					real()
					return
				}
				// fleet-grow's adversary first, the real resize once it
				// is answered, each request once the one before is: a
				// target the table cannot take (3 groups, none, or a
				// negative count, which divides the table's 4096 as its
				// absolute value would), or more groups than the fleet
				// will ever have; the real resize with an attestation the
				// fleet must not take; and the last resize committed, as
				// captured, sent again (the fleet has changed since: it
				// must change nothing).
				bad := []int{3, 2 * len(f.groups), 0, -len(f.groups)}[f.adversary().IntN(4)]
				e := epoch()
				forged, how := f.badAttestation(transport.ActResize, node.ResizeFields(target, e))
				junk, what := f.malformedAttestation(transport.ActResize, node.ResizeFields(target, e))
				replay := f.lastResize
				nd.Resize(bad, e, f.attest(transport.ActResize, node.ResizeFields(bad, e)), f.refusal(n, fmt.Sprintf("a resize to %d groups", bad), func() {
					nd.Resize(target, e, forged, f.refusal(n, fmt.Sprintf("a resize to %d groups with %s", target, how), func() {
						nd.Resize(target, e, junk, f.refusal(n, fmt.Sprintf("a resize to %d groups with %s", target, what), func() {
							if replay == nil {
								real()
								return
							}
							// Sent to another node than the one that took
							// it, which never saw its nonce: only the
							// epoch it names can refuse it there.
							others := slices.DeleteFunc(slices.Clone(ups), func(m *sim.Machine) bool { return m == replay.via })
							if len(others) == 0 {
								real()
								return
							}
							o := others[f.adversary().IntN(len(others))]
							o.Exec(func() {
								f.nd[o.Name()].Resize(replay.target, replay.epoch, replay.att,
									f.refusal(o, fmt.Sprintf("the resize to %d groups attested at epoch %d, sent again", replay.target, replay.epoch), func() { n.Exec(real) }))
							})
						}))
					}))
				}))
			})
			// An answer lost with a crash: ask again (a committed target
			// asked for twice moves nothing twice).
			f.k.After(5*time.Second, sim.EvClient, xxhash.Sum64String("resize check"), func() {
				if !answered {
					ask()
				}
			})
			return
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("resize"), ask)
	}
	f.k.At(at, sim.EvClient, xxhash.Sum64String("resize"), ask)
}

// publication is one directory epoch, and when a node first held it.
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
		if g >= f.founded {
			continue // an added group starts when it is added (addGroups)
		}
		for _, n := range founders {
			n.Start()
		}
	}
	var faulted []*sim.Machine // an added group's nodes from when it starts (addGroups)
	for _, n := range f.nodes {
		if f.member[n.ID()] < f.founded {
			faulted = append(faulted, n)
		}
	}
	chaos := StartChaos(f.run, f.nw, faulted, faults, f.calm)
	f.chaos = chaos
	f.k.At(f.calm+probeAfter, sim.EvCheck, xxhash.Sum64String("fleet probe"), f.probe.run)
	for _, h := range f.groups {
		h.holdForFloors(f.calm, f.short)
		h.startFlowClients(h.nodes, h.perNode, hot, all, f.calm)
		h.startChecks(100 * time.Millisecond)
	}
	if f.grow >= 0 {
		f.join(f.groups[f.grow], sim.Between(f.k.Stream("fleet/grow"), time.Second, f.calm/3))
		// In half of those runs (three in four of a fleet that grows by
		// added groups) the spare is removed again once it votes: its
		// group publishes the removal, and the control group's leader
		// removes it there too.
		ks := f.k.Stream("knobs/fleet/shrink")
		shrink := ks.IntN(2) == 0
		if f.founded < len(f.groups) {
			shrink = ks.IntN(4) != 0
		}
		if shrink {
			at := sim.Between(ks, f.calm/2, f.calm*3/4)
			f.run.Knob("remove_spare_at", at)
			f.removeSpare(f.groups[f.grow], at)
		}
	}
	f.k.At(f.calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		for g, h := range f.groups {
			ms := f.members(h)
			if g == f.grow && f.removed {
				// The spare's removal was asked for and may commit while
				// this check runs: from then on it is no node of the
				// fleet, and its directory stops (fleet-resize seed 233:
				// removed at 19s, it routed by a directory moves had
				// left behind).
				ms = slices.DeleteFunc(ms, func(n *sim.Machine) bool { return n == h.nodes[len(h.nodes)-1] })
			}
			h.checkFlowsServed(ms, hot, 3*time.Second)
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
// it has caught up), in calm too, as an operator would (admin-acts: it
// must land): the group's membership changes twice under load, and each
// change reaches the other groups only through the directory.
func (f *fleetHarness) join(h *flowHarness, at time.Duration) {
	spare := h.nodes[len(h.nodes)-1]
	var act *checker.AdminAct
	var ask func()
	ask = func() {
		joined := h.committed().Lists(spare.ID())
		if joined && !f.removed {
			f.joinAgain(h, spare)
		}
		if joined || f.removed || (f.k.Now() >= f.calm && act == nil) {
			return
		}
		if !spare.Up() {
			spare.Start()
		}
		f.wrongGroupJoin(h, spare)
		for _, via := range h.nodes[:len(h.nodes)-1] {
			if nd := f.nd[via.Name()]; via.Up() && nd != nil {
				// The spare asks with the control key's attestation of
				// its join at the membership the member holds (as a
				// real joiner learns it from a stale answer).
				via.Exec(func() {
					m := consensus.NewMember(spare.Name(), spare.Name()+":7000")
					index := nd.Consensus.Membership().Index
					att := f.attest(transport.ActJoin, node.JoinFields(m, index))
					real := func() {
						if act == nil {
							f.holdBehind(h, via)
						}
						nd.Join(m, f.groupOf(h), index, att, f.answered(via, h.adminAct(&act, true, spare)))
						f.spareJoin = &capturedJoin{m: m, group: f.groupOf(h), index: index, att: att, via: via}
					}
					if f.founded == len(f.groups) || f.badJoined {
						real()
						return
					}
					// fleet-grow's adversary first: the spare's join with
					// an attestation the fleet must not take; the real
					// one once it is answered.
					f.badJoined = true
					bad, how := f.badAttestation(transport.ActJoin, node.JoinFields(m, index))
					if f.adversary().IntN(2) == 0 {
						bad, how = f.malformedAttestation(transport.ActJoin, node.JoinFields(m, index))
					}
					nd.Join(m, f.groupOf(h), index, bad, f.refusal(via, fmt.Sprintf("%s's join with %s", spare.Name(), how), real))
				})
				break
			}
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+spare.Name()), ask)
	}
	f.k.At(at, sim.EvClient, xxhash.Sum64String("join "+spare.Name()), ask)
}

// joinFounded asks, from now, for n to join its group h, founded by its
// first node alone, through a member of h that is up, again each second
// until it is a member, in calm too (admin-acts: it must land, and be
// promoted). The join is attested at the membership the member holds.
func (f *fleetHarness) joinFounded(h *flowHarness, n *sim.Machine) {
	var act *checker.AdminAct
	var ask func()
	ask = func() {
		if h.committed().Lists(n.ID()) {
			return
		}
		for _, via := range f.members(h) {
			if nd := f.nd[via.Name()]; via != n && via.Up() && nd != nil {
				via.Exec(func() {
					m := consensus.NewMember(n.Name(), n.Name()+":7000")
					index := nd.Consensus.Membership().Index
					nd.Join(m, f.groupOf(h), index, f.attest(transport.ActJoin, node.JoinFields(m, index)), f.answered(via, h.adminAct(&act, true, n)))
				})
				break
			}
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+n.Name()), ask)
	}
	ask()
}

// removeSpare removes h's spare node (its last) from its group at at,
// once it is a voter, asking again each second until it is no member, in
// calm too (admin-acts: it must land); a spare not promoted before the
// faults stop stays.
func (f *fleetHarness) removeSpare(h *flowHarness, at time.Duration) {
	spare := h.nodes[len(h.nodes)-1]
	var act *checker.AdminAct
	var ask func()
	ask = func() {
		if f.k.Now() >= f.calm && !f.removed {
			return
		}
		// By the record: the nodes up now may all be behind it.
		rec := h.committed()
		voter := slices.Contains(rec.Voters, spare.ID())
		if !voter && f.removed {
			if !rec.Lists(spare.ID()) {
				f.replayJoin(h)
			}
			return // out of its group
		}
		if voter {
			for _, via := range h.nodes[:len(h.nodes)-1] {
				if nd := f.nd[via.Name()]; via.Up() && nd != nil {
					f.removed = true
					via.Exec(func() {
						index := nd.Consensus.Membership().Index
						real := func() {
							nd.Remove(spare.Name(), index, f.attest(transport.ActRemove, node.RemoveFields(spare.Name(), index)), f.answered(via, h.adminAct(&act, false, spare)))
						}
						f.badRemovals(h, spare, via, index, real)
					})
					break
				}
			}
		}
		f.k.After(time.Second, sim.EvClient, xxhash.Sum64String("remove "+spare.Name()), ask)
	}
	f.k.At(at, sim.EvClient, xxhash.Sum64String("remove "+spare.Name()), ask)
}

// answered notes the operator's act asked of n now, and records the
// instants a node answers it with nil (admin-acts holds each to the
// record).
func (f *fleetHarness) answered(n *sim.Machine, act *checker.AdminAct) func(error) {
	what := f.k.Machine(act.Node).Name() + "'s removal"
	if act.Join {
		what = f.k.Machine(act.Node).Name() + "'s join"
	}
	ask := f.asked("admin-acts", n, what)
	return func(err error) {
		ask.answered = true
		if err == nil {
			act.OKs = append(act.OKs, f.k.Now())
		}
	}
}

// holdBehind, in half of fleet-grow's runs (knob join_replay_behind),
// cuts a founder of the spare's group other than via off its group's log
// (the frames of its raft group to it are dropped) from now, as the
// spare's first join is asked, until the adversary replays that join to
// it once the spare is removed again (replayJoin), or the heal: a member
// that never applied the join still holds the index it was attested at,
// so the index is checked where the change commits, not only where it is
// asked (consensus.Node.AddLearnerAt).
func (f *fleetHarness) holdBehind(h *flowHarness, via *sim.Machine) {
	if f.founded == len(f.groups) {
		return
	}
	r := f.k.Stream("knobs/fleet/behind")
	if r.IntN(2) != 0 {
		return
	}
	founders := slices.DeleteFunc(slices.Clone(h.nodes[:len(h.nodes)-1]), func(n *sim.Machine) bool { return n == via })
	b := founders[r.IntN(len(founders))]
	f.run.Knob("join_replay_behind", b.Name())
	f.behind = b
	f.run.Inject(f.run.Fault(), fmt.Sprintf("cut %s off its group's log until the spare's join is replayed to it", b.Name()), func() {
		prev := f.lagging
		f.lagging = func(to dial.NodeID, frame []byte) bool {
			if f.behind == b && to == b.ID() && f.k.Now() < f.calm {
				if p := h.plain(frame); len(p) > 0 && p[0] == consensus.FramePrefix {
					return true
				}
			}
			return prev != nil && prev(to, frame)
		}
		f.nw.DropIf(func(_, to dial.NodeID, frame []byte) bool { return f.lagging(to, frame) })
	})
}

// joinAgain asks, once, for the spare's join again once it is a member,
// as a joiner does whose answer was lost: attested afresh at the index
// it first asked at, which the member has moved past since. A member
// asked to join again is answered nil, whatever the index, once it has
// confirmed with a quorum that it still is one (admin-acts): refused
// (not attested, another group, stale), a joiner that lost its answer
// could never be told it is in; no answer from a quorum is no refusal,
// nor is a refusal once the record shows the spare removed meanwhile.
// Sent to a member whose own membership lists the spare (one that does
// not yet rightly refuses it as stale).
func (f *fleetHarness) joinAgain(h *flowHarness, spare *sim.Machine) {
	j := f.spareJoin
	if j == nil || f.joinedAgain {
		return
	}
	for _, n := range f.members(h) {
		if nd := f.nd[n.Name()]; n != spare && n.Up() && nd != nil && nd.Consensus.Membership().Lists(spare.ID()) {
			f.joinedAgain = true
			n.Exec(func() {
				sent := f.asked("admin-acts", n, "the spare's join asked again")
				nd.Join(j.m, j.group, j.index, f.attest(transport.ActJoin, node.JoinFields(j.m, j.index)), func(err error) {
					sent.answered = true
					var stale *node.VersionError
					refused := errors.Is(err, node.ErrNotAttested) || errors.Is(err, node.ErrWrongGroup) || errors.As(err, &stale)
					// Removed meanwhile (the record says so), it is a join
					// like any other, and rightly stale.
					if refused && h.committed().Lists(spare.ID()) {
						f.run.Fail("admin-acts", "%s's join asked again through %s at %v, once a member, was refused: %v", spare.Name(), n.Name(), f.k.Now(), err)
					}
				})
			})
			return
		}
	}
}

// wrongGroupJoin is fleet-grow's adversary before the spare's first
// join: the same join, attested at the membership of the member it is
// sent to, asked of a member of another group. A node joins its own
// group only, so it must be refused (admin-refusals).
func (f *fleetHarness) wrongGroupJoin(h *flowHarness, spare *sim.Machine) {
	if f.founded == len(f.groups) || f.wrongJoined {
		return
	}
	var others []*sim.Machine
	for g, o := range f.groups {
		if o == h || g >= f.latest.Groups() {
			continue
		}
		for _, n := range f.members(o) {
			if n.Up() && f.nd[n.Name()] != nil {
				others = append(others, n)
			}
		}
	}
	if len(others) == 0 {
		return
	}
	f.wrongJoined = true
	o := others[f.adversary().IntN(len(others))]
	nd := f.nd[o.Name()]
	o.Exec(func() {
		m := consensus.NewMember(spare.Name(), spare.Name()+":7000")
		index := nd.Consensus.Membership().Index
		nd.Join(m, f.groupOf(h), index, f.attest(transport.ActJoin, node.JoinFields(m, index)),
			f.refusal(o, fmt.Sprintf("%s's join to group %d asked of a member of another group", spare.Name(), f.groupOf(h)), nil))
	})
}

// badRemovals is fleet-grow's adversary before the spare's first
// removal, through via at membership index: the removal with an
// attestation the fleet must not take, then one attested at the index
// before (a removal captured earlier), then one asked of a member of
// another group, each once the one before is answered, and real last
// (a node that took a bad one would have it in the log first). Each
// must be refused (admin-refusals).
func (f *fleetHarness) badRemovals(h *flowHarness, spare, via *sim.Machine, index uint64, real func()) {
	if f.founded == len(f.groups) || f.badRemoved {
		real()
		return
	}
	f.badRemoved = true
	nd := f.nd[via.Name()]
	forged, how := f.badAttestation(transport.ActRemove, node.RemoveFields(spare.Name(), index))
	old := index - 1
	nd.Remove(spare.Name(), index, forged, f.refusal(via, fmt.Sprintf("%s's removal with %s", spare.Name(), how), func() {
		nd.Remove(spare.Name(), old, f.attest(transport.ActRemove, node.RemoveFields(spare.Name(), old)), f.refusal(via, fmt.Sprintf("%s's removal attested at membership index %d, a change ago", spare.Name(), old), func() {
			// Only to a node whose directory names the spare in its
			// group: one that does not yet cannot tell it is another
			// group's (and removing a node its group does not hold
			// removes nothing).
			var others []*sim.Machine
			for g, o := range f.groups {
				if o != h && g < f.latest.Groups() {
					others = append(others, slices.DeleteFunc(f.members(o), func(n *sim.Machine) bool {
						nd := f.nd[n.Name()]
						if !n.Up() || nd == nil || nd.Directory() == nil {
							return true
						}
						sg, _, named := nd.Directory().Member(spare.ID())
						return !named || sg != f.groupOf(h)
					})...)
				}
			}
			if len(others) == 0 {
				real()
				return
			}
			o := others[f.adversary().IntN(len(others))]
			ond := f.nd[o.Name()]
			o.Exec(func() {
				at := ond.Consensus.Membership().Index
				ond.Remove(spare.Name(), at, f.attest(transport.ActRemove, node.RemoveFields(spare.Name(), at)),
					f.refusal(o, fmt.Sprintf("%s's removal asked of a member of another group", spare.Name()), func() { via.Exec(real) }))
			})
		}))
	}))
}

// groupOf is h's group number.
func (f *fleetHarness) groupOf(h *flowHarness) int { return slices.Index(f.groups, h) }

// capturedJoin is the spare's last join as it travelled, and the node it
// was sent to.
type capturedJoin struct {
	m     consensus.Member
	group int
	index uint64
	att   string
	via   *sim.Machine
}

// replayJoin is fleet-grow's adversary once the spare is out of its group:
// its last join, as captured, sent to another member of the group than
// the one it went to (which never saw its nonce), once that member has
// applied the removal. The membership has changed since it was
// attested, so it must add nothing (admin-refusals).
func (f *fleetHarness) replayJoin(h *flowHarness) {
	j := f.spareJoin
	if f.founded == len(f.groups) || j == nil || f.joinReplayed {
		return
	}
	if b := f.behind; b != nil {
		// The founder held behind hears its group's log again from now;
		// first, on its loop, it is asked for the join as captured, at
		// the index it still holds: its local check passes, and the
		// change must apply as nothing where it commits, after the
		// removal.
		f.behind = nil
		if nd := f.nd[b.Name()]; b.Up() && nd != nil && nd.Consensus.Membership().Index == j.index {
			f.joinReplayed = true
			b.Exec(func() {
				nd.Join(j.m, j.group, j.index, j.att,
					f.refusal(b, fmt.Sprintf("%s's join attested at membership index %d, sent again after its removal to a member still at that index", j.m.Name, j.index), nil))
			})
			return
		}
	}
	// Only a member that has applied the removal: one that has not
	// rightly answers the spare as a member still.
	var others []*sim.Machine
	for _, n := range h.nodes[:len(h.nodes)-1] {
		if nd := f.nd[n.Name()]; n != j.via && n.Up() && nd != nil && h.isMember(n.ID()) &&
			!nd.Consensus.Membership().Lists(j.m.ID) {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return // asked again on the next turn
	}
	f.joinReplayed = true
	o := others[f.adversary().IntN(len(others))]
	o.Exec(func() {
		f.nd[o.Name()].Join(j.m, j.group, j.index, j.att,
			f.refusal(o, fmt.Sprintf("%s's join attested at membership index %d, sent again after its removal", j.m.Name, j.index), nil))
	})
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
	}, f.holder, name)
	var cuts []checker.FlowCut
	for g, h := range f.groups {
		h.services = slices.DeleteFunc(slices.Clone(services), func(s checker.FlowService) bool { return f.member[s.Node] != g })
		cuts = append(cuts, checker.FlowCuts(h.services, h.memberships, faultRecord{h})...)
		h.cuts = nil
		h.checkD17()
		h.checkKnownMembership()
		h.checkPlacement()
		h.checkAnswered()
		h.checkConvergence(f.members(h))
		h.checkAEQuiet()
	}
	var taken checker.PushesTaken
	for _, h := range f.groups {
		taken.Seen += h.taken.Seen
		taken.Judged += h.taken.Judged
	}
	pushesTaken(f.run, f.groups[0].keys != nil, taken)
	f.checkReleased()
	cuts = append(cuts, f.moveCuts(services)...)
	first := f.groups[0]
	first.cuts = cuts
	f.run.History("flow-linearizability", first.flowHist)
	f.run.TimeCheck("flow-linearizability", func() {
		checker.FlowLinearizable(f.run, first.flowHist, checker.CutTimes(cuts), f.run.CheckTimeout)
	})
	checker.BridgeSeq(f.run, first.flowHist.All(), waited, first.deadline, 1000, "client deadline", flow.ErrShed.Error())
	f.checkDirectories()
	f.checkUnanswered()
	for _, h := range f.groups {
		h.checkAdminActs(f.calm)
	}
	if f.target > 0 {
		f.checkResized()
	}
	f.probe.judge()
	f.report(services)
	f.run.Did("cross-group-ops", cross)
	f.run.Logf("move-pages: %d acknowledgements judged", f.pages.judged)
	newest := uint64(0)
	if n := len(f.published); n > 0 {
		newest = f.published[n-1].epoch
	}
	f.run.Logf("fleet: %d groups, directory epochs 1..%d; %d operations judged by partition-holder, %d served across groups",
		len(f.groups), newest, judged, cross)
	for _, p := range f.published {
		f.k.Logf("directory epoch %d first held at %v", p.epoch, p.at)
	}
	if f.grow >= 0 {
		// The founding epoch and one per membership the spare's joining
		// committed (a learner, then a voter).
		f.run.Did("directory-epochs", max(len(f.published)-1, 0))
	}
}

// checkDirectories judges, once the run has been quiet a while, that
// every member of a group that is up holds a directory naming each group's latest committed
// membership (directory-current).
func (f *fleetHarness) checkDirectories() {
	if quiet := f.k.Now() - f.calm; quiet < 5*time.Second {
		f.run.Undecided("directory-current", "%v of quiet is under 5s", quiet)
		f.run.Undecided("control-members", "%v of quiet is under 5s", quiet)
		return
	}
	latest := make([]checker.MembershipChange, len(f.groups))
	for g, h := range f.groups {
		for _, m := range h.memberships {
			if m.Index > latest[g].Index {
				latest[g] = m
			}
		}
	}
	var nodes []checker.NodeDirectory
	var members []*sim.Machine // a spare that never joined its group is no node of the fleet
	for _, h := range f.groups {
		members = append(members, f.members(h)...)
	}
	for _, n := range members {
		nd := f.nd[n.Name()]
		if !n.Up() || nd == nil {
			continue
		}
		view := checker.NodeDirectory{Name: n.Name()}
		if d := nd.Directory(); d != nil {
			for g := range d.Groups() {
				gr := d.Group(g)
				ids := make([]dial.NodeID, len(gr.Voters))
				for i, m := range gr.Voters {
					ids[i] = m.ID
				}
				view.Groups = append(view.Groups, checker.DirectoryView{MIdx: gr.MIdx, Voters: ids})
			}
		}
		nodes = append(nodes, view)
	}
	f.run.Did("directories-judged", checker.DirectoryCurrent(f.run, latest, nodes))
	var controls []checker.NodeControl
	for _, n := range members {
		if nd := f.nd[n.Name()]; n.Up() && nd != nil {
			ms := nd.Control.Membership()
			var ids []dial.NodeID
			for _, m := range append(slices.Clone(ms.Voters), ms.Learners...) {
				ids = append(ids, m.ID)
			}
			controls = append(controls, checker.NodeControl{Name: n.Name(), Members: ids})
		}
	}
	checker.ControlMembers(f.run, latest, controls)
	// Nor does the control group's membership go on changing once every
	// group's has stopped: with nothing to add or remove, a change in
	// the run's last 5s is churn (a leader that proposed a removal of
	// nobody every turn passed every other check).
	if n := len(f.probe.ctlChanges); n > 0 && f.probe.ctlChanges[n-1] > f.k.Now()-5*time.Second {
		f.run.Fail("control-members", "the control group's membership changed at %v (index %d), in the last 5s of a run quiet since %v",
			f.probe.ctlChanges[n-1], f.probe.ctlIndex, f.calm)
	}
	if f.grow >= 0 && f.removed {
		// The spare voted in its group once, and its removal committed.
		h := f.groups[f.grow]
		spare := h.nodes[len(h.nodes)-1].ID()
		voted := slices.ContainsFunc(h.memberships, func(m checker.MembershipChange) bool { return slices.Contains(m.Voters, spare) })
		if voted && !slices.Contains(latest[f.grow].Voters, spare) {
			f.run.Did("spares-removed", 1)
		}
	}
}

// moveCuts are the cuts of flows whose partition moved between groups
// (FlowCuts judges each group's own handoffs, and knows nothing of
// moves). A move copies what every voter of the old group holds once its
// log has fenced the partition, so it loses only what the old group
// itself lost: a write its last server took and lost to a crash before
// the move published (before its copy was taken, which comes earlier),
// as a restart would in one group. Between two services of a flow by
// nodes of different groups, a crash of the first node after its
// service and before the publication that gave the flow to the second's
// group is a cut at the crash; anything else lost is a failure.
func (f *fleetHarness) moveCuts(services []checker.FlowService) []checker.FlowCut {
	byFlow := map[string][]checker.FlowService{}
	for _, s := range services {
		byFlow[s.Flow] = append(byFlow[s.Flow], s)
	}
	var cuts []checker.FlowCut
	for _, fl := range slices.Sorted(maps.Keys(byFlow)) {
		ss := byFlow[fl]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At < ss[j].At })
		for i := 1; i < len(ss); i++ {
			a, b := ss[i-1], ss[i]
			ga, gb := f.member[a.Node], f.member[b.Node]
			if ga == gb {
				continue
			}
			published := time.Duration(-1)
			for _, h := range f.holdings[partition.Of(fl)] {
				if h.group == gb && h.at > a.At && h.at <= b.At {
					published = h.at
				}
			}
			if published < 0 {
				continue // no move between them: partition-holder's to judge
			}
			if crashed, at := (faultRecord{f.groups[ga]}).Crashed(a.Node, a.At, published); crashed {
				cuts = append(cuts, checker.FlowCut{Flow: fl, At: at, Reason: fmt.Sprintf(
					"%s, the last of group %d to serve it (at %v), crashed at %v, before its partition's move to group %d published at %v",
					f.k.Machine(a.Node).Name(), ga, a.At, at, gb, published)})
			}
		}
	}
	return cuts
}

// checkResized judges a resize (resize-complete): once the run has been
// quiet a while, every member that is up holds a directory with the
// target asked for last and every partition where the table puts it for
// that target, none moving. And it counts the partitions the record saw
// move.
func (f *fleetHarness) checkResized() {
	moved := 0
	for _, h := range f.holdings {
		moved += len(h) - 1
	}
	f.run.Did("partitions-moved", moved)
	f.run.Logf("fleet: %d resizes committed, %d partition moves published", f.resized, moved)
	if len(f.windows) > 0 {
		w := slices.Sorted(slices.Values(f.windows))
		f.run.Logf("fleet: a partition's move, fence to publication: median %v, 90th %v, longest %v",
			w[len(w)/2], w[len(w)*9/10], w[len(w)-1])
	}
	if quiet := f.k.Now() - f.calm; quiet < 10*time.Second {
		f.run.Undecided("resize-complete", "%v of quiet is under 10s", quiet)
		return
	}
	for _, h := range f.groups {
		for _, n := range f.members(h) {
			nd := f.nd[n.Name()]
			if !n.Up() || nd == nil {
				continue
			}
			d := nd.Directory()
			if d == nil || d.Target() != f.target {
				f.run.Fail("resize-complete", "%s holds no directory with the target of %d groups after %v of quiet", n.Name(), f.target, f.k.Now()-f.calm)
				continue
			}
			if ps, from, to := d.Misplaced(1); len(ps) > 0 {
				f.run.Fail("resize-complete", "%s's directory (epoch %d) still has partition %d in group %d, not %d, after %v of quiet",
					n.Name(), d.Epoch(), ps[0], from, to, f.k.Now()-f.calm)
				continue
			}
			for p := range partition.Count {
				if _, _, _, moving := d.Moving(partition.Partition(p)); moving {
					f.run.Fail("resize-complete", "%s's directory (epoch %d) still moves partition %d after %v of quiet", n.Name(), d.Epoch(), p, f.k.Now()-f.calm)
					break
				}
			}
		}
	}
}

// report is flowHarness.report for the fleet: the one history's counts,
// every group's stores, the accepted losses and who served each flow.
func (f *fleetHarness) report(services []checker.FlowService) {
	first := f.groups[0]
	flowSummary(f.run, first.flowHist, len(first.cuts), f.groups...)
	for _, c := range first.cuts {
		f.k.Logf("accepted loss: flow %s at %v: %s", c.Flow, c.At, c.Reason)
	}
	logServices(f.k, services, func(id dial.NodeID) string { return f.k.Machine(id).Name() })
}

// capturedResize is a resize as it travelled: what an eavesdropper on
// the operator's call holds.
type capturedResize struct {
	target int
	epoch  uint64
	att    string
	via    *sim.Machine // the node that took it
}

// badAttestation draws an attestation of act with fields that the fleet
// must not take, and says what it is: one made with another key, for
// another act, for other fields of the same lengths, too long ago or too far ahead (beyond
// the allowed skew by a minute or more, more than any clock step the
// faults make); or the operator's own, tampered with on the way (its
// issue time, its nonce or its MAC changed).
func (f *fleetHarness) badAttestation(act string, fields []string) (string, string) {
	r := f.adversary()
	now := f.k.Now()
	switch r.IntN(7) {
	case 0:
		other := make([]byte, transport.KeySize)
		for i := range other {
			other[i] = byte(r.Uint32())
		}
		return f.attestAt(other, act, fields, now), "an attestation made with another key"
	case 1:
		if act == transport.ActJoin {
			return f.attest(transport.ActRemove, fields), "a removal's attestation"
		}
		return f.attest(transport.ActJoin, fields), "a join's attestation"
	case 2:
		// Other fields of the same lengths: the MAC must cover what they
		// say, not only how long they are.
		other := slices.Clone(fields)
		b := []byte(other[0])
		b[len(b)-1] ^= 1
		other[0] = string(b)
		return f.attest(act, other), fmt.Sprintf("an attestation of %q", other)
	case 3:
		late := transport.AttestValidity + transport.AttestSkew + time.Minute + sim.Between(r, 0, time.Hour)
		return f.attestAt(f.key, act, fields, now-late), fmt.Sprintf("an attestation made %v ago", late)
	case 4:
		early := transport.AttestSkew + time.Minute + sim.Between(r, 0, time.Hour)
		return f.attestAt(f.key, act, fields, now+early), fmt.Sprintf("an attestation made %v ahead", early)
	default: // 5 and 6: the likeliest attack is on what travels
		a, err := transport.ParseAttestation(f.attest(act, fields))
		if err != nil {
			panic(err) // the harness's own: a bug, not input
		}
		switch r.IntN(3) {
		case 0:
			a.IssuedAt += 1 + r.Int64N(1000) // ms: still within its validity
			return a.String(), "the operator's attestation with its issue time moved"
		case 1:
			a.Nonce[r.IntN(len(a.Nonce))] ^= 1 << r.IntN(8)
			return a.String(), "the operator's attestation with its nonce changed"
		default:
			a.MAC[r.IntN(len(a.MAC))] ^= 1 << r.IntN(8)
			return a.String(), "the operator's attestation with its MAC changed"
		}
	}
}

// malformedAttestation draws text that is no attestation of act with
// fields, and says what it is: the operator's with its nonce or its MAC
// a byte too long, within the text's bound (a parser that decodes
// before it measures runs past its arrays), the operator's padded past
// the bound (its issue time led by zeros: what it says is good, but a
// text that long is refused unread), cut short, or nothing.
func (f *fleetHarness) malformedAttestation(act string, fields []string) (string, string) {
	parts := strings.Split(f.attest(act, fields), ".")
	r := f.adversary()
	if r.IntN(5) == 0 {
		pad := transport.MaxAttestationText + 1 - len(strings.Join(parts, ".")) + r.IntN(8)
		parts[2] = strings.Repeat("0", pad) + parts[2]
		return strings.Join(parts, "."), "the operator's attestation padded past the bound"
	}
	parts[2] = "0" // room within the text's bound
	switch r.IntN(4) {
	case 0:
		parts[4] += "00"
		return strings.Join(parts, "."), "an attestation whose MAC is a byte too long"
	case 1:
		parts[3] += "00"
		return strings.Join(parts, "."), "an attestation whose nonce is a byte too long"
	case 2:
		return strings.Join(parts[:4], "."), "an attestation cut short"
	default:
		return "", "no attestation"
	}
}
