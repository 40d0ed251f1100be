package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Durability and TTL checkers over versioned flows: flows whose every
// write sets every key to the write's version (a set-all), so a read
// tells which version it saw, or that the flow was absent.

// WriteOutcome is what the writer learned of a write.
type WriteOutcome uint8

// Write outcomes.
const (
	WriteOK      WriteOutcome = iota + 1 // acknowledged: applied
	WriteRefused                         // refused before it applied
	WriteUnknown                         // no answer that says
)

// VersionWrite is one write of a versioned flow; its version is its
// position in the flow's Writes plus one.
type VersionWrite struct {
	Call, Return time.Duration // Return is zero while unanswered
	Outcome      WriteOutcome
}

// VersionRead is one read of a versioned flow that answered: the version
// it saw, 0 for an absent flow.
type VersionRead struct {
	Node         string
	Call, Return time.Duration
	Version      int
}

// VersionedFlow is one flow's history.
type VersionedFlow struct {
	Name      string
	Mode      shard.Mode
	Placement []dial.NodeID // owner and successors; the flow's only copies
	Writes    []VersionWrite
	Reads     []VersionRead
}

// DownWindow is a span in which a node was down: from its crash to its
// restart (or the end of the run). Orderly: it went down by an orderly
// shutdown whose Close completed, so its disk kept everything it held
// (never set on a stall).
type DownWindow struct {
	From, To time.Duration
	Orderly  bool
}

// CrashRecord is the simulator's record of the nodes' crashes.
type CrashRecord interface {
	Downs(node dial.NodeID) []DownWindow
	Name(node dial.NodeID) string
}

// StallRecord is what a CrashRecord may also know: the spans in which a
// node's disk, or its process, stood still. A write a copy applied just
// before or during one stays in its memory only until the stall ends, so
// a crash then may take it even past the window a healthy disk needs.
type StallRecord interface {
	Stalls(node dial.NodeID) []DownWindow
}

// reach is when a write node applied at a is on its disk at the latest:
// a+window, or window after the end of a stall that began by then.
func reach(crashes CrashRecord, node dial.NodeID, a, window time.Duration) time.Duration {
	end := a + window
	sr, ok := crashes.(StallRecord)
	if !ok {
		return end
	}
	stalls := sr.Stalls(node) // in the order they began
	for _, st := range stalls {
		if st.From <= end && st.To >= a {
			end = max(end, st.To+window)
		}
	}
	return end
}

// downDuring reports whether node was down at any instant of [from, to].
func downDuring(crashes CrashRecord, node dial.NodeID, from, to time.Duration) bool {
	for _, w := range crashes.Downs(node) {
		if w.From <= to && w.To >= from {
			return true
		}
	}
	return false
}

// Durability holds every flow's reads to its mode's promise: a read sees
// only a version that was written and not refused (checker durability),
// and misses no version that was acknowledged, or seen by an earlier
// read, before it began, unless the crash record allows that loss:
//
//   - sync: never; every disk in the simulator survives its crashes.
//   - async: only if, for some instant a at which the write may have been
//     applied, every copy was down at some point within window after a:
//     it crashed with the write in memory only, or was down when the
//     write was pushed to it. window is how long an async write may sit
//     in a copy's memory only on a healthy disk (commit delay, fsync
//     interval, the push's flight); a stall of the copy's disk or process
//     that began by then holds it there until window after the stall's
//     end (StallRecord, reach). Or some copies lost it so, and every other one was down
//     at some point between the first of them coming back and the read:
//     the returning copy adopted the flow without it (adoptedWithout).
//   - none: only if every copy has been down at some point since the
//     write.
func Durability(rep Reporter, flows []*VersionedFlow, crashes CrashRecord, window time.Duration) {
	for _, f := range flows {
		durabilityOf(rep, f, crashes, window)
	}
}

