package flow

import (
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
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
// AdoptWait has passed and at least one copy has come in (or none, when
// no node it asked is a voter any more: removed nodes may never answer,
// and their copies went with them): the last node to serve the flow may
// be unreachable, or not even among those asked, and the wait outlasts
// the isolation window in which such a node may still serve (D-17). That
// case is where the design accepts loss: writes that node acknowledged
// but never pushed are gone, and the adopter re-stamps the flow so every
// copy converges on what it serves.
type adoption struct {
	flow       string
	m          uint64
	id         uint64
	prevOwner  dial.NodeID // zero if unknown (a restarted node)
	sources    []dial.NodeID
	answered   map[dial.NodeID]bool
	servedAt   map[dial.NodeID]uint64 // what each answer said of when it last served the flow
	mode       shard.Mode             // the imposter's durability, from the request that started it
	waited     bool                   // AdoptWait has passed
	committing bool                   // complete; waiting for the fsync that makes it so
	deadline   clock.Timer            // AdoptWait
	spentAt    time.Duration          // when AdoptWait since the membership came into force ends (monotonic)
	spent      clock.Timer            // fires then, if that is before deadline; nil otherwise
	retry      clock.Timer            // asks the sources that have not answered again
	asked      int                    // rounds of asking so far
	// members: some source is a voter of the membership the adoption
	// works at. A source that is not has been removed: its copy went with
	// it, and it may never answer (stopped, or refused by the transport
	// as a stranger), so past AdoptWait the adoption does not wait for it.
	members bool
}

// maxAsks bounds an adoption's rounds of asking (four per AdoptWait).
const maxAsks = 40

func (s *Store) startAdoption(flow string, mode shard.Mode) {
	if a := s.adopting[flow]; a != nil && a.m == s.mIdx {
		return
	}
	s.nextID++
	a := &adoption{flow: flow, m: s.mIdx, id: s.nextID, mode: mode, answered: map[dial.NodeID]bool{}, servedAt: map[dial.NodeID]uint64{}}
	set := map[dial.NodeID]bool{}
	for _, id := range s.ring.Placement(ring.ClassOf(flow), flow).Nodes() {
		set[id] = true
	}
	if s.havePrev {
		p := s.prevRing.Placement(ring.ClassOf(flow), flow)
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
	for _, id := range sources {
		a.members = a.members || slices.Contains(s.voters, id)
	}
	s.adopting[flow] = a
	wait := s.cfg.AdoptWait
	if s.cfg.Bugs.NoAdoptWait {
		wait = time.Millisecond
	}
	a.deadline = s.env.Clock.AfterFunc(wait, func() {
		if s.adopting[a.flow] == a {
			a.waited = true
			s.tryFinishAdoption(a)
		}
	})
	// The wait outlasts the isolation window of a node that may still
	// serve the flow under an older membership. That window began before
	// this store first saw the membership now in force, so once that is
	// AdoptWait ago the window is spent for every flow: an adoption that
	// has heard every copy it asked for need not wait any longer (every
	// new flow of a stateful imposter, in a cluster that has not changed
	// lately). Without every answer it still waits out AdoptWait.
	a.spentAt = s.mIdxSince + wait
	if left := a.spentAt - s.env.Clock.Mono(); left > 0 && left < wait {
		a.spent = s.env.Clock.AfterFunc(left, func() {
			if s.adopting[a.flow] == a {
				s.tryFinishAdoption(a)
			}
		})
	}
	s.askSources(a, wait/4)
	s.tryFinishAdoption(a)
}

// stopTimers stops the adoption's timers. retry is set before anything
// can stop them (startAdoption asks its sources before it can finish);
// spent only when the window ends before AdoptWait.
func (a *adoption) stopTimers() {
	a.deadline.Stop()
	a.retry.Stop()
	if a.spent != nil {
		a.spent.Stop()
	}
}

// askSources asks every source that has not answered, and again every
// interval until the adoption completes: a source that was down (a node
// restarting with this one after a shared crash) answers once it is back.
func (s *Store) askSources(a *adoption, every time.Duration) {
	for _, id := range a.sources {
		if !a.answered[id] {
			_ = s.send(id, msg{Kind: FrameAdopt, ID: a.id, M: a.m, Flow: a.flow})
		}
	}
	a.retry = s.env.Clock.AfterFunc(every, func() {
		if s.adopting[a.flow] != a || a.committing {
			return
		}
		if a.asked++; a.asked >= maxAsks {
			// Nobody has answered for ten AdoptWaits: stop asking. The
			// next request for the flow starts over.
			a.stopTimers()
			delete(s.adopting, a.flow)
			return
		}
		s.askSources(a, every)
	})
}

func (s *Store) tryFinishAdoption(a *adoption) {
	if a.committing {
		return
	}
	// The previous owner's answer is the authority only if it was serving
	// the flow under the membership just before this one: then every
	// write since the flow's last handoff passed through it. If it never
	// served it there, the last node that did may be gone (removed while
	// its last pushes never arrived): the handoff may lose writes. And a
	// node that served the flow at this very membership (a restarted
	// owner, which keeps that on disk) is the authority: nobody else
	// serves at an m_idx but its owner.
	self := s.servedAt[a.flow]
	fromPrev := (s.prevMIdx > 0 && a.prevOwner != 0 &&
		((a.prevOwner == s.env.ID && self >= s.prevMIdx) ||
			(a.answered[a.prevOwner] && a.servedAt[a.prevOwner] >= s.prevMIdx))) ||
		self >= a.m
	if fromPrev && s.recovered && !s.reconciled[a.flow] && len(a.answered) < len(a.sources) {
		// A restarted node's copy is its disk, which lacks the async
		// writes its crash took; only the copies it pushed them to hold
		// them. Until every copy has answered, it is no authority.
		fromPrev = false
	}
	// Without that authority, the last node to serve the flow may be one
	// nobody here asked (it served under an older membership and is in
	// neither placement), and it may still be serving its side of a
	// partition: wait out AdoptWait, past its isolation window, even if
	// every copy asked has answered.
	everyCopy := len(a.answered) == len(a.sources) && s.env.Clock.Mono() >= a.spentAt
	// Past AdoptWait, one copy will do; none, if no voter is left to give
	// one: a voter left alone by removals asks only nodes that are gone,
	// and would otherwise refuse every flow it did not already serve, for
	// ever. Their writes that reached no one else are the loss a removal
	// accepts; a voter that is down is waited for, as before.
	waitedOut := a.waited && (len(a.answered) > 0 || len(a.sources) == 0 || !a.members && !s.cfg.Bugs.WaitForRemoved)
	if !fromPrev && !everyCopy && !waitedOut {
		return
	}
	a.stopTimers()
	if a.m != s.mIdx {
		delete(s.adopting, a.flow)
		return // the membership moved on while we gathered: start over on the next request
	}
	a.committing = true
	before, had := s.servedAt[a.flow]
	s.servedAt[a.flow] = a.m
	if !fromPrev {
		// Without the last serving owner's answer, even every copy that
		// answered may lack its final writes, and a copy still in flight
		// may carry them later: re-stamp, so the copies converge on what
		// this owner serves. If the shard refuses the re-stamped copy
		// (its writer is full), this node must not serve the flow under
		// the tuples it took, nor claim it did: start over on the next
		// request.
		if err := s.restamp(a.flow, a.mode); err != nil && !s.cfg.Bugs.AdoptRefusedCopy {
			if had {
				s.servedAt[a.flow] = before
			} else {
				delete(s.servedAt, a.flow)
			}
			delete(s.adopting, a.flow)
			return
		}
	}
	// The adopted copy, and the note that this node serves the flow at
	// this m_idx, reach the disk before the first answer: a crash right
	// after must not leave the flow's only authority with less than it
	// took over. Rare, so always synced, whatever the imposter's mode
	// (a none flow keeps even the note in memory).
	mode := shard.Sync
	if a.mode == shard.None {
		mode = shard.None
	}
	var done func(err error)
	done = func(err error) {
		if s.adopting[a.flow] != a {
			return
		}
		if errors.Is(err, shard.ErrWaitTimeout) && a.m == s.mIdx && !s.stopped && !s.cfg.Bugs.AbandonSlowAdoption {
			// The disk is slow, not failed: the adopted copy is in memory
			// and on its way, and it may have been re-stamped above every
			// copy still to come. Abandoned, the next adoption would take
			// a late answer — the previous owner's, the authority's —
			// below those tuples and serve without it. So the adoption
			// stays complete but for its fsync, refusing requests and
			// older copies as it does meanwhile (merge's floor), and
			// waits again a round of asking later; from a timer, not at
			// once, so that two adoptions that cut each other's waits at
			// MaxWaiters do not spin.
			a.retry = s.env.Clock.AfterFunc(s.cfg.AdoptWait/4, func() {
				if s.adopting[a.flow] == a && !s.stopped {
					s.sh.WhenDurable(a.flow, done)
				}
			})
			return
		}
		delete(s.adopting, a.flow)
		if err == nil && a.m == s.mIdx {
			s.adopted[a.flow] = a.m
			s.reconciled[a.flow] = true
			s.Adoptions++
		}
	}
	if len(s.sh.Peek(a.flow)) == 0 {
		// Nothing to keep: a flow nobody has written. Its note is written
		// with its first write.
		done(nil)
		return
	}
	if err := s.sh.Put(a.flow, nil, encodeServed(a.m), mode); err != nil {
		done(err)
		return
	}
	s.sh.WhenDurable(a.flow, done)
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
	// A restarted node that has not re-adopted the flow claims no
	// authority: its copy is its disk, which may lack the async writes
	// its crash took — the asker must hear the other copies too.
	served := s.servedAt[m.Flow]
	if s.recovered && !s.reconciled[m.Flow] {
		served = 0
	}
	// A fence names a newer membership than ours: pass it on, so that an
	// asker still at an older one (a restarted, deposed owner whose
	// journal lags) abandons its adoption.
	_, mode, _ := s.sh.Meta(m.Flow)
	_ = s.send(from, msg{Kind: FrameAdoptResp, ID: m.ID, M: m.M, Flow: m.Flow, Entries: s.sh.Peek(m.Flow),
		Served: served, Their: max(s.mIdx, s.fencedAt[m.Flow]), Mode: mode})
}

func (s *Store) adoptionAnswer(from dial.NodeID, m msg) {
	a := s.adopting[m.Flow]
	if a == nil || a.id != m.ID || a.committing {
		_ = s.takeAnswer(m) // a late answer is still a copy worth keeping
		return
	}
	if m.Their > a.m {
		// The answerer has applied a newer membership than ours: we may
		// be a deposed owner (a restart lost our fence). Abandon; the
		// next request starts over once we have caught up.
		a.stopTimers()
		delete(s.adopting, a.flow)
		return
	}
	if err := s.takeAnswer(m); err != nil && !s.cfg.Bugs.AdoptRefusedCopy {
		// The shard refused the copy (stopped, or its backend failed):
		// this answer has not been heard. Counted, it could complete the
		// adoption (the previous owner's answer does at once) with the
		// copy missing, and every later copy below the new owner's
		// floor. The next round of asking repeats it.
		return
	}
	a.answered[from] = true
	a.servedAt[from] = m.Served
	s.tryFinishAdoption(a)
}

// takeAnswer merges the copy an adoption answer carries. A full writer
// queue does not refuse it: the shard takes it as it takes an owner's
// push (PutReplica), in memory at once and written once the queue has
// room. The answer may be the only copy left: a removed source is
// stopped once the removal is applied, and never answers again, so an
// answer refused for a disk that stalled, and asked again, was lost
// (shrink-to-one seed 16, with clients of a stalled leader's flows:
// planted bug refused-answer). The adoption completes only once the
// node's note that it serves the flow is durable, which the shard
// writes after every flow held so, so nothing is served from memory
// alone.
func (s *Store) takeAnswer(m msg) error {
	if s.cfg.Bugs.RefusedAnswer {
		return s.merge(m.Flow, m.Entries, s.repairMode(m.Mode))
	}
	return s.mergePush(m.Flow, m.Entries, s.repairMode(m.Mode))
}

// restamp re-writes every key of a flow adopted without every copy, with a
// new tuple from the adopter, and pushes the result. A copy it did not hear
// from may hold a larger tuple from an earlier m_idx for some key than the
// copies it heard from; the new owner's tuple (this m_idx) outranks it, so
// the copies converge on what the new owner serves. Writes held only by a
// copy it did not hear from are the loss the design accepts there.
func (s *Store) restamp(flow string, mode shard.Mode) error {
	f := s.sh.Peek(flow)
	if len(f) == 0 {
		return nil
	}
	changed := map[string]Value{}
	era := s.era(flow)
	for _, k := range slices.Sorted(maps.Keys(f)) {
		v := f[k]
		v.Tuple = s.nextTuple(era, v.Tuple)
		changed[k] = v
	}
	if err := s.commit(flow, changed, mode); err != nil {
		return err
	}
	s.push(flow, changed, mode)
	return nil
}
