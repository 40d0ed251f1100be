package realnet

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// NodeConfig configures a real node.
type NodeConfig struct {
	Name     string
	DataDir  string
	PeerAddr string // listen on it, and advertise it to the cluster
	// Advertise, if set, is the peer address advertised instead of
	// PeerAddr: where peers reach this node through something in between
	// (a proxy, a NAT).
	Advertise string
	// HTTP is the node's client API address, carried in its membership
	// entry so that every node learns it from the log. Optional.
	HTTP string
	Keys transport.Keys
	// Bootstrap makes a node whose journal is empty found a one-node
	// cluster of itself. Without it, an empty node waits to be added.
	Bootstrap bool
	Core      node.Config // timings and bounds; names, addresses and keys are filled in
	// Fleet, when set, places the node's raft group in a fleet of
	// several (core/node's FleetConfig, built from it here).
	Fleet *FleetSpec
	TCP   TCPConfig // bounds; Self, Listen and Keys are filled in
	// MailboxLen bounds the node loop's mailbox; frames that find it
	// full are dropped (the protocols retry), client calls get ErrBusy.
	// Default 4096.
	MailboxLen int
	// LockTimeout bounds the wait for the data dir's lock (bbolt's file
	// lock): another process holding it fails the open. Default 1s.
	LockTimeout time.Duration
	Log         *slog.Logger
}

// FleetSpec places a real node in a fleet. Each group is founded by one
// node (Bootstrap) and grows as nodes join it; the directory's first
// epoch names each group's founder as its only voter, at membership
// index 1, and the group's members publish each membership after that.
// Group 0's founder also founds the control group; every other node's
// control replica starts empty and is added by the control group's
// leader once the directory names it.
type FleetSpec struct {
	// Group is the node's data group: an index into Founders, or, with
	// Added, a group numbered from len(Founders) on.
	Group int
	// Founders is each group's founder, in group order. Every node of
	// the fleet is started with the same list.
	Founders []Founder
	// Added: the node's group was added to the running fleet
	// (node.FleetConfig.Added): founded by a node that asked a member of
	// the fleet to add it, and grown as nodes join it.
	Added bool
}

// Founder is one group's founding node, as every node of the fleet is
// told of it at start.
type Founder struct {
	Name string
	Peer string // its advertised peer address
	HTTP string // its HTTP address, as its membership entry gives it
}

// founding is the directory's first epoch: each founder the only voter
// of its group, at membership index 1 (a founded group's first).
func (f FleetSpec) founding() []fleet.Group {
	gs := make([]fleet.Group, len(f.Founders))
	for g, fd := range f.Founders {
		gs[g] = fleet.Group{MIdx: 1, Voters: []fleet.Member{{ID: dial.IDFromName(fd.Name), Name: fd.Name, Peer: fd.Peer, HTTP: fd.HTTP}}}
	}
	return gs
}

// ErrBusy is a call that found the node's mailbox full.
var ErrBusy = errors.New("realnet: node busy (mailbox full)")

// Node is a real node: the pure core on one loop goroutine, with the wall
// clock, the journal in OS files, the flow shard in bbolt and TCP to its
// peers. Everything that touches the core goes through the loop.
type Node struct {
	cfg  NodeConfig
	loop *Loop
	clk  *clock.Wall
	tcp  *TCP
	bolt *Bolt
	// worker commits the flow shard beside the loop.
	worker *Worker
	core   *node.Node // the loop's alone
	// hints are peer addresses learnt outside the membership, such as
	// from the member that answered a join: a node that has not yet
	// applied the membership that adds it must still reach the leader.
	// The loop's alone.
	hints map[dial.NodeID]string
	// isolated is how long the node has been isolated (D-17) since it
	// started, sampled every isolationSample on the loop.
	isolated time.Duration
	// dirEpoch is the directory epoch the peers were last set from.
	dirEpoch uint64
	log      *slog.Logger
}

// isolationSample is how often the node samples whether it is isolated,
// for the seconds-isolated metric.
const isolationSample = 100 * time.Millisecond

func (n *Node) sampleIsolation() {
	n.clk.AfterFunc(isolationSample, func() {
		if n.core.Consensus.IsIsolated() {
			n.isolated += isolationSample
		}
		n.sampleIsolation()
	})
}

// Isolated is how long the node has been isolated since it started, to
// isolationSample. Call it on the loop (in Do).
func (n *Node) Isolated() time.Duration { return n.isolated }

