package scenarios

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"
	raftpb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// clusterCheckers are what every consensus cluster is judged by: sampled
// while it runs (replica-agreement, promotion, lease-stream), at the
// lease calls (lease-answer) and at finish (kv-linearizability,
// lease-safety, votes, and liveness: every client call resolved).
var clusterCheckers = []string{"replica-agreement", "promotion", "lease-stream", "lease-answer",
	"kv-linearizability", "lease-safety", "lease-lapse", "votes", "liveness", "call-deadline"}

// raftCluster is the harness the consensus scenarios share: machines, the
// consensus node running on each, client workloads that record histories,
// and the checkers that judge them from outside the nodes.
type raftCluster struct {
	names []string // checkNow's scratch list of voter names
	run   *Run
	k     *sim.Kernel
	nw    *netsim.Network
	nodes []*sim.Machine
	byID  map[dial.NodeID]*sim.Machine
	live  map[string]*consensus.Node
	cfg   consensus.Config

	// place places each node's raft group in a fleet of several
	// (harness_fleet.go), given the node's name and its data group's
	// configuration; nil: the cluster is the whole fleet.
	place func(name string, data consensus.Config) *node.FleetConfig
	// faultsUntil is when the disk's faults stop, and with them the
	// frames a sender garbles (garbleProposals, garbleFrames).
	faultsUntil time.Duration
	// lossless is a cluster whose scenario's checkers count on no frame
	// between nodes being lost (durability-restart: a lost push would
	// leave an async write fewer copies than its crash schedule says):
	// garbleFrames, whose garbled frames are lost ones, leaves it be.
	lossless bool
	// With flowCfg set, every node also runs a flow store (core/node).
	flowCfg *flow.Config
	flows   map[string]*flow.Store
	// proxies are the nodes' proxyOnce claim services (flow clusters);
	// proxyCfg configures them, and adminKeys decide their admin acts
	// (node.Config.AdminKeys).
	proxies   map[string]*proxyonce.Service
	proxyCfg  proxyonce.ServiceConfig
	adminKeys transport.Keys
	// nds are the flow nodes' latest incarnations, by name.
	nds map[string]*node.Node
	// adminActs are the joins and removals an operator asked of this
	// group through node.Node.Join and Remove (adminAct).
	adminActs []*checker.AdminAct
	// onBoot, if set, is told of every flow node that boots, as it
	// boots: the shell a scenario runs beside the core (one-server).
	onBoot func(m *sim.Machine, env *sim.Env, nd *node.Node)

	hist *linearizability.History
	// leaseCalls is every lease call clients made, in call order.
	leaseCalls []checker.LeaseCall
	// streams judges each node's watch stream; a restart or a skip in the
	// stream starts a new one.
	streams map[string]*checker.LeaseStream

	agreement  *checker.ReplicaAgreement
	eventsSeen map[string]eventCursor
	// votes is every vote a node granted, as the network saw it sent.
	votes []checker.VoteGrant
	// memberships is the record of every committed membership and the
	// instant the first node applied it.
	memberships []checker.MembershipChange
	seenM       map[uint64]bool
	promotions  *checker.Promotions

	// clientDeadline bounds how long a client waits for any answer.
	clientDeadline time.Duration
	// clientsWaiting counts, per node, the KV clients' calls through it
	// not yet answered nor given up: the clients' record, by which a
	// scenario may aim a call at a node the clients keep busy.
	clientsWaiting map[dial.NodeID]int
	// unanswered are the KV calls whose node gave no answer, not even
	// ErrTimeout, by the client's deadline (call-deadline judges them).
	unanswered []unanswered
	// faults describes the faults a scenario injected on its own (not
	// through Chaos), for the run's report.
	faults string
	// The client workloads started (with ClientsOff, the ones that would
	// have been): their work is reported for the floors.
	kvClients, leaseClients int
	kvBounds                kvBounds                 // the KV's drawn bounds (drawKVBounds); zero: the defaults
	garbling                bool                     // the run garbles forwarded proposals (garbleProposals)
	appendedChanges         []checker.AppendedChange // watchOwnRemovals' record
	// onRemovalSent, if set, hears each removal watchOwnRemovals sees
	// the network carry, with the frame's receiver (a scenario aims
	// faults by it).
	onRemovalSent func(to dial.NodeID, ch checker.AppendedChange)
	// onApplied, if set, is told of each membership a node applies (or
	// an installed snapshot brings), inside that node's step.
	onApplied func(n *sim.Machine, ms consensus.Membership)
	// timing is the protocol timings the run drew.
	timing timing

	// With keys set (seal), every flow node puts its frames in the
	// envelope (core/transport); the simulator holds the keys too, and
	// reads what crossed the wire with observer. admitted is every frame
	// the adversary made that a node's envelope let through.
	keys     *transport.Keys
	observer *transport.Observer
	links    map[string]*transport.Link // each node's envelope, latest incarnation
	// lastSealed and lastPlain are the last frame plain opened, and what
	// it held.
	lastSealed, lastPlain []byte
	adversary             *netsim.Adversary
	admitted              []checker.AdversaryFrame
}

