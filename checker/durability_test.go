package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

type downs map[dial.NodeID][]DownWindow

func (d downs) Downs(id dial.NodeID) []DownWindow { return d[id] }
func (downs) Name(id dial.NodeID) string          { return id.String() }

// twoWrites is a flow on copies a, b whose version 1 was acknowledged at
// 1s and version 2 at 3s, read back as version 1 at 5s: version 2 is lost.
func twoWrites(mode shard.Mode) *VersionedFlow {
	return &VersionedFlow{
		Name: "f", Mode: mode, Placement: []dial.NodeID{1, 2},
		Writes: []VersionWrite{
			{Call: 500 * time.Millisecond, Return: time.Second, Outcome: WriteOK},
			{Call: 2500 * time.Millisecond, Return: 3 * time.Second, Outcome: WriteOK},
		},
		Reads: []VersionRead{{Node: "n1", Call: 5 * time.Second, Return: 5*time.Second + time.Millisecond, Version: 1}},
	}
}

func TestDurability(t *testing.T) {
	window := 60 * time.Millisecond
	// Passes: the read sees the newest acknowledged version.
	ok := twoWrites(shard.Sync)
	ok.Reads[0].Version = 2
	var rec Record
	Durability(&rec, []*VersionedFlow{ok}, downs{}, window)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// Fails: sync loses nothing, whatever crashed.
	allDown := downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}, 2: {{From: 3 * time.Second, To: 4 * time.Second}}}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Sync)}, allDown, window)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "durability: flow f (sync, placement")
	require.Contains(t, rec.Failures[0], "version 2, written at 2.5s and known applied at 3s, is lost")

	// async: lost only if every copy was down within the window after the
	// write applied.
	rec = Record{}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, allDown, window)
	require.True(t, rec.OK(), "both copies crashed with the write in memory: %v", rec.Failures)
	oneLate := downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}, 2: {{From: 3200 * time.Millisecond, To: 4 * time.Second}}}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, oneLate, window)
	require.Len(t, rec.Failures, 1, "the second copy crashed 200ms later: it had the write on disk")

	// Or: one copy lost it, and the other was down while it came back
	// and adopted the flow without it. Down only until the same instant,
	// the other answers the adoption: no excuse.
	adoptedWithout := downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}, 2: {{From: 3900 * time.Millisecond, To: 4500 * time.Millisecond}}}
	rec = Record{}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, adoptedWithout, window)
	require.True(t, rec.OK(), "copy 1 adopted while copy 2, which held the write, was down: %v", rec.Failures)
	downAfterRead := downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}, 2: {{From: 5100 * time.Millisecond, To: 6 * time.Second}}}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, downAfterRead, window)
	require.Len(t, rec.Failures, 1, "copy 2 was up from copy 1's return to the read: it answered the adoption")
	noneLost := downs{2: {{From: 3900 * time.Millisecond, To: 4500 * time.Millisecond}}}
	rec = Record{}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, noneLost, window)
	require.Len(t, rec.Failures, 1, "no copy crashed with the write: nothing adopted without it")

	// none: lost only if every copy was down at some point since.
	rec = Record{}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.None)}, oneLate, window)
	require.True(t, rec.OK(), "%v", rec.Failures)
	Durability(&rec, []*VersionedFlow{twoWrites(shard.None)}, downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}}, window)
	require.Len(t, rec.Failures, 1)

	// A read of a version that was refused is a failure in every mode.
	rec = Record{}
	refused := twoWrites(shard.None)
	refused.Writes[1].Outcome = WriteRefused
	refused.Reads[0].Version = 2
	Durability(&rec, []*VersionedFlow{refused}, allDown, window)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "whose write was refused")
}

// TestMemoryOnly: a none flow's versions acknowledged before an instant
// at which every copy was down are gone for every read after it; down
// windows that never meet leave them in some memory.
func TestMemoryOnly(t *testing.T) {
	back := func(version int) *VersionedFlow { // read at 5s, seeing version
		f := twoWrites(shard.None)
		f.Reads[0].Version = version
		return f
	}
	// Both copies down from 4s (one since 3.5s): versions 1 and 2, both
	// acknowledged before 4s, cannot come back; an absent flow is right.
	allDown := downs{1: {{From: 3500 * time.Millisecond, To: 4500 * time.Millisecond}}, 2: {{From: 4 * time.Second, To: 4200 * time.Millisecond}}}
	var rec Record
	require.Equal(t, 1, MemoryOnly(&rec, []*VersionedFlow{back(0)}, allDown))
	require.True(t, rec.OK(), "%v", rec.Failures)
	require.Equal(t, 1, MemoryOnly(&rec, []*VersionedFlow{back(2)}, allDown))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "memory-only: flow f (none, placement")
	require.Contains(t, rec.Failures[0], "saw version 2, acknowledged at 3s, though every copy was down at 4s")

	// The downs never meet: a copy stayed up while the other came back
	// and took the flow from it.
	rec = Record{}
	apart := downs{1: {{From: 3 * time.Second, To: 3500 * time.Millisecond}}, 2: {{From: 4 * time.Second, To: 4200 * time.Millisecond}}}
	require.Zero(t, MemoryOnly(&rec, []*VersionedFlow{back(2)}, apart))
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A version acknowledged after the instant, or never answered (it may
	// be applied late), is not judged; nor is an async flow, nor a read
	// that began before the instant.
	late := back(2)
	late.Writes[1].Return = 4100 * time.Millisecond
	unanswered := back(2)
	unanswered.Writes[1] = VersionWrite{Call: 2500 * time.Millisecond, Outcome: WriteUnknown}
	async := back(2)
	async.Mode = shard.Async
	early := back(2)
	early.Reads[0].Call = 3900 * time.Millisecond
	require.Equal(t, 2, MemoryOnly(&rec, []*VersionedFlow{late, unanswered, async, early}, allDown))
	require.True(t, rec.OK(), "%v", rec.Failures)
}

