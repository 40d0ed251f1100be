// Package flow is the flow store: the data plane that gives stateful stubs
// per-flow state across a cluster without a quorum round per operation.
//
// Every flow (a small key→value map named by its scoped id) has one owner,
// chosen by rendezvous hashing over the committed voters (core/ring). One
// operation goes: a permit from the bounded bridge (or shed at once) → the
// owner at this node's m_idx → locally, or one RPC to the owner → the
// owner's checks, in order: same m_idx (else fenced), really the owner, not
// isolated (D-17), flow adopted at this m_idx → apply, stamp the fencing
// tuple (m_idx, v+1, origin), write the shard, push to the two successors
// → answer. Any failure is ErrUnavailable (HTTP 503): never a guess, never
// a local write on a node that does not own the flow.
//
// Replicas keep the value with the largest fencing tuple; anti-entropy
// pulls what the owner has every few seconds; a node that becomes owner of
// a flow adopts it (pulls every copy, keeps the largest tuples) before it
// serves. The promises, and what they assume, are in CONTRIBUTING.md.
//
// Two terms recur everywhere here:
//
//   - m_idx is the raft log index of the membership entry in force: the
//     committed set of voters that ownership is computed over. Two nodes
//     with the same m_idx agree on every flow's owner; a request carries
//     its sender's m_idx, and an owner refuses one whose m_idx differs
//     from its own (ErrFenced), so no node acts on an ownership that a
//     newer membership has moved. It is the first element of the fencing
//     tuple, so a newer owner's writes always win.
//   - D-17 is the isolated-owner rule (decision 17 of the design): a node
//     that has not heard its raft leader, or as leader a quorum of
//     voters, within the isolation window (the election timeout, on its
//     monotonic clock) refuses to serve as owner (ErrIsolated). A new
//     owner elsewhere may already be serving the flow; waiting out that
//     window before adopting from the copies (AdoptWait) is what keeps
//     two owners from answering at once.
package flow

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Op is a flow operation.
type Op uint8

// Operations. The numbers are on the wire: append only.
const (
	OpGet    Op = iota + 1 // one key
	OpSet                  // key = value (with an optional TTL)
	OpDelete               // one key
	OpCas                  // key = value if it is absent (ExpectAbsent) or equals Expect
	OpIncr                 // key += Delta, as a decimal int64; absent counts as 0
	OpGetAll               // every key of the flow
	OpClear                // delete every key of the flow
	OpSetAll               // set every key of Entries in one step, with one TTL: a scenario transition
)

