package proxyonce

import "fmt"

// CheckInvariants checks the service's bookkeeping: every call in flight
// and every loser waiting for a recording counts against MaxCalls, and a
// signature nobody waits on is forgotten. It reads the state only; the
// simulator calls it after every 16th step a node takes (sim.Checked).
func (s *Service) CheckInvariants() error {
	waits := 0
	bad, broken := "", false
	for k, n := range s.waiting { //fenceline:unordered a sum, and the least key reported
		if (n <= 0 || n > s.cfg.MaxWaiters) && (!broken || k < bad) {
			bad, broken = k, true
		}
		waits += n
	}
	if broken {
		return fmt.Errorf("proxyonce: %d waiting on %q (bound %d)", s.waiting[bad], bad, s.cfg.MaxWaiters)
	}
	if s.active != len(s.calls)+waits || s.active > s.cfg.MaxCalls {
		return fmt.Errorf("proxyonce: %d active, %d calls and %d waits in flight (bound %d)", s.active, len(s.calls), waits, s.cfg.MaxCalls)
	}
	return nil
}
