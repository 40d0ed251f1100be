package kv

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Entry is a stored value and the version of the change that wrote it.
type Entry struct {
	// Value is shared with the state: callers must not modify it.
	Value []byte
	// Version is the version of the Put that stored this value. Never 0.
	Version uint64
}

// State is one replica's copy of the state machine. It is not safe for
// concurrent use; like everything in core, it runs on its node's loop.
type State struct {
	cfg    Config
	data   map[string]Entry
	leases map[string]Lease
	// version is the revision counter: the version of the latest change.
	// Invariant: every stored version is in [1, version], no two stored
	// versions are equal, and the newest event carries version.
	version uint64
	// appliedIndex is the raft index of the last entry applied.
	appliedIndex uint64
	// appliedMs is the applied clock: the largest stamp applied so far
	// (the latest one, with Bugs.NoClockClamp). Invariant: every lease's
	// deadline is after it.
	appliedMs int64
	log       eventLog
}

// New returns an empty state. Zero fields of cfg take their defaults; New
// fails if a bound is negative or the bounds contradict each other.
func New(cfg Config) (*State, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &State{cfg: cfg}
	s.reset()
	return s, nil
}

// reset empties the state.
func (s *State) reset() {
	s.data = map[string]Entry{}
	s.leases = map[string]Lease{}
	s.version, s.appliedIndex, s.appliedMs = 0, 0, 0
	s.log = eventLog{}
}

// Config returns the state's configuration, defaults filled in.
func (s *State) Config() Config { return s.cfg }

// Result is what applying one entry did, handed back to its proposer.
// Every replica computes the same Result for the same entry.
type Result struct {
	// Index is the raft index of the entry.
	Index uint64
	// Kind is the op applied; OpInvalid if the entry did not decode.
	Kind OpKind
	// Err is nil, or why the op changed nothing. After ErrMalformed or
	// ErrInvalid the entry changed nothing at all, not even the clock;
	// after a *Refusal or ErrNotHeld the clock still advanced and lapsed
	// leases still expired. A txn whose guards failed is not an error; see
	// Succeeded.
	Err error
	// NowMs is the applied time the op ran at (the clamped stamp).
	NowMs int64
	// Version is the version of the op's last change: the Put's, the
	// Delete's, the last op of the txn branch that ran, the lease grant's
	// or renewal's, the release's. Zero if the op changed nothing.
	Version uint64
	// Revision is the state's version after the entry, expiries included.
	// A watcher that read this result can watch from it.
	Revision uint64
	// Found reports, for a Delete, that the key existed.
	Found bool
	// Succeeded reports, for a Txn, that every guard held and OnSuccess
	// ran (else OnFailure ran).
	Succeeded bool
	// Lease is the lease as granted or renewed by an acquire or renewal
	// that succeeded. Lease.Token is the fencing token.
	Lease Lease
}

// Apply applies the raft entry at index whose payload is data, an encoded
// Command. index must exceed AppliedIndex (it panics otherwise: the driver
// applied out of order). An entry that does not decode, or breaks a bound,
// yields an error Result and changes nothing but the applied index, the
// same way on every replica.
func (s *State) Apply(index uint64, data []byte) Result {
	s.advanceIndex(index)
	// Checked before decoding so an oversized entry costs no allocation.
	if len(data) > s.cfg.MaxCommandBytes {
		return s.refuse(index, OpInvalid, fmt.Errorf("%w: entry is %d bytes, limit %d", ErrInvalid, len(data), s.cfg.MaxCommandBytes))
	}
	cmd, err := DecodeCommand(data)
	if err != nil {
		return s.refuse(index, OpInvalid, err)
	}
	if s.cfg.Bugs.EmptyBranchMalformed && cmd.Op.Kind == OpTxn && len(cmd.Op.OnFailure) == 0 {
		// The planted bug: a decoder that takes an empty list for one cut short.
		return s.refuse(index, OpInvalid, fmt.Errorf("%w: txn's failure branch is empty", ErrMalformed))
	}
	return s.apply(index, cmd, true)
}

// ApplyCommand is Apply for a Command already decoded. It copies what it
// keeps, so the caller may reuse cmd.
func (s *State) ApplyCommand(index uint64, cmd Command) Result {
	s.advanceIndex(index)
	return s.apply(index, cmd, false)
}

func (s *State) advanceIndex(index uint64) {
	if index <= s.appliedIndex {
		panic(fmt.Sprintf("kv: apply index %d does not follow applied index %d", index, s.appliedIndex))
	}
	s.appliedIndex = index
}

// refuse is the Result of an entry that changes nothing.
func (s *State) refuse(index uint64, kind OpKind, err error) Result {
	return Result{Index: index, Kind: kind, Err: err, NowMs: s.appliedMs, Revision: s.version}
}

