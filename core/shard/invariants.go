package shard

import "fmt"

// CheckInvariants checks the shard's own bookkeeping: the LRU list, its
// count and that it holds every flow live at the latest clock reading, the
// deadline heap, the flows the backend may hold, the flows behind, and the
// writer's marks and units. It reads the state only (no clock, no
// timer), in O(flows + the keys of flows behind): the simulator calls it after every 16th step a
// node takes (sim.Checked), so a change that leaves the structures
// inconsistent fails within a few steps of the one that made it rather
// than as a symptom later, or never.
func (s *Shard[V]) CheckInvariants() error {
	// The flows are visited in map order; of those that break an
	// invariant, the first by name is reported, so the error is the same
	// on every replay.
	var bad string
	var badErr error
	inLRU, onDisk, behind := 0, 0, 0
	for name, f := range s.flows { //fenceline:unordered counts, and the least name reported
		var err error
		switch {
		case f.name != name:
			err = fmt.Errorf("shard: flow %q is filed as %q", f.name, name)
		case f.hidx < 0 || f.hidx >= len(s.due) || s.due[f.hidx] != f:
			err = fmt.Errorf("shard: flow %q is not at its place %d in the deadline heap", name, f.hidx)
		case f.lastSeq > s.seq:
			err = fmt.Errorf("shard: flow %q was last written by Put %d, past the last, %d", name, f.lastSeq, s.seq)
		case len(f.keys) > 0 && s.staleDeadlines(f):
			err = fmt.Errorf("shard: flow %q's deadlines (%d, %d) are not its keys'", name, f.liveUntil, f.purgeAt)
		case f.behindMeta && f.behindKeys == nil:
			err = fmt.Errorf("shard: flow %q has its metadata behind, and is not", name)
		case (f.behindKeys != nil) != (s.behind[name] == f):
			err = fmt.Errorf("shard: flow %q is marked behind (%v) but listed so (%v)", name, f.behindKeys != nil, s.behind[name] == f)
		case f.behindKeys != nil && f.lastSeq <= s.queued:
			// Its unit goes into pending after every Put there.
			err = fmt.Errorf("shard: flow %q is behind with Put %d, not past the last one queued, %d", name, f.lastSeq, s.queued)
		case f.behindKeys != nil && !behindHeld(f):
			err = fmt.Errorf("shard: flow %q is behind with a key it does not hold", name)
		case f.liveUntil > s.lastMs && !f.inLRU:
			// Live at every clock reading the shard has taken, so live
			// whenever it was placed: the cap must count it. (A flow
			// that died since stays listed until a purge finds it, so
			// the converse needs the clock.)
			err = fmt.Errorf("shard: flow %q is live until %d, past the clock's %d, and not in the LRU list", name, f.liveUntil, s.lastMs)
		}
		if err != nil && (badErr == nil || name < bad) {
			bad, badErr = name, err
		}
		if f.inLRU {
			inLRU++
		}
		if f.onDisk {
			onDisk++
		}
		if f.behindKeys != nil {
			behind++
		}
	}
	if badErr != nil {
		return badErr
	}
	if len(s.due) != len(s.flows) {
		return fmt.Errorf("shard: %d flows in the deadline heap, %d held", len(s.due), len(s.flows))
	}
	for i := 1; i < len(s.due); i++ {
		if p := (i - 1) / 2; before(s.due[i], s.due[p]) {
			return fmt.Errorf("shard: deadline heap out of order: %q (%d) below %q (%d)",
				s.due[i].name, s.due[i].dueAt(), s.due[p].name, s.due[p].dueAt())
		}
	}
	n := 0
	var prev *flowState[V]
	for f := s.head; f != nil; f = f.next {
		if n++; n > len(s.flows) || !f.inLRU || s.flows[f.name] != f || f.prev != prev {
			return fmt.Errorf("shard: the LRU list is broken at %q (entry %d)", f.name, n)
		}
		prev = f
	}
	switch {
	case prev != s.tail:
		return fmt.Errorf("shard: the LRU list does not end at its tail")
	case n != s.count || n != inLRU:
		return fmt.Errorf("shard: %d flows in the LRU list, %d counted, %d marked", n, s.count, inLRU)
	case onDisk != s.diskFlows:
		return fmt.Errorf("shard: %d flows on disk, %d counted", onDisk, s.diskFlows)
	case s.durable > s.seq || (s.written > s.queued && s.err == nil) || s.queued > s.seq:
		return fmt.Errorf("shard: marks durable %d, written %d, queued %d, past the last Put %d", s.durable, s.written, s.queued, s.seq)
	case len(s.behind) != behind:
		return fmt.Errorf("shard: %d flows listed behind, %d held so", len(s.behind), behind)
	case len(s.behind) == 0 && s.queued != s.seq:
		return fmt.Errorf("shard: no flow behind, yet Put %d is the last queued of %d", s.queued, s.seq)
	}
	held := s.bounded
	if s.inflight != nil {
		held.mutations += s.inflight.bounded.mutations
		held.units += s.inflight.bounded.units
	}
	if held.mutations > s.cfg.MaxPending && held.units > 1 {
		// Only a unit larger than the whole bound passes it, alone.
		return fmt.Errorf("shard: %d mutations of %d Puts in the writer's queue, past its bound %d", held.mutations, held.units, s.cfg.MaxPending)
	}
	if (len(s.pending) > 0 || len(s.behind) > 0) && s.flushT == nil && s.inflight == nil && !s.stopped && s.err == nil && s.env.Backend != nil {
		// Whatever waits for the writer has a turn coming: a timer, or
		// the completion of the commit in flight.
		return fmt.Errorf("shard: %d mutations pending and %d flows behind, and no writer turn to take them", len(s.pending), len(s.behind))
	}
	if len(s.waiters) > s.cfg.MaxWaiters {
		return fmt.Errorf("shard: %d durability waits held, past the bound %d", len(s.waiters), s.cfg.MaxWaiters)
	}
	for i, w := range s.waiters {
		// Each MaxWait runs out in the order the waits came: one timer,
		// for the first, serves them all (armWait).
		if i > 0 && w.by < s.waiters[i-1].by {
			return fmt.Errorf("shard: durability wait %d runs out at %v, before the one held before it (%v)", i, w.by, s.waiters[i-1].by)
		}
	}
	if len(s.waiters) > 0 && s.waitT == nil && !s.stopped {
		return fmt.Errorf("shard: %d durability waits held and none timed", len(s.waiters))
	}
	last := 0
	for _, u := range s.units {
		if u <= last || u > len(s.pending) {
			return fmt.Errorf("shard: unit end %d after %d, with %d mutations pending", u, last, len(s.pending))
		}
		last = u
	}
	if last != len(s.pending) {
		// Every writer of pending ends its unit in the same step: a
		// mutation past the last end would be glued to whatever comes
		// next, and a backend write could no longer be cut before it.
		return fmt.Errorf("shard: %d mutations pending past the last unit's end, %d", len(s.pending)-last, last)
	}
	return nil
}

// before is the deadline heap's order, restated: by deadline, then name.
func before[V any](a, b *flowState[V]) bool {
	if a.dueAt() != b.dueAt() {
		return a.dueAt() < b.dueAt()
	}
	return a.name < b.name
}

// staleDeadlines reports a flow whose deadlines are not what its keys
// give (computeDeadlines; a flow with keys never reads the clock there).
func (s *Shard[V]) staleDeadlines(f *flowState[V]) bool {
	live, last := s.keyDeadlines(f)
	return f.liveUntil != live || f.purgeAt != last+s.cfg.GraceMs
}

// behindHeld reports whether every key a flow behind is to write is one
// it holds: what waits for the writer is bounded by what memory holds
// (DropKeys takes a key off the list with its own delete).
func behindHeld[V any](f *flowState[V]) bool {
	for k := range f.behindKeys { //fenceline:unordered a yes or no
		if _, ok := f.keys[k]; !ok {
			return false
		}
	}
	return true
}
