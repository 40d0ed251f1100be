package flow

import (
	"fmt"
	"slices"
)

// CheckInvariants checks the store's bookkeeping and its shard's
// (shard.CheckInvariants): the duplicate-answer memory and its order, the
// adoptions in progress, the bridge's permits, the calls waiting for an
// owner. It reads the state only, in O(flows + calls): the simulator
// calls it after every 16th step a node takes (sim.Checked).
func (s *Store) CheckInvariants() error {
	if err := s.sh.CheckInvariants(); err != nil {
		return err
	}
	switch {
	case len(s.servedOrder) != len(s.served) || len(s.served) > maxServed:
		return fmt.Errorf("flow: %d answers remembered, %d in their order (bound %d)", len(s.served), len(s.servedOrder), maxServed)
	case s.permits < 0 || s.cfg.Permits-s.permits < len(s.calls):
		// Every call waiting (at an owner, or served here) holds a permit.
		return fmt.Errorf("flow: %d of %d permits free, %d calls waiting", s.permits, s.cfg.Permits, len(s.calls))
	}
	if n := len(s.servedOrder); n > 0 {
		// Both ends only: the whole order is 4,096 lookups, a step's
		// worth many times over.
		for _, k := range []servedKey{s.servedOrder[0], s.servedOrder[n-1]} {
			if _, ok := s.served[k]; !ok {
				return fmt.Errorf("flow: an answer in the order (%v) is not remembered", k)
			}
		}
	}
	// Maps are visited in their order; of the entries that break an
	// invariant, the least is reported, so a replay reports the same.
	var bad firstBad
	for id, c := range s.calls { //fenceline:unordered the least reported
		if c.id != id || c.settled {
			bad.note(fmt.Sprintf("call %020d", id), fmt.Errorf("flow: call %d is filed as %d (settled %v)", id, c.id, c.settled))
		}
	}
	for f, a := range s.adopting { //fenceline:unordered the least reported
		switch {
		case a.flow != f:
			bad.note(f, fmt.Errorf("flow: the adoption of %q is filed under %q", a.flow, f))
		case a.m > s.mIdx:
			bad.note(f, fmt.Errorf("flow: %q is adopted at m_idx %d, past the store's %d", f, a.m, s.mIdx))
		case a.asked >= maxAsks:
			bad.note(f, fmt.Errorf("flow: the adoption of %q asked %d rounds and is still held", f, a.asked))
		case len(a.answered) > len(a.sources):
			bad.note(f, fmt.Errorf("flow: the adoption of %q has %d answers from %d sources", f, len(a.answered), len(a.sources)))
		}
		for id := range a.answered { //fenceline:unordered the least reported
			if !slices.Contains(a.sources, id) {
				bad.note(fmt.Sprintf("%s %020d", f, uint64(id)), fmt.Errorf("flow: the adoption of %q took an answer from %v, not a source", f, id))
			}
		}
	}
	for f, m := range s.adopted { //fenceline:unordered the least reported
		if m > s.mIdx {
			bad.note(f, fmt.Errorf("flow: %q adopted at m_idx %d, past the store's %d", f, m, s.mIdx))
		}
	}
	return bad.err
}

// firstBad keeps, of the errors noted, the one with the least key.
type firstBad struct {
	key string
	err error
}

func (b *firstBad) note(key string, err error) {
	if b.err == nil || key < b.key {
		b.key, b.err = key, err
	}
}
