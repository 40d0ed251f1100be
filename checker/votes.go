package checker

import (
	"sort"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// VoteGrant is a vote a node sent, as the network saw it leave: a vote
// response that grants.
type VoteGrant struct {
	Voter, Candidate dial.NodeID
	Term             uint64
	At               time.Duration
}

// Votes fails when a node granted its vote in one term to two candidates
// (checker votes). Raft writes a vote to stable storage before it sends
// it, so no crash and restart may let a node vote again in a term it
// voted in: this compares what each node said on the wire, across all its
// lives, with what its durable hard state must have held.
func Votes(rep Reporter, grants []VoteGrant, name func(dial.NodeID) string) {
	type key struct {
		voter dial.NodeID
		term  uint64
	}
	first := map[key]VoteGrant{}
	reported := map[key]bool{}
	sorted := append([]VoteGrant(nil), grants...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].At < sorted[j].At })
	for _, g := range sorted {
		k := key{g.Voter, g.Term}
		f, seen := first[k]
		if !seen {
			first[k] = g
			continue
		}
		if f.Candidate != g.Candidate && !reported[k] {
			reported[k] = true
			rep.Fail("votes", "%s voted for %s in term %d at %v, and for %s in the same term at %v",
				name(g.Voter), name(f.Candidate), g.Term, f.At, name(g.Candidate), g.At)
		}
	}
}
