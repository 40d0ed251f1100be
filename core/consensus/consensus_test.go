package consensus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// These tests run consensus nodes in the simulator. They install the
// simulator's crypto/rand reader, so none may call t.Parallel.

type cluster struct {
	t     *testing.T
	k     *sim.Kernel
	nw    *netsim.Network
	nodes []*sim.Machine
	live  map[string]*consensus.Node
	cfg   consensus.Config
	http  bool // founders carry HTTP addresses (set before the first start)
	// worker runs journal writes off the loop, on the disk, as the
	// scenarios do: a stalled disk then holds a write in flight.
	worker bool
}

func newCluster(t *testing.T, seed uint64, founders, extra int) *cluster {
	t.Helper()
	k := sim.New(seed)
	t.Cleanup(k.InstallCryptoRand())
	c := &cluster{t: t, k: k, nw: netsim.New(k, netsim.DefaultConfig), live: map[string]*consensus.Node{}}
	var boot []consensus.Member
	for i := 0; i < founders; i++ {
		m := consensus.NewMember(fmt.Sprintf("n%d", i+1), "")
		m.HTTP = fmt.Sprintf("127.0.0.%d:2525", i+1) // ignored unless c.http
		boot = append(boot, m)
	}
	for i := 0; i < founders+extra; i++ {
		name := fmt.Sprintf("n%d", i+1)
		founder := i < founders
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			cfg := c.cfg
			cfg.Name = name
			if founder {
				cfg.Bootstrap = boot
				if !c.http {
					cfg.Bootstrap = nil
					for _, m := range boot {
						cfg.Bootstrap = append(cfg.Bootstrap, consensus.NewMember(m.Name, m.Addr))
					}
				}
			}
			cenv := consensus.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand}
			if c.worker {
				cenv.Worker = env.Disk
			}
			node, err := consensus.Open(cfg, cenv)
			require.NoError(t, err)
			c.live[name] = node
			return node
		}, c.nw, sim.DefaultDiskConfig)
		c.nodes = append(c.nodes, n)
	}
	return c
}

func (c *cluster) start(ns ...*sim.Machine) {
	for _, n := range ns {
		n.Start()
	}
}

func (c *cluster) run(d time.Duration) { require.NoError(c.t, c.k.RunUntil(c.k.Now()+d)) }

func (c *cluster) node(i int) *consensus.Node { return c.live[c.nodes[i].Name()] }

// elect starts every node, runs two seconds, and returns the leader they
// elected (one is required).
func (c *cluster) elect() int {
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	require.GreaterOrEqual(c.t, l, 0, "a leader within two seconds")
	return l
}

func (c *cluster) leader() int {
	for i, n := range c.nodes {
		if n.Up() && c.live[n.Name()].IsLeader() {
			return i
		}
	}
	return -1
}

// propose runs a proposal on node i and waits for its answer.
func (c *cluster) propose(i int, op kv.Op) (kv.Result, error) {
	var res kv.Result
	var err error
	answered := false
	c.nodes[i].Exec(func() {
		c.node(i).Propose(op, func(r kv.Result, e error) { res, err, answered = r, e, true })
	})
	for !answered {
		require.True(c.t, c.k.Step(), "the queue ran dry before an answer")
	}
	return res, err
}

func TestElectionTimeoutUnderFiveHeartbeatsIsRefused(t *testing.T) {
	err := consensus.Config{Name: "a", HeartbeatTicks: 4, ElectionTicks: 19}.Validate()
	require.ErrorIs(t, err, consensus.ErrBadConfig)
	require.Contains(t, err.Error(), "under five heartbeats")
	require.NoError(t, consensus.Config{Name: "a", HeartbeatTicks: 4, ElectionTicks: 20}.Validate())
	require.Error(t, consensus.Config{Name: "a", Bootstrap: []consensus.Member{consensus.NewMember("b", "")}}.Validate(),
		"a founder must be in its own bootstrap list")
}

