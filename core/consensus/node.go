package consensus

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/halt"
	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/dial"
)

// Errors a caller sees. ErrNoLeader, ErrBusy and ErrStopped are known
// non-applications: the call never left this node. ErrTimeout and
// ErrStoppedInFlight are unknown outcomes: the proposal may have been, or
// may yet be, applied.
var (
	ErrNoLeader = errors.New("consensus: no leader known; proposal not sent")
	ErrBusy     = errors.New("consensus: too many proposals in flight; refused")
	ErrTimeout  = errors.New("consensus: no answer in time; outcome unknown")
	ErrStopped  = errors.New("consensus: node stopped")
	// ErrStoppedInFlight answers a proposal raft had taken (appended, or
	// forwarded to the leader) when the node stopped: it may commit
	// without this node. An orderly restart in the simulator found it
	// answered ErrStopped, as if it had never left.
	ErrStoppedInFlight = errors.New("consensus: node stopped with the proposal in flight; outcome unknown")
	// ErrLastVoter refuses a membership change that would leave the
	// group without a voter (removing, or demoting to learner, the only
	// one): etcd raft panics when such a change applies, on every member
	// and again on every restart, since the entry stays in the log. It is
	// refused before it is proposed, and an entry that reached the log
	// anyway (proposed on a stale view, or by an earlier version) applies
	// as nothing, on every member alike. Known not applied.
	ErrLastVoter = errors.New("consensus: refusing to remove the last voter")
	// ErrMembershipMoved answers a membership change asked for at a
	// membership (AddLearnerAt, RemoveMemberAt) that was no longer the one
	// in force when its entry applied: every member applies it as
	// nothing. Known not applied.
	ErrMembershipMoved = errors.New("consensus: the membership changed before the change applied; applied as nothing")
)

// Unknown reports whether err leaves the outcome of a proposal unknown.
func Unknown(err error) bool { return errors.Is(err, ErrTimeout) || errors.Is(err, ErrStoppedInFlight) }

// Rand is the seeded source a node draws from (its proposal session).
type Rand interface{ Uint64() uint64 }

// Env is what a node is handed: its clock, its peers, its disk and its
// random source, and the worker its journal writes run on. In the
// simulator all of them are the kernel's.
type Env struct {
	Clock clock.Clock
	Net   dial.Sender
	FS    recfile.FS
	Rand  Rand
	// Worker runs the journal's writes (appends and their fsyncs) beside
	// the loop. Nil: on the loop, waited for (unit tests).
	Worker Worker
}

// Worker runs work away from the loop, in the order it was handed over,
// and then done with work's error back on the loop; Go never waits. A
// crash may lose work not yet run, and its done. Settle runs everything
// handed over, and the dones, before it returns (an orderly shutdown).
// The real node's and the simulator's are the same ones the flow shard
// uses (shard.Worker): one queue per disk.
type Worker interface {
	Go(work func() error, done func(error))
	Settle()
}

type pendingProp struct {
	done  func(kv.Result, error)
	conf  func(error) // set instead of done for membership changes
	timer clock.Timer
	// What a retry proposes again: the entry's data, or the membership
	// change (one of them).
	data []byte
	cc   *pb.ConfChange
	try  attempt
}

type pendingRead struct {
	key   string
	done  func(kv.Entry, bool, error)
	timer clock.Timer
	index uint64 // 0 until raft answers the read index
	try   attempt
}

// attempt is when a waiting call last went to raft, for retries: raft
// drops a proposal or a read without a word when it knows no leader, while
// leadership moves, or when the frame that forwards it to the leader is
// lost, and the caller would wait out its whole timeout for nothing.
type attempt struct {
	accepted bool   // raft took it at least once: it may apply
	tick     uint64 // n.ticks at the last attempt
	term     uint64 // the term raft was in then
	lead     uint64 // the leader this node knew of then
	conf     bool   // a membership change (raft may blank it)
	// logged: the entry is in this node's log, appended in term: it
	// commits, or a new term comes, without being proposed again.
	logged bool
	// mIdx is the membership in force when raft first took it: a
	// membership change is proposed again only while it is, since a change that was
	// right before another applied may be wrong after it (an AddNode
	// retried after a RemoveNode of the same node would add it back).
	mIdx uint64
	// once: never proposed again (the leader's own promotions, which it
	// proposes afresh each election timeout while they are due).
	once bool
}

