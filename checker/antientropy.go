package checker

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// The design promises that anti-entropy on a quiet cluster costs a few
// dozen numbers per pair of nodes, not its data: a replica sends an owner
// one digest per partition of the owner's flows it holds, and the owner
// answers with flows only where a partition's digests differ. Nothing
// else sees that promise broken: merging a copy the replica already holds
// changes nothing, so an owner that answered every round with its flows
// (a replica whose digests were empty, digests taken over the wrong
// flows, a comparison the wrong way round) passed every state checker.

// Held is what one node held of the flows at an instant, as the simulator
// read its store: each flow's keys with their tuples and tombstones.
type Held struct {
	Up          bool
	Incarnation uint64 // the simulator's count of the node's starts
	Flows       map[string]map[string]flow.Value
}

// AEAnswer is one anti-entropy answer an owner sent a replica, from the
// network's record of sends.
type AEAnswer struct {
	From, To dial.NodeID
	M        uint64 // the membership index it was sent at
	Flows    int    // how many flows it carried
	At       time.Duration
}

// AEQuiet judges the answers anti-entropy sends in a window at the end of
// a run (checker anti-entropy-quiet). It reads every node's copies at the
// window's start and end. A pair of an owner and one of its replicas is
// quiet when both were up throughout (the same incarnation at both ends)
// and, at both ends, what the owner held of its flows placed on the
// replica and what the replica held of them were the same, key by key
// (tuple and tombstone: what the digests cover), placed by the checkers'
// own hashing under the membership in force. Between such a pair nothing
// changed, so every digest the replica sent matched the owner's, and an
// answer from the owner to it is data sent for nothing. Answers sent
// before the window's start plus grace may answer digests taken before
// the window, and are not judged.
type AEQuiet struct {
	from  time.Duration
	m     MembershipChange
	start map[dial.NodeID]Held
	sides map[aePair][2]uint64 // at the start: the owner's side, the replica's
}

type aePair struct{ owner, replica dial.NodeID }

// NewAEQuiet reads the window's start: m is the membership in force by
// the record at at, read gives each of its voters' copies.
func NewAEQuiet(at time.Duration, m MembershipChange, read func(dial.NodeID) Held) *AEQuiet {
	q := &AEQuiet{from: at, m: m, start: map[dial.NodeID]Held{}}
	for _, id := range m.Voters {
		q.start[id] = read(id)
	}
	q.sides = q.fingerprints(q.start)
	return q
}

// fingerprints hashes, for every ordered pair of voters, what the owner
// holds of its flows placed on the replica and what the replica holds of
// them, in flow and key order.
func (q *AEQuiet) fingerprints(held map[dial.NodeID]Held) map[aePair][2]uint64 {
	type side struct {
		pair  aePair
		owner bool
	}
	sums := map[side]*xxhash.Digest{}
	add := func(s side, f string, copy map[string]flow.Value) {
		d := sums[s]
		if d == nil {
			d = xxhash.New()
			sums[s] = d
		}
		var b [8]byte
		_, _ = fmt.Fprintf(d, "%d:%s", len(f), f)
		for _, k := range slices.Sorted(maps.Keys(copy)) {
			v := copy[k]
			_, _ = fmt.Fprintf(d, "%d:%s %d %d %d %d %t;", len(k), k, v.Tuple.Era, v.Tuple.MIdx, v.Tuple.V, v.Tuple.Origin, v.Tomb)
		}
		binary.LittleEndian.PutUint64(b[:], uint64(len(copy)))
		_, _ = d.Write(b[:])
	}
	for _, id := range q.m.Voters {
		h := held[id]
		for _, f := range slices.Sorted(maps.Keys(h.Flows)) {
			p := Placement(q.m.Voters, classOf(f), f)
			if len(p) == 0 {
				continue
			}
			for _, r := range p[1:] {
				if id == p[0] {
					add(side{aePair{id, r}, true}, f, h.Flows[f])
				}
				if id == r {
					add(side{aePair{p[0], id}, false}, f, h.Flows[f])
				}
			}
		}
	}
	out := map[aePair][2]uint64{}
	for s, d := range sums { //fenceline:unordered filling a map
		v := out[s.pair]
		if s.owner {
			v[0] = d.Sum64()
		} else {
			v[1] = d.Sum64()
		}
		out[s.pair] = v
	}
	return out
}

// Judge reads the window's end at at and fails for every answer sent
// between a quiet pair after the window's start plus grace, at the
// window's membership, once per pair. ms is the record's memberships: a
// window in which the membership changed judges nothing. It returns how
// many pairs were quiet and held flows.
func (q *AEQuiet) Judge(rep Reporter, at time.Duration, read func(dial.NodeID) Held, ms []MembershipChange,
	answers []AEAnswer, grace time.Duration, name func(dial.NodeID) string) int {
	for _, c := range ms {
		if c.At > q.from && c.At <= at {
			return 0
		}
	}
	end := map[dial.NodeID]Held{}
	for _, id := range q.m.Voters {
		end[id] = read(id)
	}
	endSides := q.fingerprints(end)
	quiet := map[aePair]bool{}
	for _, o := range q.m.Voters {
		for _, r := range q.m.Voters {
			p := aePair{o, r}
			s, e := q.sides[p], endSides[p]
			up := q.start[o].Up && q.start[r].Up && end[o].Up && end[r].Up &&
				q.start[o].Incarnation == end[o].Incarnation && q.start[r].Incarnation == end[r].Incarnation
			if o != r && up && s[0] != 0 && s[0] == s[1] && s == e {
				quiet[p] = true
			}
		}
	}
	reported := map[aePair]bool{}
	for _, a := range answers {
		p := aePair{a.From, a.To}
		if a.At <= q.from+grace || a.At > at || a.M != q.m.Index || !quiet[p] || reported[p] {
			continue
		}
		reported[p] = true
		rep.Fail("anti-entropy-quiet", "%s sent %s %d flows by anti-entropy at %v (m_idx %d), though from %v to %v neither changed what the two held of %s's flows placed on %s and the copies matched",
			name(a.From), name(a.To), a.Flows, a.At, a.M, q.from, at, name(a.From), name(a.To))
	}
	return len(quiet)
}

// AEAnswerBound fails (checker anti-entropy-bound) for an anti-entropy
// answer that carried more than most flows, once per sender: an owner
// works a long list of differing flows through round by round, at most
// MaxAEFlows an answer. It returns how many answers carried exactly most,
// the bound reached.
func AEAnswerBound(rep Reporter, answers []AEAnswer, most int, name func(dial.NodeID) string) int {
	reported := map[dial.NodeID]bool{}
	at := 0
	for _, a := range answers {
		if a.Flows == most {
			at++
		}
		if a.Flows > most && !reported[a.From] {
			reported[a.From] = true
			rep.Fail("anti-entropy-bound", "%s sent %s %d flows in one anti-entropy answer at %v; the bound is %d", name(a.From), name(a.To), a.Flows, a.At, most)
		}
	}
	return at
}
