package checker

import (
	"cmp"
	"slices"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// AdminAct is one join or removal of a node the simulator's operator
// asked a group for, as its client recorded it: when it first asked, and
// each instant a node answered an ask of it with nil. The operator asks
// again (at the version the member holds) until it sees the act done, in
// calm too, so an act asked is an act that must land.
type AdminAct struct {
	Join  bool // a join; else a removal
	Node  dial.NodeID
	Asked time.Duration
	OKs   []time.Duration
}

// AdminActs judges the operator's joins and removals against the
// membership record (each committed membership at the instant the first
// node applied it), as checker "admin-acts":
//
//   - an answer of nil says the act is done: for a join, a membership
//     recorded no later than the answer lists the node (as a learner or a
//     voter); for a removal, one recorded no later, after the first that
//     listed it, lists it no more. A node that answers before it has
//     applied the act, or for an act it never proposed, tells the operator
//     a falsehood it acts on (it stops asking);
//   - an act asked lands: by the end of the run, a joined node is a voter
//     of the last membership (promoted once caught up; of some membership,
//     if its removal was asked after), and a removed one is in it no more.
//     Every refusal on the way is allowed (a stale version, a busy guard,
//     a timeout), so long as the act lands. An act is held to this only
//     if the run went on at least AdminSettle past both its first ask and
//     calm (the instant the faults stopped); else that part is undecided.
//
// It returns how many acts it judged.
func AdminActs(rep Reporter, acts []AdminAct, record []MembershipChange, calm, end time.Duration, name func(dial.NodeID) string) int {
	sorted := slices.Clone(record)
	slices.SortFunc(sorted, func(a, b MembershipChange) int {
		return cmp.Compare(a.Index, b.Index)
	})
	if len(sorted) == 0 {
		if len(acts) > 0 {
			rep.Undecided("admin-acts", "no membership recorded to judge %d acts by", len(acts))
		}
		return 0
	}
	last := sorted[len(sorted)-1]
	for _, a := range acts {
		what := "join"
		if !a.Join {
			what = "removal"
		}
		for _, at := range a.OKs {
			if !adminDoneBy(sorted, a, at) {
				rep.Fail("admin-acts", "%s of %s answered done at %v, before any membership recorded by then said so",
					what, name(a.Node), at)
				break
			}
		}
		if end < max(a.Asked, calm)+AdminSettle {
			rep.Undecided("admin-acts", "the %s of %s asked at %v: the run ended at %v, under %v after it and the calm at %v",
				what, name(a.Node), a.Asked, end, AdminSettle, calm)
			continue
		}
		removed := slices.ContainsFunc(acts, func(b AdminAct) bool { return !b.Join && b.Node == a.Node && b.Asked >= a.Asked })
		voted := slices.ContainsFunc(sorted, func(m MembershipChange) bool { return slices.Contains(m.Voters, a.Node) })
		switch {
		case a.Join && removed && !voted:
			rep.Fail("admin-acts", "%s asked to join at %v, then to be removed, never voted (membership index %d at the run's end)",
				name(a.Node), a.Asked, last.Index)
		case a.Join && !removed && !slices.Contains(last.Voters, a.Node):
			rep.Fail("admin-acts", "%s asked to join at %v is no voter at the run's end (membership index %d)",
				name(a.Node), a.Asked, last.Index)
		case !a.Join && last.Lists(a.Node):
			rep.Fail("admin-acts", "%s asked to be removed at %v is still a member at the run's end (membership index %d)",
				name(a.Node), a.Asked, last.Index)
		}
	}
	return len(acts)
}

// AdminSettle is how long after an admin act is first asked, and after
// the faults stop, it must have landed: a join caught up and promoted, a
// removal applied (each a few of a healthy group's round trips, asked
// again each second).
const AdminSettle = 10 * time.Second

// adminDoneBy reports whether the record (by index) shows a's act done by
// instant at.
func adminDoneBy(record []MembershipChange, a AdminAct, at time.Duration) bool {
	listed := false
	for _, m := range record {
		if m.At > at {
			continue
		}
		in := m.Lists(a.Node)
		switch {
		case a.Join && in:
			return true
		case !a.Join && in:
			listed = true
		case !a.Join && listed:
			return true
		}
	}
	return false
}