// Node is one member of the raft group.
type Node struct {
	cfg     Config
	id      dial.NodeID
	env     Env
	j       *journal.Journal
	rn      *raft.RawNode
	kv      *kv.State
	members map[dial.NodeID]Member
	applied *dedupe // proposal ids applied: replicated, so every replica skips the same duplicates
	conf    pb.ConfState
	mIdx    uint64 // index of the membership entry in force
	// prevMIdx and prevVoters are the membership applied just before mIdx,
	// when this node applied both in order; 0 and nil when it does not
	// know (it restored mIdx from a snapshot).
	prevMIdx   uint64
	prevVoters []uint64

	session uint64
	seq     uint64
	pending map[uint64]*pendingProp // by seq
	reads   map[uint64]*pendingRead // by seq; ids share the proposal counter

	ticks uint64 // raft ticks so far: the node's monotonic clock
	// heard is, per peer, the monotonic reading (clock.Clock.Mono) when a
	// contact from it last arrived. Not ticks: a loop held up by fsyncs
	// runs its tick timer late, and a count of ticks then measures less
	// time than has passed, which would stretch the isolation window
	// (D-17) and the leader's quorum check past their bound in true time.
	heard     map[uint64]time.Duration
	heardTick map[uint64]uint64 // the tick of the same contact (Bugs.TickWindow only)
	// The unbroken contact this node has with a leader (ContactSince):
	// the leader it last heard leader traffic from, and since when, with
	// no gap longer than the isolation window; and the term in which it
	// last found itself leading, and since when.
	streakLead  uint64
	streakStart time.Duration
	ledTerm     uint64
	ledSince    time.Duration
	lastExp     uint64            // tick of the last expiry proposal
	promoting   map[uint64]uint64 // learner -> tick its promotion was proposed
	// onMembership, if set, is told of every membership change as it is
	// applied, and of the membership an installed snapshot brings (see
	// OnMembership).
	onMembership func(Membership)
	// onRevision, if set, is told of the KV's revision after each batch
	// of applied entries that moved it (OnRevision); told is the last
	// revision it was told.
	onRevision func(rev uint64)
	told       uint64
	tick       clock.Timer
	onTick     func() // the tick timer's callback, made once by armTick
	stopped    bool
	pumping    bool        // inside pump: a nested call returns at once
	resume     clock.Timer // armed when a turn reached MaxReadyRounds: pump's next turn
	deferred   []func()    // callbacks to run after the current Ready

	// Raft's asynchronous storage writes. The journal stages each
	// MsgStorageAppend; one journal write runs at a time on the worker
	// (jw), and whatever is staged meanwhile goes in the next one, under
	// one fsync. An append's responses (votes, append acknowledgements,
	// raft's own MsgStorageAppendResp) are held until the write that
	// covers it completed: queuedResp for what is staged, jwResp for what
	// jw covers. So are the appends holdAppend holds back (a leader of
	// two, sending the voter it removes what it has not yet written).
	jw         *journal.Write
	jwResp     []pb.Message
	queuedResp []pb.Message

	appliedTo uint64 // index of the last entry applied, or of the snapshot restored
	// confAt are the indexes of the membership changes appended to this
	// node's log in this incarnation and not yet applied, ascending
	// (membershipBehind): raft keeps a leader to one change at a time, so
	// a handful at most. What a restart finds in the journal needs no
	// entry: a node back from one serves nothing before a barrier asked
	// since it found its leader (flow's current), which waits until it
	// has applied all that was committed.
	confAt    []uint64
	snapIndex uint64 // index of the journal's snapshot
	snapWant  uint64 // apply index at which a snapshot was requested
	snapData  []byte // the state at snapWant, taken when it was applied

	// Stats, for benchmarks and traces. RefusedConfChanges counts the
	// committed membership changes applied as nothing because they would
	// have left no voter (ErrLastVoter).
	Applied, Proposed, Sent, SendErrors, BadFrames, Duplicates, RefusedConfChanges uint64
	// BadSnapshots counts the snapshots from peers refused because their
	// data did not decode (counted in BadFrames too).
	BadSnapshots uint64
	// Terms counts the terms this node has seen begin since it started:
	// each is an election somewhere in the cluster.
	Terms    uint64
	lastTerm uint64
	// PumpYields counts the turns that reached MaxReadyRounds and left
	// the rest of raft's work to the next turn.
	PumpYields uint64
}

