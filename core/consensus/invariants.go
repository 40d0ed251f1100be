package consensus

import "fmt"

// CheckInvariants checks the node's own bookkeeping against the last
// entry it applied: the KV's, the membership's and the snapshot's indexes
// at or below it, the last two memberships in order, the duplicate
// table's sessions (at most dedupeSessions, none applied past it), and
// the calls waiting on it (numbered below the counter). It reads the
// state only; the simulator calls it after every 16th step a node takes
// (sim.Checked).
func (n *Node) CheckInvariants() error {
	applied := n.appliedTo
	switch {
	case n.kv.AppliedIndex() > applied || n.mIdx > applied || n.snapIndex > applied:
		return fmt.Errorf("consensus: applied to %d, but the KV is at %d, the membership at %d, the snapshot at %d",
			applied, n.kv.AppliedIndex(), n.mIdx, n.snapIndex)
	case len(n.applied.sessions) > dedupeSessions:
		return fmt.Errorf("consensus: %d sessions in the duplicate table, bound %d", len(n.applied.sessions), dedupeSessions)
	case n.prevMIdx != 0 && n.prevMIdx >= n.mIdx:
		return fmt.Errorf("consensus: the membership before %d is from %d", n.mIdx, n.prevMIdx)
	}
	worst := uint64(0)
	for _, s := range n.applied.sessions { //fenceline:unordered a maximum
		worst = max(worst, s.lastIndex)
	}
	if worst > applied {
		return fmt.Errorf("consensus: a session of the duplicate table last applied at %d, past the applied %d", worst, applied)
	}
	lo, hi := n.seq, uint64(0)
	for seq := range n.pending { //fenceline:unordered a minimum and a maximum
		lo, hi = min(lo, seq), max(hi, seq)
	}
	for seq := range n.reads { //fenceline:unordered a minimum and a maximum
		lo, hi = min(lo, seq), max(hi, seq)
	}
	if len(n.pending)+len(n.reads) > 0 && (lo == 0 || hi > n.seq) {
		return fmt.Errorf("consensus: calls numbered %d to %d wait, counter at %d", lo, hi, n.seq)
	}
	return nil
}