func TestThreeNodesElectReplicateAndRead(t *testing.T) {
	c := newCluster(t, 1, 3, 0)
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	require.GreaterOrEqual(t, l, 0, "a leader within 2s")
	follower := (l + 1) % 3

	res, err := c.propose(follower, kv.Put("x", []byte("1")))
	require.NoError(t, err, "a follower forwards proposals to the leader")
	require.NoError(t, res.Err)
	require.Positive(t, res.Version)

	var got kv.Entry
	var found bool
	var rerr error
	done := false
	c.nodes[follower].Exec(func() {
		c.node(follower).Read("x", func(e kv.Entry, f bool, err error) { got, found, rerr, done = e, f, err, true })
	})
	for !done {
		require.True(t, c.k.Step())
	}
	require.NoError(t, rerr)
	require.True(t, found)
	require.Equal(t, "1", string(got.Value))

	c.run(time.Second)
	for i := range c.nodes {
		e, ok := c.node(i).LocalGet("x")
		require.True(t, ok, "node %d applied the put", i)
		require.Equal(t, res.Version, e.Version)
	}
	ms := c.node(0).Membership()
	require.Len(t, ms.Voters, 3)
	require.Equal(t, uint64(1), ms.Index, "the founding membership is the bootstrap snapshot at index 1")
}

func TestDeposedLeaderBelievesButIsNotConfirmed(t *testing.T) {
	c := newCluster(t, 2, 3, 0)
	l := c.elect()
	var others []dial.NodeID
	for i, n := range c.nodes {
		if i != l {
			others = append(others, n.ID())
		}
	}
	c.nw.Split(c.k.Nodes(), []dial.NodeID{c.nodes[l].ID()}, others)
	// Within the election timeout the old leader loses its quorum's
	// confirmation; with CheckQuorum it steps down a little later, and
	// past the isolation window it is isolated.
	c.run(400 * time.Millisecond)
	old := c.node(l)
	require.False(t, old.IsLeader(), "a leader cut off from its quorum is not confirmed")
	c.run(200 * time.Millisecond)
	require.True(t, old.IsIsolated())
	c.run(2 * time.Second)
	newLeader := c.leader()
	require.GreaterOrEqual(t, newLeader, 0)
	require.NotEqual(t, l, newLeader)
	require.False(t, c.node(newLeader).IsIsolated())

	// A proposal on the cut-off node gets an answer, never a hang.
	_, err := c.propose(l, kv.Put("y", []byte("1")))
	require.Error(t, err)
	c.nw.Heal()
	c.run(2 * time.Second)
	require.False(t, c.node(l).IsIsolated(), "back in touch with the leader after the heal")
}

// ContactSince holds while a follower hears its leader and starts again
// when it hears one after a gap past the isolation window: a node back
// from a partition may not have applied what was committed meanwhile.
// A leader's holds from when it was first seen leading in its term.
func TestContactSinceStartsAgainAfterIsolation(t *testing.T) {
	c := newCluster(t, 3, 3, 0)
	l := c.elect()
	f := (l + 1) % 3
	led, since := c.node(l).ContactSince(), c.node(f).ContactSince()
	c.run(time.Second)
	require.Equal(t, led, c.node(l).ContactSince(), "a leader's contact holds through its term")
	require.Equal(t, since, c.node(f).ContactSince(), "heartbeats within the window keep contact unbroken")

	var others []dial.NodeID
	for i, n := range c.nodes {
		if i != f {
			others = append(others, n.ID())
		}
	}
	c.nw.Split(c.k.Nodes(), []dial.NodeID{c.nodes[f].ID()}, others)
	c.run(time.Second)
	require.True(t, c.node(f).IsIsolated())
	c.nw.Heal()
	c.run(time.Second)
	require.False(t, c.node(f).IsIsolated())
	back := c.node(f).ContactSince()
	require.Greater(t, back, since+time.Second, "contact after the gap starts at the heal, not before the cut")
	c.run(time.Second)
	require.Equal(t, back, c.node(f).ContactSince())
}

func TestRestartRecoversFromTheJournal(t *testing.T) {
	c := newCluster(t, 3, 3, 0)
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	for i := 0; i < 20; i++ {
		_, err := c.propose(l, kv.Put(fmt.Sprintf("k%d", i), []byte("v")))
		require.NoError(t, err)
	}
	c.run(500 * time.Millisecond)
	for _, n := range c.nodes {
		n.Crash()
	}
	c.start(c.nodes...)
	c.run(3 * time.Second)
	for i := range c.nodes {
		e, ok := c.node(i).LocalGet("k19")
		require.True(t, ok, "node %d lost an applied write across a restart", i)
		require.Equal(t, "v", string(e.Value))
	}
}

