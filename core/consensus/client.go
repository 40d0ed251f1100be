package consensus

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
)

// Propose stamps op with this node's wall time (once: every replica
// applies the same stamp, clamped so applied time never goes back) and
// proposes it. done runs exactly once, on the node's loop: with the
// applied result; with ErrBusy, ErrStopped or a validation error at once,
// or ErrNoLeader at the timeout if raft never took it (not applied); or
// with ErrTimeout (outcome unknown). A follower forwards the proposal to
// the leader. A proposal raft dropped (no leader known, leadership
// moving, the forward lost) is proposed again until it applies or the
// timeout ends (retryWaiting); a copy applied twice applies once (dedupe).
func (n *Node) Propose(op kv.Op, done func(kv.Result, error)) {
	cmd := kv.Command{AtMs: n.env.Clock.Now().UnixMilli(), Op: op}
	if err := n.cfg.KV.Validate(cmd); err != nil {
		done(kv.Result{}, err)
		return
	}
	payload, err := kv.EncodeCommand(cmd)
	if err != nil {
		done(kv.Result{}, err)
		return
	}
	seq, err := n.admit()
	if err != nil {
		done(kv.Result{}, err)
		return
	}
	data := propID{n.id, n.session, seq}.append(make([]byte, 0, propIDBytes+len(payload)))
	data = append(data, payload...)
	p := &pendingProp{done: done, data: data}
	n.propose(p)
	n.Proposed++
	n.wait(seq, p)
	n.pump()
}

// propose hands a waiting proposal to raft (again). Whatever raft says,
// the proposal waits: for its retry if raft did not take it, and in any
// case for its commit or its timer, which answers it as an unknown
// outcome. etcd raft v3.6 refuses a proposal only with
// ErrProposalDropped (its Step returns nothing else for MsgProp, and a
// ConfChange always marshals), so no refusal is final; were a later raft
// to refuse otherwise, the caller would still be told the truth, that
// the outcome is unknown.
func (n *Node) propose(p *pendingProp) {
	taken := false
	if to, first := n.handOffBefore(p.cc); first {
		// Not while this node leads: it hands leadership to the other
		// voter, and the change waits, unaccepted, for the next retry,
		// which forwards it to the new leader.
		if to != 0 {
			n.rn.TransferLeader(to)
		}
	} else if p.cc != nil {
		taken = n.rn.ProposeConfChange(*p.cc) == nil
	} else {
		taken = n.rn.Propose(p.data) == nil
	}
	was := p.try.accepted
	n.tried(&p.try, taken)
	p.try.conf = p.cc != nil
	if !was && p.try.accepted {
		p.try.mIdx = n.mIdx // the membership its first copy was proposed under
	}
}

// tried notes an attempt.
func (n *Node) tried(a *attempt, accepted bool) {
	a.conf, a.logged = false, false
	st := n.rn.BasicStatus()
	a.accepted = a.accepted || accepted
	a.tick, a.term, a.lead = n.ticks, st.Term, st.Lead
}

// stale reports whether a waiting call should go to raft again:
//   - raft never took it (it knew no leader): at once, since a drop costs
//     nothing, and the first leader known takes it;
//   - leadership moved since the last attempt (another term or leader): at
//     once, since a deposed leader's uncommitted entry may be gone;
//   - a follower forwarded it an election timeout ago and has not seen it
//     come back in the leader's appends: the forward may have been lost.
//     Not sooner: a slow commit proposed again is one more entry to write
//     everywhere, and retrying a loaded cluster's proposals faster than it
//     commits them would load it more.
//
// One this node has in its log, appended in the current term (the
// leader's own, or a follower's that the leader's appends brought back),
// never: it commits, or a new term comes. A membership change not in the
// log, every election timeout, even on the leader: raft blanks a change
// proposed while another is pending (an empty entry takes its place);
// the retry is harmless otherwise, a copy applied twice being applied
// once (dedupe), and retryWaiting stops retrying one once the membership
// moved.
func (n *Node) stale(a attempt) bool {
	return n.staleAfter(a, uint64(n.cfg.ElectionTicks))
}

// staleRead is stale for a read's index request, which goes again after
// two heartbeats rather than an election timeout: asking again costs the
// leader one heartbeat round and appends nothing, and a lost request or
// answer otherwise leaves little of the read's timeout for a retry.
func (n *Node) staleRead(a attempt) bool {
	return n.staleAfter(a, uint64(2*n.cfg.HeartbeatTicks))
}