var opNames = [...]string{"invalid", "get", "set", "delete", "cas", "incr", "get-all", "clear", "set-all"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

func (o Op) writes() bool {
	return o == OpSet || o == OpDelete || o == OpCas || o == OpIncr || o == OpClear || o == OpSetAll
}

// ReadMode says who answers a read.
type ReadMode uint8

// Read modes.
const (
	Strong ReadMode = iota // the owner answers (the default)
	Local                  // this node's copy answers: at most one push behind, possibly more
)

// Request is one operation on one flow.
type Request struct {
	Flow         string // the scoped flow id, e.g. "i8080:abc"
	Op           Op
	Key          string
	Value        []byte
	Expect       []byte
	ExpectAbsent bool
	Delta        int64
	Entries      map[string][]byte // OpSetAll
	TTLMs        int64             // writes: the entries lapse after this long; 0: the store's default
	Read         ReadMode
	// Mode is the imposter's durability (shard.Async by default): when
	// the owner may answer a write, relative to its fsync. It travels
	// with every replication push so replicas write in the same mode.
	Mode shard.Mode
}

// Response is an operation's answer.
type Response struct {
	Found     bool
	Value     []byte
	Succeeded bool              // OpCas
	Int       int64             // OpIncr: the new value
	All       map[string][]byte // OpGetAll
}

// Tuple is the fencing tuple every stored value (tombstones too) carries:
// the era of the holding it was written in, the membership index under
// which the writer owned the key, the owner's per-key write counter, and
// the writer's id to break exact ties. The larger tuple wins every merge,
// everywhere, so a deposed owner's writes, stamped with a smaller m_idx,
// lose by arithmetic.
//
// Era is 0 outside a fleet, and for a partition that has never left the
// group the table first put it in. In a fleet, a partition that moved to
// a group is written there in the era of the directory epoch it was
// assigned at (Store.era), and its copies arrive in the era of its fence
// (Store.Ingest): every holding of a partition is a later era than the
// one before it, so a group's leftover copies from an earlier holding
// lose to whatever a later one wrote, whatever the two groups' membership
// indexes (which are unrelated counters).
type Tuple struct {
	Era    uint64
	MIdx   uint64
	V      uint64
	Origin dial.NodeID
}

// Less orders tuples lexicographically.
func (t Tuple) Less(o Tuple) bool {
	if t.Era != o.Era {
		return t.Era < o.Era
	}
	if t.MIdx != o.MIdx {
		return t.MIdx < o.MIdx
	}
	if t.V != o.V {
		return t.V < o.V
	}
	return t.Origin < o.Origin
}

func (t Tuple) String() string {
	if t.Era != 0 {
		return fmt.Sprintf("(%d:%d,%d,%v)", t.Era, t.MIdx, t.V, t.Origin)
	}
	return fmt.Sprintf("(%d,%d,%v)", t.MIdx, t.V, t.Origin)
}

// Value is one stored key.
type Value struct {
	Data  []byte
	Tomb  bool  // deleted: kept so the deletion wins merges
	Tuple Tuple //
	// ExpiresAtMs is the wall time (the writer's clock) from which reads
	// see nothing. A tombstone carries its deletion time: it is invisible
	// at once, and kept by the shard for its grace after that.
	ExpiresAtMs int64
}

// Errors. Every refusal reaches the caller wrapped in ErrUnavailable (the
// engine's 503). Known reports whether the operation certainly did not
// apply (the owner refused before applying, or it never left this node);
// otherwise the outcome is unknown.
var (
	ErrUnavailable = errors.New("flow: backend unavailable")

	ErrShed       = errors.New("no bridge permit free; shed")
	ErrNoOwner    = errors.New("no voters: no owner")
	ErrFenced     = errors.New("fenced: membership index differs")
	ErrNotOwner   = errors.New("not the owner")
	ErrIsolated   = errors.New("owner isolated (D-17)")
	ErrNotAdopted = errors.New("flow not adopted yet at this membership")
	ErrSend       = errors.New("owner unreachable; request not sent")
	ErrTimeout    = errors.New("no answer within the deadline; outcome unknown")
	ErrCrashed    = errors.New("the owner's answer was lost; outcome unknown")

	// ErrNotInteger is not an availability problem: OpIncr on a value
	// that is not a decimal int64. It changes nothing.
	ErrNotInteger = errors.New("flow: value is not an integer")
	// ErrBadRequest: a request the store refuses to run (unknown op,
	// empty flow id, oversized key or value).
	ErrBadRequest = errors.New("flow: bad request")
	// ErrBusy: the owner's shard writer is full; nothing was applied.
	ErrBusy = errors.New("owner's shard writer is full")
	// ErrDisk: the owner's disk failed after the write was applied in
	// memory; outcome unknown.
	ErrDisk = errors.New("owner's disk failed; outcome unknown")
	// ErrDiskSlow: the owner applied the write (or read what a write may
	// still change) and its disk did not make it durable within the
	// shard's MaxWait, or its durability waits were at their bound;
	// outcome unknown. The write may still reach the disk.
	ErrDiskSlow = errors.New("owner's disk did not answer in time; outcome unknown")
)

// The fleet's refusals (core/fleet), a node's answer to a request for a
// partition its group does not hold, or holds since another epoch than the
// caller routed with, are known not applied too: the check is made before
// anything else.
var known = []error{ErrShed, ErrNoOwner, ErrFenced, ErrNotOwner, ErrIsolated, ErrNotAdopted, ErrSend, ErrNotInteger, ErrBadRequest, ErrBusy,
	fleet.ErrElsewhere, fleet.ErrStaleEpoch, fleet.ErrAhead, fleet.ErrMoving}

// Known reports whether err means the operation certainly did not apply.
func Known(err error) bool {
	// The everyday refusals are the values unavailable made once: their
	// answers are made once too.
	for i, e := range unavailableErrs {
		if err == e {
			return unavailableKnown[i]
		}
	}
	return known1(err)
}

// unavailableKnown is Known of each of unavailableErrs.
var unavailableKnown = func() []bool {
	out := make([]bool, len(unavailableErrs))
	for i, e := range unavailableErrs {
		out[i] = known1(e)
	}
	return out
}()

func known1(err error) bool {
	for _, k := range known {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

func unavailable(cause error) error {
	for i, k := range unavailableCauses {
		if cause == k {
			return unavailableErrs[i]
		}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, cause)
}

// unavailableErrs are unavailable(cause) for the causes that are bare
// sentinels, made once: a refusal is an everyday answer (every call a
// crashed or isolated owner refuses, every timeout), and an error value
// is only read, never changed, so one value serves every call.
var (
	unavailableCauses = []error{ErrShed, ErrNoOwner, ErrFenced, ErrNotOwner, ErrIsolated, ErrNotAdopted, ErrSend, ErrTimeout, ErrCrashed, ErrBusy, ErrDisk, ErrDiskSlow}
	unavailableErrs   = func() []error {
		out := make([]error, len(unavailableCauses))
		for i, c := range unavailableCauses {
			out[i] = fmt.Errorf("%w: %w", ErrUnavailable, c)
		}
		return out
	}()
)

// Reason names, in one word for a header or a metric label, why an
// operation got err: what a 503 says instead of a guess. "timeout" is
// every outcome that may have applied.
func Reason(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{ErrShed, "shed"}, {ErrBusy, "shed"}, {ErrNoOwner, "no_owner"}, {ErrFenced, "fenced"},
		{ErrNotOwner, "not_owner"}, {ErrIsolated, "isolated"}, {ErrNotAdopted, "not_adopted"},
		{ErrSend, "unreachable"}, {ErrBadRequest, "bad_request"}, {ErrNotInteger, "bad_request"},
		{fleet.ErrElsewhere, "partition_elsewhere"}, {fleet.ErrStaleEpoch, "stale_epoch"}, {fleet.ErrAhead, "epoch_ahead"}, {fleet.ErrMoving, "partition_moving"},
	} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "timeout"
}

// RetryPause says whether a call refused with err may be made again, and
// after what pause (its attempt-th retry, from 0). Only a flow not yet
// adopted qualifies: it is known not applied, and the refusal itself set
// its owner adopting (one round trip to the copies, in a cluster whose
// membership has not just changed), so the first request of a new flow
// is answered after a pause instead of refused. Callers stop at their own
// deadline.
func RetryPause(err error, attempt int) (time.Duration, bool) {
	if !errors.Is(err, ErrNotAdopted) {
		return 0, false
	}
	return min(2*time.Millisecond<<min(attempt, 6), 100*time.Millisecond), true
}
