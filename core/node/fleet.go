package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
)

// A fleet is several raft groups (data groups), each holding the flows of
// the partitions the group directory gives it (core/fleet), and one more
// raft group, the control group, which holds the directory. Every node of
// the fleet runs a replica of the control group beside its data group's:
// a voter if it is one of the control group's founders, otherwise a
// learner, which the control group's leader adds once the directory names
// it as a voter of its data group, and promotes once it has caught up
// while the control group has fewer than ControlVoters voters (a learner
// otherwise, which applies every entry and votes in nothing); the leader
// removes a member the
// directory names in no group (a node removed from its data group). The
// control group also holds what the fleet shares (Node.Admin):
// imposters, recordings, the KV API, the rollout. The directory is one
// value in the control group's KV (DirectoryKey), so a node reads the directory
// its replica has applied, in log order, and a node whose replica has not
// yet caught up has none and refuses every flow (core/flow).
//
// The directory changes only by compare-and-set on that value:
//
//   - once, at the founding: the control group's leader writes epoch 1
//     from FleetConfig.Founding if the value is absent;
//   - each time a data group commits a new membership: each of its nodes
//     that has applied it and follows the control group publishes it
//     (fleet.Directory.WithGroup), guarded by the version it read, so two
//     nodes of one group, or two groups, publishing at once never
//     overwrite each other: the loser reads again at its next turn, and
//     finds the membership published or publishes it then.
//
// Not only the group's leader publishes: a node that has just joined a
// group may lead it before the directory names it, and then it is no
// member of the control group yet (the control group's leader adds the
// voters the directory names), and could not publish itself into it
// (fleet-routing seed 224: a spare promoted to voter won its group's
// next election, and the group's new membership was never published).
//
// Publishing is a turn every PublishEvery on each node: one proposal in
// flight at a time, and the directory's own check (a membership index
// must advance) refuses whatever is stale. Until a publication lands, callers route by
// the group's older voters and m_idx, which the owner's m_idx fence
// refuses: a lagging directory costs 503s, never a misroute.

// FleetConfig places a node's raft group in a fleet.
type FleetConfig struct {
	// Group is the node's data group: an index into Founding, or, with
	// Added, a group numbered from len(Founding) on.
	Group int
	// Founding is each data group's founding voters, at membership index
	// 1: the directory's first epoch, written once.
	Founding []fleet.Group
	// Added: the node's group is one added to the running fleet
	// (Node.AddGroup), not one of Founding. Until the directory names
	// it, the node's group holds nothing and publishes nothing; once it
	// does, the group holds only what a resize moves to it.
	Added bool
	// Control configures the node's replica of the control group. Its
	// Bootstrap names the control group's founding voters on those nodes
	// (empty on every other node: it starts empty and is added as a
	// learner); JournalName defaults to ControlJournal. Name and Addr are
	// the node's own, as in its data group.
	Control consensus.Config
	// PublishEvery is how often the node takes its publishing turn.
	// Default 100ms.
	PublishEvery time.Duration
}

// DirectoryKey is the control group's key that holds the directory.
const DirectoryKey = fleet.KeyPrefix + "directory"

// ControlJournal is the control replica's journal file, beside the data
// group's.
const ControlJournal = "control.journal"

// ControlFramePrefix is the first byte of a frame for the control group's
// replica: the raft frame follows it.
const ControlFramePrefix = 5

// ControlVoters is the control group's default bound on its voters
// (consensus.Config.MaxVoters): every node of the fleet follows it, and
// every node beyond the first five does as a learner, promoted when a
// voter leaves. Five voters survive two failures, and a fleet of many
// groups does not make every commit of the control group wait for a
// majority of all its nodes.
const ControlVoters = 5

func (c FleetConfig) withDefaults() FleetConfig {
	if c.Control.JournalName == "" {
		c.Control.JournalName = ControlJournal
	}
	if c.Control.MaxVoters == 0 {
		c.Control.MaxVoters = ControlVoters
	}
	if c.PublishEvery == 0 {
		c.PublishEvery = 100 * time.Millisecond
	}
	return c
}

