package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// Removal is a committed membership change that took voters out, by the
// simulator's record: the instant the first node applied it, who went,
// the voters it left, and the end of the span it is judged over (the next
// membership change, or the end of the run).
type Removal struct {
	Index     uint64
	At        time.Duration
	Removed   []dial.NodeID
	Survivors []dial.NodeID
	Until     time.Duration
}

// Removals reads the removals out of the membership record (each change
// at the instant the first node applied it): every change whose voters
// lack a voter of the change before it. A removal's span ends at the next
// change, or at end. A change after a removal that leaves the voters as
// they are (a removal of a node already gone, proposed again: it moves
// m_idx, and the survivors start over on the flows they were adopting)
// begins a span of its own, with the same survivors.
func Removals(ms []MembershipChange, end time.Duration) []Removal {
	sorted := append([]MembershipChange(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	var out []Removal
	var gone []dial.NodeID // the last removal's, while the voters stay as it left them
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1].Voters, sorted[i].Voters
		var left []dial.NodeID
		for _, v := range prev {
			if !slices.Contains(cur, v) {
				left = append(left, v)
			}
		}
		switch {
		case len(left) > 0:
			gone = left
		case len(gone) > 0 && slices.Equal(prev, cur):
			// The same survivors, at a new m_idx.
		default:
			gone = nil
			continue
		}
		until := end
		if i+1 < len(sorted) {
			until = sorted[i+1].At
		}
		out = append(out, Removal{Index: sorted[i].Index, At: sorted[i].At, Removed: gone,
			Survivors: append([]dial.NodeID(nil), cur...), Until: until})
	}
	return out
}

// FlowCall is one client call on a flow as the client saw it: the node it
// called, when it called and when it had its answer (or gave up: 0 while
// unresolved), and whether it was served, refused (the store said it did
// not apply it), or neither (no answer: an unknown outcome).
type FlowCall struct {
	Node          dial.NodeID
	Flow          string
	Call, Return  time.Duration
	Served        bool
	Refused       bool
	Note          string // the refusal, for the message
	Client, Index int    // names the call in a message
}

// RemovalBounds are the times ServedAfterRemoval allows, each from the
// scenario's timings.
type RemovalBounds struct {
	// Elect: from the instant a lone survivor starts (the removal, or its
	// restart) to its leading: raft's randomized election timeout, under
	// two isolation windows. (Several survivors are heard leading, in the
	// network's record.)
	Elect time.Duration
	// Settle: from the instant the survivors lead again to the instant
	// each has applied the removal (a heartbeat or two that carries the
	// commit, an fsync).
	Settle time.Duration
	// Adopt: from the first answer on a flow through a survivor once the
	// survivors lead (served, or refused: the owner is adopting it, or
	// has yet to apply the removal) to its serving it: AdoptWait, and the
	// asks the network may lose past it.
	Adopt time.Duration
	// Persist: how long refusals of one flow must go on, past Adopt, to
	// be a failure: a shorter run of them is a blip (an election, an
	// owner briefly isolated on a lossy network), which the run's other
	// checkers judge.
	Persist time.Duration
}

