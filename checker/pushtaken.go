package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// PushTaken holds a successor to the async promise's count of copies
// (checker push-taken): the owner answers a write, pushes it to the
// flow's two successors and counts each live one as a holder, so a
// successor that took the push whole must hold every value it carried,
// or a newer one, once its step ends. A push refused there (a full
// writer queue, a decoder stricter than the encoder, a floor applied
// where none was due) leaves the write one copy short until anti-entropy
// comes round, which no state checker sees unless every other copy is
// lost in that span too. Only the node's own merge floor may refuse a
// copy, and it lies at an m_idx at which the node owned the flow: a value
// stamped at or below the last such m_idx applied by then is not judged
// (a deposed owner's late push, below the node's adoption), nor a push
// to a node it did not leave up.
//
// A run's judge is one PushesTaken: it fails once per flow, and counts
// the pushes it saw taken and those it judged.
type PushesTaken struct {
	Seen, Judged int // pushes taken, and of those judged
	reported     map[string]bool
}

// Judge holds one push, taken by p.To: pushed is what it carried, held
// what the node's copy holds after taking it, read by the simulator.
func (j *PushesTaken) Judge(rep Reporter, p Push, pushed, held map[string]flow.Value, ms []MembershipChange, name func(dial.NodeID) string) {
	j.Seen++
	// The floor is (era, m_idx, incarnation) at an m_idx at which the
	// node adopted the flow, so as its owner: a value stamped at a
	// higher m_idx is above every floor it may hold.
	var owned uint64
	for _, m := range ms {
		if m.At <= p.At {
			if OwnerOf(m.Voters, p.Flow) == p.To {
				owned = max(owned, m.Index)
			}
		}
	}
	var short []string
	judged := false
	for _, k := range slices.Sorted(maps.Keys(pushed)) {
		if pushed[k].Tuple.MIdx <= owned {
			continue
		}
		judged = true
		if cur, ok := held[k]; !ok || cur.Tuple.Less(pushed[k].Tuple) {
			got := "nothing"
			if ok {
				got = fmt.Sprint(cur.Tuple)
			}
			short = append(short, fmt.Sprintf("%q at %v (holds %s)", k, pushed[k].Tuple, got))
		}
	}
	if judged {
		j.Judged++
	}
	if len(short) > 0 && !j.reported[p.Flow] {
		if j.reported == nil {
			j.reported = map[string]bool{}
		}
		j.reported[p.Flow] = true
		rep.Fail("push-taken", "%s took %s's push of flow %s at %v and does not hold %s: a copy the owner counts among the write's holders was dropped",
			name(p.To), name(p.From), p.Flow, p.At, strings.Join(short, ", "))
	}
}
