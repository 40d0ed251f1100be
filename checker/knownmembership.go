package checker

import (
	"sort"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// CommitShown is a commit index a node's frame carried as it left the
// node: a leader's append or heartbeat tells its follower how far the log
// is committed, so its sender knew at least that much at At.
type CommitShown struct {
	Node   dial.NodeID
	At     time.Duration // the sender's own instant (its loop may run ahead of the kernel's)
	Commit uint64
}

// KnownMembership holds every service to the memberships its node knew
// were committed (checker known-membership): once a frame a node sent
// showed a commit index at or past a membership change, that node serves
// no flow it does not own under that membership, or under a later one
// applied by then. A node that knows the change committed and has not
// applied it yet (its disk behind the quorum) must wait: the placement
// it would serve by is gone, and the flows that moved have new owners
// adopting them. The placement checker cannot see it (the node owned the
// flow under a membership applied before), and D-17 only when the node
// also lacks a quorum of the new voters.
//
// Knowledge lasts an incarnation: a node that restarts may come back
// with less of its log than it had (an unsynced tail), and re-learns.
// upSince gives the instant a node last came up at or before an instant.
// At most one failure per node is reported. It returns how many services
// it judged against a membership the node knew.
func KnownMembership(rep Reporter, services []FlowService, shown []CommitShown, ms []MembershipChange,
	upSince func(dial.NodeID, time.Duration) time.Duration, name func(dial.NodeID) string) int {
	ms = append([]MembershipChange(nil), ms...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Index < ms[j].Index })
	byNode := map[dial.NodeID][]CommitShown{}
	for _, c := range shown {
		byNode[c.Node] = append(byNode[c.Node], c)
	}
	for _, cs := range byNode { //fenceline:unordered sorting each list in place
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].At < cs[j].At })
	}
	reported := map[dial.NodeID]bool{}
	judged := 0
	for _, s := range services {
		if reported[s.Node] {
			continue
		}
		commit := knownCommit(byNode[s.Node], upSince(s.Node, s.At), s.At)
		// The newest membership the node knew committed.
		k := sort.Search(len(ms), func(i int) bool { return ms[i].Index > commit }) - 1
		if k < 0 {
			continue
		}
		judged++
		owns := false
		for i := k; i < len(ms) && !owns; i++ {
			owns = (i == k || ms[i].At <= s.At) && OwnerOf(ms[i].Voters, s.Flow) == s.Node
		}
		if owns {
			continue
		}
		reported[s.Node] = true
		rep.Fail("known-membership", "%s served flow %s at %v, having shown at %v that it knew committed m_idx %d, under which it does not own the flow (owner %s): an owner serving by a membership it knew was replaced",
			name(s.Node), s.Flow, s.At, shownAt(byNode[s.Node], upSince(s.Node, s.At), s.At, ms[k].Index), ms[k].Index, ownerName(ms[k].Voters, s.Flow, name))
	}
	return judged
}

// knownCommit is the highest commit index cs shows its node sent in
// [since, at): the last one before at, if it is since since, raft's
// commit index never falling within a process's life.
func knownCommit(cs []CommitShown, since, at time.Duration) uint64 {
	j := sort.Search(len(cs), func(i int) bool { return cs[i].At >= at }) - 1
	if j < 0 || cs[j].At < since {
		return 0
	}
	return cs[j].Commit
}

// shownAt is when cs first showed a commit index of at least idx in
// [since, at), for the failure's message.
func shownAt(cs []CommitShown, since, at time.Duration, idx uint64) time.Duration {
	for _, c := range cs {
		if c.At >= since && c.At < at && c.Commit >= idx {
			return c.At
		}
	}
	return 0
}

func ownerName(voters []dial.NodeID, flow string, name func(dial.NodeID) string) string {
	if o := OwnerOf(voters, flow); o != 0 {
		return name(o)
	}
	return "none"
}