// validate checks what Open cannot leave to the parts.
func (c FleetConfig) validate(data consensus.Config) error {
	if _, err := fleet.New(1, c.Founding); err != nil {
		return fmt.Errorf("node: fleet: founding groups: %w", err)
	}
	switch {
	case !c.Added && (c.Group < 0 || c.Group >= len(c.Founding)):
		return fmt.Errorf("node: fleet: group %d of %d founded", c.Group, len(c.Founding))
	case c.Added && (c.Group < len(c.Founding) || c.Group >= fleet.MaxGroups):
		return fmt.Errorf("node: fleet: an added group is numbered from %d (the founded groups) to %d, not %d", len(c.Founding), fleet.MaxGroups-1, c.Group)
	case c.PublishEvery <= 0:
		return errors.New("node: fleet: PublishEvery must be positive")
	case c.Control.JournalName == data.JournalName || c.Control.JournalName == FlowLog:
		return fmt.Errorf("node: fleet: the control journal %q would share a file with the data group", c.Control.JournalName)
	case c.Control.Name != data.Name:
		return fmt.Errorf("node: fleet: the control replica is named %q, the node %q", c.Control.Name, data.Name)
	}
	return nil
}

// prefixed sends each frame with a prefix byte before it.
type prefixed struct {
	net    dial.Sender
	prefix byte
}

func (s prefixed) Send(to dial.NodeID, frame []byte) error {
	out := make([]byte, 1+len(frame))
	out[0] = s.prefix
	copy(out[1:], frame)
	return s.net.Send(to, out)
}

// directoryView is the flow store's view of the fleet (flow.Fleet): the
// directory the control replica has applied, decoded once per version.
type directoryView struct {
	ctl   *consensus.Node
	data  *consensus.Node // the node's data group, whose log holds its fences
	group int
	rev   uint64 // the control KV's revision last looked at
	ver   uint64 // the directory value's version decoded
	// dir is nil when the value did not decode: the node then has no
	// directory, and refuses every flow, rather than route by a value it
	// cannot read.
	dir *fleet.Directory
	// The group's fences (fleet.Fences), from the data group's KV, decoded
	// once per version like the directory. A value that does not decode
	// fences every partition (fencesBad): a fence must never be read as
	// absent.
	fencesRev, fencesVer uint64
	fences               fleet.Fences
	fencesBad            bool
}

func (v *directoryView) Group() int { return v.group }

func (v *directoryView) Directory() *fleet.Directory {
	if rev := v.ctl.Revision(); rev != v.rev {
		v.rev = rev
		v.refresh()
	}
	return v.dir
}

func (v *directoryView) refresh() {
	e, ok := v.ctl.LocalGet(DirectoryKey)
	switch {
	case !ok:
		// Versions are the KV's revisions, which only grow: a value
		// written again later has a version no earlier one had.
		v.dir = nil
	case e.Version != v.ver:
		v.ver = e.Version
		d, err := fleet.Decode(e.Value)
		if err != nil {
			d = nil
		}
		v.dir = d
	}
}

// Fences is the group's fences as the data replica has applied them.
func (v *directoryView) Fences() fleet.Fences {
	if rev := v.data.Revision(); rev != v.fencesRev {
		v.fencesRev = rev
		e, ok := v.data.LocalGet(fleet.FencesKey)
		switch {
		case !ok:
			v.fencesVer, v.fences, v.fencesBad = 0, fleet.Fences{}, false
		case e.Version != v.fencesVer:
			v.fencesVer = e.Version
			f, err := fleet.DecodeFences(e.Value)
			v.fences, v.fencesBad = f, err != nil
		}
	}
	if v.fencesBad {
		return fleet.FenceAll
	}
	return v.fences
}