// drawEnvelope turns the envelope on in half the runs (knob envelope),
// with keys drawn from its own stream: a scenario about something else
// then also runs the envelope's classifiers over its frames, which a
// scenario whose frames are never sealed never does.
func drawEnvelope(run *Run, c *raftCluster) {
	if keys := drawKeys(run); keys != nil {
		c.seal(*keys)
	}
}

// drawKeys is drawEnvelope's draw: the envelope's keys, or nil in the
// runs without it. A fleet draws once for all its groups.
func drawKeys(run *Run) *transport.Keys {
	r := run.Kernel.Stream("knobs/envelope")
	on := r.IntN(2) == 0
	run.Knob("envelope", on)
	if !on {
		return nil
	}
	keys := transport.Keys{Control: make([]byte, transport.KeySize), Data: make([]byte, transport.KeySize)}
	for i := range transport.KeySize {
		keys.Control[i], keys.Data[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	return &keys
}

// seal turns the envelope on for every node booted from now on.
func (c *raftCluster) seal(keys transport.Keys) {
	c.keys, c.observer, c.links = &keys, transport.NewObserver(keys), map[string]*transport.Link{}
}

// plain is a frame's contents as the simulator reads them: the frame
// itself, or, with the envelope on, what it seals, opened with the keys
// the simulator holds. Nil for a frame that does not open.
//
// Every watcher reads every fate of a frame (sent, each copy delivered or
// lost) in turn, so the last frame opened is kept: holding its bytes keeps
// the address from being reused by another frame while it is the key.
func (c *raftCluster) plain(frame []byte) []byte {
	if c.observer == nil {
		return frame
	}
	if len(frame) > 0 && len(frame) == len(c.lastSealed) && &frame[0] == &c.lastSealed[0] {
		return c.lastPlain
	}
	_, p, ok := c.observer.Open(frame)
	if !ok {
		p = nil
	}
	c.lastSealed, c.lastPlain = frame, p
	return p
}

// admit is the simulator's record of what a node's envelope let through:
// a frame handed over while the adversary was delivering one of its own
// is one it made.
func (c *raftCluster) admit(dial.NodeID, []byte) {
	if c.adversary == nil {
		return
	}
	if inj, ok := c.adversary.Delivering(); ok {
		c.admitted = append(c.admitted, checker.AdversaryFrame{Attack: inj.Attack, To: inj.To, At: inj.At})
	}
}

type eventCursor struct {
	inc     uint64
	version uint64
}

func newRaftCluster(run *Run, names []string, founders int, netCfg netsim.Config, disk sim.DiskConfig) *raftCluster {
	return newGroupCluster(run, netsim.New(run.Kernel, netCfg), names, founders, disk, nil)
}

// newGroupCluster is newRaftCluster on the network nw, which other raft
// groups of a fleet may share: place gives each node its place in the
// fleet (nil: the cluster is the whole fleet). The run's supervisor and
// panic hook are installed by the first cluster of a run only.
func newGroupCluster(run *Run, nw *netsim.Network, names []string, founders int, disk sim.DiskConfig, place func(string, consensus.Config) *node.FleetConfig) *raftCluster {
	k := run.Kernel
	c := &raftCluster{
		run:            run,
		k:              k,
		nw:             nw,
		place:          place,
		byID:           map[dial.NodeID]*sim.Machine{},
		live:           map[string]*consensus.Node{},
		flows:          map[string]*flow.Store{},
		proxies:        map[string]*proxyonce.Service{},
		nds:            map[string]*node.Node{},
		hist:           linearizability.NewHistory(0),
		streams:        map[string]*checker.LeaseStream{},
		agreement:      checker.NewReplicaAgreement(),
		eventsSeen:     map[string]eventCursor{},
		seenM:          map[uint64]bool{1: true},
		promotions:     checker.NewPromotions(),
		clientDeadline: 3 * time.Second,
		clientsWaiting: map[dial.NodeID]int{},
	}
	c.nw.Watch(func(s netsim.Sending) {
		frame := c.plain(s.Frame)
		if s.Fate != netsim.Sent || len(frame) == 0 || frame[0] != consensus.FramePrefix || c.byID[s.From] == nil || !consensus.MayBeVoteResp(frame) {
			return
		}
		if info, err := consensus.DecodeFrame(frame); err == nil && info.Kind == consensus.FrameVoteResp && !info.Reject {
			c.votes = append(c.votes, checker.VoteGrant{Voter: info.From, Candidate: info.To, Term: info.Term, At: c.k.Now()})
		}
	})
	b := run.Bugs()
	c.cfg = consensus.Config{KV: kv.Config{Bugs: b}, Journal: journal.Config{Bugs: b}, Bugs: b}
	c.timing = drawTiming(run)
	c.timing.applyConsensus(&c.cfg)
	if run.callBounds {
		c.drawKVBounds()
	}
	var boot []consensus.Member
	var founding []dial.NodeID
	for _, name := range names[:founders] {
		boot = append(boot, consensus.NewMember(name, name+":7000"))
		founding = append(founding, dial.IDFromName(name))
	}
	c.memberships = []checker.MembershipChange{{Index: 1, Voters: founding}}
	if !run.supervised {
		run.supervised = true
		k.OnNodePanic(func(n *sim.Machine, v any) {
			run.Fail("node-panic", "%s: %v", n.Name(), v)
		})
		supervise(run)
	}
	for i, name := range names {
		name := name
		founder := i < founders
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			cfg := c.cfg
			cfg.Name, cfg.Addr = name, name+":7000"
			if founder {
				cfg.Bootstrap = boot
			}
			if c.flowCfg != nil {
				ncfg := node.Config{Consensus: cfg, Flow: *c.flowCfg, ProxyOnce: c.proxyCfg, AdminKeys: c.adminKeys}
				nenv := node.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand, Worker: env.Disk}
				if c.place != nil {
					ncfg.Fleet = c.place(name, cfg)
				}
				if c.keys != nil {
					ncfg.Transport = transport.Config{Keys: *c.keys, Bugs: b}
					nenv.Admitted = c.admit
				}
				nd, err := node.Open(ncfg, nenv)
				if err != nil {
					err = haltOnIO(err, env.Disk)
					run.Fail("boot", "%s: %v", name, err)
					delete(c.live, name)
					delete(c.flows, name)
					delete(c.nds, name)
					return dial.HandlerFunc(func(dial.NodeID, []byte) {})
				}
				c.live[name], c.flows[name], c.proxies[name], c.nds[name] = nd.Consensus, nd.Flow, nd.ProxyOnce, nd
				if nd.Link != nil {
					c.links[name] = nd.Link
				}
				nd.Consensus.OnMembership(c.membershipApplied(name))
				if c.onBoot != nil {
					c.onBoot(c.byID[dial.IDFromName(name)], env, nd)
				}
				return nd
			}
			cn, err := consensus.Open(cfg, consensus.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand, Worker: env.Disk})
			if err != nil {
				err = haltOnIO(err, env.Disk)
				run.Fail("boot", "%s: %v", name, err)
				delete(c.live, name)
				return dial.HandlerFunc(func(dial.NodeID, []byte) {})
			}
			c.live[name] = cn
			cn.OnMembership(c.membershipApplied(name))
			return cn
		}, c.nw, disk)
		c.nodes = append(c.nodes, n)
		c.byID[n.ID()] = n
	}
	if disk.SyncFailProb > 0 && !run.noAimedIO && place == nil {
		aimIOErrors(run, c.nodes, disk.FaultsUntil) // a fleet aims at all its nodes at once (fleetSetup)
	}
	aimBootFaults(run, c.nodes, cmp.Or(c.cfg.JournalName, consensus.DefaultJournalName), disk.FaultsUntil)
	c.faultsUntil = disk.FaultsUntil
	c.garbleProposals()
	c.garbleSnapshots()
	return c
}