// apply applies a decoded command. owned says the command's values are
// fresh copies (DecodeCommand's) that the state may keep; otherwise they
// belong to the caller and are copied, after validation, so a refused
// entry costs no copy.
func (s *State) apply(index uint64, cmd Command, owned bool) Result {
	// Validation comes before any change, so a txn whose last op breaks a
	// bound changes nothing: all-or-nothing needs nothing else, because a
	// valid Put or Delete cannot fail.
	if err := s.cfg.Validate(cmd); err != nil {
		return s.refuse(index, cmd.Op.Kind, err)
	}
	op := cmd.Op
	if !owned {
		op = op.cloneValues()
	}
	before := s.step()
	s.advanceClock(cmd.AtMs)
	res := Result{Index: index, Kind: op.Kind, NowMs: s.appliedMs}
	switch op.Kind {
	case OpPut:
		res.Version = s.put(op.Key, op.Value)
	case OpDelete:
		res.Version, res.Found = s.delete(op.Key)
	case OpTxn:
		res.Succeeded, res.Version = s.txn(op)
	case OpLeaseAcquire:
		res.Lease, res.Err = s.acquire(op.Key, op.Holder, op.TTLMs)
		res.Version = res.Lease.Version
	case OpLeaseRenew:
		res.Lease, res.Err = s.renew(op.Key, op.Holder, op.TTLMs)
		res.Version = res.Lease.Version
	case OpLeaseRelease:
		res.Version, res.Err = s.release(op.Key, op.Holder)
	case OpTick:
	default:
		panic(fmt.Sprintf("kv: validated command has op kind %v", op.Kind))
	}
	res.Revision = s.version
	s.checkStep(before)
	return res
}

// advanceClock moves applied time to the command's stamp, never back
// (unless the no-clock-clamp bug is planted), then expires every lease
// that lapsed by then.
func (s *State) advanceClock(atMs int64) {
	now := atMs
	if now < s.appliedMs && !s.cfg.Bugs.NoClockClamp {
		// A leader whose clock stepped back must not move the cluster's
		// time back: leases granted at the earlier time would get
		// deadlines the cluster already passed.
		now = s.appliedMs
	}
	if s.cfg.Bugs.StoppedLeaseClock && s.appliedMs != 0 {
		now = s.appliedMs // the planted bug: time stands still
	}
	s.appliedMs = now
	s.expireLapsed()
}

// bump takes the next version for one change.
func (s *State) bump() uint64 {
	s.version++
	return s.version
}

// stepMark is what checkStep compares against after an apply.
type stepMark struct {
	version   uint64
	appliedMs int64
}

func (s *State) step() stepMark { return stepMark{s.version, s.appliedMs} }

// checkStep checks the cheap invariants of one apply: time and versions
// only move forward, and each change left exactly one event (eventLog.add
// checks the events are consecutive; here, that the last is the newest
// version).
func (s *State) checkStep(before stepMark) {
	if s.version < before.version {
		panic(fmt.Sprintf("kv: version went back from %d to %d", before.version, s.version))
	}
	if s.appliedMs < before.appliedMs && !s.cfg.Bugs.NoClockClamp {
		panic(fmt.Sprintf("kv: applied time went back from %d to %d", before.appliedMs, s.appliedMs))
	}
	if s.log.last != s.version {
		panic(fmt.Sprintf("kv: version %d but newest event has %d", s.version, s.log.last))
	}
}

// checkInvariants checks the whole state: O(n log n), for tests and for
// Restore.
func (s *State) checkInvariants() error {
	seen := make(map[uint64]string, len(s.data)+len(s.leases))
	claim := func(v uint64, who string) error {
		if v == 0 || v > s.version {
			return fmt.Errorf("%s has version %d outside [1, %d]", who, v, s.version)
		}
		if other, dup := seen[v]; dup {
			return fmt.Errorf("%s and %s share version %d", who, other, v)
		}
		seen[v] = who
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(s.data)) {
		if err := claim(s.data[k].Version, fmt.Sprintf("key %q", k)); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.leases)) {
		l := s.leases[name]
		who := fmt.Sprintf("lease %q", name)
		if err := claim(l.Version, who); err != nil {
			return err
		}
		switch {
		case l.Name != name || l.Holder == "":
			return fmt.Errorf("%s is filed as %q with holder %q", who, l.Name, l.Holder)
		case l.Token == 0 || l.Token > l.Version:
			return fmt.Errorf("%s has token %d outside [1, version %d]", who, l.Token, l.Version)
		case l.DeadlineMs <= s.appliedMs:
			return fmt.Errorf("%s lapsed at %d but applied time is %d", who, l.DeadlineMs, s.appliedMs)
		}
	}
	return s.log.check(s.version)
}

// AppliedIndex is the raft index of the last entry applied.
func (s *State) AppliedIndex() uint64 { return s.appliedIndex }

// AppliedMs is the applied clock, in milliseconds since the epoch.
func (s *State) AppliedMs() int64 { return s.appliedMs }

// Version is the version of the latest change.
func (s *State) Version() uint64 { return s.version }

// Get reads key from this replica's state: a local read, as stale as this
// replica is. The linearizable read is the raft driver's.
func (s *State) Get(key string) (Entry, bool) {
	e, ok := s.data[key]
	return e, ok
}

// Keys returns the keys starting with prefix, sorted.
func (s *State) Keys(prefix string) []string {
	var keys []string
	for k := range s.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// Len is the number of keys.
func (s *State) Len() int { return len(s.data) }
