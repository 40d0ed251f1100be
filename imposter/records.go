package imposter

import (
	"cmp"
	"iter"
	"slices"

	"github.com/fenceline/fenceline/core/bugs"
)

// This file: recorded requests across a cluster. Each member records the
// requests it takes, stamped with its own clock (never going back) and
// its own count; a read of an imposter's requests gathers every member's
// records and merges them into one list, as one server would have kept
// it.
//
// The order is by (arrival time on the member that took the request, that
// member's id, its count): a total order every member computes alike. It
// keeps each member's own order exactly; between members it is real time
// as far as their clocks agree (requests further apart than the members'
// clock skew are in the order they arrived).
//
// The bound holds cluster-wide: each member keeps its newest
// MaxRecordedRequests, and the merge keeps the newest of all. A request
// among the cluster's newest n is among its own member's newest n, so
// nothing the merge should show was dropped by a member.

// Recorded is one recorded request: when it arrived (Unix nanoseconds,
// on its member's clock, clamped to never go back), the member's count
// of it, and the request as mountebank records it.
type Recorded struct {
	AtNs  int64
	Seq   uint64
	Value *Object
	size  int // what it holds, about (Request.size): for MaxRecordedBytes
}

// Records is one member's part of an imposter's recorded requests.
type Records struct {
	Node  uint64 // the member's id, to order ties
	Count int    // requests it took (numberOfRequests), recorded or not
	List  []Recorded
}

// records is this member's records, oldest first.
func (imp *Imposter) records() iter.Seq[Recorded] { return imp.requests.all() }

// MaxRecordedBytes bounds the bytes of one imposter's recorded requests
// on one member (bodies, headers and the rest, as received): past it the
// oldest go, as past MaxRecordedRequests. Without it 10,000 requests of
// the 16 MiB a body may hold would be 160 GiB.
const MaxRecordedBytes = 64 << 20

// recordRing keeps the newest recorded requests: at most
// MaxRecordedRequests of them and MaxRecordedBytes together, the oldest
// dropped first. It is a ring (buf[head] is the oldest of n), so that
// dropping the oldest costs nothing.
type recordRing struct {
	buf     []Recorded
	head, n int
	bytes   int
}

func (q *recordRing) add(r Recorded) {
	for q.n > 0 && (q.n >= MaxRecordedRequests || q.bytes+r.size > MaxRecordedBytes) {
		q.bytes -= q.buf[q.head].size
		q.buf[q.head] = Recorded{}
		q.head = (q.head + 1) % len(q.buf)
		q.n--
	}
	if q.n == len(q.buf) {
		// Full below the bound: grow, oldest first again.
		grown := make([]Recorded, q.n, max(16, min(2*q.n, MaxRecordedRequests)))
		for i := range q.n {
			grown[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = grown[:cap(grown)], 0
	}
	q.buf[(q.head+q.n)%len(q.buf)] = r
	q.n++
	q.bytes += r.size
}

func (q *recordRing) all() iter.Seq[Recorded] {
	return func(yield func(Recorded) bool) {
		for i := range q.n {
			if !yield(q.buf[(q.head+i)%len(q.buf)]) {
				return
			}
		}
	}
}

// LocalRecords is this member's part: its count and a copy of its records.
func (imp *Imposter) LocalRecords(node uint64) Records {
	list := make([]Recorded, 0, imp.requests.n)
	for r := range imp.records() {
		list = append(list, Recorded{AtNs: r.AtNs, Seq: r.Seq, Value: Clone(r.Value).(*Object)})
	}
	return Records{Node: node, Count: imp.NumberOfRequests, List: list}
}

// Gathered is an imposter's requests across the members that answered.
type Gathered struct {
	Count    int       // numberOfRequests: every member's count
	Requests []*Object // the newest max of every member's records, oldest first
}

// MergeRecords merges the members' parts, keeping the newest max.
func MergeRecords(parts []Records, max int) Gathered {
	type rec struct {
		Recorded
		node uint64
	}
	var all []rec
	g := Gathered{}
	for _, p := range parts {
		g.Count += p.Count
		for _, r := range p.List {
			all = append(all, rec{r, p.Node})
		}
	}
	slices.SortFunc(all, func(a, b rec) int {
		if c := cmp.Compare(a.AtNs, b.AtNs); c != 0 {
			return c
		}
		if c := cmp.Compare(a.node, b.node); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	if len(all) > max {
		all = all[len(all)-max:]
	}
	g.Requests = make([]*Object, len(all))
	for i, r := range all {
		g.Requests[i] = r.Value
	}
	return g
}

// GatherFrom is whom a read of recorded requests asks for their records,
// besides this member's own: every other member of the membership. The
// planted bug local-records-only asks none, as if this member were the
// only server.
func GatherFrom(self uint64, members []uint64, b bugs.Set) []uint64 {
	if b.LocalRecordsOnly {
		return nil
	}
	var out []uint64
	for _, m := range members {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}
