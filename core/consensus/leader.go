package consensus

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
)

// Leader returns the leader this node knows of, or 0.
func (n *Node) Leader() dial.NodeID { return dial.NodeID(n.rn.BasicStatus().Lead) }

// BelievesSelfLeader is this node's opinion that it leads. A deposed
// leader keeps believing it until it hears otherwise: fine for a status
// line, wrong before doing something only one node may do — ask IsLeader.
func (n *Node) BelievesSelfLeader() bool {
	return n.rn.BasicStatus().RaftState == raft.StateLeader
}

// IsLeader reports that this node leads and a quorum of voters has
// acknowledged it within the election timeout (measured on this node's
// monotonic clock, so a wall-clock step cannot stretch it, nor can ticks
// that a busy loop ran late): past it, those voters may elect another.
func (n *Node) IsLeader() bool {
	return n.BelievesSelfLeader() && n.quorumHeardWithin(time.Duration(n.cfg.ElectionTicks)*n.cfg.TickInterval)
}

// IsolationWindow is the window IsIsolated uses: IsolationTicks ticks of
// TickInterval, as monotonic time.
func (n *Node) IsolationWindow() time.Duration {
	return time.Duration(n.cfg.IsolationTicks) * n.cfg.TickInterval
}

// IsIsolated is seed 000's D-17 rule: true when this node knows no current
// leader, when it leads but no quorum acknowledged it within the window, or
// when it follows a leader it has not heard from within the window. An
// isolated node refuses owner-side writes and strong reads.
//
// It is true too while this node's log holds a committed membership
// change it has not applied (membershipBehind): the voters it would count
// and the owners it would place flows by are those of a membership no
// longer in force. A leader whose own disk stalls falls behind so: the
// quorum commits without its write, and raft applies nothing a node has
// not written. Counting the old voters, it kept serving, by the old
// placement, flows its own removal had moved away (imposter-scenarios
// seed 1302: a second, with the new voters out of its reach).
func (n *Node) IsIsolated() bool {
	st := n.rn.BasicStatus()
	switch {
	case st.Lead == raft.None:
		return true
	case n.membershipBehind(st.Commit):
		return true
	case st.RaftState == raft.StateLeader:
		return !n.quorumHeardWithin(n.IsolationWindow())
	default:
		return !n.heardWithin(st.Lead, n.IsolationWindow())
	}
}

// ContactSince is the monotonic instant from which this node has been in
// unbroken contact with the leader it follows (leader traffic from it with
// no gap past the isolation window), or has led in its present term. A
// node that was cut off, restarted, or followed another leader before it
// may not have applied what was committed meanwhile, a membership change
// included: D-17 lets it serve as soon as it hears a leader, so an owner
// confirms with a barrier asked for after this instant that it is current
// (core/flow). A node that follows a leader it has not heard since it
// learned of it gets now: it cannot have confirmed anything yet.
func (n *Node) ContactSince() time.Duration {
	st := n.rn.BasicStatus()
	if st.RaftState == raft.StateLeader {
		// Found lazily: a barrier asked for before it was first seen
		// leading does not count, which only costs one more.
		if n.ledTerm != st.Term {
			n.ledTerm, n.ledSince = st.Term, n.env.Clock.Mono()
		}
		return n.ledSince
	}
	if st.Lead == raft.None || st.Lead != n.streakLead {
		return n.env.Clock.Mono()
	}
	return n.streakStart
}

// membershipBehind reports whether a membership change at or before
// commit, this node's commit index, waits in its log to be applied.
func (n *Node) membershipBehind(commit uint64) bool {
	return !n.cfg.Bugs.StaleMembership && len(n.confAt) > 0 && n.confAt[0] <= commit
}

// heardWithin reports whether a contact from peer arrived within window.
func (n *Node) heardWithin(peer uint64, window time.Duration) bool {
	if n.cfg.Bugs.TickWindow {
		last, ok := n.heardTick[peer]
		return ok && n.ticks-last <= uint64(window/n.cfg.TickInterval)
	}
	last, ok := n.heard[peer]
	return ok && n.env.Clock.Mono()-last <= window
}

func (n *Node) quorumHeardWithin(window time.Duration) bool {
	voters := n.conf.Voters
	if len(voters) == 0 {
		return false
	}
	acks := 0
	for _, v := range voters {
		if v == uint64(n.id) || n.heardWithin(v, window) {
			acks++
		}
	}
	return acks > len(voters)/2
}

// Membership is the committed membership in force.
type Membership struct {
	Index    uint64   // m_idx: the index of the membership entry in force
	Voters   []Member // sorted by id; the ring is built from these
	Learners []Member // sorted by id
	// PrevIndex and PrevVoters are the membership entry applied just
	// before Index (a snapshot carries them too); PrevIndex is 0 when this
	// node does not know it (a snapshot written before they were kept).
	PrevIndex  uint64
	PrevVoters []dial.NodeID // sorted
}

// Lists reports whether id is a voter or a learner of m.
func (m Membership) Lists(id dial.NodeID) bool {
	is := func(x Member) bool { return x.ID == id }
	return slices.ContainsFunc(m.Voters, is) || slices.ContainsFunc(m.Learners, is)
}

// MembershipShape names the membership in force cheaply — its m_idx, its
// number of voters and the previous m_idx — so a caller can tell it has
// not changed without building it.
func (n *Node) MembershipShape() [3]uint64 {
	return [3]uint64{n.mIdx, uint64(len(n.conf.Voters)), n.prevMIdx}
}