// Open boots a node from its journal (bootstrapping a new cluster if the
// journal is empty and cfg.Bootstrap is set) and starts its tick.
func Open(cfg Config, env Env) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	j, err := journal.Open(env.FS, cfg.JournalName, cfg.Journal)
	if err != nil {
		return nil, fmt.Errorf("consensus: journal: %w", err)
	}
	state, err := kv.New(cfg.KV)
	if err != nil {
		return nil, fmt.Errorf("consensus: kv: %w", err)
	}
	n := &Node{
		cfg:       cfg,
		id:        dial.IDFromName(cfg.Name),
		env:       env,
		j:         j,
		kv:        state,
		members:   map[dial.NodeID]Member{},
		applied:   newDedupe(),
		session:   env.Rand.Uint64(),
		pending:   map[uint64]*pendingProp{},
		reads:     map[uint64]*pendingRead{},
		heard:     map[uint64]time.Duration{},
		heardTick: map[uint64]uint64{},
		promoting: map[uint64]uint64{},
	}
	if j.LastIndex() == 0 && j.Snapshot().Meta.Index == 0 && len(cfg.Bootstrap) > 0 {
		if err := n.bootstrap(); err != nil {
			return nil, err
		}
	}
	if err := n.restoreFromJournal(); err != nil {
		return nil, err
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              uint64(n.id),
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   cfg.HeartbeatTicks,
		Storage:         storage{j: j, snapPending: n.snapshotPending},
		Applied:         n.snapIndex,
		MaxSizePerMsg:   256 << 10,
		MaxInflightMsgs: 256,
		// Bounds the proposals a leader accepts before they commit.
		MaxUncommittedEntriesSize: 8 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		// A leader that applies its own removal steps down: left to
		// itself it would go on leading a group it is not a voter of,
		// its followers content, and nobody leading with a quorum.
		StepDownOnRemoval: true,
		// The journal's writes leave the loop (pump): raft hands them
		// over as messages and learns of their completion the same way.
		AsyncStorageWrites: true,
		Logger:             discardLogger{},
	})
	if err != nil {
		return nil, fmt.Errorf("consensus: raft: %w", err)
	}
	n.rn = rn
	n.armTick()
	n.pump()
	return n, nil
}

// bootstrap writes the founding snapshot at index 1: the voters, their
// names and addresses, an empty KV. Every founder writes the same one.
func (n *Node) bootstrap() error {
	members := map[dial.NodeID]Member{}
	var voters []uint64
	for _, m := range n.cfg.Bootstrap {
		members[m.ID] = m
		voters = append(voters, uint64(m.ID))
	}
	sort.Slice(voters, func(i, j int) bool { return voters[i] < voters[j] })
	empty, err := kv.New(n.cfg.KV)
	if err != nil {
		return err
	}
	data := snapshotState{mIdx: 1, members: members, dedupe: newDedupe(), kv: empty.Snapshot()}.encode()
	snap, err := snapToJournal(pb.Snapshot{
		Data:     data,
		Metadata: pb.SnapshotMetadata{Index: 1, Term: 1, ConfState: pb.ConfState{Voters: voters}},
	})
	if err != nil {
		return err
	}
	if err := n.j.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("consensus: bootstrap: %w", err)
	}
	return nil
}

// trackConf notes the membership changes among entries being appended to
// this node's log. An append that starts at or before a change noted
// replaces it (a new leader's log overwrote the tail).
func (n *Node) trackConf(entries []pb.Entry) {
	if len(entries) == 0 {
		return
	}
	first := entries[0].Index
	for len(n.confAt) > 0 && n.confAt[len(n.confAt)-1] >= first {
		n.confAt = n.confAt[:len(n.confAt)-1]
	}
	for _, e := range entries {
		if e.Type == pb.EntryConfChange {
			n.confAt = append(n.confAt, e.Index)
		}
	}
}

// restoreFromJournal loads the membership and KV from the journal's
// snapshot; raft then hands back the committed entries after it.
func (n *Node) restoreFromJournal() error {
	snap := n.j.Snapshot()
	n.snapIndex, n.appliedTo = snap.Meta.Index, snap.Meta.Index
	if snap.Meta.Index == 0 {
		return nil
	}
	return n.restoreSnapshot(snap.Data, snap.Meta.ConfState)
}

func (n *Node) restoreSnapshot(data, confState []byte) error {
	st, err := decodeSnapshotState(data)
	if err != nil {
		return err
	}
	if err := n.kv.Restore(st.kv); err != nil {
		return fmt.Errorf("consensus: restoring kv: %w", err)
	}
	var cs pb.ConfState
	if err := cs.Unmarshal(confState); err != nil {
		return err
	}
	n.conf, n.members, n.mIdx, n.applied = cs, st.members, st.mIdx, st.dedupe
	// The membership before the one in force, if the snapshot knew it.
	n.prevMIdx, n.prevVoters = st.prevMIdx, st.prevVoters
	return nil
}

// ID is this node's id.
func (n *Node) ID() dial.NodeID { return n.id }

