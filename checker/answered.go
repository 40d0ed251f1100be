package checker

import (
	"sort"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// Ask is a request a node took: From sent it at Sent (in its Session,
// numbered ID), and To took it at Taken, by the network's record.
type Ask struct {
	From, To    dial.NodeID
	Session, ID uint64
	Sent, Taken time.Duration
}

// Reply is an answer a node sent: From answered To's request Session/ID
// at At, by the network's record.
type Reply struct {
	From, To    dial.NodeID
	Session, ID uint64
	At          time.Duration
}

// Answered fails when a node took a request and sent no answer to it
// within bound of taking it, though it stayed up the whole time (checker
// request-answered). A refusal is an answer: the protocols promise the
// caller one, the sooner the better, so that a 503 comes at once instead
// of a timeout; an owner that swallows a request leaves its caller with
// an unknown outcome, which every other checker forgives. Requests taken
// less than bound before end are not judged (their answers may be
// coming). down reports whether a node was down at any instant of a span
// (the simulator's record: a crash, a halt, a stop). At most one failure
// per receiving node is reported. It returns how many requests it judged.
func Answered(rep Reporter, checker string, asks []Ask, replies []Reply, bound, end time.Duration,
	down func(node dial.NodeID, from, to time.Duration) bool, name func(dial.NodeID) string) int {
	type key struct {
		from, to    dial.NodeID
		session, id uint64
	}
	at := map[key][]time.Duration{}
	for _, r := range replies {
		k := key{r.To, r.From, r.Session, r.ID}
		at[k] = append(at[k], r.At)
	}
	for _, times := range at { //fenceline:unordered sorting each list in place
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	}
	reported := map[dial.NodeID]bool{}
	judged := 0
	for _, a := range asks {
		by := a.Taken + bound
		if by > end || down(a.To, a.Taken, by) {
			continue
		}
		judged++
		times := at[key{a.From, a.To, a.Session, a.ID}]
		i := sort.Search(len(times), func(i int) bool { return times[i] >= a.Sent })
		if i < len(times) && times[i] <= by {
			continue
		}
		if !reported[a.To] {
			reported[a.To] = true
			rep.Fail(checker, "%s took %s's request %d/%d at %v and sent no answer by %v, up all along",
				name(a.To), name(a.From), a.Session, a.ID, a.Taken, by)
		}
	}
	return judged
}