// OpenNode opens the data dir, takes its lock, listens for peers and boots
// the core from what the dir holds.
func OpenNode(cfg NodeConfig) (*Node, error) {
	if cfg.Name == "" || cfg.DataDir == "" || cfg.PeerAddr == "" {
		return nil, errors.New("realnet: NodeConfig needs Name, DataDir and PeerAddr")
	}
	if cfg.MailboxLen == 0 {
		cfg.MailboxLen = 4096
	}
	if cfg.LockTimeout == 0 {
		cfg.LockTimeout = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	// The flow shard first: its lock is the data dir's lock, taken before
	// anything else in the dir is touched.
	bolt, err := OpenBolt(cfg.DataDir, cfg.LockTimeout)
	if err != nil {
		return nil, err
	}
	fs, err := OpenDir(filepath.Join(cfg.DataDir, "raft"))
	if err != nil {
		_ = bolt.Close()
		return nil, err
	}
	n := &Node{cfg: cfg, bolt: bolt, log: cfg.Log, loop: NewLoop(cfg.MailboxLen)}
	n.worker = NewWorker(n.loop)
	n.clk = clock.NewWall(n.loop.PostTimer)
	id := dial.IDFromName(cfg.Name)
	tcfg := cfg.TCP
	tcfg.Self, tcfg.Listen, tcfg.Keys = id, cfg.PeerAddr, cfg.Keys
	if host, _, err := net.SplitHostPort(cfg.PeerAddr); err == nil && net.ParseIP(host) != nil && tcfg.DialFrom == "" {
		tcfg.DialFrom = host // dial from the address we listen on
	}
	n.tcp, err = ListenTCP(tcfg, func(from dial.NodeID, frame []byte) error {
		return n.loop.TryPost(func() {
			if n.core != nil {
				n.core.HandleFrame(from, frame)
			}
		})
	})
	if err != nil {
		n.loop.Stop()
		n.worker.Close()
		_ = bolt.Close()
		return nil, err
	}
	var seed [32]byte
	_, _ = cryptorand.Read(seed[:]) // never fails (crypto/rand panics instead)
	rnd := rand.New(rand.NewChaCha8(seed))

	// Advertise where the listener is (PeerAddr may ask for port 0), or
	// what we were told to.
	advertise := n.tcp.Addr().String()
	if cfg.Advertise != "" {
		advertise = cfg.Advertise
	}
	ccfg := cfg.Core
	ccfg.Consensus.Name, ccfg.Consensus.Addr = cfg.Name, advertise
	if cfg.Bootstrap {
		founder := consensus.NewMember(cfg.Name, advertise)
		founder.HTTP = cfg.HTTP
		ccfg.Consensus.Bootstrap = []consensus.Member{founder}
	}
	if f := cfg.Fleet; f != nil {
		fc := &node.FleetConfig{Group: f.Group, Founding: f.founding(), Added: f.Added}
		fc.Control.Name, fc.Control.Addr = cfg.Name, advertise
		if cfg.Bootstrap && f.Group == 0 && len(f.Founders) > 0 && f.Founders[0].Name == cfg.Name {
			founder := consensus.NewMember(cfg.Name, advertise)
			founder.HTTP = cfg.HTTP
			fc.Control.Bootstrap = []consensus.Member{founder}
		}
		ccfg.Fleet = fc
	}
	ccfg.Transport.Keys, ccfg.AdminKeys = cfg.Keys, cfg.Keys
	booted := make(chan error, 1)
	if err := n.loop.Post(func() {
		core, err := node.Open(ccfg, node.Env{Clock: n.clk, Net: n.tcp, FS: fs, Rand: rnd, Shard: bolt, Worker: n.worker})
		if err == nil {
			n.core = core
			core.Consensus.OnMembership(func(consensus.Membership) { n.peersChanged() })
			if core.Control != nil {
				core.Control.OnMembership(func(consensus.Membership) { n.peersChanged() })
				core.OnControlRevision(func(uint64) {
					if d := core.Directory(); d != nil && d.Epoch() != n.dirEpoch {
						n.dirEpoch = d.Epoch()
						n.peersChanged()
					}
				})
			}
			n.peersChanged()
			n.sampleIsolation()
		}
		booted <- err
	}); err != nil {
		booted <- err
	}
	if err := <-booted; err != nil {
		_ = n.tcp.Close()
		n.loop.Stop()
		n.worker.Close()
		_ = bolt.Close()
		return nil, fmt.Errorf("realnet: boot %s: %w", cfg.Name, err)
	}
	n.log.Info("node up", "name", cfg.Name, "id", id, "peer", n.tcp.Addr().String(), "data_dir", cfg.DataDir)
	return n, nil
}

// peersChanged points the transport at every peer's address: the
// members of the node's raft group, and in a fleet every node of the
// fleet it knows of (another group's owner takes its flows' calls; every
// node follows the control group). Later sources win: a join's hints, the
// fleet's founders, the directory, the control group's membership, the
// data group's. It runs on the loop.
func (n *Node) peersChanged() {
	addrs := map[dial.NodeID]string{}
	for id, a := range n.hints {
		addrs[id] = a
	}
	if f := n.cfg.Fleet; f != nil {
		for _, fd := range f.Founders {
			addrs[dial.IDFromName(fd.Name)] = fd.Peer
		}
		if d := n.core.Directory(); d != nil {
			for g := range d.Groups() {
				for _, m := range d.Group(g).Voters {
					addrs[m.ID] = m.Peer
				}
			}
		}
		ms := n.core.Control.Membership()
		for _, m := range append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...) {
			addrs[m.ID] = m.Addr
		}
	}
	ms := n.core.Consensus.Membership()
	for _, m := range append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...) {
		addrs[m.ID] = m.Addr
	}
	delete(addrs, n.core.Consensus.ID())
	n.tcp.SetPeers(addrs)
	for _, id := range slices.Sorted(maps.Keys(addrs)) {
		n.core.Link.Greet(id)
	}
}