// publisher is the node's publishing turn.
type publisher struct {
	n     *Node
	cfg   FleetConfig
	bugs  bugs.Set
	view  *directoryView
	timer clock.Timer
	// inFlight counts the proposals and membership changes of ours not
	// answered yet: at most one (CheckInvariants holds it).
	inFlight int
	stopped  bool
	// copied is the move batch whose copy completed at this node (its
	// driver, the control group's leader): publish it next.
	copied *flow.Move
}

func (p *publisher) arm() {
	if !p.stopped {
		p.timer = p.n.clk.AfterFunc(p.cfg.PublishEvery, p.turn)
	}
}

func (p *publisher) stop() {
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
}

// turn does at most one thing. On the control group's leader: found the
// directory (once), add a voter the directory names that is not yet a
// member of the control group, as a learner, remove a member of the
// control group the directory names in no group, or take a resize's next
// step (drive: publish a batch whose copy is done, or fence the next;
// a batch's copy runs beside the turns). On any node that follows the
// control group: fence in its data group's log the moves out of its
// group the directory shows (fence), or publish its data group's
// membership, if it has applied a newer one than the directory names.
func (p *publisher) turn() {
	if p.stopped {
		return
	}
	defer p.arm()
	if p.inFlight > 0 {
		return
	}
	ctl := p.n.Control
	e, found := ctl.LocalGet(DirectoryKey)
	if ctl.IsLeader() {
		if !found {
			d, err := fleet.New(1, p.cfg.Founding)
			if err != nil {
				panic(err) // validated at Open
			}
			p.propose(kv.Txn([]kv.Guard{kv.Absent(DirectoryKey)}, []kv.Op{kv.Put(DirectoryKey, d.Encode())}, nil))
			return
		}
		if d := p.view.Directory(); d != nil {
			if m, ok := notFollowing(d, ctl.Membership()); ok {
				p.inFlight++
				ctl.AddLearner(consensus.Member{ID: m.ID, Name: m.Name, Addr: m.Peer, HTTP: m.HTTP}, func(error) { p.inFlight-- })
				return
			}
			if id, ok := unnamed(d, ctl.Membership()); ok && !p.bugs.KeepRemovedFollower {
				p.inFlight++
				ctl.RemoveMember(id, func(error) { p.inFlight-- })
				return
			}
			if p.drive(d, e.Version) {
				return
			}
		}
	} else {
		// Only the control group's leader drives a move's copy.
		p.n.Flow.StopMove()
		p.copied = nil
	}
	if d := p.view.Directory(); d != nil && p.fence(d) {
		return
	}
	if p.bugs.UnpublishedMembership {
		return
	}
	ms := p.n.Consensus.Membership()
	d := p.view.Directory() // nil while the value is absent: then !found
	if d == nil || p.cfg.Group >= d.Groups() || d.Group(p.cfg.Group).MIdx >= ms.Index {
		// (An added group the directory does not name yet publishes
		// nothing: Node.AddGroup names it.)
		return
	}
	voters := make([]fleet.Member, len(ms.Voters))
	for i, m := range ms.Voters {
		voters[i] = fleet.Member{ID: m.ID, Name: m.Name, Peer: m.Addr, HTTP: m.HTTP}
	}
	next, err := d.WithGroup(p.cfg.Group, fleet.Group{MIdx: ms.Index, Voters: voters})
	if err != nil {
		return // a membership the directory cannot name (no voters): nothing to publish
	}
	p.propose(kv.Txn([]kv.Guard{kv.VersionIs(DirectoryKey, e.Version)}, []kv.Op{kv.Put(DirectoryKey, next.Encode())}, nil))
}

// propose sends one compare-and-set of the directory through the control
// replica; a failed guard or an error is tried again at a later turn,
// from what the replica has applied by then.
func (p *publisher) propose(op kv.Op) {
	p.inFlight++
	p.n.Control.Propose(op, func(kv.Result, error) { p.inFlight-- })
}

