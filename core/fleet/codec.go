package fleet

import (
	"encoding/binary"
	"fmt"

	"github.com/fenceline/fenceline/core/binenc"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/dial"
)

// The directory's bytes, as the control group's KV holds them
// (core/node): a version byte, then
//
//	epoch, base, target                 uvarints
//	founded                             uvarint, in version 3 only
//	groups: count, then each            MIdx, voters: count, then each ID, name, peer, HTTP
//	moved: count, then each             partition (ascending), group, epoch, to+1 (0: not moving)
//
// where moved lists only the partitions not where the founding table
// puts them since base: a directory no resize has touched is a few
// hundred bytes, and one every partition of which moved is under 50 KiB.
// A fleet that has had no group added is version 2, with no founded
// field (it is the group count), exactly as before groups could be
// added; one with added groups is version 3. Decode is strict
// (core/binenc): one directory has one encoding, and bytes that are not
// one (cut short, trailing, out of order, naming a group that is not
// there, a version 3 with no group added) are refused, never read as a
// directory.
const (
	codecVersion      = 2
	codecVersionAdded = 3
)

// MaxEncoded bounds a directory's bytes: MaxVoters voters of every group
// of the largest fleet would pass it long before a real one does.
const MaxEncoded = 1 << 20

// Encode returns d's bytes.
func (d *Directory) Encode() []byte {
	added := d.founded != len(d.groups)
	b := []byte{codecVersion}
	if added {
		b[0] = codecVersionAdded
	}
	b = binary.AppendUvarint(b, d.epoch)
	b = binary.AppendUvarint(b, d.base)
	b = binary.AppendUvarint(b, uint64(d.target))
	if added {
		b = binary.AppendUvarint(b, uint64(d.founded))
	}
	b = binary.AppendUvarint(b, uint64(len(d.groups)))
	for _, g := range d.groups {
		b = binary.AppendUvarint(b, g.MIdx)
		b = binary.AppendUvarint(b, uint64(len(g.Voters)))
		for _, m := range g.Voters {
			b = binary.AppendUvarint(b, uint64(m.ID))
			b = binenc.AppendBytes(b, m.Name)
			b = binenc.AppendBytes(b, m.Peer)
			b = binenc.AppendBytes(b, m.HTTP)
		}
	}
	var moved []int
	for p, a := range d.held {
		if a != d.placed(partition.Partition(p)) {
			moved = append(moved, p)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(moved)))
	for _, p := range moved {
		b = binary.AppendUvarint(b, uint64(p))
		b = binary.AppendUvarint(b, uint64(d.held[p].group))
		b = binary.AppendUvarint(b, d.held[p].epoch)
		b = binary.AppendUvarint(b, uint64(d.held[p].to1))
	}
	return b
}

// placed is where the founding table puts p in d's fleet, since d's
// founding.
func (d *Directory) placed(p partition.Partition) assignment {
	return assignment{group: p.Group(d.founded), epoch: d.base}
}

// Decode reads a directory Encode wrote, checked as New checks one.
func Decode(b []byte) (*Directory, error) {
	if len(b) > MaxEncoded {
		return nil, fmt.Errorf("%w: %d bytes (at most %d)", ErrInvalid, len(b), MaxEncoded)
	}
	d := binenc.Decoder{B: b}
	v := d.Byte()
	if d.Err == nil && v != codecVersion && v != codecVersionAdded {
		return nil, fmt.Errorf("%w: encoding version %d (this node reads %d and %d)", ErrInvalid, v, codecVersion, codecVersionAdded)
	}
	epoch, base, target := d.Uvarint(), d.Uvarint(), d.Uvarint()
	founded := uint64(0) // version 2: every group was founded
	if v == codecVersionAdded {
		founded = d.Uvarint()
	}
	groups := make([]Group, d.Count())
	for g := range groups {
		groups[g].MIdx = d.Uvarint()
		groups[g].Voters = make([]Member, d.Count())
		for i := range groups[g].Voters {
			groups[g].Voters[i] = Member{ID: dial.NodeID(d.Uvarint()), Name: d.Str(), Peer: d.Str(), HTTP: d.Str()}
		}
	}
	if d.Err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, d.Err)
	}
	if base == 0 || base > epoch {
		return nil, fmt.Errorf("%w: founded at epoch %d, now at %d", ErrInvalid, base, epoch)
	}
	if v == codecVersion {
		founded = uint64(len(groups))
	} else if founded == 0 || founded >= uint64(len(groups)) {
		return nil, fmt.Errorf("%w: founded with %d of its %d groups, in the encoding of a fleet that added some", ErrInvalid, founded, len(groups))
	}
	dir, err := New(base, groups[:founded])
	if err != nil {
		return nil, err
	}
	if err := dir.setGroups(groups); err != nil {
		return nil, err
	}
	dir.epoch = epoch
	if target > uint64(len(groups)) || partition.Compatible(int(target)) != nil {
		return nil, fmt.Errorf("%w: target of %d groups in a fleet of %d", ErrInvalid, target, len(groups))
	}
	dir.target = int(target)
	n := d.Count()
	prev := -1
	for range n {
		p, g, e, to1 := d.Uvarint(), d.Uvarint(), d.Uvarint(), d.Uvarint()
		switch {
		case d.Err != nil:
		case to1 > uint64(len(groups)) || to1 == g+1:
			d.Fail("partition %d moving from group %d to %d of %d", p, g, int(to1)-1, len(groups))
		case p >= partition.Count || int(p) <= prev:
			d.Fail("moved partition %d after %d (ascending, below %d)", p, prev, partition.Count)
		case g >= uint64(len(groups)):
			d.Fail("partition %d held by group %d of %d", p, g, len(groups))
		case e < base || e > epoch:
			d.Fail("partition %d assigned at epoch %d, outside [%d, %d]", p, e, base, epoch)
		default:
			a := assignment{group: int(g), epoch: e, to1: int(to1)}
			if a == dir.placed(partition.Partition(p)) {
				d.Fail("partition %d listed as moved where the table puts it", p)
			}
			dir.held[p] = a
			prev = int(p)
		}
	}
	d.End()
	if d.Err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, d.Err)
	}
	return dir, nil
}