// Introduce tells the node where peers listen before any membership it
// has applied says so: what a joining node learns from the member that
// added it. The membership's addresses win once it names a peer.
func (n *Node) Introduce(ctx context.Context, peers map[dial.NodeID]string) error {
	return n.Do(ctx, func(core *node.Node) {
		n.hints = map[dial.NodeID]string{}
		for id, a := range peers {
			if id != n.ID() {
				n.hints[id] = a
			}
		}
		n.peersChanged()
	})
}

// ID is the node's id.
func (n *Node) ID() dial.NodeID { return dial.IDFromName(n.cfg.Name) }

// Advertised is the peer address the node gives the cluster.
func (n *Node) Advertised() string {
	if n.cfg.Advertise != "" {
		return n.cfg.Advertise
	}
	return n.tcp.Addr().String()
}

// PeerAddr is where the node listens for peers.
func (n *Node) PeerAddr() string { return n.tcp.Addr().String() }

// TCPStats is the transport's counters.
func (n *Node) TCPStats() TCPStats { return n.tcp.Stats() }

// Do runs f on the node's loop with the core, and waits for it, at most
// until ctx ends. f must not block. A full mailbox is ErrBusy at once.
func (n *Node) Do(ctx context.Context, f func(*node.Node)) error {
	done := make(chan struct{})
	if err := n.loop.TryPost(func() { f(n.core); close(done) }); err != nil {
		if errors.Is(err, ErrMailboxFull) {
			return ErrBusy
		}
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Await runs start on the loop, which must arrange for its callback to be
// called exactly once on the loop, and waits for the answer at most until
// ctx ends (the core's own deadlines answer long before a sane ctx does).
func Await[T any](ctx context.Context, n *Node, start func(core *node.Node, done func(T, error))) (T, error) {
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	err := n.Do(ctx, func(core *node.Node) {
		start(core, func(v T, err error) { ch <- answer{v, err} })
	})
	if err != nil {
		var zero T
		return zero, err
	}
	select {
	case a := <-ch:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Close shuts the node down: no more frames in or out; on the loop, the
// core closes (calls in flight are answered as failed, the flow shard
// written, fsynced and closed, the journal closed); then the loop stops.
func (n *Node) Close() error {
	err := n.tcp.Close()
	closed := make(chan error, 1)
	if perr := n.loop.Post(func() { closed <- n.core.Close() }); perr != nil {
		closed <- perr
	}
	if cerr := <-closed; err == nil {
		err = cerr
	}
	n.loop.Stop()
	n.worker.Close()
	return err
}

// GenerateKey returns a fresh cluster secret from the OS's randomness.
func GenerateKey() []byte {
	k := make([]byte, transport.KeySize)
	_, _ = cryptorand.Read(k)
	return k
}
