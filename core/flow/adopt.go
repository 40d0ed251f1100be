package flow

import (
	"sort"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// adoption is a new owner gathering every copy of one flow before it
// serves it.
//
// It asks the previous owner and the successors under both memberships.
// It completes at once when the authority has spoken: the owner under the
// membership just before, if that owner was serving the flow there (it
// answered, and answering fenced it: it serves the flow no more below the
// new m_idx), or this node itself, if it was. Otherwise it completes once
// AdoptWait has passed and at least one copy has come in: the last node
// to serve the flow may be unreachable, or not even among those asked,
// and the wait outlasts the isolation window in which such a node may
// still serve (D-17). That case is where the design accepts loss: writes
// that node acknowledged but never pushed are gone, and the adopter
// re-stamps the flow so every copy converges on what it serves.
type adoption struct {
	flow      string
	m         uint64
	id        uint64
	prevOwner dial.NodeID // zero if unknown (a restarted node)
	sources   []dial.NodeID
	answered  map[dial.NodeID]bool
	servedAt  map[dial.NodeID]uint64 // what each answer said of when it last served the flow
	waited    bool
	timer     clock.Timer
}

func (s *Store) startAdoption(flow string) {
	if a := s.adopting[flow]; a != nil && a.m == s.mIdx {
		return
	}
	s.nextID++
	a := &adoption{flow: flow, m: s.mIdx, id: s.nextID, answered: map[dial.NodeID]bool{}, servedAt: map[dial.NodeID]uint64{}}
	set := map[dial.NodeID]bool{}
	for _, id := range s.ring.Placement(ring.ClassFlow, flow).Nodes() {
		set[id] = true
	}
	if s.havePrev {
		p := s.prevRing.Placement(ring.ClassFlow, flow)
		a.prevOwner, _ = p.Owner()
		for _, id := range p.Nodes() {
			set[id] = true
		}
	}
	delete(set, s.env.ID)
	sources := make([]dial.NodeID, 0, len(set))
	for id := range set {
		sources = append(sources, id)
	}
	sort.Slice(sources, func(i, j int) bool { return sources[i] < sources[j] })
	a.sources = sources
	s.adopting[flow] = a
	s.askSources(a)
	s.tryFinishAdoption(a)
}

func (s *Store) askSources(a *adoption) {
	for _, id := range a.sources {
		if !a.answered[id] {
			_ = s.send(id, msg{Kind: kindAdoptReq, ID: a.id, M: a.m, Flow: a.flow})
		}
	}
	wait := s.cfg.AdoptWait
	if s.cfg.Bugs.NoAdoptWait {
		wait = time.Millisecond
	}
	a.timer = s.env.Clock.AfterFunc(wait, func() {
		if s.adopting[a.flow] != a {
			return
		}
		a.waited = true
		if !s.tryFinishAdoption(a) {
			s.askSources(a) // nobody answered yet: ask again, wait again
		}
	})
}

func (s *Store) tryFinishAdoption(a *adoption) bool {
	// The previous owner's answer is the authority only if it was serving
	// the flow under the membership just before this one: then every
	// write since the flow's last handoff passed through it. If it never
	// served it there, the last node that did may be gone (removed while
	// its last pushes never arrived): the handoff may lose writes.
	fromPrev := s.prevMIdx > 0 && a.prevOwner != 0 &&
		((a.prevOwner == s.env.ID && s.servedAt[a.flow] >= s.prevMIdx) ||
			(a.answered[a.prevOwner] && a.servedAt[a.prevOwner] >= s.prevMIdx))
	// Without that authority, the last node to serve the flow may be one
	// nobody here asked (it served under an older membership and is in
	// neither placement), and it may still be serving its side of a
	// partition: wait out AdoptWait, past its isolation window, even if
	// every copy asked has answered.
	if !fromPrev && !(a.waited && (len(a.answered) > 0 || len(a.sources) == 0)) {
		return false
	}
	a.timer.Stop()
	delete(s.adopting, a.flow)
	if a.m != s.mIdx {
		return true // the membership moved on while we gathered: start over on the next request
	}
	s.adopted[a.flow] = a.m
	s.servedAt[a.flow] = a.m
	s.Adoptions++
	if !fromPrev {
		// Without the last serving owner's answer, even every copy that
		// answered may lack its final writes, and a copy still in flight
		// may carry them later: re-stamp, so the copies converge on what
		// this owner serves.
		s.restamp(a.flow)
	}
	if s.onAdopted != nil {
		s.onAdopted(a.flow, a.m, fromPrev)
	}
	return true
}

// answerAdoption sends a new owner this node's copy of a flow. If the new
// owner works at a newer membership than this node, this node fences the
// flow: until it catches up it refuses to serve it, so the two can never
// both serve — the handshake that closes the deposed-owner window whenever
// the old owner can be reached.
func (s *Store) answerAdoption(from dial.NodeID, m msg) {
	if m.M > s.mIdx && m.M > s.fencedAt[m.Flow] {
		s.fencedAt[m.Flow] = m.M
	}
	_ = s.send(from, msg{Kind: kindAdoptResp, ID: m.ID, M: m.M, Flow: m.Flow, Entries: s.flows[m.Flow],
		Served: s.servedAt[m.Flow], Their: s.mIdx})
}

func (s *Store) adoptionAnswer(from dial.NodeID, m msg) {
	a := s.adopting[m.Flow]
	if a == nil || a.id != m.ID {
		s.merge(m.Flow, m.Entries) // a late answer is still a copy worth keeping
		return
	}
	if m.Their > a.m {
		// The answerer has applied a newer membership than ours: we may
		// be a deposed owner (a restart lost our fence). Abandon; the
		// next request starts over once we have caught up.
		a.timer.Stop()
		delete(s.adopting, a.flow)
		return
	}
	s.merge(m.Flow, m.Entries)
	a.answered[from] = true
	a.servedAt[from] = m.Served
	s.tryFinishAdoption(a)
}

// restamp re-writes every key of a flow adopted without every copy, with a
// new tuple from the adopter, and pushes the result. A copy it did not hear
// from may hold a larger tuple from an earlier m_idx for some key than the
// copies it heard from; the new owner's tuple (this m_idx) outranks it, so
// the copies converge on what the new owner serves. Writes held only by a
// copy it did not hear from are the loss the design accepts there.
func (s *Store) restamp(flow string) {
	f := s.flows[flow]
	if len(f) == 0 {
		return
	}
	changed := map[string]Value{}
	for _, k := range sortedKeys(f) {
		v := f[k]
		v.Tuple = s.nextTuple(v.Tuple)
		changed[k] = v
	}
	s.commit(flow, changed)
	s.push(flow, changed)
}