func TestPendingBoundRefusesAtOnce(t *testing.T) {
	c := newCluster(t, 4, 3, 0)
	c.cfg.MaxPending = 2
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	var errs []error
	c.nodes[l].Exec(func() {
		for i := 0; i < 3; i++ {
			c.node(l).Propose(kv.Put("z", []byte("v")), func(_ kv.Result, err error) { errs = append(errs, err) })
		}
	})
	require.Len(t, errs, 1, "the third call is refused before the queue runs")
	require.ErrorIs(t, errs[0], consensus.ErrBusy)
	c.run(time.Second)
	require.Len(t, errs, 3)
}

func TestLearnerJoinsAndIsPromoted(t *testing.T) {
	c := newCluster(t, 5, 3, 1)
	c.http = true
	c.start(c.nodes[:3]...)
	c.run(2 * time.Second)
	l := c.leader()
	for i := 0; i < 30; i++ {
		_, err := c.propose(l, kv.Put(fmt.Sprintf("k%d", i), []byte("v")))
		require.NoError(t, err)
	}
	c.start(c.nodes[3])
	var joinErr error
	joined := false
	c.nodes[l].Exec(func() {
		m := consensus.NewMember("n4", "")
		m.HTTP = "127.0.0.4:2525"
		c.node(l).AddLearner(m, func(err error) { joinErr, joined = err, true })
	})
	for !joined {
		require.True(t, c.k.Step())
	}
	require.NoError(t, joinErr)
	c.run(5 * time.Second)
	ms := c.node(l).Membership()
	require.Len(t, ms.Voters, 4, "the caught-up learner was promoted")
	require.Empty(t, ms.Learners)
	e, ok := c.node(3).LocalGet("k29")
	require.True(t, ok, "the newcomer caught up from the snapshot and log")
	require.Equal(t, "v", string(e.Value))
	require.Equal(t, "n4", ms.Voters[memberIndex(ms.Voters, c.nodes[3].ID())].Name, "membership carries names")
	// ... and HTTP addresses: the newcomer learnt the founders' from the
	// snapshot it restored, the founders learnt its own from the log, and
	// a restart reads them back.
	c.nodes[0].Crash()
	c.nodes[0].Start()
	c.run(2 * time.Second)
	for i := range c.nodes {
		for _, m := range c.node(i).Membership().Voters {
			require.Equal(t, "127.0.0."+m.Name[1:]+":2525", m.HTTP, "n%d's view of %s", i+1, m.Name)
		}
	}
}

// At MaxVoters the leader promotes no more learners: they apply every
// entry and stay learners; when a voter leaves, one of them is promoted
// in its place, and the voters are at the bound again.
func TestLearnersWaitAtMaxVoters(t *testing.T) {
	c := newCluster(t, 7, 1, 3)
	c.cfg.MaxVoters = 2
	c.start(c.nodes...)
	c.run(2 * time.Second)
	for i := 1; i < 4; i++ {
		require.NoError(t, c.conf(0, func(n *consensus.Node, done func(error)) {
			n.AddLearner(consensus.NewMember(c.nodes[i].Name(), ""), done)
		}))
	}
	c.run(5 * time.Second)
	l := c.leader()
	ms := c.node(l).Membership()
	require.Len(t, ms.Voters, 2, "promoted up to the bound")
	require.Len(t, ms.Learners, 2, "the rest wait as learners")
	_, err := c.propose(l, kv.Put("k", []byte("v")))
	require.NoError(t, err)
	c.run(time.Second)
	for _, m := range ms.Learners {
		e, ok := c.live[m.Name].LocalGet("k")
		require.True(t, ok && string(e.Value) == "v", "learner %s applies every entry", m.Name)
	}
	// A voter leaves (not the leader): a learner takes its place.
	var gone consensus.Member
	for _, m := range ms.Voters {
		if m.ID != c.nodes[l].ID() {
			gone = m
		}
	}
	require.NoError(t, c.conf(l, func(n *consensus.Node, done func(error)) { n.RemoveMember(gone.ID, done) }))
	c.run(5 * time.Second)
	ms = c.node(c.leader()).Membership()
	require.Len(t, ms.Voters, 2, "a learner promoted in the leaver's place")
	require.Len(t, ms.Learners, 1)
	require.Equal(t, -1, memberIndex(ms.Voters, gone.ID))

	bad := c.cfg
	bad.Name, bad.MaxVoters = "x", -1
	require.ErrorIs(t, bad.Validate(), consensus.ErrBadConfig)
}

