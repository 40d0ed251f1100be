// Package partition is the fleet's fixed partition table: every scoped
// key (a flow, a response cycle, a proxyOnce claim) falls in one of Count
// partitions, decided once by the key's bytes alone, and the partitions,
// never the keys, are what the fleet's raft groups divide among them.
//
//	Of(key)         = xxh64(key) mod Count        (seed 0; independent of G)
//	p.Group(G)      = p mod G
//	GroupOf(key, G) = Of(key).Group(G)
//
// Why a table and not xxh64(key) mod G directly: a group owns the state of
// its keys, so a mapping in which G → G+1 re-homes almost every key moves
// almost all the data. With the table a resize only hands whole
// partitions from one group to another, each a bounded unit of work that
// can be fenced, copied and published on its own, and a key's partition
// never changes.
//
// Why Count is 4096 and G must divide it: (h mod Count) mod G equals
// h mod G exactly when G divides Count, so the two-level mapping is
// bit-identical to plain modulo for every legal G (the property test
// sweeps ids × every divisor). Every power of two up to 4096 is legal;
// Compatible refuses any other G rather than let the two forms disagree,
// which would split the mapping in two: two nodes computing a key's group
// by different formulas would both serve it.
//
// Within a group, a key's owner is still chosen by rendezvous hashing over
// that group's voters (package ring). With one group (G = 1, today's only
// fleet) every key is group 0 and nothing changes: the table is in place
// where it cannot fire.
//
// The byte layout is a compatibility contract, like the ring's: every node
// of a fleet must place a key in the same partition. The golden test pins
// it; change it and every node moves together, or none does.
package partition

import (
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Count is the number of partitions. Fixed for the life of a fleet: a
// key's partition is stored nowhere, it is recomputed from the key.
const Count = 4096

// Partition is one of the Count partitions.
type Partition uint16

// Of is the partition of a scoped key (ring.ImposterKey and its kin): the
// key's xxh64 (seed 0) modulo Count. It does not depend on how many groups
// the fleet has.
func Of(key string) Partition {
	return Partition(xxhash.Sum64String(key) % Count)
}

// ErrIncompatible is wrapped by Compatible's errors.
var ErrIncompatible = errors.New("partition: group count does not divide the partition table")

// Compatible reports whether a fleet may have groups raft groups: a
// positive divisor of Count (a power of two up to 4096). Any other count
// is refused, not rounded: with it, p mod G would no longer equal
// h mod G, and a node that computed a key's group either way would
// disagree with one that computed it the other.
func Compatible(groups int) error {
	if groups < 1 || groups > Count || Count%groups != 0 {
		return fmt.Errorf("%w: %d groups (a fleet has a power of two from 1 to %d)", ErrIncompatible, groups, Count)
	}
	return nil
}

// Group is the group, 0 ≤ g < groups, that holds partition p in a fleet
// of groups groups. groups must have passed Compatible (it comes from the
// fleet's configuration, validated when loaded); Group panics otherwise,
// since by then an incompatible count is a bug, not input.
func (p Partition) Group(groups int) int {
	if err := Compatible(groups); err != nil {
		panic(err)
	}
	return int(p) % groups
}

// GroupOf is the group that holds key in a fleet of groups groups:
// Of(key).Group(groups).
func GroupOf(key string, groups int) int {
	return Of(key).Group(groups)
}