// Stop cancels the node's timers and fails every waiting call with
// ErrStopped. A stopped node ignores frames.
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	n.tick.Stop() // armed at Open, never cleared
	if n.resume != nil {
		n.resume.Stop()
	}
	for _, seq := range slices.Sorted(maps.Keys(n.pending)) {
		p := n.pending[seq]
		delete(n.pending, seq)
		p.timer.Stop()
		if p.try.accepted {
			p.fail(ErrStoppedInFlight)
		} else {
			p.fail(ErrStopped)
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(n.reads)) {
		r := n.reads[seq]
		delete(n.reads, seq)
		r.timer.Stop()
		r.done(kv.Entry{}, false, ErrStopped)
	}
}

// Close stops the node and closes its journal, whose every record was
// synced before anything that depended on it was sent: the orderly
// shutdown of a real node.
func (n *Node) Close() error {
	running := n.jw != nil
	n.Stop()
	if running && n.env.Worker != nil {
		n.env.Worker.Settle() // the write in flight ends before its file closes
	}
	return n.j.Close()
}

func (p *pendingProp) fail(err error) {
	if p.conf != nil {
		p.conf(err)
		return
	}
	p.done(kv.Result{}, err)
}

func (n *Node) armTick() {
	if n.onTick == nil {
		// Made once: a node ticks every TickInterval for its whole life.
		n.onTick = func() {
			if n.stopped {
				return
			}
			n.ticks++
			n.rn.Tick()
			n.leaderDuties()
			n.retryWaiting()
			n.pump()
			n.armTick()
		}
	}
	n.tick = n.env.Clock.AfterFunc(n.cfg.TickInterval, n.onTick)
}

// HandleFrame steps a raft message from a peer.
func (n *Node) HandleFrame(from dial.NodeID, frame []byte) {
	if n.stopped {
		return
	}
	if len(frame) == 0 || frame[0] != frameRaft {
		n.BadFrames++
		return
	}
	var m pb.Message
	if err := m.Unmarshal(frame[1:]); err != nil || m.From != uint64(from) || m.To != uint64(n.id) || raft.IsLocalMsg(m.Type) {
		// Garbage, a message claiming another sender, or a local message
		// type from the wire: drop it. Raft retries what matters.
		n.BadFrames++
		return
	}
	if contact(m.Type) {
		now := n.env.Clock.Mono()
		if fromLeader(m.Type) {
			// Contact with a leader is unbroken while it comes from the
			// same leader with no gap past the isolation window.
			if last, ok := n.heard[m.From]; !ok || m.From != n.streakLead || now-last > n.IsolationWindow() {
				n.streakLead, n.streakStart = m.From, now
			}
		}
		n.heard[m.From] = now
		n.heardTick[m.From] = n.ticks
	}
	if m.Type == pb.MsgSnap && !n.cfg.Bugs.UncheckedSnapshot {
		// Read a peer's snapshot before raft takes it: raft would have
		// it written to the journal before this node restores it, and
		// one that does not decode would then halt the node at every
		// boot. Refused, it is as good as lost; the leader sends again.
		if err := checkSnapshot(m.Snapshot); err != nil {
			n.BadFrames++
			n.BadSnapshots++
			return
		}
	}
	if m.Type == pb.MsgProp && len(n.conf.Voters) == 2 && n.handOffFor(m) {
		n.pump()
		return
	}
	if err := n.rn.Step(m); err != nil {
		return // e.g. a message from a peer that is not a member
	}
	n.pump()
}

const frameRaft = 1

// FramePrefix is the first byte of every raft frame a node sends, for a
// watcher of the wire (the simulator's) that tells them from others.
const FramePrefix = frameRaft

// handOffFor keeps a leader of two voters from appending a forwarded
// change that takes it out (see handOffBefore): it drops the proposal
// and hands leadership to the other voter instead; the proposer asks
// again once leadership has moved, and the new leader appends it.
func (n *Node) handOffFor(m pb.Message) bool {
	for _, e := range m.Entries {
		if e.Type != pb.EntryConfChange {
			continue
		}
		var cc pb.ConfChange
		if cc.Unmarshal(e.Data) != nil {
			continue
		}
		if to, first := n.handOffBefore(&cc); first {
			if to != 0 {
				n.rn.TransferLeader(to)
			}
			return true
		}
	}
	return false
}

// contact reports whether a message of type t is what D-17 counts as
// contact: a leader's entries, heartbeat or snapshot (a follower hears its
// leader), or a follower's answer to them (a leader hears a voter). A
// deposed leader's pre-vote, or a candidate's vote request, proves no
// leadership: counting them let a follower whose leader had stepped down
// believe itself in touch for another election timeout (the simulator's
// d17 checker found it).
func contact(t pb.MessageType) bool {
	switch t {
	case pb.MsgApp, pb.MsgHeartbeat, pb.MsgSnap, pb.MsgAppResp, pb.MsgHeartbeatResp:
		return true
	}
	return false
}

