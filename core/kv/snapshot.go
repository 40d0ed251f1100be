package kv

import (
	"encoding/binary"
	"fmt"
	"github.com/fenceline/fenceline/core/binenc"
	"maps"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Snapshot format, version 1, in the varints and byte strings of the
// command encoding:
//
//	snapshot := 0x01 version appliedIndex appliedMs
//	            n (key entryVersion value){n}                   keys ascending
//	            n (name holder token leaseVersion deadline){n}  names ascending
//
// Sorted, with one encoding per state, so equal states are equal bytes and
// Digest can compare replicas. The event log is not in it.
const snapshotVersion = 1

// Snapshot returns the whole state (keys, leases, version counter, applied
// index and time) as deterministic bytes.
func (s *State) Snapshot() []byte {
	b := make([]byte, 0, s.snapshotSizeHint())
	b = append(b, snapshotVersion)
	b = binary.AppendUvarint(b, s.version)
	b = binary.AppendUvarint(b, s.appliedIndex)
	b = binary.AppendUvarint(b, uint64(s.appliedMs))
	b = binary.AppendUvarint(b, uint64(len(s.data)))
	for _, k := range slices.Sorted(maps.Keys(s.data)) {
		e := s.data[k]
		b = binenc.AppendBytes(b, k)
		b = binary.AppendUvarint(b, e.Version)
		b = binenc.AppendBytes(b, e.Value)
	}
	b = binary.AppendUvarint(b, uint64(len(s.leases)))
	for _, name := range slices.Sorted(maps.Keys(s.leases)) {
		l := s.leases[name]
		b = binenc.AppendBytes(b, name)
		b = binenc.AppendBytes(b, l.Holder)
		b = binary.AppendUvarint(b, l.Token)
		b = binary.AppendUvarint(b, l.Version)
		b = binary.AppendUvarint(b, uint64(l.DeadlineMs))
	}
	return b
}

func (s *State) snapshotSizeHint() int {
	n := 64
	//fenceline:unordered order does not reach output: summing sizes
	for k, e := range s.data {
		n += len(k) + len(e.Value) + 16
	}
	return n + 64*len(s.leases)
}

// Digest is a hash of Snapshot: replicas at the same applied index must
// have equal digests.
func (s *State) Digest() uint64 { return xxhash.Sum64(s.Snapshot()) }

// CheckSnapshot reports why Restore would refuse snap, without a state
// to restore it into: a node reads a peer's snapshot with it before raft
// takes it.
func CheckSnapshot(snap []byte) error {
	var scratch State
	return scratch.Restore(snap)
}

// Restore replaces the state with a snapshot. The event log restarts empty
// at the snapshot's version, so watchers from before it get ErrCompacted.
// The bytes come from another node, so Restore checks them as strictly as
// DecodeCommand checks an entry, plus the state's invariants; on error the
// state is unchanged. The Config is not in the snapshot and is kept; its
// size bounds are not re-checked here, since they govern new entries.
func (s *State) Restore(snap []byte) error {
	d := decoder{binenc.Decoder{B: snap}}
	if v := d.Byte(); d.Err == nil && v != snapshotVersion {
		d.Fail("snapshot version %d, want %d", v, snapshotVersion)
	}
	next := State{cfg: s.cfg, data: map[string]Entry{}, leases: map[string]Lease{}}
	next.version = d.Uvarint()
	next.appliedIndex = d.Uvarint()
	next.appliedMs = d.Int63()
	if d.Err == nil && next.appliedMs > MaxAtMs {
		d.Fail("applied time %d past %d", next.appliedMs, MaxAtMs)
	}
	prev, first := "", true
	ascending := func(what, k string) {
		if d.Err == nil && !first && k <= prev {
			d.Fail("%s %q out of order after %q", what, k, prev)
		}
		prev, first = k, false
	}
	for n := d.Count(); n > 0 && d.Err == nil; n-- {
		k := d.Str()
		ascending("key", k)
		e := Entry{Version: d.Uvarint(), Value: d.bytes()}
		if d.Err == nil && k == "" {
			d.Fail("empty key")
		}
		next.data[k] = e
	}
	prev, first = "", true
	for n := d.Count(); n > 0 && d.Err == nil; n-- {
		l := Lease{Name: d.Str(), Holder: d.Str(), Token: d.Uvarint(), Version: d.Uvarint(), DeadlineMs: d.Int63()}
		ascending("lease", l.Name)
		if d.Err == nil && l.Name == "" {
			d.Fail("empty lease name")
		}
		next.leases[l.Name] = l
	}
	d.End()
	if d.Err == nil {
		next.log.restart(next.version)
		d.Err = next.checkInvariants()
	}
	if d.Err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, d.Err)
	}
	*s = next
	return nil
}