func durabilityOf(rep Reporter, f *VersionedFlow, crashes CrashRecord, window time.Duration) {
	// established[v-1]: when version v was known applied: its write's
	// acknowledgement, or the end of the first read that saw it.
	established := make([]time.Duration, len(f.Writes))
	for i, w := range f.Writes {
		established[i] = -1
		if w.Outcome == WriteOK {
			established[i] = w.Return
		}
	}
	for _, rd := range f.Reads {
		if rd.Version == 0 {
			continue
		}
		if rd.Version > len(f.Writes) {
			rep.Fail("durability", "flow %s (%s): the read through %s at %v saw version %d, which was never written", f.Name, f.Mode, rd.Node, rd.Call, rd.Version)
			return
		}
		w := f.Writes[rd.Version-1]
		if w.Outcome == WriteRefused || w.Call > rd.Return {
			what := "not yet made"
			if w.Outcome == WriteRefused {
				what = "refused"
			}
			rep.Fail("durability", "flow %s (%s): the read through %s at %v saw version %d, whose write was %s", f.Name, f.Mode, rd.Node, rd.Call, rd.Version, what)
			return
		}
		if e := &established[rd.Version-1]; *e < 0 || rd.Return < *e {
			*e = rd.Return
		}
	}
	// Versions by when they were established, so each read finds the
	// newest version established before it began.
	order := make([]int, 0, len(f.Writes))
	for i := range f.Writes {
		if established[i] >= 0 {
			order = append(order, i)
		}
	}
	sort.Slice(order, func(a, b int) bool { return established[order[a]] < established[order[b]] })
	newest := make([]int, len(order)) // newest[j]: the highest version among order[:j+1]
	for j, i := range order {
		newest[j] = i + 1
		if j > 0 {
			newest[j] = max(newest[j], newest[j-1])
		}
	}
	for _, rd := range f.Reads {
		j := sort.Search(len(order), func(j int) bool { return established[order[j]] >= rd.Call }) - 1
		if j < 0 || newest[j] <= rd.Version {
			continue
		}
		for v := rd.Version + 1; v <= newest[j]; v++ {
			e := established[v-1]
			if e < 0 || e >= rd.Call {
				continue
			}
			// A version first seen by a read was applied before that
			// read answered, and before its own write's answer.
			applied := e
			if w := f.Writes[v-1]; w.Return > 0 {
				applied = min(applied, w.Return)
			}
			if !lossAllowed(f, crashes, window, f.Writes[v-1].Call, applied, rd.Call) {
				rep.Fail("durability", "flow %s (%s, placement %s): version %d, written at %v and known applied at %v, is lost: the read through %s at %v saw version %d, and no crash schedule the %s promise allows explains it (downtime: %s)",
					f.Name, f.Mode, names(crashes, f.Placement), v, f.Writes[v-1].Call, e, rd.Node, rd.Call, rd.Version, f.Mode, downtime(crashes, f.Placement))
				return
			}
		}
	}
}

// lossAllowed is each mode's promise, as the crash record allows a write
// (called at call, applied by applied at the latest) to be missing from a
// read that began at readAt.
func lossAllowed(f *VersionedFlow, crashes CrashRecord, window, call, applied, readAt time.Duration) bool {
	all := func(from, to time.Duration) bool {
		for _, id := range f.Placement {
			if !downDuring(crashes, id, from, to) {
				return false
			}
		}
		return true
	}
	switch f.Mode {
	case shard.Sync:
		return false
	case shard.None:
		return all(call, readAt)
	}
	// lost: every copy was down within [a, reach], the span in which a
	// write applied at a may be in its memory only.
	lost := func(a time.Duration) bool {
		for _, id := range f.Placement {
			if !downDuring(crashes, id, a, min(reach(crashes, id, a, window), readAt)) {
				return false
			}
		}
		return true
	}
	// The instants a for which a copy was down within [a, reach] form
	// intervals whose left ends are where reach first meets a crash: at
	// the crash less the window, or where a stall first falls within the
	// window (its start less the window); where those of every copy meet,
	// they meet at the left end of one of them, or at call.
	cands := []time.Duration{call}
	add := func(a time.Duration) {
		if a > call && a <= applied {
			cands = append(cands, a)
		}
	}
	sr, _ := crashes.(StallRecord)
	for _, id := range f.Placement {
		for _, w := range crashes.Downs(id) {
			add(w.From - window)
		}
		if sr != nil {
			for _, st := range sr.Stalls(id) {
				add(st.From - window)
			}
		}
	}
	for _, a := range cands {
		if lost(a) || adoptedWithout(f, crashes, a, window, readAt) {
			return true
		}
	}
	return false
}