func memberIndex(ms []consensus.Member, id dial.NodeID) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// TestCallbackMayProposeAgain pins the re-entrancy rule: done runs after
// the Ready that applied its entry is advanced, so a closed-loop client
// can propose from inside it (raft panics on a second Ready before
// Advance).
func TestCallbackMayProposeAgain(t *testing.T) {
	c := newCluster(t, 6, 3, 0)
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	applied := 0
	var again func()
	again = func() {
		c.node(l).Propose(kv.Put("loop", []byte("v")), func(_ kv.Result, err error) {
			require.NoError(t, err)
			if applied++; applied < 50 {
				again()
			}
		})
	}
	c.nodes[l].Exec(again)
	c.run(2 * time.Second)
	require.Equal(t, 50, applied)
}

// A call made before the node knows a leader waits for one, within its
// timeout, instead of failing at once: raft drops it, and the node asks
// again (the first call through a node that just started).
func TestCallsWaitForALeader(t *testing.T) {
	c := newCluster(t, 3, 3, 0)
	c.start(c.nodes...)
	// No leader yet: every node is a follower that heard nobody.
	require.Equal(t, -1, c.leader())
	res, err := c.propose(1, kv.Put("early", []byte("1")))
	require.NoError(t, err, "a proposal before any leader applies once one is elected")
	require.NoError(t, res.Err)
	var rerr error
	done := false
	c.nodes[2].Exec(func() { c.node(2).Barrier(func(err error) { rerr, done = err, true }) })
	for !done {
		require.True(t, c.k.Step())
	}
	require.NoError(t, rerr, "a read before any leader is answered once one is elected")
}

// Two followers' reads with the same sequence number are both answered:
// the leader keeps one pending read per context, so a context is the
// node's, its session's and its number, not the number alone.
func TestConcurrentReadsOfTwoFollowersAreBothAnswered(t *testing.T) {
	c := newCluster(t, 4, 3, 0)
	l := c.elect()
	a, b := (l+1)%3, (l+2)%3
	var errs [2]error
	var done [2]bool
	// Each follower's first read: both number it 1.
	c.nodes[a].Exec(func() { c.node(a).Barrier(func(err error) { errs[0], done[0] = err, true }) })
	c.nodes[b].Exec(func() { c.node(b).Barrier(func(err error) { errs[1], done[1] = err, true }) })
	start := c.k.Now()
	for !done[0] || !done[1] {
		require.True(t, c.k.Step())
	}
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	// With one context per number, the leader kept one of the two and the
	// other waited for its retry, an election timeout later (about 300ms
	// here); before retries, for its whole 2s timeout.
	require.Less(t, c.k.Now()-start, 100*time.Millisecond, "both answered in a round trip or two, not after a retry")
}

// A node stopped with a proposal in flight answers it as an unknown
// outcome: raft had taken it, and the others commit it without the node.
// One raft never took (no leader known) is answered as not applied.
func TestStopAnswersAProposalInFlightAsUnknown(t *testing.T) {
	c := newCluster(t, 5, 3, 0)
	l := c.elect()
	f := (l + 1) % 3
	var err error
	c.nodes[f].Exec(func() {
		c.node(f).Propose(kv.Put("k", []byte("v")), func(_ kv.Result, e error) { err = e })
		c.node(f).Stop()
	})
	require.ErrorIs(t, err, consensus.ErrStoppedInFlight)
	require.True(t, consensus.Unknown(err))
	c.run(2 * time.Second)
	e, ok := c.node(l).LocalGet("k")
	require.True(t, ok, "the forwarded proposal committed without the node that stopped")
	require.Equal(t, "v", string(e.Value))

	lone := newCluster(t, 6, 3, 0)
	lone.start(lone.nodes[0]) // one of three: no leader, so raft takes nothing
	lone.run(time.Second)
	lone.nodes[0].Exec(func() {
		lone.node(0).Propose(kv.Put("k", []byte("v")), func(_ kv.Result, e error) { err = e })
		lone.node(0).Stop()
	})
	require.ErrorIs(t, err, consensus.ErrStopped)
	require.False(t, consensus.Unknown(err))
}