func TestExpiryNeverUndone(t *testing.T) {
	f := &VersionedFlow{
		Name:   "f",
		Writes: []VersionWrite{{Call: 0, Return: time.Second, Outcome: WriteOK}, {Call: 5 * time.Second, Return: 6 * time.Second, Outcome: WriteOK}},
		Reads: []VersionRead{
			{Node: "n1", Call: 2 * time.Second, Return: 2 * time.Second, Version: 1},
			{Node: "n1", Call: 3 * time.Second, Return: 3 * time.Second, Version: 0}, // expired
			{Node: "n2", Call: 7 * time.Second, Return: 7 * time.Second, Version: 2}, // a new write: fine
		},
	}
	var rec Record
	ExpiryNeverUndone(&rec, []*VersionedFlow{f}, nil)
	require.True(t, rec.OK(), "%v", rec.Failures)

	f.Reads = append(f.Reads, VersionRead{Node: "n3", Call: 8 * time.Second, Return: 8 * time.Second, Version: 1})
	ExpiryNeverUndone(&rec, []*VersionedFlow{f}, func(string, time.Duration, time.Duration) bool { return true })
	require.True(t, rec.OK(), "a return the record explains is forgiven")
	ExpiryNeverUndone(&rec, []*VersionedFlow{f}, nil)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "ttl: flow f was absent to the read through n1 at 3s, yet version 1, acknowledged at 1s before it, is back")
}

func TestExpiryHonoured(t *testing.T) {
	clocks := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 50 * ms}}
	// Version 1 acknowledged at 1s with a TTL of 1s: on every clock it has
	// expired by 1s + 50ms (the clock furthest ahead) + 1s + 1ms.
	f := func(readAt time.Duration, version int) *VersionedFlow {
		return &VersionedFlow{Name: "f",
			Writes: []VersionWrite{{Call: 900 * ms, Return: time.Second, Outcome: WriteOK}},
			Reads:  []VersionRead{{Node: "n1", Call: readAt, Return: readAt + 10*ms, Version: version}}}
	}
	var rec Record
	ExpiryHonoured(&rec, []*VersionedFlow{f(2*time.Second, 1), f(2052*ms, 0)}, time.Second, clocks)
	require.True(t, rec.OK(), "within the clocks' reach, or absent: %v", rec.Failures)

	ExpiryHonoured(&rec, []*VersionedFlow{f(2052*ms, 1)}, time.Second, clocks)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "saw version 1, acknowledged at 1s with a TTL of 1s")

	// A write not known to be applied is not judged.
	rec = Record{}
	unknown := f(5*time.Second, 1)
	unknown.Writes[0].Outcome = WriteUnknown
	ExpiryHonoured(&rec, []*VersionedFlow{unknown}, time.Second, clocks)
	require.True(t, rec.OK())
}

// stalled is downs with a record of stalls.
type stalled struct {
	downs
	stalls map[dial.NodeID][]DownWindow
}

func (s stalled) Stalls(id dial.NodeID) []DownWindow { return s.stalls[id] }

// A stall of a copy's disk holds an async write in its memory until
// window after the stall ends: a crash inside that span may take it,
// one after it may not. A stall that began after the window had passed
// changes nothing.
func TestDurabilityAllowsAStalledDiskItsDelay(t *testing.T) {
	window := 60 * time.Millisecond
	oneLate := downs{1: {{From: 3 * time.Second, To: 4 * time.Second}}, 2: {{From: 3200 * time.Millisecond, To: 4 * time.Second}}}
	var rec Record
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, stalled{oneLate, map[dial.NodeID][]DownWindow{2: {{From: 3 * time.Second, To: 3150 * time.Millisecond}}}}, window)
	require.True(t, rec.OK(), "copy 2's disk stood still until 3.15s: the write was still in its memory at 3.2s: %v", rec.Failures)
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, stalled{oneLate, map[dial.NodeID][]DownWindow{2: {{From: 3 * time.Second, To: 3100 * time.Millisecond}}}}, window)
	require.Len(t, rec.Failures, 1, "the stall ended at 3.1s: the write was on disk by 3.16s")
	rec = Record{}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, stalled{oneLate, map[dial.NodeID][]DownWindow{2: {{From: 3100 * time.Millisecond, To: 3300 * time.Millisecond}}}}, window)
	require.Len(t, rec.Failures, 1, "the stall began after the write reached the disk")
	// Stalls chain: one that begins within the span another extended
	// extends it again.
	rec = Record{}
	chain := map[dial.NodeID][]DownWindow{2: {{From: 3 * time.Second, To: 3050 * time.Millisecond}, {From: 3100 * time.Millisecond, To: 3150 * time.Millisecond}}}
	Durability(&rec, []*VersionedFlow{twoWrites(shard.Async)}, stalled{oneLate, chain}, window)
	require.True(t, rec.OK(), "%v", rec.Failures)
}
