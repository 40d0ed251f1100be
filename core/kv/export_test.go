package kv

// CheckInvariants exposes the whole-state invariant check to the external
// tests, which run it after every step.
func (s *State) CheckInvariants() error { return s.checkInvariants() }