// At the tightest bound on a turn's Ready rounds, every node still elects,
// replicates and answers: a turn that reaches the bound leaves the rest to
// its next turn. A turn needs more than one round when the entries it
// commits pass raft's bound on what one Ready applies (256 KiB): here
// twenty puts of 64 KiB, proposed at once.
func TestReadyRoundsBoundYieldsAndCarriesOn(t *testing.T) {
	for _, bound := range []int{1, 64} {
		c := newCluster(t, 5, 3, 0)
		c.cfg.MaxReadyRounds = bound
		c.start(c.nodes...)
		c.run(2 * time.Second)
		l := c.leader()
		require.GreaterOrEqual(t, l, 0, "a leader within 2s")
		answered := 0
		big := make([]byte, 64<<10)
		c.nodes[l].Exec(func() {
			for i := range 20 {
				c.node(l).Propose(kv.Put(fmt.Sprint("k", i), big), func(r kv.Result, err error) {
					require.NoError(t, err)
					require.NoError(t, r.Err)
					answered++
				})
			}
		})
		c.run(3 * time.Second)
		require.Equal(t, 20, answered, "bound %d: every put answered", bound)
		var yields uint64
		for i := range c.nodes {
			for k := range 20 {
				_, ok := c.node(i).LocalGet(fmt.Sprint("k", k))
				require.True(t, ok, "bound %d: node %d applied put %d", bound, i, k)
			}
			yields += c.node(i).PumpYields
		}
		if bound == 1 {
			require.Positive(t, yields, "a turn reached the bound of one round")
		} else {
			require.Zero(t, yields, "the default bound is not reached by a healthy node")
		}
	}
	err := consensus.Config{Name: "a", MaxReadyRounds: -1}.Validate()
	require.ErrorIs(t, err, consensus.ErrBadConfig)
}

// A leader whose disk stalls while a quorum commits a membership change
// knows the change committed and cannot apply it (raft applies nothing
// a node has not written): it counts itself isolated until it has, since
// the voters it would count and the owners it would place flows by are
// those of a membership no longer in force. Its followers apply it.
func TestALeaderBehindACommittedMembershipIsIsolated(t *testing.T) {
	for _, bug := range []bool{false, true} {
		c := newCluster(t, 7, 4, 0)
		c.worker = true
		c.cfg.Bugs.StaleMembership = bug
		l := c.elect()
		f := (l + 1) % 4
		before := c.node(f).Membership().Index
		c.nodes[l].Disk().Stall(2 * time.Second)
		c.nodes[l].Exec(func() { c.node(l).RemoveMember(c.nodes[f].ID(), func(error) {}) })
		c.run(500 * time.Millisecond)
		other := (l + 2) % 4
		require.Greater(t, c.node(other).Membership().Index, before, "a follower applied the removal")
		require.Equal(t, before, c.node(l).Membership().Index, "the stalled leader has not")
		require.True(t, c.node(l).BelievesSelfLeader())
		require.Equal(t, !bug, c.node(l).IsIsolated(), "bug %v: the leader behind a committed change is isolated", bug)
		c.run(3 * time.Second)
		require.False(t, c.node(c.leader()).IsIsolated(), "once applied, in touch again")
	}
}

// beforeJoin starts three founders, puts k=v through their leader, and
// starts the fourth node, not yet a member: it returns the leader.
func (c *cluster) beforeJoin() int {
	c.start(c.nodes[:3]...)
	c.run(2 * time.Second)
	l := c.leader()
	require.GreaterOrEqual(c.t, l, 0)
	_, err := c.propose(l, kv.Put("k", []byte("v")))
	require.NoError(c.t, err)
	c.start(c.nodes[3])
	return l
}