// fromLeader reports a message only a leader sends.
func fromLeader(t pb.MessageType) bool {
	return t == pb.MsgApp || t == pb.MsgHeartbeat || t == pb.MsgSnap
}

// pump carries out every Ready raft has. With asynchronous storage
// writes a Ready is a list of messages, taken in order:
//   - MsgStorageAppend (a snapshot from the leader, new entries, a hard
//     state) is staged in the journal: memory at once (raft reads its log
//     from there), the file by the next journal write (flushJournal). Its
//     responses, which may promise what it holds (a vote, an append
//     acknowledgement), go out only when that write completed: persist
//     before send;
//   - MsgStorageApply's committed entries are applied here and now, and
//     raft told so (they are committed: a quorum holds them, perhaps not
//     yet this node's disk);
//   - every other message goes to its peer at once.
//
// A snapshot of our own state, if one is due, is taken once no journal
// write runs (maybeSnapshot), so raft never sees its log compacted under
// a write in flight.
//
// Callers' callbacks (an applied proposal's done, a read's answer) are
// collected during the Ready and run after it: a callback may propose
// again. pump does not re-enter: a call from inside a callback returns at
// once, and the loop below picks the new work up.
func (n *Node) pump() {
	if n.pumping {
		return
	}
	n.pumping = true
	defer func() { n.pumping = false }()
	for rounds := 0; !n.stopped && n.rn.HasReady(); rounds++ {
		if rounds == n.cfg.MaxReadyRounds {
			n.yieldPump()
			return
		}
		rd := n.rn.Ready()
		if !raft.IsEmptyHardState(rd.HardState) {
			if n.lastTerm != 0 && rd.Term > n.lastTerm {
				n.Terms += rd.Term - n.lastTerm
			}
			n.lastTerm = max(n.lastTerm, rd.Term)
		}
		var applied []pb.Message
		for _, m := range rd.Messages {
			switch m.To {
			case raft.LocalAppendThread:
				n.stageAppend(m)
			case raft.LocalApplyThread:
				for _, e := range m.Entries {
					n.apply(e)
				}
				applied = append(applied, m.Responses...)
			default:
				if n.holdAppend(m) {
					n.queuedResp = append(n.queuedResp, m)
					continue
				}
				n.send(m)
			}
		}
		if v := n.kv.Version(); n.onRevision != nil && v != n.told {
			n.told = v
			n.later(func() { n.onRevision(v) })
		}
		for _, rs := range rd.ReadStates {
			n.readIndexed(rs)
		}
		for _, m := range applied {
			n.deliver(m)
		}
		n.flushJournal()
		n.finishReads()
		n.maybeSnapshot()
		n.runDeferred()
		n.handOffPendingRemoval()
	}
}

// yieldPump leaves the rest of raft's work to the node's next turn: a
// zero-delay timer, so whatever else waits for the node (frames, timers,
// callers) goes first, and a turn's work is bounded. Raft's state is whole
// between two Ready rounds, so stopping between them loses nothing.
func (n *Node) yieldPump() {
	n.PumpYields++
	if n.resume != nil {
		return
	}
	n.resume = n.env.Clock.AfterFunc(0, func() {
		n.resume = nil
		n.pump()
	})
}

// handOffPendingRemoval hands leadership to the other voter when this
// node leads a group of two while its log holds, unapplied, a change that
// takes it out: appended by the leader before it, which did not live to
// commit it (handOffBefore keeps a leader from appending its own). It
// cannot keep the change from committing: its first append commits it
// once the other voter acknowledges. But while a transfer is under way
// raft drops every new proposal, so its log ends where the other voter's
// does. Once it applies the change it steps down, and the other voter,
// if it missed that commit (one lost frame), still counts two voters and
// needs this node's vote: a log no longer than its own gets it. Without
// the hand-over, a proposal forwarded to this node in between made its
// log the longer, the vote was refused for good, and the group never
// elected again (found by shrink-to-one seed 196; the scenario now aims
// a crash of the leader at the last removal in a third of its runs, half
// of them the instant the leader sends the other voter its removal).
// A leader of two voters is one of them, so the other is never None.
func (n *Node) handOffPendingRemoval() {
	if n.cfg.Bugs.LeadOwnRemoval || n.cfg.Bugs.RemoveLeaderOfTwo || len(n.conf.Voters) != 2 || !n.BelievesSelfLeader() {
		return
	}
	st := n.rn.BasicStatus()
	if st.LeadTransferee != raft.None || !n.removalPending(uint64(n.id)) {
		return
	}
	n.rn.TransferLeader(n.otherVoter())
}