// ServedAfterRemoval (checker "served-after-removal") holds the survivors
// of every removal to serving again, judged from the clients' record and
// the simulator's (frames delivered, crashes) alone, never from what a
// node says of itself.
//
// A removal's span is cut where a survivor is down (a crash, a halt on a
// failed disk: downs), and where the disk of a survivor or of a removed
// node stands still (stalls): a survivor adopts nothing while its fsyncs
// wait, and the removal commits only with a quorum of the membership
// before it, which counts the removed nodes (of two voters, one whose
// disk stalls holds the other's removal of it back, and the survivor,
// behind a change it knows committed, stays isolated). Each piece is
// judged on its own, from the removal, or the restart or the stall's end
// that begins it. The survivors are ready once
// they lead again: a lone survivor Elect after the piece begins, several
// once each has heard leader traffic from a survivor, or, leading, an
// answer to its own (contacts); then Settle. From then on, once a call on
// a flow through a survivor has been answered (served, or refused: its
// owner is adopting it, say, which the first call starts), every call made
// Adopt later and answered within the piece must find it served: a flow
// refused for longer than Persist past that point, with no call served in
// between, is a survivor that no longer serves it (a flow nobody adopts,
// a lone survivor that never leads).
//
// A pair (survivor, flow) never answered once the survivors were ready,
// or asked too little past Adopt, is not judged. It
// returns how many pairs it judged, the removals with no pair judged (the
// caller decides whether the run as a whole decided), and the longest a
// survivor went on refusing a flow once it was ready (from the first
// answer to the last refusal before it served it).
func ServedAfterRemoval(rep Reporter, removals []Removal, calls []FlowCall, contacts []Contact, downs, stalls func(dial.NodeID) []DownWindow,
	b RemovalBounds, name func(dial.NodeID) string) (judged int, unjudged []Removal, slowest time.Duration) {
	byNode := map[dial.NodeID][]FlowCall{}
	for _, c := range calls {
		byNode[c.Node] = append(byNode[c.Node], c)
	}
	for _, cs := range byNode {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Call < cs[j].Call })
	}
	for _, rm := range removals {
		decided := 0
		for _, p := range pieces(rm, downs, stalls) {
			ready, ok := survivorsLead(rm, p, contacts, b.Elect)
			if !ok {
				continue
			}
			ready += b.Settle
			for _, s := range rm.Survivors {
				n, stuck, slow := judgeSurvivor(byNode[s], ready, p.To, b)
				decided += n
				slowest = max(slowest, slow)
				if len(stuck) > 0 {
					rep.Fail("served-after-removal", "%s, left a voter by the removal of %s at %v (judged from %v, the survivors ready by %v), kept refusing %d flow(s) for over %v, %v after it first answered: %s",
						name(s), nodeNames(rm.Removed, name), rm.At, p.From, ready-b.Settle, len(stuck), b.Persist, b.Adopt, strings.Join(stuck, "; "))
				}
			}
		}
		judged += decided
		if decided == 0 {
			unjudged = append(unjudged, rm)
		}
	}
	return judged, unjudged, slowest
}

// pieces cuts a removal's span where a survivor was down, and where the
// disk of a survivor, or of a removed node before it went down, stood
// still. (A removed node's downs are not cuts: it is stopped for good
// once the removal applies, and holds nothing back after.)
func pieces(rm Removal, downs, stalls func(dial.NodeID) []DownWindow) []DownWindow {
	var cuts []DownWindow
	cut := func(id dial.NodeID, windows func(dial.NodeID) []DownWindow, until time.Duration) {
		if windows == nil {
			return
		}
		for _, d := range windows(id) {
			if d.From < until && d.To > rm.At {
				cuts = append(cuts, DownWindow{From: d.From, To: min(d.To, until)})
			}
		}
	}
	for _, id := range rm.Survivors {
		cut(id, downs, rm.Until)
		cut(id, stalls, rm.Until)
	}
	for _, id := range rm.Removed {
		up := rm.Until
		if downs != nil {
			for _, d := range downs(id) {
				if d.To > rm.At {
					up = min(up, max(d.From, rm.At))
					break
				}
			}
		}
		cut(id, stalls, up)
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].From < cuts[j].From })
	var out []DownWindow
	from := rm.At
	for _, c := range cuts {
		if c.From > from {
			out = append(out, DownWindow{From: from, To: c.From})
		}
		from = max(from, c.To)
	}
	if from < rm.Until {
		out = append(out, DownWindow{From: from, To: rm.Until})
	}
	return out
}

