package journal

import (
	"fmt"
	"slices"
)

// state is the journal's content in memory: what replaying the file gives.
// Replay and live writes change it through the same apply, so what a write
// does in memory is what reopening the file will do.
type state struct {
	hs   HardState
	snap Snapshot
	// ents follow the snapshot.
	// Invariant: ents[i].Index == snap.Meta.Index+1+i.
	ents []Entry
	// logBytes is Entry.Size summed over ents.
	logBytes uint64
}

func (s *state) firstIndex() uint64 { return s.snap.Meta.Index + 1 }

func (s *state) lastIndex() uint64 { return s.snap.Meta.Index + uint64(len(s.ents)) }

// term returns the term at i, which must lie in [snapshot index, last].
func (s *state) term(i uint64) uint64 {
	if i == s.snap.Meta.Index {
		return s.snap.Meta.Term
	}
	return s.ents[i-s.firstIndex()].Term
}

// The check methods state the log's rules. Replay turns a broken rule into
// ErrCorrupt; a live write panics, since the driver broke raft's storage
// contract. They never change the state.

// checkTruncate: only uncommitted entries after the snapshot may be dropped,
// and only ones that exist.
func (s *state) checkTruncate(from uint64) error {
	switch {
	case from <= s.snap.Meta.Index:
		return fmt.Errorf("truncate from %d reaches into the snapshot at %d", from, s.snap.Meta.Index)
	case from <= s.hs.Commit:
		return fmt.Errorf("truncate from %d drops committed entries (commit %d)", from, s.hs.Commit)
	case from > s.lastIndex():
		return fmt.Errorf("truncate from %d is past the last entry %d", from, s.lastIndex())
	}
	return nil
}

// checkEntries: the batch continues the log right after prevIndex, whose
// term is prevTerm, with contiguous indexes and terms that never decrease.
func checkEntries(batch []Entry, prevIndex, prevTerm uint64) error {
	for i := range batch {
		e := &batch[i]
		if e.Index != prevIndex+1 {
			return fmt.Errorf("entry %d does not follow %d", e.Index, prevIndex)
		}
		if e.Term < prevTerm {
			return fmt.Errorf("entry %d has term %d below the previous entry's %d", e.Index, e.Term, prevTerm)
		}
		prevIndex, prevTerm = e.Index, e.Term
	}
	return nil
}

// checkHardState: terms and commit never go back, a vote once cast stands
// for its term, and commit never passes the last entry (last is the log's
// last index once the records before this one are applied).
func (s *state) checkHardState(hs HardState, last uint64) error {
	cur := s.hs
	switch {
	case hs.Term < cur.Term:
		return fmt.Errorf("term goes back from %d to %d", cur.Term, hs.Term)
	case hs.Term == cur.Term && cur.Vote != 0 && hs.Vote != cur.Vote:
		return fmt.Errorf("vote in term %d changes from %d to %d", hs.Term, cur.Vote, hs.Vote)
	case hs.Commit < cur.Commit:
		return fmt.Errorf("commit goes back from %d to %d", cur.Commit, hs.Commit)
	case hs.Commit > last:
		return fmt.Errorf("commit %d is past the last entry %d", hs.Commit, last)
	}
	return nil
}

// checkSnapshot: a snapshot moves forward and never lands below the commit
// index (raft installs one only past its commit).
func (s *state) checkSnapshot(m SnapshotMeta) error {
	switch {
	case m.Index <= s.snap.Meta.Index:
		return fmt.Errorf("snapshot at %d is not past the current one at %d", m.Index, s.snap.Meta.Index)
	case m.Index < s.hs.Commit:
		return fmt.Errorf("snapshot at %d is below commit %d", m.Index, s.hs.Commit)
	}
	return nil
}

// apply checks r against the rules and, if it passes, applies it.
func (s *state) apply(r *record) error {
	switch r.kind {
	case kindTruncate:
		if err := s.checkTruncate(r.from); err != nil {
			return err
		}
		keep := r.from - s.firstIndex()
		for i := keep; i < uint64(len(s.ents)); i++ {
			s.logBytes -= s.ents[i].Size()
		}
		// Clear the dropped tail so its data can be collected.
		clear(s.ents[keep:])
		s.ents = s.ents[:keep]
	case kindEntries:
		last := s.lastIndex()
		if err := checkEntries(r.entries, last, s.term(last)); err != nil {
			return err
		}
		for i := range r.entries {
			s.logBytes += r.entries[i].Size()
		}
		s.ents = append(s.ents, r.entries...)
	case kindHardState:
		if err := s.checkHardState(r.hs, s.lastIndex()); err != nil {
			return err
		}
		s.hs = r.hs
	case kindSnapshot:
		if err := s.checkSnapshot(r.snap.Meta); err != nil {
			return err
		}
		s.snap = r.snap
		s.ents, s.logBytes = nil, 0
		s.hs.Commit = max(s.hs.Commit, r.snap.Meta.Index)
	default:
		return fmt.Errorf("unknown record kind %d", r.kind)
	}
	return nil
}

// mustApply applies a record a live write has already checked: a failure is
// a bug in the journal.
func (s *state) mustApply(r *record) {
	if err := s.apply(r); err != nil {
		panic(fmt.Sprintf("journal: bug: a checked %s record does not apply: %v", r.kind, err))
	}
}

// invariants checks what must hold between operations. full adds the O(n)
// walk over every entry; it runs after Open and Compact, while the O(1)
// part runs after every write.
func (s *state) invariants(full bool) error {
	first, last := s.firstIndex(), s.lastIndex()
	if n := len(s.ents); n > 0 {
		if s.ents[0].Index != first || s.ents[n-1].Index != last {
			return fmt.Errorf("entries span [%d, %d], want [%d, %d]", s.ents[0].Index, s.ents[n-1].Index, first, last)
		}
		if s.ents[0].Term < s.snap.Meta.Term {
			return fmt.Errorf("entry %d has term %d below the snapshot's %d", first, s.ents[0].Term, s.snap.Meta.Term)
		}
	}
	if s.hs.Commit < s.snap.Meta.Index || s.hs.Commit > last {
		return fmt.Errorf("commit %d outside [%d, %d]", s.hs.Commit, s.snap.Meta.Index, last)
	}
	if !full {
		return nil
	}
	if err := checkEntries(s.ents, s.snap.Meta.Index, s.snap.Meta.Term); err != nil {
		return err
	}
	var size uint64
	for i := range s.ents {
		size += s.ents[i].Size()
	}
	if size != s.logBytes {
		return fmt.Errorf("logBytes %d, entries hold %d", s.logBytes, size)
	}
	return nil
}

// cloneEntries copies a batch, and the data of all its entries into one
// allocation: the caller's buffers stay the caller's.
func cloneEntries(ents []Entry) []Entry {
	var total int
	for i := range ents {
		total += len(ents[i].Data)
	}
	arena := make([]byte, 0, total)
	out := slices.Clone(ents)
	for i := range out {
		if len(out[i].Data) == 0 {
			out[i].Data = nil
			continue
		}
		start := len(arena)
		arena = append(arena, out[i].Data...)
		out[i].Data = arena[start:len(arena):len(arena)]
	}
	return out
}

func cloneBytes(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return slices.Clone(p)
}