// holdAppend reports whether m, an append from the leader of a group of
// two voters to the other, must wait for this node's own write of what
// it carries (it waits among the responses the next journal write
// covers): while the log holds, unapplied, a change that takes that
// voter out, or m carries one. Raft lets a leader send entries before
// its own copy is durable, which is safe while the follower can still
// be elected; a voter that has applied its own removal never campaigns
// again, though, and still refuses its vote to a log shorter than its
// own. The leader that crashed with such a tail unwritten, and came
// back with its commit index (which rides on later writes) below the
// removal, counted two voters, needed that vote, and the group never
// elected again (shrink-to-one seed 77, once the scenario crashed a
// leader at the removal's append). Held, the removed voter's log is
// never longer than the survivor's durable one.
func (n *Node) holdAppend(m pb.Message) bool {
	if m.Type != pb.MsgApp || len(m.Entries) == 0 || len(n.conf.Voters) != 2 || n.cfg.Bugs.SendBeforeDurable {
		return false
	}
	for _, e := range m.Entries {
		if e.Type == pb.EntryConfChange && takesOut(e.Data, m.To) {
			return true
		}
	}
	return n.removalPending(m.To)
}

// stageAppend stages one MsgStorageAppend in the journal and holds its
// responses for the write that will cover it.
func (n *Node) stageAppend(m pb.Message) {
	if m.Snapshot != nil {
		n.installSnapshot(*m.Snapshot)
	}
	var hs *journal.HardState
	if h := (pb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}); !raft.IsEmptyHardState(h) {
		hs = &journal.HardState{Term: h.Term, Vote: h.Vote, Commit: h.Commit}
	}
	if len(m.Entries) > 0 && len(n.pending) > 0 {
		n.markLogged(m.Entries)
	}
	n.trackConf(m.Entries)
	// Raft asks for durability exactly where the append carries
	// responses: they may promise what it holds.
	sync := len(m.Responses) > 0
	if n.cfg.Bugs.NoVoteSync && len(m.Entries) == 0 && m.Snapshot == nil {
		sync = false // the planted bug
	}
	if err := n.j.Stage(hs, toJournal(m.Entries), sync); err != nil {
		// The journal cannot promise what raft needs: a node that
		// goes on would break raft's safety. Stop, as a crash would.
		halt.Stopf("consensus: %s: journal write failed: %w", n.cfg.Name, err)
		return
	}
	if n.cfg.Bugs.AckBeforeAppend {
		// The planted bug: the responses go out before the write.
		for _, r := range m.Responses {
			n.deliver(r)
		}
		return
	}
	n.queuedResp = append(n.queuedResp, m.Responses...)
}

// flushJournal starts the next journal write, unless one runs: it takes
// everything staged since the last one. Responses that need no write (the
// journal holds nothing unsynced) go out at once.
func (n *Node) flushJournal() {
	if n.jw != nil || n.stopped {
		return
	}
	w := n.j.Take()
	resp := n.queuedResp
	n.queuedResp = nil
	if w == nil {
		for _, m := range resp {
			n.deliver(m)
		}
		return
	}
	n.jw, n.jwResp = w, resp
	if n.env.Worker == nil {
		n.journalDone(w, w.Run())
		return
	}
	n.env.Worker.Go(w.Run, func(err error) { n.journalDone(w, err) })
}

// journalDone is a journal write's completion, back on the loop: the
// responses it covers go out, a compaction that waited for it runs, and
// whatever was staged meanwhile is the next write.
func (n *Node) journalDone(w *journal.Write, err error) {
	if n.jw != w || n.stopped {
		return
	}
	if err := n.j.Done(w, err); err != nil {
		halt.Stopf("consensus: %s: journal write failed: %w", n.cfg.Name, err)
		return
	}
	resp := n.jwResp
	n.jw, n.jwResp = nil, nil
	for _, m := range resp {
		n.deliver(m)
	}
	n.maybeSnapshot()
	n.flushJournal()
	n.pump()
}

// deliver hands a storage write's response to its target: raft itself
// (a local message, or this node's own append acknowledgement as leader)
// or a peer.
func (n *Node) deliver(m pb.Message) {
	if m.To != uint64(n.id) {
		n.send(m)
		return
	}
	if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
		panic(fmt.Sprintf("consensus: %s: raft refused its own storage response %v: %v", n.cfg.Name, m.Type, err))
	}
}

