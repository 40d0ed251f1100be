package checker

import "github.com/fenceline/fenceline/dial"

// Promotions judges each learner's promotion the instant the first node
// applies the membership that makes it a voter: it must have held the log
// up to within the promotion lag of the promoting entry. What it holds is
// read from its own journal by the simulator, not from the leader's
// opinion of its progress. A learner promoted while still replaying grows
// the quorum with a node that cannot yet vote for anything current
// (DESIGN hazard 10).
type Promotions struct {
	wasLearner map[dial.NodeID]bool
	judged     map[dial.NodeID]bool
}

// NewPromotions returns a checker that has seen no membership.
func NewPromotions() *Promotions {
	return &Promotions{wasLearner: map[dial.NodeID]bool{}, judged: map[dial.NodeID]bool{}}
}

// Membership judges the membership entry at index, with these learners
// and voters, as first applied. held reports a node's last log index from
// its journal (ok false when it is down: what it held is not judged); lag
// is the promotion lag the leader was configured with. It returns how
// many voters were promoted learners seen for the first time.
func (p *Promotions) Membership(rep Reporter, index uint64, learners, voters []dial.NodeID, lag uint64,
	held func(dial.NodeID) (last uint64, ok bool), name func(dial.NodeID) string) (promoted int) {
	for _, id := range learners {
		p.wasLearner[id] = true
		delete(p.judged, id) // a node that returns is judged again
	}
	for _, id := range voters {
		if !p.wasLearner[id] || p.judged[id] {
			continue
		}
		p.judged[id] = true
		promoted++
		last, ok := held(id)
		if !ok {
			continue
		}
		// The promoting entry is at index; the leader saw the learner
		// within lag of its last entry just before it, and the learner
		// has only gained since.
		if last+lag+1 < index {
			rep.Fail("promotion", "%s became a voter at index %d holding the log only to %d: promoted more than %d entries behind",
				name(id), index, last, lag)
		}
	}
	return promoted
}
