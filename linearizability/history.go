// Package linearizability records what clients saw and checks it: histories
// of operations with their call and return times and outcomes, porcupine
// models for the stores, and the checkers that stand outside the nodes.
//
// A checker never trusts what a node says about itself: it judges the
// history the clients recorded and the state the simulator can see.
package linearizability

import (
	"fmt"
	"iter"
	"time"
)

// Outcome is what a client knows about whether its operation took effect.
type Outcome uint8

// Outcomes. Unknown is not failure: an operation that timed out, or got a
// 503 after the server may have applied it, is recorded as possibly
// applied, and checkers must accept both worlds.
const (
	Unknown Outcome = iota // no answer, or an answer that does not say
	OK                     // applied; Output holds the answer
	Refused                // definitely not applied (refused before applying)
)

func (o Outcome) String() string {
	switch o {
	case Unknown:
		return "unknown"
	case OK:
		return "ok"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Op is one client operation.
type Op struct {
	ID      int
	Client  int    // which client issued it; a client has one op in flight
	Key     string // what it touched, for partitioned checking
	Input   any
	Output  any
	Call    time.Duration // virtual time of the call
	Return  time.Duration // virtual time of the answer; 0 while pending
	Outcome Outcome
	Note    string // why it was refused, or what the answer was, for people
	// Until, when not zero, is the latest virtual time at which the
	// operation can have taken effect, as the simulator's own record
	// shows (the last instant its request could still reach a node that
	// applies it). A checker holds an unknown operation to [Call, Until]
	// instead of [Call, forever). Set it only from what the simulator
	// saw, never from what a node said.
	Until   time.Duration
	Bounded bool // Until is set
}

// History is the record of every operation of a run, in call order.
//
// The operations are kept in chunks of opChunk, never moved once
// recorded: one growing slice of them copied the whole history again at
// every doubling, a measurable part of a simulated run.
type History struct {
	chunks [][]Op
	n      int
	limit  int
}

// opChunk is how many operations one chunk of a History holds.
const opChunk = 1024

// at is operation id, in place.
func (h *History) at(id int) *Op { return &h.chunks[id/opChunk][id%opChunk] }

// all yields every operation, in call order, in place.
func (h *History) all() iter.Seq[*Op] {
	return func(yield func(*Op) bool) {
		for _, c := range h.chunks {
			for i := range c {
				if !yield(&c[i]) {
					return
				}
			}
		}
	}
}

// DefaultHistoryLimit bounds a history: a workload that issues more calls
// is a bug in the workload, and Call panics rather than eat memory.
const DefaultHistoryLimit = 1_000_000

// NewHistory returns an empty history holding at most limit operations
// (DefaultHistoryLimit if limit <= 0).
func NewHistory(limit int) *History {
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	return &History{limit: limit}
}

// Call records the start of an operation and returns its id.
func (h *History) Call(client int, key string, input any, at time.Duration) int {
	if h.n >= h.limit {
		panic(fmt.Sprintf("linearizability: history over its limit of %d ops", h.limit))
	}
	id := h.n
	if id%opChunk == 0 {
		h.chunks = append(h.chunks, make([]Op, 0, opChunk))
	}
	c := &h.chunks[len(h.chunks)-1]
	*c = append(*c, Op{ID: id, Client: client, Key: key, Input: input, Call: at})
	h.n++
	return id
}

// Return records that the operation was applied and answered.
func (h *History) Return(id int, output any, at time.Duration) {
	op := h.pending(id)
	op.Output, op.Return, op.Outcome = output, at, OK
}

// Refuse records that the operation was definitely not applied.
func (h *History) Refuse(id int, why string, at time.Duration) {
	op := h.pending(id)
	op.Return, op.Outcome, op.Note = at, Refused, why
}

// GiveUp records that the client stopped waiting: the outcome is unknown.
func (h *History) GiveUp(id int, why string, at time.Duration) {
	op := h.pending(id)
	op.Return, op.Note = at, why
}

// Bound records the latest instant at which operation id can take
// effect (see Op.Until). It may be called before or after the answer.
func (h *History) Bound(id int, until time.Duration) {
	if id < 0 || id >= h.n {
		panic(fmt.Sprintf("linearizability: no op %d", id))
	}
	op := h.at(id)
	if until < op.Call {
		until = op.Call
	}
	op.Until, op.Bounded = until, true
}

func (h *History) pending(id int) *Op {
	if id < 0 || id >= h.n {
		panic(fmt.Sprintf("linearizability: no op %d", id))
	}
	op := h.at(id)
	if op.Return != 0 || op.Outcome != Unknown {
		panic(fmt.Sprintf("linearizability: op %d answered twice", id))
	}
	return op
}

// Op returns operation id.
func (h *History) Op(id int) Op {
	if id < 0 || id >= h.n {
		panic(fmt.Sprintf("linearizability: index out of range [%d] with length %d", id, h.n))
	}
	return *h.at(id)
}

// All yields every operation, in call order, without copying the
// history first as Ops does.
func (h *History) All() iter.Seq[Op] {
	return func(yield func(Op) bool) {
		for op := range h.all() {
			if !yield(*op) {
				return
			}
		}
	}
}

// Ops returns every operation, in call order.
func (h *History) Ops() []Op {
	if h.n == 0 {
		return nil
	}
	out := make([]Op, 0, h.n)
	for _, c := range h.chunks {
		out = append(out, c...)
	}
	return out
}

// Len is the number of operations.
func (h *History) Len() int { return h.n }

// Count returns how many operations have each outcome.
func (h *History) Count() (ok, refused, unknown int) {
	for op := range h.all() {
		switch op.Outcome {
		case OK:
			ok++
		case Refused:
			refused++
		default:
			unknown++
		}
	}
	return ok, refused, unknown
}
