package fleet

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/fenceline/fenceline/core/binenc"
	"github.com/fenceline/fenceline/core/partition"
)

// Fences is what a data group's own log says of the partitions it let
// go: for each, the epoch of the latest move out of the group that the
// log has fenced. It is the second half of a move's fence. The directory
// (the control group's) says a partition is moving, but an owner reads
// the directory from its replica of the control group, which may lag
// while its own group runs on; the group's own log is what D-17 and the
// confirmation before serving hold an owner to (core/flow). So an owner
// serves a partition its directory gives its group since epoch e only if
// its group's log has fenced no move of it at e or later, and the move
// copies from the group only what its log has fenced: once the fence is
// committed, an owner that has not applied it is cut off and stops
// within its isolation window, which the copy waits out (as an adoption
// does) unless every voter has answered.
//
// Fences is a value: With returns a new one.
type Fences struct {
	at map[partition.Partition]uint64
}

// FenceAll fences every partition at every epoch: what a node reads
// from a fences value it cannot decode, which must never read as "no
// fence".
var FenceAll = func() Fences {
	f := Fences{at: make(map[partition.Partition]uint64, partition.Count)}
	for p := range partition.Count {
		f.at[partition.Partition(p)] = ^uint64(0)
	}
	return f
}()

// KeyPrefix begins every KV key the fleet's own code writes (the
// directory in the control group's KV, the fences in each data group's):
// the KV API refuses to write under it, since a directory or fences
// written by anything but the code that guards them could hand a
// partition to a group without a move.
const KeyPrefix = "fleet/"

// FencesKey is the data group's KV key holding its Fences.
const FencesKey = KeyPrefix + "fences"

// At is the epoch of the latest move of p out of the group that the
// group's log has fenced; 0 if none.
func (f Fences) At(p partition.Partition) uint64 { return f.at[p] }

// AtKey is At of key's partition.
func (f Fences) AtKey(key string) uint64 { return f.at[partition.Of(key)] }

// Covers reports whether every one of ps is fenced at epoch or later.
func (f Fences) Covers(ps []partition.Partition, epoch uint64) bool {
	for _, p := range ps {
		if f.at[p] < epoch {
			return false
		}
	}
	return true
}

// With returns f with each of ps fenced at epoch (a later fence than one
// already there only).
func (f Fences) With(ps []partition.Partition, epoch uint64) Fences {
	n := Fences{at: make(map[partition.Partition]uint64, len(f.at)+len(ps))}
	for p, e := range f.at { //fenceline:unordered copying into a map
		n.at[p] = e
	}
	for _, p := range ps {
		n.at[p] = max(n.at[p], epoch)
	}
	return n
}

const fencesVersion = 1

// Encode returns f's bytes: a version byte, a count, then each partition
// (ascending) and its epoch, as uvarints. At most partition.Count
// entries, so a few tens of KiB at the most.
func (f Fences) Encode() []byte {
	ps := make([]partition.Partition, 0, len(f.at))
	for p := range f.at {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	b := []byte{fencesVersion}
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(p))
		b = binary.AppendUvarint(b, f.at[p])
	}
	return b
}

// DecodeFences reads what Encode wrote, strictly: one encoding per value.
func DecodeFences(b []byte) (Fences, error) {
	d := binenc.Decoder{B: b}
	if v := d.Byte(); d.Err == nil && v != fencesVersion {
		return Fences{}, fmt.Errorf("%w: fences encoding version %d (this node reads %d)", ErrInvalid, v, fencesVersion)
	}
	f := Fences{at: map[partition.Partition]uint64{}}
	n := d.Count()
	prev := -1
	for range n {
		p, e := d.Uvarint(), d.Uvarint()
		switch {
		case d.Err != nil:
		case p >= partition.Count || int(p) <= prev:
			d.Fail("fenced partition %d after %d (ascending, below %d)", p, prev, partition.Count)
		case e == 0:
			d.Fail("partition %d fenced at epoch 0", p)
		default:
			f.at[partition.Partition(p)] = e
			prev = int(p)
		}
	}
	d.End()
	if d.Err != nil {
		return Fences{}, fmt.Errorf("%w: fences: %v", ErrInvalid, d.Err)
	}
	return f, nil
}