// malformedUnexplained reports whether a command proposed at call and
// refused as malformed (kv.ErrMalformed) was refused for bytes no fault
// made: the proposer encoded it, so only garbleProposals can have changed
// them, and only before the faults stop. Such a refusal is a decoder that
// disagrees with its encoder (checker kv-refusals).
func (c *raftCluster) malformedUnexplained(call time.Duration, res kv.Result) bool {
	return errors.Is(res.Err, kv.ErrMalformed) && !(c.garbling && call < c.faultsUntil)
}

// garbleProposals makes, in a third of the runs until the faults stop,
// one in ten commands a follower forwards to its leader leave cut short,
// or with bytes after their end: what a peer of another version, or one
// whose memory garbled the bytes before it sent them, puts on the wire.
// The KV's encoding has no optional tail, so no proper prefix of a
// command is one, nor is a command with bytes after it (core/kv's
// decoder refuses both): every replica must refuse the entry alike,
// and its proposer's client is told it was refused. A decoder that took
// one would apply a command no client asked for, which kv-linearizability
// and replica-agreement see; before this, no run's log held a malformed
// entry, and the readers of a command's bytes were judged by the unit
// tests alone. Only the forwarded proposal is garbled: what the leader
// appends reaches every replica the same. Its own stream: the draws
// above are the same. In a fleet each group garbles its own nodes'.
func (c *raftCluster) garbleProposals() {
	r := c.k.Stream("faults/garble")
	on := r.IntN(3) == 0
	c.run.Knob("garbled_proposals", on)
	if !on {
		return
	}
	c.garbling = true
	c.nw.RewriteIf(func(from, to dial.NodeID, frame []byte) []byte {
		// The type byte first: a whole decode of every frame would be
		// the most of this fault's cost.
		if t, ok := consensus.FrameType(frame); c.k.Now() >= c.faultsUntil || !ok || t != raftpb.MsgProp || c.byID[from] == nil {
			return nil
		}
		var m raftpb.Message
		if m.Unmarshal(frame[1:]) != nil || m.Type != raftpb.MsgProp {
			return nil
		}
		changed := false
		for i, e := range m.Entries {
			if e.Type != raftpb.EntryNormal || len(e.Data) <= consensus.ProposalIDBytes || r.IntN(10) != 0 {
				continue
			}
			b := append([]byte(nil), e.Data[:consensus.ProposalIDBytes]...)
			what := "cut short"
			if payload := e.Data[consensus.ProposalIDBytes:]; r.IntN(2) == 0 {
				b = append(b, payload[:r.IntN(len(payload))]...)
			} else {
				b = append(b, payload...)
				for range 1 + r.IntN(3) {
					b = append(b, byte(r.IntN(256)))
				}
				what = "with bytes after its end"
			}
			m.Entries[i].Data = b
			changed = true
			c.run.Did("garbled-proposals", 1)
			c.k.Logf("garble a command %s forwards to %s: %s", c.k.Machine(from).Name(), c.k.Machine(to).Name(), what)
		}
		if !changed {
			return nil
		}
		out, err := m.Marshal()
		if err != nil {
			return nil
		}
		return append([]byte{consensus.FramePrefix}, out...)
	})
}

