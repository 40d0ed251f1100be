// Package node composes one cluster node from the core's parts: the raft
// driver (control plane), the flow store (data plane) and proxyOnce's
// claim service, sharing one clock, one peer seam and one disk. It routes
// each arriving frame to its part by the frame's first byte.
package node

import (
	"time"

	"errors"
	"fmt"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/core/rollout"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// Rand is the seeded source a node's parts draw from.
type Rand interface {
	Uint64() uint64
	Int64N(n int64) int64
}

// Env is what a node is handed.
type Env struct {
	Clock clock.Clock
	Net   dial.Sender
	FS    recfile.FS
	Rand  Rand
	// Shard is the flow store's disk. Nil: a shard log (FlowLog) on FS,
	// as the simulator runs it; the real node hands in bbolt.
	Shard shard.Backend
	// Worker runs the disk work beside the node's loop, the flow shard's
	// commits and the raft journal's writes in one queue (shard.Worker,
	// consensus.Worker): a goroutine in the real node, disk completion
	// events in the simulator. Nil: both wait for the disk on the loop.
	Worker shard.Worker
	// Admitted, if set, sees every frame the envelope lets through, as it
	// hands it to the parts: the world's record of what got past the
	// link (the simulator's adversary checker reads it). Nil in the real
	// node.
	Admitted func(from dial.NodeID, frame []byte)
}

// FlowLog is the flow shard's file on FS when no backend is handed in:
// apart from the raft journal, so their fsyncs never contend.
const FlowLog = "flow.log"

// Config configures both parts.
type Config struct {
	Consensus consensus.Config
	Flow      flow.Config
	// Transport, when its Keys hold a data key, puts every frame the node
	// sends and receives in the envelope (core/transport); the node fills
	// in Self, Epoch, Rand and Classify. The real node always sets it; the
	// simulator's scenarios set it where the envelope is under test
	// (transport-adversary), and elsewhere exchange plain frames, which
	// the parts treat the same.
	Transport transport.Config
	// ProxyOnce configures the claim service.
	ProxyOnce proxyonce.ServiceConfig
	// Rollout configures how an admin change waits for every member to
	// serve it.
	Rollout rollout.Config
	// AdminKeys hold the control key (and, amid a rotation, the one
	// still accepted) whose attestations alone decide admin acts: Join,
	// Remove, Resize, AddGroup (admin.go). Without a control key every
	// act is refused; a fleet requires one.
	AdminKeys transport.Keys
	// MaxAttestations bounds the attestations the node remembers.
	// Default MaxAttestations.
	MaxAttestations int
	// Fleet, when set, places the node's raft group in a fleet of
	// several and runs its replica of the fleet's control group
	// (fleet.go): the flow store sends another group's flows to that
	// group. Nil: the group is the whole fleet.
	Fleet *FleetConfig
}

// Node is one cluster node.
type Node struct {
	Consensus *consensus.Node
	Flow      *flow.Store
	ProxyOnce *proxyonce.Service
	// Rollout confirms that members serve a configuration revision.
	Rollout *rollout.Service
	// Link is the envelope, nil without Config.Transport's keys.
	Link *transport.Link
	// Control is the node's replica of the fleet's control group, nil
	// outside a fleet.
	Control *consensus.Node
	// Admin is the raft group that holds what the whole fleet shares:
	// imposter definitions, proxyOnce's claims and recordings, the KV
	// API, the rollout of every admin change. In a fleet that is the
	// control group, which every node follows, so every node of every
	// group serves the same imposters and a proxy records once
	// fleet-wide; outside a fleet it is the data group. Only flows live
	// in a data group of a fleet.
	Admin *consensus.Node
	// onControlRevision is the caller's hook on the control replica's
	// revisions (OnControlRevision).
	onControlRevision func(rev uint64)
	// greeted is the directory epoch the fleet's nodes were last greeted
	// at (greetFleet).
	greeted   uint64
	view      *directoryView
	publisher *publisher
	clk       clock.Clock
	// adminKeys check the attestations of admin acts (Config.AdminKeys),
	// and attestations remembers the nonces of those taken (admin.go).
	adminKeys    transport.Keys
	attestations *transport.AttestGuard
	bugs         bugs.Set
	BadFrames    uint64
	// behind is the shell's nudge (OnBehind).
	behind func(rev uint64)
	// Quarantined, when set, says the flow shard's log was found damaged
	// at boot and where it was moved; the node started with an empty
	// shard. The binary logs it; an operator may inspect the file.
	Quarantined string
}

// Open boots the node: the consensus part from its journal, then the flow
// store, which asks the consensus part for membership and isolation.
func Open(cfg Config, env Env) (*Node, error) {
	n := &Node{clk: env.Clock, adminKeys: cfg.AdminKeys, bugs: cfg.Consensus.Bugs}
	maxAtt := cfg.MaxAttestations
	if maxAtt == 0 {
		maxAtt = MaxAttestations
	}
	n.attestations = transport.NewAttestGuard(maxAtt)
	var fc FleetConfig
	if cfg.Fleet != nil {
		fc = cfg.Fleet.withDefaults()
		if err := fc.validate(cfg.Consensus); err != nil {
			return nil, err
		}
		if len(cfg.AdminKeys.Control) != transport.KeySize {
			return nil, errors.New("node: fleet: the fleet's admin acts need the control key (AdminKeys.Control)")
		}
	}
	// With the envelope, the parts send through the link, which needs the
	// boot epoch, read after the journal opens: a frame the consensus part
	// sends before then is lost, as any frame may be.
	net := env.Net
	sealed := cfg.Transport.Keys.Data != nil
	if sealed {
		net = linkSender{n}
	}
	cn, err := consensus.Open(cfg.Consensus, consensus.Env{Clock: env.Clock, Net: net, FS: env.FS, Rand: env.Rand, Worker: env.Worker})
	if err != nil {
		return nil, err
	}
	// The control replica, in a fleet: its frames go out and come in
	// under ControlFramePrefix.
	var view *directoryView
	if cfg.Fleet != nil {
		ccfg := fc.Control
		ccfg.Bugs = cfg.Consensus.Bugs
		if n.Control, err = consensus.Open(ccfg, consensus.Env{Clock: env.Clock, Net: prefixed{net, ControlFramePrefix}, FS: env.FS, Rand: env.Rand, Worker: env.Worker}); err != nil {
			cn.Stop()
			return nil, fmt.Errorf("node: control group: %w", err)
		}
		view = &directoryView{ctl: n.Control, data: cn, group: fc.Group}
	}
	stop := func() {
		cn.Stop()
		if n.Control != nil {
			n.Control.Stop()
		}
	}
	epoch, err := nextEpoch(env.FS)
	if err != nil {
		stop()
		return nil, fmt.Errorf("node: boot epoch: %w", err)
	}
	if sealed {
		tc := cfg.Transport
		tc.Self, tc.Epoch, tc.Rand, tc.Classify, tc.Clock = cn.ID(), epoch, env.Rand, Classify, env.Clock
		inner := dial.HandlerFunc(n.route)
		if env.Admitted != nil {
			inner = func(from dial.NodeID, frame []byte) {
				env.Admitted(from, frame)
				n.route(from, frame)
			}
		}
		if n.Link, err = transport.New(tc, env.Net, inner); err != nil {
			stop()
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	backend, quarantined := env.Shard, ""
	if backend == nil {
		if backend, quarantined, err = openShardLog(env.FS, epoch); err != nil {
			stop()
			return nil, fmt.Errorf("node: flow shard: %w", err)
		}
	}
	fs, err := flow.New(cfg.Flow, flow.Env{ID: cn.ID(), Epoch: epoch, Clock: env.Clock, Net: net, Ctl: &control{cn: cn}, Rand: env.Rand, Backend: backend, Worker: env.Worker, Fleet: fleetOf(view)})
	if err != nil {
		stop()
		_ = backend.Close() // the store's error is the one worth reporting
		return nil, fmt.Errorf("node: flow store: %w", err)
	}
	admin := cn
	if n.Control != nil {
		admin = n.Control
	}
	// The claim service's tokens name the boot epoch, which no restart
	// repeats (and drawing it from Rand would shift every later draw).
	pcfg := cfg.ProxyOnce
	pcfg.Bugs = cfg.Consensus.Bugs
	claims := admin
	if cfg.Consensus.Bugs.GroupClaims {
		claims = cn // the planted bug
	}
	po := proxyonce.NewService(pcfg, proxyonce.Env{ID: cn.ID(), Session: epoch, Clock: env.Clock, Net: net, Ctl: &claimControl{cn: claims}})
	rcfg := cfg.Rollout
	rcfg.Bugs = cfg.Consensus.Bugs
	ro := rollout.New(rcfg, rollout.Env{ID: cn.ID(), Clock: env.Clock, Net: net, Ctl: rolloutControl{admin},
		Behind: func(rev uint64) {
			if n.behind != nil {
				n.behind(rev)
			}
		}})
	// A change an asker waits for is nudged as soon as it applies.
	admin.OnRevision(func(rev uint64) {
		ro.Applied(rev)
		if admin == n.Control {
			n.greetFleet()
			if n.onControlRevision != nil {
				n.onControlRevision(rev)
			}
		}
	})
	n.Consensus, n.Admin, n.Flow, n.ProxyOnce, n.Rollout, n.Quarantined = cn, admin, fs, po, ro, quarantined
	if view != nil {
		n.view = view
		n.publisher = &publisher{n: n, cfg: fc, view: view, bugs: cfg.Consensus.Bugs}
		n.publisher.arm()
		n.greetFleet()
	}
	return n, nil
}

// linkSender sends through the node's link once it exists.
type linkSender struct{ n *Node }

func (s linkSender) Send(to dial.NodeID, frame []byte) error {
	if s.n.Link == nil {
		return dial.ErrUnreachable
	}
	return s.n.Link.Send(to, frame)
}

// Classify says what a frame is to the envelope: raft frames are control
// traffic, flow frames data, each with its protocol's request and reply
// families.
func Classify(frame []byte) (transport.Kind, bool) {
	if len(frame) == 0 {
		return transport.Kind{}, false
	}
	var family uint8
	var reply, ok bool
	class := transport.Data
	switch frame[0] {
	case flow.FramePrefix:
		family, reply, ok = flow.FrameKind(frame)
	case proxyonce.FramePrefix:
		family, reply, ok = proxyonce.FrameKind(frame)
	case rollout.FramePrefix:
		class = transport.Control
		family, reply, ok = rollout.FrameKind(frame)
	case ControlFramePrefix:
		// The control group's raft: its families are raft's (a family
		// pairs requests and replies per peer; the two groups' share
		// the bound, as flow and raft frames do).
		class = transport.Control
		family, reply, ok = consensus.FrameKind(frame[1:])
	default:
		class = transport.Control
		family, reply, ok = consensus.FrameKind(frame)
	}
	return transport.Kind{Class: class, Family: family, Reply: reply}, ok
}

// openShardLog opens the flow shard's log. A log damaged before its tail
// (shard.ErrCorrupt: bytes no crash leaves) is never read as data and
// never deleted: it is renamed aside, under the boot epoch so no earlier
// one is overwritten, and the node starts with an empty shard. That loses
// no flow the cluster still holds — every flow has two more copies, and a
// restarted owner re-adopts from them, as after any long partition — where
// refusing to boot would take this node's third of the copies away for
// good. The returned note says what happened, for the operator.
func openShardLog(fs recfile.FS, epoch uint64) (*shard.Log, string, error) {
	l, err := shard.OpenLog(fs, FlowLog)
	if !errors.Is(err, shard.ErrCorrupt) {
		return l, "", err
	}
	aside := fmt.Sprintf("%s.corrupt-%d", FlowLog, epoch)
	if rerr := fs.Rename(FlowLog, aside); rerr != nil {
		return nil, "", fmt.Errorf("%w (moving it aside failed: %v)", err, rerr)
	}
	if serr := fs.SyncDir(); serr != nil {
		return nil, "", fmt.Errorf("%w (moving it aside failed: %v)", err, serr)
	}
	l, oerr := shard.OpenLog(fs, FlowLog)
	return l, fmt.Sprintf("%v: moved to %s; starting with an empty shard", err, aside), oerr
}

// HandleFrame takes a frame from the network: through the envelope, if
// the node has one, to the part it is for.
func (n *Node) HandleFrame(from dial.NodeID, frame []byte) {
	if n.Link != nil {
		n.Link.HandleFrame(from, frame)
		return
	}
	n.route(from, frame)
}

// route hands a plain frame to the part it is for, by its first byte.
func (n *Node) route(from dial.NodeID, frame []byte) {
	if len(frame) == 0 {
		n.BadFrames++
		return
	}
	switch frame[0] {
	case flow.FramePrefix:
		n.Flow.HandleFrame(from, frame)
	case proxyonce.FramePrefix:
		n.ProxyOnce.HandleFrame(from, frame)
	case rollout.FramePrefix:
		n.Rollout.HandleFrame(from, frame)
	case ControlFramePrefix:
		if n.Control == nil {
			n.BadFrames++ // a control frame for a node outside a fleet
			return
		}
		n.Control.HandleFrame(from, frame[1:])
	default:
		n.Consensus.HandleFrame(from, frame)
	}
}

// Stop stops the parts.
func (n *Node) Stop() {
	if n.publisher != nil {
		n.publisher.stop()
		n.Control.Stop()
	}
	n.Rollout.Stop()
	n.ProxyOnce.Stop()
	n.Flow.Stop()
	n.Consensus.Stop()
}

// Close is the orderly shutdown: the flow store writes and fsyncs what it
// holds and closes its shard, then the consensus part stops and closes its
// journal. Calls in flight are answered as failed.
func (n *Node) Close() error {
	n.Rollout.Stop()
	n.ProxyOnce.Stop()
	if n.publisher != nil {
		n.publisher.stop()
	}
	err := n.Flow.Close()
	if cerr := n.Consensus.Close(); err == nil {
		err = cerr
	}
	if n.Control != nil {
		if cerr := n.Control.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// control answers the flow store's questions from the consensus part.
// The store asks for the membership on every call it serves; the answer
// is rebuilt only when the membership changed (a new m_idx), since
// building it copies and sorts every member.
type control struct {
	cn     *consensus.Node
	cached flow.Membership
	shape  [3]uint64 // m_idx, voter count, previous m_idx of the cached answer
}

func (c *control) Membership() flow.Membership {
	if shape := c.cn.MembershipShape(); shape == c.shape && c.cached.Index != 0 {
		return c.cached
	}
	ms := c.cn.Membership()
	ids := make([]dial.NodeID, len(ms.Voters))
	for i, m := range ms.Voters {
		ids[i] = m.ID
	}
	c.cached = flow.Membership{Index: ms.Index, Voters: ids, PrevIndex: ms.PrevIndex, PrevVoters: ms.PrevVoters}
	c.shape = c.cn.MembershipShape()
	return c.cached
}

func (c *control) IsIsolated() bool { return c.cn.IsIsolated() }

func (c *control) ContactSince() time.Duration { return c.cn.ContactSince() }

func (c *control) Confirm(done func(error)) { c.cn.Barrier(done) }

// claimControl answers the claim service's questions from the consensus
// part: the ring's membership, D-17, and the KV where recordings live.
type claimControl struct {
	cn     *consensus.Node
	shape  [3]uint64
	m      uint64
	voters []dial.NodeID
}

func (c *claimControl) Membership() (uint64, []dial.NodeID) {
	if shape := c.cn.MembershipShape(); shape != c.shape || c.m == 0 {
		ms := c.cn.Membership()
		c.voters = c.voters[:0]
		for _, m := range ms.Voters {
			c.voters = append(c.voters, m.ID)
		}
		c.m, c.shape = ms.Index, shape
	}
	return c.m, c.voters
}

func (c *claimControl) IsIsolated() bool { return c.cn.IsIsolated() }

func (c *claimControl) Recorded(key string) ([]byte, bool) {
	e, ok := c.cn.LocalGet(key)
	return e.Value, ok
}

// Record puts the answer unless the key exists: a recording that lost a
// race to another (a lapse, an ownership move) changes nothing.
func (c *claimControl) Confirm(done func(error)) { c.cn.Barrier(done) }

func (c *claimControl) Record(key string, answer []byte, overwrite bool, done func(error)) {
	op := kv.Txn([]kv.Guard{kv.Absent(key)}, []kv.Op{kv.Put(key, answer)}, nil)
	if overwrite {
		op = kv.Put(key, answer) // the planted stale-token bug
	}
	c.cn.Propose(op, func(res kv.Result, err error) {
		switch {
		case err != nil:
			done(err)
		case res.Err != nil:
			done(res.Err)
		case op.Kind == kv.OpTxn && !res.Succeeded:
			done(proxyonce.ErrAlreadyRecorded)
		default:
			done(nil)
		}
	})
}

// OnBehind registers the shell's nudge: f is told, on the node's loop,
// that an admin change waits for this node to serve revision rev, which
// it has applied. f must not block.
func (n *Node) OnBehind(f func(rev uint64)) { n.behind = f }

// rolloutControl answers the rollout service from the consensus part.
type rolloutControl struct{ cn *consensus.Node }

func (c rolloutControl) Members() []dial.NodeID {
	ms := c.cn.Membership()
	ids := make([]dial.NodeID, 0, len(ms.Voters)+len(ms.Learners))
	for _, m := range ms.Voters {
		ids = append(ids, m.ID)
	}
	for _, m := range ms.Learners {
		ids = append(ids, m.ID)
	}
	return ids
}

func (c rolloutControl) Applied() uint64 { return c.cn.Revision() }

// CheckInvariants checks the bookkeeping of the node's consensus part,
// flow store (with its shard) and claim service. The simulator calls it
// after every 16th step (sim.Checked); a real node never does (it reads
// every flow).
func (n *Node) CheckInvariants() error {
	if err := n.Consensus.CheckInvariants(); err != nil {
		return err
	}
	if err := n.Flow.CheckInvariants(); err != nil {
		return err
	}
	if n.Control != nil {
		if err := n.Control.CheckInvariants(); err != nil {
			return fmt.Errorf("control group: %w", err)
		}
		if err := n.publisher.checkInvariants(); err != nil {
			return err
		}
	}
	return n.ProxyOnce.CheckInvariants()
}

// fleetOf is the flow store's fleet: nil outside one.
func fleetOf(v *directoryView) flow.Fleet {
	if v == nil {
		return nil
	}
	return v
}