// adoptedWithout is the async promise's second way to lose a write: some
// copies lost it (each down within [a, its reach]), and every other copy was
// down at some instant after the first return of one of those and not
// after the read. A copy that comes back adopts the flow from whichever copies
// answer it within AdoptWait (core/flow), and re-stamps it: a copy that
// held the write and was down then does not count, and its version is
// overwritten when it returns.
func adoptedWithout(f *VersionedFlow, crashes CrashRecord, a, window, readAt time.Duration) bool {
	back := time.Duration(-1) // the first return of a copy that lost it
	var kept []dial.NodeID
	for _, id := range f.Placement {
		to := min(reach(crashes, id, a, window), readAt)
		lost := false
		for _, w := range crashes.Downs(id) {
			if w.From <= to && w.To >= a {
				lost = true
				if w.To > a && w.To <= readAt && (back < 0 || w.To < back) {
					back = w.To
				}
				break
			}
		}
		if !lost {
			kept = append(kept, id)
		}
	}
	if back < 0 || len(kept) == len(f.Placement) {
		return false
	}
	for _, id := range kept {
		// Strictly after back (time is whole nanoseconds): a copy that came
		// back at the same instant as the adopter answers its adoption.
		if !downDuring(crashes, id, back+1, readAt) {
			return false
		}
	}
	return true
}

func names(crashes CrashRecord, ids []dial.NodeID) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = crashes.Name(id)
	}
	return strings.Join(out, ",")
}

func downtime(crashes CrashRecord, ids []dial.NodeID) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, " %s:", crashes.Name(id))
		for _, w := range crashes.Downs(id) {
			fmt.Fprintf(&b, "[%v,%v]", w.From, w.To)
		}
	}
	return b.String()
}

// ExpiryNeverUndone holds TTL flows to: a read sees only versions that
// were written and not refused, and once a read has found a flow absent
// (expired, or evicted by its owner), no later read sees a version
// acknowledged before that read began (checker ttl).
//
// forgive, if not nil, excuses a return between two instants the record
// shows it possible: an eviction is a write of tombstones, and in async
// mode a crash of the owner may take it back with its last writes.
func ExpiryNeverUndone(rep Reporter, flows []*VersionedFlow, forgive func(flow string, from, to time.Duration) bool) {
	for _, f := range flows {
		expiryOf(rep, f, forgive)
	}
}

func expiryOf(rep Reporter, f *VersionedFlow, forgive func(flow string, from, to time.Duration) bool) {
	for _, rd := range f.Reads {
		if rd.Version == 0 {
			continue
		}
		if rd.Version > len(f.Writes) {
			rep.Fail("ttl", "flow %s: the read through %s at %v saw version %d, which was never written", f.Name, rd.Node, rd.Call, rd.Version)
			return
		}
		if w := f.Writes[rd.Version-1]; w.Outcome == WriteRefused || w.Call > rd.Return {
			rep.Fail("ttl", "flow %s: the read through %s at %v saw version %d, which was refused or not yet written", f.Name, rd.Node, rd.Call, rd.Version)
			return
		}
	}
	for _, gone := range f.Reads {
		if gone.Version != 0 {
			continue
		}
		for _, rd := range f.Reads {
			if rd.Version == 0 || rd.Call <= gone.Return {
				continue
			}
			if w := f.Writes[rd.Version-1]; w.Outcome == WriteOK && w.Return < gone.Call {
				if forgive != nil && forgive(f.Name, gone.Call, rd.Return) {
					continue
				}
				rep.Fail("ttl", "flow %s was absent to the read through %s at %v, yet version %d, acknowledged at %v before it, is back in the read through %s at %v",
					f.Name, gone.Node, gone.Call, rd.Version, w.Return, rd.Node, rd.Call)
				return
			}
		}
	}
}