// garbleSnapshots makes, in a third of the runs until the faults stop,
// half the snapshots this group's nodes send each other leave with their
// data cut short (to nothing, at times; a quarter of the cuts within its
// first 64 bytes: the membership, the session table), with bytes after
// its end, with a version byte no node knows, or, one in sixteen, with no
// snapshot in the message at all: garbleProposals' fault, for the one
// raft message that carries state.
// Neither the envelope nor the KV state inside it has an optional tail,
// so the receiver must refuse such a snapshot whole, as a lost frame
// (core/consensus checkSnapshot), and the leader sends it again. One
// taken would be written to the receiver's journal and fail to restore
// (planted bug unchecked-snapshot: halt-cause, then boot), and one a
// lenient decoder read part of would install a state no replica has
// (replica-agreement, kv-linearizability). Frames are lost, so a
// lossless cluster is left alone; so are sealed frames (the envelope's
// tag refuses any garbled byte). Its own stream.
func (c *raftCluster) garbleSnapshots() {
	r := c.k.Stream("faults/garble-snapshots")
	on := r.IntN(3) == 0 && !c.lossless
	c.run.Knob("garbled_snapshots", on)
	if !on {
		return
	}
	c.nw.RewriteIf(func(from, to dial.NodeID, frame []byte) []byte {
		if t, ok := consensus.FrameType(frame); c.k.Now() >= c.faultsUntil || !ok || t != raftpb.MsgSnap || c.byID[from] == nil {
			return nil
		}
		var m raftpb.Message
		if m.Unmarshal(frame[1:]) != nil || m.Type != raftpb.MsgSnap || m.Snapshot == nil || len(m.Snapshot.Data) < 2 || r.IntN(2) != 0 {
			return nil
		}
		d := m.Snapshot.Data
		var what string
		switch x := r.IntN(16); {
		case x < 7:
			cut := r.IntN(len(d))
			if r.IntN(4) == 0 {
				cut = r.IntN(min(64, len(d)))
			}
			d, what = d[:cut], fmt.Sprintf("cut to %d of its %d bytes", cut, len(d))
		case x < 14:
			d = append([]byte(nil), d...)
			for range 1 + r.IntN(3) {
				d = append(d, byte(r.IntN(256)))
			}
			what = "with bytes after its end"
		case x < 15:
			// A version this node does not know: a peer's newer one.
			d = append([]byte{byte(4 + r.IntN(252))}, d[1:]...)
			what = "with an unknown version"
		default:
			// No snapshot at all: raft would take the message's empty
			// snapshot field for one and fail on it.
			m.Snapshot, what = nil, "with no snapshot in it"
		}
		if m.Snapshot != nil {
			m.Snapshot.Data = d
		}
		out, err := m.Marshal()
		if err != nil {
			return nil
		}
		c.run.Did("garbled-snapshots", 1)
		c.k.Logf("garble a snapshot %s sends %s: %s", c.k.Machine(from).Name(), c.k.Machine(to).Name(), what)
		return append([]byte{consensus.FramePrefix}, out...)
	})
}

// watchOwnRemovals records, while the committed membership has two
// voters, every change a leader's append carries that takes a voter out,
// as the network saw the leader send it (accepted or refused: either way
// it had appended the change), for checkOwnRemovals. Appends are decoded
// only then: the rule is about groups of two.
func (c *raftCluster) watchOwnRemovals() {
	c.nw.Watch(func(s netsim.Sending) {
		if s.Fate != netsim.Sent && s.Fate != netsim.Refused || c.byID[s.From] == nil || len(c.committed().Voters) != 2 {
			return
		}
		frame := s.Meant
		if frame == nil {
			frame = s.Frame
		}
		frame = c.plain(frame)
		if len(frame) == 0 || frame[0] != consensus.FramePrefix {
			return
		}
		from, term, changes, err := consensus.AppendConfChanges(frame)
		if err != nil {
			return
		}
		for _, ch := range changes {
			if ch.Out != 0 {
				a := checker.AppendedChange{Leader: from, Term: term, Index: ch.Index, EntryTerm: ch.Term, Out: ch.Out, At: c.k.Now()}
				c.appendedChanges = append(c.appendedChanges, a)
				if c.onRemovalSent != nil && s.Fate == netsim.Sent {
					c.onRemovalSent(s.To, a)
				}
			}
		}
	})
}

// checkOwnRemovals judges what watchOwnRemovals recorded (checker
// own-removal).
func (c *raftCluster) checkOwnRemovals() {
	judged := checker.OwnRemoval(c.run, c.appendedChanges, c.memberships, func(id dial.NodeID) string { return c.byID[id].Name() })
	c.run.Logf("own-removal: %d appended removals from groups of two judged", judged)
}