// notFollowing returns a voter the directory names, of any group, that
// is not a member of the control group, if there is one: the first, by
// group and by id, so every run chooses alike.
func notFollowing(d *fleet.Directory, ctl consensus.Membership) (fleet.Member, bool) {
	in := map[dial.NodeID]bool{}
	for _, m := range ctl.Voters {
		in[m.ID] = true
	}
	for _, m := range ctl.Learners {
		in[m.ID] = true
	}
	for g := range d.Groups() {
		for _, m := range d.Group(g).Voters {
			if !in[m.ID] {
				return m, true
			}
		}
	}
	return fleet.Member{}, false
}

// unnamed returns a member of the control group that the directory names
// in no group, if there is one (the lowest id): a node removed from its
// data group, once its group has published the removal. It leaves the
// control group too, or it would count in the control group's quorum for
// good, a voter nobody runs. A node the directory has not named yet is
// no member of the control group either (it is added once named), so
// nothing is removed before it was added.
func unnamed(d *fleet.Directory, ctl consensus.Membership) (dial.NodeID, bool) {
	var out dial.NodeID
	for _, m := range append(append([]consensus.Member(nil), ctl.Voters...), ctl.Learners...) {
		if _, _, named := d.Member(m.ID); !named && (out == 0 || m.ID < out) {
			out = m.ID
		}
	}
	return out, out != 0
}

// Directory is the group directory this node's control replica has
// applied, as its flow store routes by it: nil outside a fleet, and until
// the replica holds one that decodes.
func (n *Node) Directory() *fleet.Directory {
	if n.view == nil {
		return nil
	}
	return n.view.Directory()
}

// greetFleet tells every node of the fleet this node knows of its boot
// epoch (transport.Link.Greet), at boot and whenever its directory moves
// to a new epoch: its data group's members, its control group's, and
// every group's voters. A node of another group may hear from this one
// first on a flow's call or a claim, and the envelope drops a request
// that names the wrong incarnation (after a restart, say) until the two
// have exchanged epochs: without the greeting that first call cost its
// whole deadline (fleet-routing's proxyOnce probe, through a node
// restarted 8s before). The real node greets its peers too, as it learns
// their addresses; at most one hello per peer per HelloEvery either way.
func (n *Node) greetFleet() {
	if n.Link == nil || n.view == nil {
		return
	}
	d := n.view.Directory()
	if d != nil && d.Epoch() == n.greeted {
		return
	}
	ids := map[dial.NodeID]bool{}
	for _, ms := range []consensus.Membership{n.Consensus.Membership(), n.Control.Membership()} {
		for _, m := range append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...) {
			ids[m.ID] = true
		}
	}
	if d != nil {
		n.greeted = d.Epoch()
		for g := range d.Groups() {
			for _, m := range d.Group(g).Voters {
				ids[m.ID] = true
			}
		}
	}
	delete(ids, n.Consensus.ID())
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		n.Link.Greet(id)
	}
}

// FleetGroup is the node's data group in its fleet; false outside a
// fleet.
func (n *Node) FleetGroup() (int, bool) {
	if n.view == nil {
		return 0, false
	}
	return n.view.group, true
}

// OnControlRevision registers f to be told of each revision the control
// replica applies (after the rollout's own cue), for a caller that follows
// the directory: the simulator's record of which directory each node held,
// the real node's peer addresses. Outside a fleet f is never called. f
// must not call back into the node.
func (n *Node) OnControlRevision(f func(rev uint64)) { n.onControlRevision = f }

// checkInvariants checks the publisher's bound: at most one proposal or
// membership change of its own in flight.
func (p *publisher) checkInvariants() error {
	if p.inFlight < 0 || p.inFlight > 1 {
		return fmt.Errorf("node: the fleet's publisher has %d calls in flight (at most 1)", p.inFlight)
	}
	return nil
}
