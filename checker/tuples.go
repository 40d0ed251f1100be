package checker

import (
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// Tuples holds every write's fencing tuple to naming that write alone
// (checker tuple-unique). A replica keeps, of two copies of a key, the
// one with the larger tuple, and takes equal tuples for the same write:
// two writes under one tuple are a fork no merge can see, each copy
// keeping whichever it got first. The tuple's counter starts each
// incarnation above a floor of its own (the node's epoch), so an owner
// restarted without its last, unsynced write never issues that write's
// tuple again for other data. Every write an owner answers is pushed to
// its successors first (replica-push), so the network's record of pushes
// is a record of the writes: each key's tuple must come with the same
// value and tombstone every time it is pushed, by any node.
type Tuples struct {
	seen     map[tupleKey]tupleSeen
	reported map[string]bool
}

type tupleKey struct {
	flow, key string
	t         flow.Tuple
}

type tupleSeen struct {
	sum  uint64
	tomb bool
	node dial.NodeID
	at   time.Duration
}

// Push records the values node pushed for f at at, and fails for a key
// whose tuple an earlier push gave other data, once per flow.
func (c *Tuples) Push(rep Reporter, node dial.NodeID, at time.Duration, f string, entries map[string]flow.Value, name func(dial.NodeID) string) {
	if c.seen == nil {
		c.seen, c.reported = map[tupleKey]tupleSeen{}, map[string]bool{}
	}
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		v := entries[k]
		now := tupleSeen{sum: xxhash.Sum64(v.Data), tomb: v.Tomb, node: node, at: at}
		key := tupleKey{f, k, v.Tuple}
		was, ok := c.seen[key]
		if !ok {
			c.seen[key] = now
			continue
		}
		if (was.sum != now.sum || was.tomb != now.tomb) && !c.reported[f] {
			c.reported[f] = true
			rep.Fail("tuple-unique", "%s pushed %s key %s under tuple %v with other data than %s pushed under it at %v: two writes share one tuple",
				name(node), f, k, v.Tuple, name(was.node), was.at)
		}
	}
}

// Writes is how many distinct writes (key and tuple) the pushes named.
func (c *Tuples) Writes() int { return len(c.seen) }
