package kv

import "fmt"

// Command is one raft entry's payload: an op and the wall time at which
// its proposer stamped it.
type Command struct {
	// AtMs is the proposer's wall clock in milliseconds since the epoch,
	// read once when the command was proposed. Apply uses
	// max(AppliedMs, AtMs), so a proposer whose clock stepped back cannot
	// move the state machine's clock back. In [0, MaxAtMs].
	AtMs int64
	// Op is what to do.
	Op Op
}

// OpKind says which op an Op is. The values are the wire encoding: never
// renumber them.
type OpKind uint8

const (
	// OpInvalid is the zero OpKind. No valid Op has it; a Result for an
	// entry that did not decode carries it.
	OpInvalid OpKind = iota
	// OpPut sets Key to Value.
	OpPut
	// OpDelete removes Key. Deleting an absent key changes nothing.
	OpDelete
	// OpTxn checks Guards and applies OnSuccess if all hold, OnFailure
	// otherwise, as one step.
	OpTxn
	// OpLeaseAcquire grants lease Key to Holder for TTLMs if it is free,
	// or already Holder's (then it is renewed).
	OpLeaseAcquire
	// OpLeaseRenew extends Holder's lease Key to now+TTLMs.
	OpLeaseRenew
	// OpLeaseRelease drops Holder's lease Key.
	OpLeaseRelease
	// OpTick only advances applied time, so that lapsed leases expire on a
	// cluster with nothing else to apply.
	OpTick
	opKindEnd
)

var opKindNames = [...]string{"invalid", "put", "delete", "txn", "lease-acquire", "lease-renew", "lease-release", "tick"}

func (k OpKind) String() string {
	if k < opKindEnd {
		return opKindNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Op is one operation. Which fields it uses depends on Kind; a field the
// kind does not use must be zero (Validate refuses it), so that encoding
// never silently drops something the caller set.
type Op struct {
	Kind OpKind
	// Key is the data key (Put, Delete) or the lease name (lease ops).
	Key string
	// Value is the value a Put stores. Empty and nil are the same value.
	Value []byte
	// Holder names who acquires, renews or releases a lease.
	Holder string
	// TTLMs is how long an acquire or renewal lasts, from applied time.
	TTLMs int64
	// Guards, OnSuccess and OnFailure make up a Txn. The branches hold
	// only Put and Delete: a lease op's outcome (granted or refused) is not
	// all-or-nothing with anything else, and nesting would make the entry's
	// cost unbounded.
	Guards    []Guard
	OnSuccess []Op
	OnFailure []Op
}

// Put returns an op setting key to value.
func Put(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// Delete returns an op removing key.
func Delete(key string) Op { return Op{Kind: OpDelete, Key: key} }

// Txn returns an op that applies onSuccess if every guard holds, onFailure
// otherwise, all or nothing.
func Txn(guards []Guard, onSuccess, onFailure []Op) Op {
	return Op{Kind: OpTxn, Guards: guards, OnSuccess: onSuccess, OnFailure: onFailure}
}

// LeaseAcquire returns an op asking for lease name on behalf of holder.
func LeaseAcquire(name, holder string, ttlMs int64) Op {
	return Op{Kind: OpLeaseAcquire, Key: name, Holder: holder, TTLMs: ttlMs}
}

// LeaseRenew returns an op extending holder's lease name to now+ttlMs.
func LeaseRenew(name, holder string, ttlMs int64) Op {
	return Op{Kind: OpLeaseRenew, Key: name, Holder: holder, TTLMs: ttlMs}
}

// LeaseRelease returns an op dropping holder's lease name.
func LeaseRelease(name, holder string) Op {
	return Op{Kind: OpLeaseRelease, Key: name, Holder: holder}
}

// Tick returns an op that only advances applied time.
func Tick() Op { return Op{Kind: OpTick} }

// GuardKind says what a Guard compares. The values are the wire encoding.
type GuardKind uint8

const (
	guardInvalid GuardKind = iota
	// GuardVersionIs holds if the key's version equals Version. An absent
	// key has version 0, and no present key does, so Version 0 means
	// "absent".
	GuardVersionIs
	// GuardAbsent holds if the key does not exist.
	GuardAbsent
	// GuardValueIs holds if the key exists with exactly Value. It is
	// UNSAFE for read-modify-write: a key that went A -> B -> A between the
	// read and the transaction passes it, and the transaction applies over
	// two writes it never saw. It exists to demonstrate that bug; use
	// GuardVersionIs.
	GuardValueIs
	guardKindEnd
)

var guardKindNames = [...]string{"invalid", "version-is", "absent", "value-is"}

func (k GuardKind) String() string {
	if k < guardKindEnd {
		return guardKindNames[k]
	}
	return fmt.Sprintf("GuardKind(%d)", uint8(k))
}

// Guard is one precondition of a Txn, evaluated against the state before
// any of the transaction's ops.
type Guard struct {
	Kind GuardKind
	Key  string
	// Version is the version GuardVersionIs expects; zero for other kinds.
	Version uint64
	// Value is the value the client observed. GuardValueIs compares it;
	// GuardVersionIs carries it only so the "value-guard" bug has something
	// to compare; GuardAbsent leaves it empty.
	Value []byte
}

// VersionIs returns a guard holding if key's version is v (0: absent).
func VersionIs(key string, v uint64) Guard {
	return Guard{Kind: GuardVersionIs, Key: key, Version: v}
}

// Absent returns a guard holding if key does not exist.
func Absent(key string) Guard { return Guard{Kind: GuardAbsent, Key: key} }

// ValueIs returns a guard holding if key exists with value. It is unsafe;
// see GuardValueIs.
func ValueIs(key string, value []byte) Guard {
	return Guard{Kind: GuardValueIs, Key: key, Value: value}
}

// Unchanged returns the guard a read-modify-write client wants after
// reading (e, found) at key: Absent if it was absent, else VersionIs on the
// version read, carrying the value read as well.
func Unchanged(key string, e Entry, found bool) Guard {
	if !found {
		return Absent(key)
	}
	g := VersionIs(key, e.Version)
	g.Value = e.Value
	return g
}
