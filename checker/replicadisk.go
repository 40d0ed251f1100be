package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// ReplicaDisk holds a successor's disk to the async promise (checker
// replica-disk): the owner counts a live successor it pushed to as a
// holder of the write, and a holder's copy survives its crash once it is
// on its disk, window after it took the push (longer across a stall of
// its disk or process, as durability allows: reach). So a node that
// restarts must recover, from its own disk, every value it took that
// long before it went down, or a newer one. durability judges only what
// every copy together lost; a successor that kept a push in memory only
// (a flow behind a full writer queue never written, a value written as
// a delete, a sync push never fsynced) was covered by the other copies
// until they too were lost. A node shut down in order (its Close
// completed) has no window: Close writes and fsyncs everything it holds,
// so every value it took before the shutdown must come back.
//
// It judges the flows of the modes that write (sync, async) whose keys
// only ever grow in version: no delete, no expiry, no eviction, as in
// durability-restart.
type ReplicaDisk struct {
	Modes  map[string]shard.Mode                   // the flows judged, and the mode each is written in
	Judged int                                     // values judged at restarts
	taken  map[dial.NodeID]map[copyKey][]takenCopy // by when taken
	failed map[string]bool                         // one failure a flow
}

type copyKey struct{ flow, key string }

type takenCopy struct {
	tuple flow.Tuple
	at    time.Duration
}

// Took records the values node took of a push at at, in its current
// incarnation: every one, since which of them had reached its disk when
// it went down is known only then.
func (r *ReplicaDisk) Took(node dial.NodeID, f string, pushed map[string]flow.Value, at time.Duration) {
	if m, ok := r.Modes[f]; !ok || m == shard.None {
		return
	}
	if r.taken == nil {
		r.taken = map[dial.NodeID]map[copyKey][]takenCopy{}
	}
	m := r.taken[node]
	if m == nil {
		m = map[copyKey][]takenCopy{}
		r.taken[node] = m
	}
	for k, v := range pushed { //fenceline:unordered a map filled key by key
		ck := copyKey{f, k}
		m[ck] = append(m[ck], takenCopy{tuple: v.Tuple, at: at})
	}
}

// Restarted judges node as it comes back: every value it took at least
// its reach before it next went down must be in recovered, its copy read
// back from its disk before it takes a frame. The record starts over for
// the new incarnation. (A boot that failed, halting at once, never came
// back: the values it had taken are judged at the next boot, against the
// first time the node went down after taking them.)
//
// The mode the disk records for the flow is not judged: a repair writes
// a sync flow's copy async, and its recorded mode with it (core/flow's
// repairMode), and the recorded mode decides nothing a promise rests on
// (an owner writes and answers in its request's mode; a repair or a move
// writes sync and async flows alike; an eviction's tombstones are held to
// the async promise either way). It was judged, and durability-restart
// seed 207 failed where a repair had landed on a sync flow after a push.
func (r *ReplicaDisk) Restarted(rep Reporter, node dial.NodeID, window time.Duration, crashes CrashRecord, recovered func(flow string) map[string]flow.Value) {
	taken := r.taken[node]
	delete(r.taken, node)
	keys := slices.SortedFunc(maps.Keys(taken), func(a, b copyKey) int {
		return cmp.Or(strings.Compare(a.flow, b.flow), strings.Compare(a.key, b.key))
	})
	copies := map[string]map[string]flow.Value{}
	for _, ck := range keys {
		// The newest value the node held long enough before it next
		// went down (the one before it may have been in memory only),
		// or held at all before an orderly shutdown.
		var t takenCopy
		var downAt time.Duration
		found, orderly := false, false
		for i := len(taken[ck]) - 1; i >= 0 && !found; i-- {
			t = taken[ck][i]
			for _, w := range crashes.Downs(node) {
				if w.From >= t.at {
					downAt, orderly = w.From, w.Orderly
					found = orderly || reach(crashes, node, t.at, window) < w.From
					break
				}
			}
		}
		if !found {
			continue
		}
		r.Judged++
		c, ok := copies[ck.flow]
		if !ok {
			c = recovered(ck.flow)
			copies[ck.flow] = c
		}
		var problem string
		if cur, ok := c[ck.key]; !ok {
			problem = "its disk gave back nothing"
		} else if cur.Tuple.Less(t.tuple) {
			problem = fmt.Sprintf("its disk gave back %v", cur.Tuple)
		}
		if problem == "" || r.failed[ck.flow] {
			continue
		}
		if r.failed == nil {
			r.failed = map[string]bool{}
		}
		r.failed[ck.flow] = true
		why := fmt.Sprintf("past the window (%v) a write may sit in memory", window)
		if orderly {
			why = "in an orderly shutdown, which writes everything held"
		}
		rep.Fail("replica-disk", "%s took flow %s's %q at %v at %v and went down at %v, %s, yet %s",
			crashes.Name(node), ck.flow, ck.key, t.tuple, t.at, downAt, why, problem)
	}
}