// A leader whose disk stalls as it applies the change that adds a
// learner cannot write the snapshot that names the newcomer until its
// journal write in flight completes. Meanwhile it sends no snapshot: the
// one it has written does not name the newcomer, which refuses it, and
// each refusal would draw it again. Once written, the newcomer catches up.
func TestNoSnapshotWhileTheOneNamingANewcomerIsUnwritten(t *testing.T) {
	for _, bug := range []bool{false, true} {
		c := newCluster(t, 5, 3, 1)
		c.worker = true
		c.cfg.Bugs.StaleSnapshot = bug
		l := c.beforeJoin()
		stalled := false
		c.node(l).OnMembership(func(ms consensus.Membership) {
			if len(ms.Learners) > 0 && !stalled {
				stalled = true
				c.nodes[l].Disk().Stall(time.Second)
			}
		})
		snaps := 0
		c.nw.Watch(func(s netsim.Sending) {
			if s.Fate == netsim.Sent && s.To == c.nodes[3].ID() {
				if info, err := consensus.DecodeFrame(s.Frame); err == nil && info.Kind == consensus.FrameSnapshot {
					snaps++
				}
			}
		})
		c.nodes[l].Exec(func() { c.node(l).AddLearner(consensus.NewMember("n4", ""), func(error) {}) })
		c.run(3 * time.Second)
		require.True(t, stalled)
		if bug {
			require.Greater(t, snaps, 20, "the stale snapshot is sent again and again")
			continue
		}
		require.LessOrEqual(t, snaps, 2, "a snapshot only once the one naming the newcomer is written")
		e, ok := c.node(3).LocalGet("k")
		require.True(t, ok, "the newcomer caught up")
		require.Equal(t, "v", string(e.Value))
	}
}

// A snapshot from a peer whose data does not decode (cut short, or with
// bytes after its end: what a peer of another version, or one whose
// memory garbled the bytes, sends) is refused before raft takes it, as a
// lost frame: raft would have it written to the journal before the node
// restores it, and the node would then halt at every boot. The leader
// sends again, and the newcomer catches up from the whole one.
func TestAGarbledSnapshotIsRefusedAsLost(t *testing.T) {
	for _, bug := range []bool{false, true} {
		c := newCluster(t, 5, 3, 1)
		c.cfg.Bugs.UncheckedSnapshot = bug
		l := c.beforeJoin()
		newcomer := c.nodes[3]
		garbled := 0
		c.nw.RewriteIf(func(_, to dial.NodeID, frame []byte) []byte {
			var m raftpb.Message
			if garbled == 6 || to != newcomer.ID() || len(frame) == 0 || frame[0] != consensus.FramePrefix ||
				m.Unmarshal(frame[1:]) != nil || m.Type != raftpb.MsgSnap || len(m.Snapshot.Data) < 2 {
				return nil
			}
			d := m.Snapshot.Data
			switch garbled {
			case 0: // cut inside the envelope
				d = d[:1+len(d)/8]
			case 1: // cut inside the KV state at its end
				d = d[:len(d)-1]
			case 2: // a byte after its end
				d = append(append([]byte(nil), d...), 7)
			case 3: // cut to its version byte
				d = d[:1]
			case 4: // a version this node does not know
				d = append([]byte{9}, d[1:]...)
			}
			if garbled == 5 { // no snapshot at all
				m.Snapshot = nil
			} else {
				m.Snapshot.Data = d
			}
			garbled++
			out, err := m.Marshal()
			require.NoError(t, err)
			return append([]byte{consensus.FramePrefix}, out...)
		})
		c.nodes[l].Exec(func() { c.node(l).AddLearner(consensus.NewMember("n4", ""), func(error) {}) })
		c.run(5 * time.Second)
		require.Positive(t, garbled, "snapshots were garbled")
		if bug {
			require.Positive(t, newcomer.Halts, "bug: the garbled snapshot is written and halts the newcomer")
			continue
		}
		require.Zero(t, newcomer.Halts, "no garbled snapshot halts the newcomer")
		require.Equal(t, uint64(garbled), c.node(3).BadSnapshots, "every garbled snapshot refused")
		e, ok := c.node(3).LocalGet("k")
		require.True(t, ok, "the newcomer caught up from a whole snapshot")
		require.Equal(t, "v", string(e.Value))
	}
}
