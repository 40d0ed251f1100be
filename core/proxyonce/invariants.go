package proxyonce

import (
	"fmt"
	"maps"
	"slices"
)

// CheckInvariants checks the service's bookkeeping: every call in flight,
// every loser waiting for a recording and every claim won and not yet
// recorded or released counts against MaxCalls, and a
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
	if len(s.waiters) != waits {
		return fmt.Errorf("proxyonce: %d losers waiting, %d answers kept for a stop", waits, len(s.waiters))
	}
	if s.active != len(s.calls)+waits+len(s.held) || s.active > s.cfg.MaxCalls {
		return fmt.Errorf("proxyonce: %d active, %d calls, %d waits and %d held claims in flight (bound %d)", s.active, len(s.calls), waits, len(s.held), s.cfg.MaxCalls)
	}
	return s.claims.checkInvariants()
}

// checkInvariants checks the claims' count per port, which MaxPending is
// judged by: each port's count is the number of pending claims on it,
// and within the bound. A count that drifted from the claims (a lapsed
// claim replaced without its count going down) refuses the port's
// claims busy long before it holds MaxPending, or never does.
func (c *Claims) checkInvariants() error {
	count := map[int]int{}
	for k := range c.pending { //fenceline:unordered a count
		count[portOf(k)]++
	}
	for port, n := range c.perPort { //fenceline:unordered a comparison; the least port reported
		if n != count[port] || n > c.cfg.MaxPending {
			return c.badCount(count)
		}
	}
	if len(count) != len(c.perPort) {
		return c.badCount(count)
	}
	return nil
}

// badCount describes the first port, in order, whose count is wrong.
func (c *Claims) badCount(count map[int]int) error {
	ports := slices.Sorted(maps.Keys(count))
	for p := range c.perPort { //fenceline:unordered collected, then sorted
		if _, ok := count[p]; !ok {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	for _, p := range ports {
		if c.perPort[p] != count[p] || c.perPort[p] > c.cfg.MaxPending {
			return fmt.Errorf("proxyonce: port %d counts %d pending claims, holds %d (bound %d)", p, c.perPort[p], count[p], c.cfg.MaxPending)
		}
	}
	return fmt.Errorf("proxyonce: the claims' count per port drifted")
}
