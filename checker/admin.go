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
	// Abandoned: the operator stopped asking before it saw the act done
	// (its script ends at the calm): what the answers said is judged,
	// not whether the act landed.
	Abandoned bool
}

// AdminActs judges the operator's joins and removals against the
// membership record (each committed membership at the instant the first
// node applied it), as checker "admin-acts". A node may be joined and
// removed many times; each act is judged up to the next act on the same
// node (which the operator asks only once it sees this one done):
//
//   - an answer of nil says the act is done: the newest membership
//     recorded no later than the answer lists the node (a join: as a
//     learner or a voter), or does not (a removal). A node that answers
//     before it has applied the act, or for an act it never proposed,
//     tells the operator a falsehood it acts on (it stops asking);
//   - an act asked lands: a join makes the node a voter (promoted once
//     caught up), a removal takes it out, in a membership recorded
//     between its first ask and the next act's; the last act on a node
//     holds at the run's end. Every refusal on the way is allowed (a
//     stale version, a busy guard, a timeout), so long as the act lands.
//     The last act is held to this only if the run went on at least
//     AdminSettle past both its first ask and calm (the instant the
//     faults stopped); else that part is undecided.
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
				rep.Fail("admin-acts", "%s of %s answered done at %v, when the newest membership recorded did not say so",
					what, name(a.Node), at)
				break
			}
		}
		// The next act on the same node, if any.
		var next *AdminAct
		for i := range acts {
			if b := &acts[i]; b.Node == a.Node && b.Asked > a.Asked && (next == nil || b.Asked < next.Asked) {
				next = b
			}
		}
		landed := func(m MembershipChange) bool {
			if a.Join {
				return slices.Contains(m.Voters, a.Node)
			}
			return !m.Lists(a.Node)
		}
		if a.Abandoned {
			continue
		}
		if next != nil {
			if !slices.ContainsFunc(sorted, func(m MembershipChange) bool { return m.At >= a.Asked && m.At <= next.Asked && landed(m) }) {
				rep.Fail("admin-acts", "the %s of %s asked at %v had not landed by %v, when the next act on it was asked", what, name(a.Node), a.Asked, next.Asked)
			}
			continue
		}
		if end < max(a.Asked, calm)+AdminSettle {
			rep.Undecided("admin-acts", "the %s of %s asked at %v: the run ended at %v, under %v after it and the calm at %v",
				what, name(a.Node), a.Asked, end, AdminSettle, calm)
			continue
		}
		if !landed(last) {
			rep.Fail("admin-acts", "the %s of %s asked at %v had not landed at the run's end (membership index %d)", what, name(a.Node), a.Asked, last.Index)
		}
	}
	return len(acts)
}

// AdminSettle is how long after an admin act is first asked, and after
// the faults stop, it must have landed: a join caught up and promoted, a
// removal applied (each a few of a healthy group's round trips, asked
// again each second).
const AdminSettle = 10 * time.Second

// adminDoneBy reports whether the newest membership the record (by
// index) holds at instant at shows a's act done.
func adminDoneBy(record []MembershipChange, a AdminAct, at time.Duration) bool {
	var newest *MembershipChange
	for i := range record {
		if record[i].At <= at {
			newest = &record[i]
		}
	}
	return newest != nil && newest.Lists(a.Node) == a.Join
}