// markLogged notes, of each waiting proposal of this node's whose entry
// is among entries (being appended to this node's log), that it is
// logged: it is not proposed again unless leadership moves.
func (n *Node) markLogged(entries []pb.Entry) {
	term := n.rn.BasicStatus().Term
	for _, e := range entries {
		var ctx []byte
		switch e.Type {
		case pb.EntryNormal:
			ctx = e.Data
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if cc.Unmarshal(e.Data) != nil {
				continue
			}
			ctx = cc.Context
		}
		id, _, err := splitPropID(ctx)
		if err != nil || id.origin != n.id || id.session != n.session || e.Term != term {
			continue
		}
		if p := n.pending[id.seq]; p != nil {
			p.try.logged, p.try.term, p.try.lead = true, term, n.rn.BasicStatus().Lead
		}
	}
}

// later queues a callback to run after the current Ready is advanced.
func (n *Node) later(f func()) { n.deferred = append(n.deferred, f) }

func (n *Node) runDeferred() {
	for len(n.deferred) > 0 {
		f := n.deferred[0]
		n.deferred = n.deferred[1:]
		f()
	}
	n.deferred = nil
}

func (n *Node) installSnapshot(s pb.Snapshot) {
	js, err := snapToJournal(s)
	if err == nil {
		err = n.j.StageSnapshot(js)
	}
	if err == nil {
		err = n.restoreSnapshot(js.Data, js.Meta.ConfState)
	}
	if err != nil {
		halt.Stopf("consensus: %s: installing snapshot at %d: %w", n.cfg.Name, s.Metadata.Index, err)
	}
	n.snapIndex, n.appliedTo = s.Metadata.Index, s.Metadata.Index
	// The snapshot replaces the log, and its membership is applied.
	n.confAt = n.confAt[:0]
	// The snapshot may carry a membership this node never applied entry
	// by entry: a newcomer learns who its peers are, and where, here.
	if n.onMembership != nil {
		n.onMembership(n.Membership())
	}
}

func (n *Node) send(m pb.Message) {
	// Marshalled in place behind the prefix byte: one allocation per
	// frame, not two.
	frame := make([]byte, 1+m.Size())
	frame[0] = frameRaft
	if _, err := m.MarshalTo(frame[1:]); err != nil {
		panic(fmt.Sprintf("consensus: marshal %v: %v", m.Type, err))
	}
	err := n.env.Net.Send(dial.NodeID(m.To), frame)
	n.Sent++
	if err != nil {
		n.SendErrors++
		n.rn.ReportUnreachable(m.To)
	}
	if m.Type == pb.MsgSnap {
		status := raft.SnapshotFinish
		if err != nil {
			status = raft.SnapshotFailure
		}
		n.rn.ReportSnapshot(m.To, status)
	}
}