// membershipApplied is the callback node name's consensus tells of each
// membership it applies: recorded, then handed to onApplied.
func (c *raftCluster) membershipApplied(name string) func(consensus.Membership) {
	return func(ms consensus.Membership) {
		c.recordMembership(ms)
		if c.onApplied != nil {
			c.onApplied(c.byID[dial.IDFromName(name)], ms)
		}
	}
}

// recordMembership notes the first instant any node applied a membership.
func (c *raftCluster) recordMembership(ms consensus.Membership) {
	if c.seenM[ms.Index] {
		return
	}
	c.seenM[ms.Index] = true
	c.checkPromotions(ms)
	ids := func(ms []consensus.Member) []dial.NodeID {
		out := make([]dial.NodeID, len(ms))
		for i, m := range ms {
			out[i] = m.ID
		}
		return out
	}
	c.memberships = append(c.memberships, checker.MembershipChange{Index: ms.Index, Voters: ids(ms.Voters), Learners: ids(ms.Learners), At: c.k.Now()})
}

// committed is the newest membership the record holds: the latest any
// node has applied, whichever nodes are up now (membership reads what
// the live nodes hold, which may all be behind).
func (c *raftCluster) committed() checker.MembershipChange {
	var best checker.MembershipChange
	for _, m := range c.memberships {
		if m.Index >= best.Index {
			best = m
		}
	}
	return best
}

// node returns the consensus node running on machine n, if it is up.
func (c *raftCluster) node(n *sim.Machine) *consensus.Node {
	if !n.Up() {
		return nil
	}
	return c.live[n.Name()]
}

// call runs f against machine n's consensus node as a client request
// arriving there; it reports false (refused) if the node is down.
func (c *raftCluster) call(n *sim.Machine, f func(*consensus.Node)) bool {
	cn := c.node(n)
	if cn == nil {
		return false
	}
	return n.Exec(func() { f(cn) })
}

// confCall asks n, through call, for a membership change, as the
// operator does, and holds n to call-deadline for it as for a KV call:
// some answer within its ProposalTimeout, whatever became of the change
// (raft dropped it, the calls-in-flight bound refused it, it timed out).
// The operator retries by the membership it sees, not by the answer, so
// a change left unanswered went unseen before.
func (c *raftCluster) confCall(n *sim.Machine, what string, call func(cn *consensus.Node, done func(error))) {
	at := c.k.Now()
	answered := false
	if !c.call(n, func(cn *consensus.Node) { call(cn, func(error) { answered = true }) }) {
		return
	}
	c.k.After(c.clientDeadline, sim.EvClient, xxhash.Sum64String(what), func() {
		if !answered {
			c.unanswered = append(c.unanswered, unanswered{client: -1, key: what, node: n, call: at, gave: c.k.Now(), busy: n.Local() > c.k.Now()})
		}
	})
}

// busiest is the node of ns, up, through which the KV clients wait on
// the most calls (the first of equals; nil if none is up).
func (c *raftCluster) busiest(ns []*sim.Machine) *sim.Machine {
	var best *sim.Machine
	for _, n := range ns {
		if n.Up() && (best == nil || c.clientsWaiting[n.ID()] > c.clientsWaiting[best.ID()]) {
			best = n
		}
	}
	return best
}

// whenBusy calls f with the node of ns the KV clients keep busiest, as
// soon as the clients' record shows one holding as many calls as the
// run's calls-in-flight bound (checked every 5 ms), or with the busiest
// after patience has passed, or at once if the run has no such bound.
func (c *raftCluster) whenBusy(ns []*sim.Machine, patience time.Duration, f func(*sim.Machine)) {
	until := c.k.Now() + patience
	var poll func()
	poll = func() {
		b := c.busiest(ns)
		if b == nil || c.timing.callsInFlight == 0 || c.clientsWaiting[b.ID()] >= c.timing.callsInFlight || c.k.Now() >= until {
			f(b)
			return
		}
		c.k.After(5*time.Millisecond, sim.EvClient, xxhash.Sum64String("when busy"), poll)
	}
	poll()
}

// adminAct is the record of the operator's join (or removal) of n that
// *current holds, made at its first ask (admin-acts judges each:
// checkAdminActs).
func (c *raftCluster) adminAct(current **checker.AdminAct, join bool, n *sim.Machine) *checker.AdminAct {
	if *current == nil {
		*current = &checker.AdminAct{Join: join, Node: n.ID(), Asked: c.k.Now()}
		c.adminActs = append(c.adminActs, *current)
	}
	return *current
}

// checkAdminActs judges the operator's joins and removals against the
// membership record (admin-acts), if it asked any.
func (c *raftCluster) checkAdminActs(calm time.Duration) {
	if len(c.adminActs) == 0 {
		return
	}
	acts := make([]checker.AdminAct, len(c.adminActs))
	for i, a := range c.adminActs {
		acts[i] = *a
	}
	name := func(id dial.NodeID) string { return c.k.Machine(id).Name() }
	c.run.Did("admin-acts", checker.AdminActs(c.run, acts, c.memberships, calm, c.k.Now(), name))
}

// callNode is call for a flow node: f runs against machine n's node as
// a client request arriving there; false (refused) if it is down.
func (c *raftCluster) callNode(n *sim.Machine, f func(*node.Node)) bool {
	nd := c.nds[n.Name()]
	if nd == nil || c.node(n) == nil {
		return false
	}
	return n.Exec(func() { f(nd) })
}