func (n *Node) staleAfter(a attempt, forwarded uint64) bool {
	if a.once {
		return false
	}
	st := n.rn.BasicStatus()
	switch {
	case !a.accepted:
		return true
	case st.Term != a.term || st.Lead != a.lead:
		return true
	case a.logged:
		return false
	case a.conf:
		return n.ticks-a.tick >= uint64(n.cfg.ElectionTicks)
	case st.RaftState == raft.StateLeader:
		return false
	}
	return n.ticks-a.tick >= forwarded
}

// retryWaiting proposes again every waiting proposal, and asks again for
// every waiting read's index, that raft may have dropped, in the order
// they were made.
func (n *Node) retryWaiting() {
	if len(n.pending) == 0 && len(n.reads) == 0 {
		return
	}
	for _, seq := range slices.Sorted(maps.Keys(n.pending)) {
		p := n.pending[seq]
		if p.cc != nil && p.try.accepted && p.try.mIdx != n.mIdx {
			continue // the membership moved: the change may no longer be right
		}
		if n.stale(p.try) {
			n.propose(p)
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(n.reads)) {
		if r := n.reads[seq]; r.index == 0 && n.staleRead(r.try) {
			n.rn.ReadIndex(n.readCtx(seq))
			n.tried(&r.try, true)
		}
	}
}

// timedOut is a waiting call's failure at its timeout: ErrNoLeader if
// raft never took it (certainly not applied), else ErrTimeout.
func timedOut(a attempt) error {
	if !a.accepted {
		return ErrNoLeader
	}
	return ErrTimeout
}

// admit reserves a sequence number for a call, or refuses it at the bound.
func (n *Node) admit() (uint64, error) {
	if n.stopped {
		return 0, ErrStopped
	}
	if len(n.pending)+len(n.reads) >= n.cfg.MaxPending {
		return 0, fmt.Errorf("%w (%d in flight)", ErrBusy, len(n.pending)+len(n.reads))
	}
	n.seq++
	return n.seq, nil
}

func (n *Node) wait(seq uint64, p *pendingProp) {
	n.pending[seq] = p
	p.timer = n.env.Clock.AfterFunc(n.cfg.ProposalTimeout, func() {
		if n.pending[seq] == p {
			delete(n.pending, seq)
			if !n.cfg.Bugs.SilentTimeout {
				p.fail(timedOut(p.try))
			}
		}
	})
}

// Read is a linearizable read of key: raft's ReadIndex confirms with a
// quorum that this node's leader is still the leader, and the read is
// answered from this node's state once it has applied that index. done
// runs once: with the value, or with an error (a read changes nothing, so
// every error only means "no answer").
func (n *Node) Read(key string, done func(e kv.Entry, found bool, err error)) {
	seq, err := n.admit()
	if err != nil {
		done(kv.Entry{}, false, err)
		return
	}
	r := &pendingRead{key: key, done: done}
	n.reads[seq] = r
	r.timer = n.env.Clock.AfterFunc(n.cfg.ProposalTimeout, func() {
		if n.reads[seq] == r {
			delete(n.reads, seq)
			if !n.cfg.Bugs.SilentTimeout {
				done(kv.Entry{}, false, ErrTimeout)
			}
		}
	})
	// Raft drops a read index request silently when it knows no leader,
	// and a forwarded one may be lost: retryWaiting asks again, and the
	// timeout above is what turns a read nobody answered into an answer.
	n.rn.ReadIndex(n.readCtx(seq))
	n.tried(&r.try, true)
	n.pump()
}

// readCtx names a read to raft, cluster-wide: the leader keeps one
// pending read per context, so two nodes' reads with the same number
// would share one, and the second would never be answered.
func (n *Node) readCtx(seq uint64) []byte {
	return propID{n.id, n.session, seq}.append(make([]byte, 0, propIDBytes))
}

func (n *Node) readIndexed(rs raft.ReadState) {
	id, rest, err := splitPropID(rs.RequestCtx)
	if err != nil || len(rest) != 0 || id.origin != n.id || id.session != n.session {
		return
	}
	seq := id.seq
	if r := n.reads[seq]; r != nil && r.index == 0 {
		r.index = rs.Index
	}
}

// finishReads answers every read whose index this node has applied.
func (n *Node) finishReads() {
	if len(n.reads) == 0 {
		return // the common case: pump runs this after every Ready
	}
	applied := n.appliedIndex()
	for _, seq := range slices.Sorted(maps.Keys(n.reads)) {
		r := n.reads[seq]
		if r.index == 0 || r.index > applied {
			continue
		}
		delete(n.reads, seq)
		r.timer.Stop()
		e, ok := n.kv.Get(r.key)
		n.later(func() { r.done(e, ok, nil) })
	}
}

// appliedIndex is the highest index whose effects are in this node's state.
func (n *Node) appliedIndex() uint64 { return n.rn.BasicStatus().Applied }

// Barrier answers once this node has applied everything that was
// committed when it was called, as confirmed with a quorum (raft's
// ReadIndex, as Read does): state read from this node afterwards, such as
// LocalLease, is a linearizable read. Errors only mean "no answer".
func (n *Node) Barrier(done func(err error)) {
	n.Read("", func(_ kv.Entry, _ bool, err error) { done(err) })
}

// LocalGet reads this node's applied state: no quorum, no leader, possibly
// stale. Named differently from Read on purpose.
func (n *Node) LocalGet(key string) (kv.Entry, bool) { return n.kv.Get(key) }

// LocalKeys lists this node's applied data keys under prefix, sorted.
func (n *Node) LocalKeys(prefix string) []string { return n.kv.Keys(prefix) }

// LocalLen is how many data keys this node's applied state holds.
func (n *Node) LocalLen() int { return n.kv.Len() }

// LocalLease reads a lease from this node's applied state.
func (n *Node) LocalLease(name string) (kv.Lease, bool) { return n.kv.Lease(name) }

// Events returns up to max watch events this node applied after version.
func (n *Node) Events(since uint64, max int) ([]kv.Event, error) { return n.kv.EventsSince(since, max) }

// Digest is a digest of this node's applied KV state, for checkers.
func (n *Node) Digest() (index uint64, digest uint64) {
	return n.kv.AppliedIndex(), n.kv.Digest()
}

// AddLearner proposes adding m as a learner: it receives the log but does
// not vote until the leader promotes it, once it has caught up. Growing the
// quorum with a member still replaying the log would stall the cluster.
// done runs once: nil when the change is applied here, or an error
// (ErrTimeout: unknown — raft turns a conf change it refuses into an empty
// entry, which answers nobody).
//
// Adding as a learner the only voter would demote it and leave the group
// without a voter: that is refused with ErrLastVoter, as RemoveMember
// refuses removing it.
func (n *Node) AddLearner(m Member, done func(error)) { n.AddLearnerAt(m, 0, done) }

// AddLearnerAt is AddLearner asked for at the membership of index at (0:
// whatever membership is in force): if another is in force when its
// entry applies, every member applies it as nothing, and done gets
// ErrMembershipMoved. An admin act attested at a membership index takes
// effect only at that membership, wherever it was asked and however late
// it commits.
func (n *Node) AddLearnerAt(m Member, at uint64, done func(error)) {
	n.proposeConf(pb.ConfChange{Type: pb.ConfChangeAddLearnerNode, NodeID: uint64(m.ID)}, m, at, done)
}

// RemoveMember proposes removing a voter or learner. A crashed voter stays a
// voter until someone removes it explicitly.
//
// Removing the last voter is refused at once with ErrLastVoter, judged by
// the membership this node has applied: etcd raft panics applying such a
// change, and the entry would panic every member again on every restart.
// A removal proposed on a view that is stale by the time it commits (two
// removals racing in a two-voter group) is caught where it applies: every
// member applies it as nothing, and its proposer gets ErrLastVoter.
func (n *Node) RemoveMember(id dial.NodeID, done func(error)) { n.RemoveMemberAt(id, 0, done) }

// RemoveMemberAt is RemoveMember asked for at the membership of index at,
// as AddLearnerAt.
func (n *Node) RemoveMemberAt(id dial.NodeID, at uint64, done func(error)) {
	m, ok := n.members[id]
	if !ok {
		m = Member{ID: id}
	}
	n.proposeConf(pb.ConfChange{Type: pb.ConfChangeRemoveNode, NodeID: uint64(id)}, m, at, done)
}

func (n *Node) proposeConf(cc pb.ConfChange, m Member, at uint64, done func(error)) {
	if leavesNoVoter(n.conf, cc) && !n.cfg.Bugs.RemoveLastVoter {
		done(ErrLastVoter)
		return
	}
	n.proposeConfOnce(cc, m, at, false, done)
}

// handOffBefore reports whether cc takes this node out of a group of two
// voters while it leads (removes it, or makes it a learner), and if so
// the voter to hand leadership to first. Such a change must not be
// appended by the leader it removes: once it applies it, the leader
// steps down, and the other voter, if it missed the commit (one lost
// frame), still counts two voters and can be elected only with the vote
// of the node just removed, which does not campaign, refuses a candidate
// whose log is shorter than its own, and is about to be stopped: the
// group never elects again (etcd-io/etcd#10563). With three voters or
// more the others can elect without it. The other voter, once leader,
// appends the change and commits it itself.
//
// Nor may leadership go while a membership change waits in this node's
// log, unapplied: the other voter, elected, would commit it. If that
// change removes the other voter, it commits its own removal, and this
// node, which may miss that commit, is the one left counting two voters
// (shrink-to-one's race: the node being removed asks for the survivor's
// removal while its own is still in flight; with the journal's writes
// off the loop, the leader's own append, and so the commit, comes a
// disk write later, and the hand-over used to win). Then the change
// waits, unaccepted, with no hand-over (to is 0): the proposer asks again
// once the pending change has applied.
func (n *Node) handOffBefore(cc *pb.ConfChange) (to uint64, first bool) {
	if cc == nil || n.cfg.Bugs.RemoveLeaderOfTwo || cc.NodeID != uint64(n.id) || len(n.conf.Voters) != 2 ||
		!outOfVoters(cc.Type) || !n.BelievesSelfLeader() {
		return 0, false
	}
	if n.confPending() {
		return 0, true
	}
	if v := n.otherVoter(); v != 0 {
		return v, true
	}
	return 0, false
}

// otherVoter is the voter of a group of two that is not this node; 0 if
// there is none.
func (n *Node) otherVoter() uint64 {
	for _, v := range n.conf.Voters {
		if v != uint64(n.id) {
			return v
		}
	}
	return 0
}

// confPending reports whether this node's log holds a membership change
// past what it has applied.
func (n *Node) confPending() bool {
	ents, err := n.unapplied()
	if err != nil {
		return true // cannot tell: assume one is, and hold the change back
	}
	for _, e := range ents {
		if pb.EntryType(e.Type) == pb.EntryConfChange {
			return true
		}
	}
	return false
}

// unapplied returns the entries of this node's log past what it has
// applied.
func (n *Node) unapplied() ([]journal.Entry, error) {
	applied, last := n.rn.BasicStatus().Applied, n.j.LastIndex()
	if applied >= last {
		return nil, nil
	}
	return n.j.Entries(max(applied+1, n.j.FirstIndex()), last+1, math.MaxUint64)
}

// removalPending reports whether this node's log holds, past what it
// has applied, a change that removes id or makes it a learner.
func (n *Node) removalPending(id uint64) bool {
	ents, err := n.unapplied()
	if err != nil {
		return false // cannot tell: no hand-over or hold, and the change commits as it would have
	}
	for _, e := range ents {
		if pb.EntryType(e.Type) == pb.EntryConfChange && takesOut(e.Data, id) {
			return true
		}
	}
	return false
}

// takesOut reports whether data, a ConfChange entry's payload, removes id
// or makes it a learner.
func takesOut(data []byte, id uint64) bool {
	var cc pb.ConfChange
	return cc.Unmarshal(data) == nil && cc.NodeID == id && outOfVoters(cc.Type)
}

// outOfVoters reports whether a change of type t takes its node out of
// the voters: a removal, or a voter made a learner.
func outOfVoters(t pb.ConfChangeType) bool {
	return t == pb.ConfChangeRemoveNode || t == pb.ConfChangeAddLearnerNode
}

// leavesNoVoter reports whether applying cc to the membership cs would
// leave no voter: removing the only voter, or making it a learner. (Only
// simple changes are proposed here; joint ones never are.)
func leavesNoVoter(cs pb.ConfState, cc pb.ConfChange) bool {
	if !outOfVoters(cc.Type) {
		return false
	}
	for _, v := range cs.Voters {
		if v != cc.NodeID {
			return false
		}
	}
	return len(cs.Voters) > 0
}

// proposeConfOnce is proposeConf, with once: never proposed again.
func (n *Node) proposeConfOnce(cc pb.ConfChange, m Member, at uint64, once bool, done func(error)) {
	seq, err := n.admit()
	if err != nil {
		if !n.cfg.Bugs.SilentConfBusy {
			done(err)
		}
		return
	}
	cc.Context = appendContext(propID{n.id, n.session, seq}, m, at)
	p := &pendingProp{conf: done, cc: &cc}
	p.try.once = once
	n.propose(p)
	n.Proposed++
	n.wait(seq, p)
	n.pump()
}

// Revision is the version of the last change this node applied.
func (n *Node) Revision() uint64 { return n.kv.Version() }
