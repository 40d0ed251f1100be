package kv

import (
	"fmt"
	"maps"
	"slices"
)

// Lease is a named lease: how the cluster picks one of anything (one
// scheduler, one proxyOnce winner) through an ordinary log entry, so the
// single winner comes from raft rather than from a lock.
type Lease struct {
	Name   string
	Holder string
	// Token is the fencing token: the version of the grant that began this
	// holder's tenure. Renewals keep it, so a holder fences every write of
	// one tenure with one token; a later holder's token is always larger,
	// because versions only grow.
	Token uint64
	// Version is the version of the latest grant or renewal.
	Version uint64
	// DeadlineMs is when the lease lapses, in applied time: it expires at
	// the first entry applied at or after DeadlineMs. A holder must renew
	// well before: a renewal sent at the deadline arrives after it.
	DeadlineMs int64
}

// Lease reads lease name from this replica's state. A lease is returned
// only while live: lapsed leases are expired by the entry that passes
// their deadline.
func (s *State) Lease(name string) (Lease, bool) {
	l, ok := s.leases[name]
	return l, ok
}

// Leases returns every live lease, sorted by name.
func (s *State) Leases() []Lease {
	out := make([]Lease, 0, len(s.leases))
	for _, name := range slices.Sorted(maps.Keys(s.leases)) {
		out = append(out, s.leases[name])
	}
	return out
}

// acquire grants name to holder if it is free, or renews it if holder
// already has it. Lapsed leases were expired when the clock advanced, so a
// lease found here is live.
func (s *State) acquire(name, holder string, ttlMs int64) (Lease, error) {
	l, held := s.leases[name]
	if held && l.Holder != holder {
		return Lease{}, refusal(l)
	}
	v := s.bump()
	if !held {
		l = Lease{Name: name, Holder: holder, Token: v}
	}
	return s.grant(l, v, ttlMs), nil
}

// renew extends holder's lease. Only the holder may: anyone else is
// refused with the holder's name, and a lease nobody holds cannot be
// renewed back into existence (acquire it).
func (s *State) renew(name, holder string, ttlMs int64) (Lease, error) {
	l, held := s.leases[name]
	if !held {
		return Lease{}, fmt.Errorf("%w: lease %q", ErrNotHeld, name)
	}
	if l.Holder != holder {
		return Lease{}, refusal(l)
	}
	return s.grant(l, s.bump(), ttlMs), nil
}

// grant stores l at version v with a deadline ttlMs from now. The deadline
// is set, not maxed: a holder asking for less gets less.
func (s *State) grant(l Lease, v uint64, ttlMs int64) Lease {
	l.Version = v
	l.DeadlineMs = s.appliedMs + ttlMs
	s.leases[l.Name] = l
	s.emit(Event{Kind: EventPut, Space: SpaceLease, Key: l.Name, Version: v, Holder: l.Holder, Token: l.Token, DeadlineMs: l.DeadlineMs})
	return l
}

// release drops holder's lease. Only the holder may: a node back from a
// partition, still believing it holds the lease, would otherwise drop its
// successor's and two of the singleton would run.
func (s *State) release(name, holder string) (uint64, error) {
	l, held := s.leases[name]
	if !held {
		return 0, fmt.Errorf("%w: lease %q", ErrNotHeld, name)
	}
	if l.Holder != holder && !s.cfg.Bugs.ReleaseAny {
		return 0, refusal(l)
	}
	if !s.cfg.Bugs.ReleaseKeeps {
		delete(s.leases, name)
	}
	v := s.bump()
	s.emit(Event{Kind: EventDeleted, Space: SpaceLease, Key: name, Version: v, Holder: l.Holder, Token: l.Token, DeadlineMs: l.DeadlineMs})
	return v, nil
}

// expireLapsed expires every lease whose deadline is not after applied
// time, in name order so every replica numbers them alike. Each expiry is
// a change of its own, with its own version and an Expired event: "the
// holder stopped renewing" calls for a different reaction than "the holder
// released".
func (s *State) expireLapsed() {
	for _, name := range slices.Sorted(maps.Keys(s.leases)) {
		l := s.leases[name]
		if l.DeadlineMs > s.appliedMs || (s.cfg.Bugs.ExpireLate && l.DeadlineMs == s.appliedMs) {
			continue
		}
		delete(s.leases, name)
		v := s.bump()
		s.emit(Event{Kind: EventExpired, Space: SpaceLease, Key: name, Version: v, Holder: l.Holder, Token: l.Token, DeadlineMs: l.DeadlineMs})
	}
}

func refusal(l Lease) *Refusal {
	return &Refusal{Name: l.Name, Holder: l.Holder, UntilMs: l.DeadlineMs}
}