// judgeSurvivor judges one survivor's calls in a piece of a removal's
// span whose survivors were ready at ready and which ends at until.
func judgeSurvivor(cs []FlowCall, ready, until time.Duration, b RemovalBounds) (decided int, stuck []string, slowest time.Duration) {
	from := sort.Search(len(cs), func(i int) bool { return cs[i].Call >= ready })
	byFlow := map[string][]FlowCall{}
	var flows []string
	for _, c := range cs[from:] {
		if c.Call >= until {
			break
		}
		if _, seen := byFlow[c.Flow]; !seen {
			flows = append(flows, c.Flow)
		}
		byFlow[c.Flow] = append(byFlow[c.Flow], c)
	}
	for _, f := range flows {
		fc := byFlow[f]
		// The first answer: from then on the flow's owner is serving it,
		// adopting it, or about to.
		first := -1
		for i, c := range fc {
			if (c.Served || c.Refused) && c.Return < until {
				first = i
				break
			}
		}
		if first < 0 {
			continue
		}
		start := fc[first].Call
		for _, c := range fc[first:] {
			if c.Return == 0 || c.Return >= until || c.Served {
				break
			}
			if c.Refused {
				slowest = max(slowest, c.Return-start)
			}
		}
		deadline := start + b.Adopt
		var served, refusing bool
		var since, last FlowCall
		refused := 0
		for _, c := range fc[first:] {
			if c.Call < deadline || c.Return == 0 || c.Return >= until {
				continue
			}
			if c.Served {
				served = true
				break
			}
			if c.Refused {
				if refused == 0 {
					since = c
				}
				refused++
				last = c
				refusing = refusing || last.Call-since.Call >= b.Persist
			}
		}
		switch {
		case served:
			decided++
		case refusing:
			decided++
			stuck = append(stuck, fmt.Sprintf("%s (first answered at %v; %d calls refused from %v to %v, the last, client %d's call %d: %s)",
				f, start, refused, since.Call, last.Call, last.Client, last.Index, last.Note))
		}
	}
	return decided, stuck, slowest
}

// survivorsLead is the first instant in piece p of a removal's span by
// which the survivors lead again: a lone survivor elect after the piece
// begins (it needs nobody); several once every one of them has heard, in
// the piece, leader traffic (entries, a heartbeat, a snapshot) from a
// survivor, or an answer from one to its own.
func survivorsLead(rm Removal, p DownWindow, contacts []Contact, elect time.Duration) (time.Duration, bool) {
	if len(rm.Survivors) <= 1 {
		return p.From + elect, p.From+elect < p.To
	}
	at := p.From
	for _, s := range rm.Survivors {
		heard := time.Duration(-1)
		for _, c := range contacts {
			if c.To == s && c.At >= p.From && c.At < p.To && (c.FromLeader || c.Ack) && slices.Contains(rm.Survivors, c.From) &&
				(heard < 0 || c.At < heard) {
				heard = c.At
			}
		}
		if heard < 0 {
			return 0, false
		}
		at = max(at, heard)
	}
	return at, true
}

func nodeNames(ids []dial.NodeID, name func(dial.NodeID) string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = name(id)
	}
	return strings.Join(out, ",")
}

// LastVoterAsk is a request to take the last voter out (remove it, or
// make it a learner) as the client saw it answered.
type LastVoterAsk struct {
	What     string
	At       time.Duration
	Answered bool
	Refused  bool   // answered with the refusal that names the last voter
	Answer   string // the answer, for the message
}

// LastVoter (checker "last-voter") holds a group to keeping a voter: no
// membership in the record is without one, and every request to take
// the last voter out was answered, with the refusal that says why.
func LastVoter(rep Reporter, ms []MembershipChange, asks []LastVoterAsk) {
	for _, m := range ms {
		if len(m.Voters) == 0 {
			rep.Fail("last-voter", "the membership at index %d, first applied at %v, has no voter", m.Index, m.At)
		}
	}
	for _, a := range asks {
		switch {
		case !a.Answered:
			rep.Fail("last-voter", "%s at %v was never answered", a.What, a.At)
		case !a.Refused:
			rep.Fail("last-voter", "%s at %v was answered %q, not refused as the last voter", a.What, a.At, a.Answer)
		}
	}
}