// answer wraps a client's callback so that only the first of "the node
// answered" and "the client gave up" counts, and an answer from a process
// that crashed after the call cannot arrive.
type answer struct {
	done   bool
	onDone func() // if set, runs at the first answer
}

func (a *answer) once() bool {
	if a.done {
		return false
	}
	a.done = true
	if a.onDone != nil {
		a.onDone()
	}
	return true
}

// clocks is the simulator's record of the cluster's clocks, for the
// lease checker.
type clocks struct{ c *raftCluster }

func (cl clocks) OffsetAt(node string, t time.Duration) time.Duration {
	for _, n := range cl.c.nodes {
		if n.Name() == node {
			return n.Clock().OffsetAt(t)
		}
	}
	panic("scenarios: no node " + node)
}

func (cl clocks) MinOffset(from, to time.Duration) time.Duration {
	lo, _ := cl.offsets(from, to)
	return lo
}

func (cl clocks) MaxOffset(from, to time.Duration) time.Duration {
	_, hi := cl.offsets(from, to)
	return hi
}

// offsets is the smallest and largest offset any node's clock had in
// [from, to].
func (cl clocks) offsets(from, to time.Duration) (lo, hi time.Duration) {
	lo, hi = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, n := range cl.c.nodes {
		l, h := n.Clock().OffsetRange(from, to)
		lo, hi = min(lo, l), max(hi, h)
	}
	return lo, hi
}

// checkLeases judges the holders' beliefs at true instants.
func (c *raftCluster) checkLeases() {
	checker.LeaseExclusive(c.run, checker.LeaseBeliefs(c.leaseCalls, clocks{c}))
	checker.LeaseLapse(c.run, c.leaseCalls, clocks{c})
}

// startChecks samples every node on a timer: replica agreement, membership
// agreement and the watch stream's own rules.
func (c *raftCluster) startChecks(every time.Duration) {
	var tick func()
	tick = func() {
		c.checkNow()
		c.k.After(every, sim.EvCheck, 0, tick)
	}
	c.k.After(every, sim.EvCheck, 0, tick)
}

func (c *raftCluster) checkNow() {
	for _, n := range c.nodes {
		cn := c.node(n)
		if cn == nil {
			continue
		}
		idx, dig := cn.Digest()
		c.agreement.Applied(c.run, n.Name(), idx, dig)
		ms := cn.Membership()
		c.names = appendMemberNames(c.names[:0], ms.Voters)
		c.agreement.Voters(c.run, n.Name(), ms.Index, c.names)
		c.checkEvents(n, cn)
	}
}

// checkPromotions judges a membership the instant the first node applies
// it (checker.Promotions), with what each promoted node held read from
// its own journal.
func (c *raftCluster) checkPromotions(ms consensus.Membership) {
	lag := c.cfg.PromoteLag
	if lag == 0 {
		lag = 8 // consensus's default
	}
	held := func(id dial.NodeID) (uint64, bool) {
		cn := c.node(c.byID[id])
		if cn == nil {
			return 0, false
		}
		return cn.LastIndex(), true
	}
	name := func(id dial.NodeID) string { return c.byID[id].Name() }
	if n := c.promotions.Membership(c.run, ms.Index, memberIDs(ms.Learners), memberIDs(ms.Voters), lag, held, name); n > 0 {
		c.run.Did("promotions", n)
	}
}

// checkEvents reads the watch events a node applied since the last look
// and holds them to the lease rules: applied time never goes back, and an
// Expired event only reports a lease whose deadline had passed.
func (c *raftCluster) checkEvents(n *sim.Machine, cn *consensus.Node) {
	cur := c.eventsSeen[n.Name()]
	if cur.inc != n.Incarnation() {
		// A restarted node replays from its snapshot: watch it afresh.
		cur = eventCursor{inc: n.Incarnation()}
		c.streams[n.Name()] = checker.NewLeaseStream(n.Name())
	}
	for {
		evs, err := cn.Events(cur.version, 256)
		if err != nil {
			// The node's event log no longer reaches back to our cursor
			// (a burst of changes, or a snapshot installed): resume from
			// what it still holds; the gap is not judged, and what we knew
			// of its leases is stale.
			cur.version = cn.Revision()
			c.streams[n.Name()].Skip()
			break
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			c.streams[n.Name()].Event(c.run, ev, c.leaseCalls)
			cur.version = ev.Version
		}
	}
	c.eventsSeen[n.Name()] = cur
}