// Membership returns the committed membership this node has applied.
func (n *Node) Membership() Membership {
	// Sized once and sorted without reflection: the simulator's checkers
	// ask every node for it ten times a virtual second.
	ms := Membership{Index: n.mIdx}
	if len(n.conf.Voters) > 0 {
		ms.Voters = make([]Member, 0, len(n.conf.Voters))
	}
	for _, id := range n.conf.Voters {
		ms.Voters = append(ms.Voters, n.member(id))
	}
	if len(n.conf.Learners) > 0 {
		ms.Learners = make([]Member, 0, len(n.conf.Learners))
	}
	for _, id := range n.conf.Learners {
		ms.Learners = append(ms.Learners, n.member(id))
	}
	if n.prevMIdx > 0 {
		ms.PrevIndex = n.prevMIdx
		for _, id := range n.prevVoters {
			ms.PrevVoters = append(ms.PrevVoters, dial.NodeID(id))
		}
		slices.Sort(ms.PrevVoters)
	}
	byID := func(a, b Member) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(ms.Voters, byID)
	slices.SortFunc(ms.Learners, byID)
	return ms
}

func (n *Node) member(id uint64) Member {
	if m, ok := n.members[dial.NodeID(id)]; ok {
		return m
	}
	return Member{ID: dial.NodeID(id)}
}

// leaderDuties runs on every tick of a leader: the expiry tick that lets
// leases lapse on a quiet cluster, and learner promotion.
func (n *Node) leaderDuties() {
	if !n.BelievesSelfLeader() {
		return
	}
	every := uint64(n.cfg.ExpiryTick / n.cfg.TickInterval)
	if every == 0 {
		every = 1
	}
	if n.ticks-n.lastExp >= every && len(n.pending)+len(n.reads) < n.cfg.MaxPending/2 {
		n.lastExp = n.ticks
		n.Propose(kv.Tick(), func(kv.Result, error) {})
	}
	n.promoteCaughtUpLearners()
}

// promoteCaughtUpLearners proposes, one at a time, that a learner whose
// match index is within PromoteLag of the leader's last index become a
// voter, while the voters are under MaxVoters. Raft runs one conf change at a time, and a promotion that times
// out is retried after an election timeout.
func (n *Node) promoteCaughtUpLearners() {
	if len(n.conf.Learners) == 0 || n.rn.BasicStatus().Applied < n.rn.BasicStatus().Commit {
		return
	}
	if n.cfg.MaxVoters > 0 && len(n.conf.Voters) >= n.cfg.MaxVoters {
		return // at the bound: learners wait for a voter to leave
	}
	last := n.j.LastIndex()
	learners := append([]uint64(nil), n.conf.Learners...)
	sort.Slice(learners, func(i, j int) bool { return learners[i] < learners[j] })
	for _, id := range learners {
		if at, ok := n.promoting[id]; ok && n.ticks-at < uint64(n.cfg.ElectionTicks) {
			return
		}
	}
	var match = map[uint64]uint64{}
	n.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { match[id] = pr.Match })
	for _, id := range learners {
		// Caught up, and heard from: a learner that has acknowledged
		// nothing yet (match 0) is no voter, however short the log.
		if (match[id] > 0 && match[id]+n.cfg.PromoteLag >= last) || n.cfg.Bugs.PromoteEarly {
			n.promoting[id] = n.ticks
			// Proposed once: this duty proposes it afresh each election
			// timeout while it is due, and a retry after the learner was
			// removed would add it back.
			n.proposeConfOnce(pb.ConfChange{Type: pb.ConfChangeAddNode, NodeID: id}, n.member(id), 0, true, func(error) {})
			return
		}
	}
}

// OnMembership registers f to be told of every membership change this
// node applies, as it applies it, and of the membership a snapshot it
// installs carries: the simulator's record of when each membership came
// into force, for checkers that compute ownership themselves, and the real
// node's source of its peers' addresses. f must not call back into the
// node.
func (n *Node) OnMembership(f func(Membership)) { n.onMembership = f }

// OnRevision registers f to be told, after entries it applied moved the
// replicated KV's revision, of the revision: the rollout's cue that this
// node has applied a change an asker waits for. f runs after the entries'
// callbacks, and may call back into the node.
func (n *Node) OnRevision(f func(rev uint64)) { n.onRevision = f }

// LastIndex is the index of the last entry in this node's log: what it
// holds, committed or not. Checkers compare it across nodes.
func (n *Node) LastIndex() uint64 { return n.j.LastIndex() }

// Info is the node's raft state, for an operator's status page.
type Info struct {
	State                    string // StateLeader, StateFollower, ...
	Term, Applied, Commit    uint64
	LastIndex, SnapshotIndex uint64
	Leader                   dial.NodeID // 0: none known
	Pending                  int         // proposals and reads awaiting an answer
	Sent, SendErrors         uint64
}

// Info reports the node's raft state.
func (n *Node) Info() Info {
	st := n.rn.BasicStatus()
	return Info{State: st.RaftState.String(), Term: st.Term, Applied: st.Applied, Commit: st.Commit,
		LastIndex: n.j.LastIndex(), SnapshotIndex: n.snapIndex, Leader: dial.NodeID(st.Lead),
		Pending: len(n.pending) + len(n.reads), Sent: n.Sent, SendErrors: n.SendErrors}
}

// Status is a one-line description of this node's raft state, for traces
// and checker messages.
func (n *Node) Status() string {
	st := n.rn.BasicStatus()
	return fmt.Sprintf("%s term=%d lead=%v applied=%d commit=%d last=%d snap=%d m_idx=%d isolated=%v pending=%d dups=%d sent=%d senderr=%d",
		st.RaftState, st.Term, dial.NodeID(st.Lead), st.Applied, st.Commit, n.j.LastIndex(), n.snapIndex, n.mIdx, n.IsIsolated(), len(n.pending)+len(n.reads), n.Duplicates, n.Sent, n.SendErrors)
}