// ExpiryHonoured holds TTL flows to the other direction: once an
// acknowledged write's entries must have expired, wherever the clocks
// stood, no read that begins after that shows the write's version
// (checker ttl-expiry). The bound is loose where clocks moved and exact
// in what it assumes, from the simulator's clock record alone:
//
//   - the write was applied by the time it was acknowledged (w.Return),
//     and its owner stamped the expiry from its clock clamped to the
//     furthest it had read: at most w.Return + ttl plus the largest
//     offset any clock had up to then;
//   - the node that served the read compares with its clamped clock, which
//     reads at least true time plus the smallest offset any clock had
//     during the read.
//
// Each side gives a millisecond for the wall clock's rounding.
func ExpiryHonoured(rep Reporter, flows []*VersionedFlow, ttl time.Duration, clocks ClockRecord) {
	for _, f := range flows {
		for _, rd := range f.Reads {
			if rd.Version == 0 || rd.Version > len(f.Writes) {
				continue // an absence, or ExpiryNeverUndone's to judge
			}
			w := f.Writes[rd.Version-1]
			if w.Outcome != WriteOK {
				continue
			}
			expiredBy := w.Return + clocks.MaxOffset(0, w.Return) + ttl + time.Millisecond
			readsAt := rd.Call + clocks.MinOffset(rd.Call, rd.Return) - time.Millisecond
			if readsAt >= expiredBy {
				rep.Fail("ttl-expiry", "flow %s: the read through %s at %v saw version %d, acknowledged at %v with a TTL of %v: it had expired by %v on every clock",
					f.Name, rd.Node, rd.Call, rd.Version, w.Return, ttl, expiredBy)
				return
			}
		}
	}
}

// MemoryOnly holds none flows to the other half of their promise (checker
// memory-only): memory only. Once every copy of a flow has been down at
// one instant, nothing of the flow is left in any memory, so a read that
// begins after that instant sees none of the versions acknowledged before
// it: a restarted node gets a none flow back only from copies that stayed
// up, never from its disk. A version whose write was never answered may
// still be applied after the instant (a request in flight, a retry), so
// only acknowledged ones are judged. It returns how many reads it judged:
// reads of a none flow after such an instant.
func MemoryOnly(rep Reporter, flows []*VersionedFlow, crashes CrashRecord) int {
	judged := 0
	for _, f := range flows {
		if f.Mode != shard.None {
			continue
		}
		gone := allDownInstants(f, crashes)
		if len(gone) == 0 {
			continue
		}
		for _, rd := range f.Reads {
			// The latest instant before the read began: the later it is,
			// the more versions it rules out.
			i := sort.Search(len(gone), func(i int) bool { return gone[i] >= rd.Call }) - 1
			if i < 0 {
				continue
			}
			judged++
			if rd.Version == 0 || rd.Version > len(f.Writes) {
				continue // absent, or never written (Durability's to judge)
			}
			w := f.Writes[rd.Version-1]
			if w.Outcome == WriteOK && w.Return < gone[i] {
				rep.Fail("memory-only", "flow %s (none, placement %s): the read through %s at %v saw version %d, acknowledged at %v, though every copy was down at %v: a none flow came back from a disk (downtime: %s)",
					f.Name, names(crashes, f.Placement), rd.Node, rd.Call, rd.Version, w.Return, gone[i], downtime(crashes, f.Placement))
				return judged
			}
		}
	}
	return judged
}

// allDownInstants is, in order, the instants at which every copy of f was
// down: where down windows of every copy meet, they meet at the start of
// one of them.
func allDownInstants(f *VersionedFlow, crashes CrashRecord) []time.Duration {
	var at []time.Duration
	for _, id := range f.Placement {
		for _, w := range crashes.Downs(id) {
			all := true
			for _, other := range f.Placement {
				if !downDuring(crashes, other, w.From, w.From) {
					all = false
					break
				}
			}
			if all {
				at = append(at, w.From)
			}
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
	return at
}