func memberIDs(ms []consensus.Member) []dial.NodeID {
	out := make([]dial.NodeID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func memberNames(ms []consensus.Member) []string {
	return appendMemberNames(make([]string, 0, len(ms)), ms)
}

// appendMemberNames appends the names of ms to out, sorted.
func appendMemberNames(out []string, ms []consensus.Member) []string {
	n := len(out)
	for _, m := range ms {
		out = append(out, m.Name)
	}
	sort.Strings(out[n:])
	return out
}

// checkLinearizable runs porcupine over the KV history.
func (c *raftCluster) checkLinearizable() {
	c.run.TimeCheck("kv-linearizability", func() { checker.KVLinearizable(c.run, c.hist, c.run.CheckTimeout) })
}

// checkLiveness runs after the calm phase has lasted settle: some node
// must lead with a quorum's acknowledgement, and through every node a
// write must be applied and then read back by a linearizable read. A
// healed cluster answers both kinds of call: with writes alone probed, a
// node whose reads never finished passed (every read timed out, an
// unknown outcome the history forgives).
func (c *raftCluster) checkLiveness(members []*sim.Machine, settle time.Duration, done func()) {
	c.k.After(settle, sim.EvCheck, xxhash.Sum64String("liveness"), func() {
		leaders := 0
		for _, n := range members {
			if cn := c.node(n); cn != nil && cn.IsLeader() {
				leaders++
			}
		}
		if leaders != 1 {
			c.run.Fail("liveness", "%d nodes lead with a quorum %v after the faults healed", leaders, settle)
		}
		// A probe write through every node, retried every 100ms (a node
		// may still be learning who leads), must be applied within 3s,
		// and read back through the same node.
		pending := map[string]error{}
		deadline := c.k.Now() + 3*time.Second
		// readBack reads the probe's key through n: found, as written. A
		// failed read leaves the node pending; the next probe round
		// writes and reads again.
		readBack := func(n *sim.Machine) {
			name := n.Name()
			c.call(n, func(cn *consensus.Node) {
				cn.Read("probe/"+name, func(e kv.Entry, found bool, err error) {
					if _, waiting := pending[name]; !waiting {
						return
					}
					switch {
					case err != nil:
						pending[name] = fmt.Errorf("read back: %w", err)
					case !found || string(e.Value) != "ok":
						pending[name] = fmt.Errorf("read back: found=%v value=%q after the write was applied", found, e.Value)
					default:
						delete(pending, name)
					}
				})
			})
		}
		var probe func(n *sim.Machine)
		probe = func(n *sim.Machine) {
			name := n.Name()
			if _, waiting := pending[name]; !waiting || c.k.Now() >= deadline {
				return
			}
			c.call(n, func(cn *consensus.Node) {
				cn.Propose(kv.Put("probe/"+name, []byte("ok")), func(res kv.Result, err error) {
					if _, waiting := pending[name]; !waiting {
						return // an earlier attempt's late answer; one success is enough
					}
					if err == nil && res.Err == nil {
						readBack(n)
						return
					}
					if err == nil {
						err = res.Err
					}
					pending[name] = err
				})
			})
			c.k.After(100*time.Millisecond, sim.EvCheck, xxhash.Sum64String("probe "+name), func() { probe(n) })
		}
		for _, n := range members {
			pending[n.Name()] = fmt.Errorf("no answer")
			probe(n)
		}
		c.k.At(deadline, sim.EvCheck, xxhash.Sum64String("probe"), func() {
			gone := c.removedSince(members)
			for _, n := range members {
				if err, ok := pending[n.Name()]; ok && !gone[n.Name()] {
					c.run.Fail("liveness", "no write through %s was applied and read back within 3s of a healed, settled cluster (last: %v)\n%s",
						n.Name(), err, c.statusLines())
				}
			}
			if done != nil {
				done()
			}
		})
	})
}

// removedSince names the nodes of members that the membership no longer
// lists: a removal proposed before calm may commit after it, and a
// removed node need not learn its removal (the leader stops sending to
// it), so it answers for its flows with the fence's refusal for good.
// The checks of a healed cluster hold only the members that stay to
// serving (imposter-scenarios seed 2075: n1's removal, asked before
// calm at 22 s, committed at 23.9 s, after the probes' members were
// drawn).
func (c *raftCluster) removedSince(members []*sim.Machine) map[string]bool {
	gone := map[string]bool{}
	for _, n := range members {
		if !c.isMember(n.ID()) {
			gone[n.Name()] = true
			c.k.Logf("%s was removed after calm: not held to serving", n.Name())
		}
	}
	return gone
}

// statusLines describes every node's raft state, for a failure message.
func (c *raftCluster) statusLines() string {
	var out string
	for _, n := range c.nodes {
		st := "down"
		if cn := c.node(n); cn != nil {
			st = cn.Status()
		}
		out += fmt.Sprintf("    %s (%v): %s\n", n.Name(), n.ID(), st)
	}
	return out
}

// crashRecord is the simulator's record of the cluster's crashes, for the
// durability checker, which reads it after the run, when it no longer
// changes: each node's windows are built once (newCrashRecord), not for
// every read and write the checker weighs.
type crashRecord struct {
	c      *raftCluster
	memo   map[dial.NodeID][]checker.DownWindow // read only once made
	stalls map[dial.NodeID][]checker.DownWindow // the same, for Stalls
}

func newCrashRecord(c *raftCluster) crashRecord {
	return crashRecord{c: c, memo: map[dial.NodeID][]checker.DownWindow{}, stalls: map[dial.NodeID][]checker.DownWindow{}}
}

func (r crashRecord) Downs(id dial.NodeID) []checker.DownWindow {
	if w, ok := r.memo[id]; ok {
		return w
	}
	stops := r.c.byID[id].Stops()
	out := make([]checker.DownWindow, len(stops))
	for i, st := range stops {
		out[i] = checker.DownWindow{From: st.From, To: st.To, Orderly: st.Orderly}
	}
	r.memo[id] = out
	return out
}

func (r crashRecord) Name(id dial.NodeID) string { return r.c.byID[id].Name() }

// Stalls is every span in which id's disk or process stood still, by
// when each began (checker.StallRecord).
func (r crashRecord) Stalls(id dial.NodeID) []checker.DownWindow {
	if w, ok := r.stalls[id]; ok {
		return w
	}
	n := r.c.byID[id]
	out := []checker.DownWindow{}
	add := func(from, to []time.Duration) {
		for i := range from {
			out = append(out, checker.DownWindow{From: from[i], To: to[i]})
		}
	}
	add(n.Disk().StallSpans())
	add(n.FrozenSpans())
	slices.SortFunc(out, func(a, b checker.DownWindow) int { return cmp.Compare(a.From, b.From) })
	r.stalls[id] = out
	return out
}

// unanswered is a KV call the client gave up on (or the operator's
// membership change: confCall): its node, and when the call was made and
// given up.
type unanswered struct {
	client     int // -1: the operator
	key        string
	node       *sim.Machine
	call, gave time.Duration
	busy       bool // the node's loop was still held up (a stall, an fsync) when the client gave up
}

// checkCallDeadline holds the node to its ProposalTimeout: a proposal or
// read not applied by then is answered ErrTimeout, an unknown outcome,
// so a call through a node that stayed up gets some answer within it
// (and the clock's drift, and 100 ms for the tick the timer lands on).
// The client waits clientDeadline; a run whose timeout the client
// would not outwait is not judged. Without this a call left with no
// answer at all was the client's to give up on, an unknown outcome the
// history forgives, whatever the node had promised.
func (c *raftCluster) checkCallDeadline() {
	limit := c.timing.proposal + c.timing.proposal/1000 + 100*time.Millisecond
	if limit >= c.clientDeadline {
		return
	}
	for _, u := range c.unanswered {
		if crashed, _ := u.node.CrashedDuring(u.call, u.gave); crashed || u.busy {
			continue
		}
		who := fmt.Sprintf("client %d's call on %s", u.client, u.key)
		if u.client < 0 {
			who = "the operator's " + u.key
		}
		c.run.Fail("call-deadline", "%s through %s at %v had no answer, not even a timeout, for %v; its ProposalTimeout is %v",
			who, u.node.Name(), u.call, u.gave-u.call, c.timing.proposal)
	}
}

// finish runs the end-of-run checkers and prints the run's figures.
func (c *raftCluster) finish(chaos *Chaos) {
	c.checkNow()
	// Every client call got an answer: applied, refused, or given up on
	// at the client's deadline. A call left hanging is a liveness bug in
	// the client path (a callback lost), whatever the cluster did.
	for op := range c.hist.All() {
		if op.Return == 0 && op.Call+c.clientDeadline < c.k.Now() {
			c.run.Fail("liveness", "client %d's call on %s at %v never resolved", op.Client, op.Key, op.Call)
		}
	}
	c.checkCallDeadline()
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
	return c.membership().Lists(id)
}

// retire stops n, removed from the membership, as an operator may: once
// a member that stays (another node, up, whose applied membership lists
// itself and not n) has applied the removal, after a further pause, and
// for good (Run.Retire); then it calls then, if any. Until a member that
// stays has applied it, it looks again every 100 ms. Stopped sooner, a
// removed node may take with it the only vote the others can be elected
// with: in a group of two the removed node may have committed its own
// removal (elected after the leader that appended it failed) and stepped
// down just as a lost frame kept the commit from the survivor, which
// then counts two voters for ever (shrink-to-one seed 196). README tells
// the operator the same: ask a member that stays, stop after its answer.
func (c *raftCluster) retire(n *sim.Machine, pause time.Duration, then func()) {
	for _, s := range c.nodes {
		cn := c.node(s)
		if s == n || cn == nil {
			continue
		}
		if ms := cn.Membership(); ms.Lists(s.ID()) && !ms.Lists(n.ID()) {
			c.k.Logf("%s removed, applied by %s; stopped in %v", n.Name(), s.Name(), pause)
			c.k.After(pause, sim.EvFault, xxhash.Sum64String("stop "+n.Name()), func() {
				c.run.Retire(n)
				if then != nil {
					then()
				}
			})
			return
		}
	}
	c.k.After(100*time.Millisecond, sim.EvClient, xxhash.Sum64String("stop "+n.Name()), func() { c.retire(n, pause, then) })
}

// isolate is a fault attempt: partition n from every other node, both
// ways, named why; it reports whether the run injected it (Run.Inject).
func (c *raftCluster) isolate(n *sim.Machine, why string) bool {
	return c.isolateAs(c.run.Fault(), n, why)
}

// isolateAs is isolate as fault attempt ord, numbered by the caller
// before it looked at the cluster's state.
func (c *raftCluster) isolateAs(ord FaultID, n *sim.Machine, why string) bool {
	var rest []dial.NodeID
	for _, o := range c.nodes {
		if o != n {
			rest = append(rest, o.ID())
		}
	}
	return c.run.Inject(ord, why, func() { c.nw.Split(c.k.Nodes(), []dial.NodeID{n.ID()}, rest) })
}
