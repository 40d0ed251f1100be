package checker

import (
	"time"

	"github.com/fenceline/fenceline/dial"
)

// AppendedChange is a membership change that takes a voter out, as the
// network saw a leader's append carry it: the sender and the term it
// sent in, the entry's index and term, and the voter it takes out.
type AppendedChange struct {
	Leader    dial.NodeID
	Term      uint64
	Index     uint64
	EntryTerm uint64
	Out       dial.NodeID
	At        time.Duration
}

// OwnRemoval holds leaders of a group of two to their rule (checker
// own-removal): a leader never appends a change that takes itself out of
// a group of two voters; it hands leadership to the other voter first,
// and the change goes through the new leader (core/consensus,
// handOffBefore). A leader of two that commits its own removal steps down
// on applying it, and the other voter, if it missed that commit (one lost
// frame), still counts two voters and can never be elected: the group is
// gone. The outcome needs that lost frame; the rule is judged on every
// append. An entry the leader did not append itself (its term is older
// than the sender's) is an earlier leader's, which a new leader must
// carry (it hands over then, at once: handOffPendingRemoval). The
// membership an entry is judged against is the last one recorded below
// its index: raft appends no change while another is unapplied, so the
// leader ran under that one. It returns how many changes it judged:
// those that took a voter out of a group of two.
func OwnRemoval(rep Reporter, seen []AppendedChange, memberships []MembershipChange, name func(dial.NodeID) string) int {
	judged := 0
	reported := map[[2]uint64]bool{}
	for _, c := range seen {
		var in MembershipChange
		for _, m := range memberships {
			if m.Index < c.Index && m.Index >= in.Index {
				in = m
			}
		}
		if len(in.Voters) != 2 {
			continue
		}
		judged++
		key := [2]uint64{uint64(c.Leader), c.Index}
		if c.Out != c.Leader || c.EntryTerm != c.Term || reported[key] {
			continue
		}
		reported[key] = true
		rep.Fail("own-removal", "%s, leading the two voters of membership %d in term %d, appended its own removal at index %d and sent it at %v: it must hand leadership over first",
			name(c.Leader), in.Index, c.Term, c.Index, c.At)
	}
	return judged
}
