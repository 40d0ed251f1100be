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
// It completes when the previous owner has answered (its answer carries
// the latest writes, and answering fences it: it serves the flow no more
// below the new m_idx), when every source has answered, or, when the
// previous owner cannot be reached, once AdoptWait has passed and at least
// one copy has come in. That last case is where the design accepts loss:
// writes the unreachable owner acknowledged but never pushed are gone.
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
	fromPrev := a.prevOwner != 0 && a.prevOwner != s.env.ID && a.answered[a.prevOwner] &&
		s.prevMIdx > 0 && a.servedAt[a.prevOwner] >= s.prevMIdx
	all := len(a.answered) == len(a.sources)
	if !fromPrev && !all && !(a.waited && len(a.answered) > 0) {
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
	if !fromPrev && !all {
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
	_ = s.send(from, msg{Kind: kindAdoptResp, ID: m.ID, M: m.M, Flow: m.Flow, Entries: s.flows[m.Flow], Served: s.servedAt[m.Flow]})
}

func (s *Store) adoptionAnswer(from dial.NodeID, m msg) {
	a := s.adopting[m.Flow]
	if a == nil || a.id != m.ID {
		s.merge(m.Flow, m.Entries) // a late answer is still a copy worth keeping
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
