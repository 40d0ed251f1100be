package kv

import (
	"encoding/binary"
	"fmt"
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
		b = appendBytes(b, k)
		b = binary.AppendUvarint(b, e.Version)
		b = appendBytes(b, e.Value)
	}
	b = binary.AppendUvarint(b, uint64(len(s.leases)))
	for _, name := range slices.Sorted(maps.Keys(s.leases)) {
		l := s.leases[name]
		b = appendBytes(b, name)
		b = appendBytes(b, l.Holder)
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

// Restore replaces the state with a snapshot. The event log restarts empty
// at the snapshot's version, so watchers from before it get ErrCompacted.
// The bytes come from another node, so Restore checks them as strictly as
// DecodeCommand checks an entry, plus the state's invariants; on error the
// state is unchanged. The Config is not in the snapshot and is kept; its
// size bounds are not re-checked here, since they govern new entries.
func (s *State) Restore(snap []byte) error {
	d := decoder{b: snap}
	if v := d.byte(); d.err == nil && v != snapshotVersion {
		d.fail("snapshot version %d, want %d", v, snapshotVersion)
	}
	next := State{cfg: s.cfg, data: map[string]Entry{}, leases: map[string]Lease{}}
	next.version = d.uvarint()
	next.appliedIndex = d.uvarint()
	next.appliedMs = d.int63()
	if d.err == nil && next.appliedMs > MaxAtMs {
		d.fail("applied time %d past %d", next.appliedMs, MaxAtMs)
	}
	prev, first := "", true
	ascending := func(what, k string) {
		if d.err == nil && !first && k <= prev {
			d.fail("%s %q out of order after %q", what, k, prev)
		}
		prev, first = k, false
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		k := d.string()
		ascending("key", k)
		e := Entry{Version: d.uvarint(), Value: d.bytes()}
		if d.err == nil && k == "" {
			d.fail("empty key")
		}
		next.data[k] = e
	}
	prev, first = "", true
	for n := d.count(); n > 0 && d.err == nil; n-- {
		l := Lease{Name: d.string(), Holder: d.string(), Token: d.uvarint(), Version: d.uvarint(), DeadlineMs: d.int63()}
		ascending("lease", l.Name)
		if d.err == nil && l.Name == "" {
			d.fail("empty lease name")
		}
		next.leases[l.Name] = l
	}
	d.end()
	if d.err == nil {
		next.log.restart(next.version)
		d.err = next.checkInvariants()
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, d.err)
	}
	*s = next
	return nil
}