// apply applies one committed entry and answers the caller waiting on it.
func (n *Node) apply(e pb.Entry) {
	n.Applied++
	n.appliedTo = e.Index
	for len(n.confAt) > 0 && n.confAt[0] <= e.Index {
		n.confAt = n.confAt[1:]
	}
	switch e.Type {
	case pb.EntryNormal:
		if len(e.Data) == 0 {
			return // a new leader's empty entry, or a refused conf change
		}
		id, payload, err := splitPropID(e.Data)
		if err != nil {
			n.BadFrames++
			return
		}
		if !n.applied.firstTime(id, e.Index) {
			n.Duplicates++
			return // its first copy answered the caller
		}
		res := n.kv.Apply(e.Index, payload)
		if p := n.mine(id); p != nil && p.done != nil {
			n.later(func() { p.done(res, nil) })
		}
	case pb.EntryConfChange:
		var cc pb.ConfChange
		if err := cc.Unmarshal(e.Data); err != nil {
			panic(fmt.Sprintf("consensus: committed conf change at %d does not decode: %v", e.Index, err))
		}
		id, rest, err := splitPropID(cc.Context)
		if err == nil && !n.applied.firstTime(id, e.Index) {
			// A duplicate: tell raft the change is a no-op (etcd does the
			// same for conf changes it refuses), so its bookkeeping of the
			// pending change clears and the config stays as it is.
			n.Duplicates++
			n.rn.ApplyConfChange(pb.ConfChange{Type: cc.Type, NodeID: raft.None})
			return
		}
		var m Member
		var at uint64
		if err == nil {
			m, at, err = readContext(rest)
		}
		if at != 0 && at != n.mIdx && !n.cfg.Bugs.ProposalTimeVersion {
			// Asked for at a membership no longer in force (its asker
			// checked the index on a node that was behind, or another
			// change committed first): every member decides this alike,
			// from the same m_idx at the same index, and applies it as
			// nothing. A join replayed through a lagging member would
			// otherwise add back a node removed since.
			n.RefusedConfChanges++
			n.rn.ApplyConfChange(pb.ConfChange{Type: cc.Type, NodeID: raft.None})
			if p := n.mine(id); p != nil && p.conf != nil {
				n.later(func() { p.conf(ErrMembershipMoved) })
			}
			return
		}
		if leavesNoVoter(n.conf, cc) && !n.cfg.Bugs.RemoveLastVoter {
			// A change that would leave no voter: etcd raft would panic
			// applying it (here, on every member, and on every restart
			// while the entry is in the log). Every member decides this
			// alike, from the same membership at the same index, so every
			// member applies it as nothing, as etcd does for conf changes
			// it refuses: the membership and m_idx stay as they are.
			n.RefusedConfChanges++
			n.rn.ApplyConfChange(pb.ConfChange{Type: cc.Type, NodeID: raft.None})
			if p := n.mine(id); p != nil && p.conf != nil {
				n.later(func() { p.conf(ErrLastVoter) })
			}
			return
		}
		n.prevMIdx, n.prevVoters = n.mIdx, append([]uint64(nil), n.conf.Voters...)
		n.conf = *n.rn.ApplyConfChange(cc)
		n.mIdx = e.Index
		if err == nil {
			if cc.Type == pb.ConfChangeRemoveNode {
				delete(n.members, m.ID)
			} else {
				n.members[m.ID] = m
			}
		}
		delete(n.promoting, cc.NodeID)
		if n.onMembership != nil {
			n.onMembership(n.Membership())
		}
		// A newcomer with an empty log rejects a snapshot whose ConfState
		// does not name it, so every membership change is followed by a
		// snapshot that carries the new membership.
		n.requestSnapshot(e.Index)
		if p := n.mine(id); p != nil && p.conf != nil {
			n.later(func() { p.conf(nil) })
		}
	default:
		panic(fmt.Sprintf("consensus: entry type %v is not used by this driver", e.Type))
	}
}

// mine returns the waiting call an applied entry answers, if this node
// proposed it in this incarnation.
func (n *Node) mine(id propID) *pendingProp {
	if id.origin != n.id || id.session != n.session {
		return nil
	}
	p := n.pending[id.seq]
	if p == nil {
		return nil // it timed out: the caller was told "unknown"
	}
	delete(n.pending, id.seq)
	p.timer.Stop()
	return p
}

func (n *Node) requestSnapshot(index uint64) {
	n.snapWant = index
	n.snapData = snapshotState{mIdx: n.mIdx, prevMIdx: n.prevMIdx, prevVoters: n.prevVoters, members: n.members, dedupe: n.applied, kv: n.kv.Snapshot()}.encode()
}

// snapshotPending reports that this node wants a snapshot it has not
// yet written (maybeSnapshot waits for the journal's write in flight).
func (n *Node) snapshotPending() bool {
	return !n.cfg.Bugs.StaleSnapshot && n.snapWant > n.snapIndex
}

func (n *Node) maybeSnapshot() {
	if n.jw != nil {
		return // the write's completion calls again
	}
	// Labelled with the last entry applied, not the KV's: a duplicate or
	// refused conf change after the KV's last entry is in the duplicate
	// table the snapshot carries.
	if n.snapWant == 0 && n.appliedTo >= n.snapIndex+n.cfg.SnapshotEntries {
		n.requestSnapshot(n.appliedTo)
	}
	if n.snapWant == 0 || n.snapWant <= n.snapIndex {
		n.snapWant, n.snapData = 0, nil
		return
	}
	cs, err := n.conf.Marshal()
	if err != nil {
		panic(err)
	}
	if err := n.j.Compact(n.snapWant, n.snapData, cs); err != nil {
		halt.Stopf("consensus: %s: compacting at %d: %w", n.cfg.Name, n.snapWant, err)
		return
	}
	n.snapIndex = n.snapWant
	n.snapWant, n.snapData = 0, nil
	// The compaction wrote what was staged, synced: its responses may go.
	resp := n.queuedResp
	n.queuedResp = nil
	for _, m := range resp {
		n.deliver(m)
	}
}

type discardLogger struct{}

func (discardLogger) Debug(...any)            {}
func (discardLogger) Debugf(string, ...any)   {}
func (discardLogger) Error(...any)            {}
func (discardLogger) Errorf(string, ...any)   {}
func (discardLogger) Info(...any)             {}
func (discardLogger) Infof(string, ...any)    {}
func (discardLogger) Warning(...any)          {}
func (discardLogger) Warningf(string, ...any) {}
func (discardLogger) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (discardLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
