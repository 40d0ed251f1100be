package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

const ms = time.Millisecond

// flatClocks is a crafted clock record: each node at a fixed offset, with
// an optional step of one node's clock at one instant.
type flatClocks struct {
	off      map[string]time.Duration
	stepNode string
	stepAt   time.Duration
	step     time.Duration
}

func (c flatClocks) OffsetAt(node string, t time.Duration) time.Duration {
	o := c.off[node]
	if node == c.stepNode && t >= c.stepAt {
		o += c.step
	}
	return o
}

func (c flatClocks) MaxOffset(from, to time.Duration) time.Duration {
	hi := time.Duration(-1 << 62)
	for n := range c.off { //fenceline:unordered a maximum
		hi = max(hi, c.OffsetAt(n, from), c.OffsetAt(n, to))
	}
	return hi
}

func (c flatClocks) MinOffset(from, to time.Duration) time.Duration {
	lo := time.Duration(1 << 62)
	for n := range c.off { //fenceline:unordered a minimum
		lo = min(lo, c.OffsetAt(n, from), c.OffsetAt(n, to))
	}
	return lo
}

func grant(holder, node string, call, answer time.Duration, token uint64) LeaseCall {
	return LeaseCall{Holder: holder, Lease: "l", Kind: LeaseAcquire, Node: node, TTL: 1000 * ms,
		Call: call, Answered: true, Answer: answer, Granted: true, Token: token}
}

func TestLeaseExclusive(t *testing.T) {
	synced := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 0}}

	// Passes: b is granted after a's tenure, as a careful client counts it.
	var rec Record
	calls := []LeaseCall{grant("a", "n1", 0, 10*ms, 1), grant("b", "n2", 1000*ms, 1010*ms, 2)}
	LeaseExclusive(&rec, LeaseBeliefs(calls, synced))
	require.True(t, rec.OK(), "%v", rec.Failures)

	// Fails: b granted while a still believes.
	rec = Record{}
	calls = []LeaseCall{grant("a", "n1", 0, 10*ms, 1), grant("b", "n2", 500*ms, 510*ms, 2)}
	LeaseExclusive(&rec, LeaseBeliefs(calls, synced))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "lease-safety: lease \"l\": a (token 1)")

	// A release ends the belief at once: b's grant after it is fine.
	rec = Record{}
	calls = append(calls[:1], LeaseCall{Holder: "a", Lease: "l", Kind: LeaseRelease, Node: "n1", Call: 400 * ms}, calls[1])
	LeaseExclusive(&rec, LeaseBeliefs(calls, synced))
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A clock that runs ahead of the granting node's shortens what a
	// careful holder may believe: n2 is 300ms ahead of n1, so a, granted
	// through n1, believes only to 700ms, and b at 750ms is no overlap.
	rec = Record{}
	skewed := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 300 * ms}}
	calls = []LeaseCall{grant("a", "n1", 0, 10*ms, 1), grant("b", "n2", 750*ms, 760*ms, 2)}
	beliefs := LeaseBeliefs(calls, skewed)
	require.Equal(t, 700*ms, beliefs[0].To)
	LeaseExclusive(&rec, beliefs)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A step forward during the tenure shortens it too.
	stepped := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 0}, stepNode: "n2", stepAt: 200 * ms, step: 2 * time.Second}
	beliefs = LeaseBeliefs([]LeaseCall{grant("a", "n1", 0, 10*ms, 1)}, stepped)
	require.Empty(t, beliefs, "a step ahead by more than the TTL leaves nothing to believe")
}

func TestLeaseAnswer(t *testing.T) {
	var rec Record
	c := grant("a", "n1", 0, 10*ms, 7)
	LeaseAnswer(&rec, c, kv.Lease{Name: "l", Holder: "a", Token: 7})
	require.True(t, rec.OK())
	LeaseAnswer(&rec, c, kv.Lease{Name: "l", Holder: "b", Token: 7})
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], `lease-answer: acquire of lease "l" by a`)
}

func event(kind kv.EventKind, holder string, token uint64, atMs, deadlineMs int64) kv.Event {
	return kv.Event{Kind: kind, Space: kv.SpaceLease, Key: "l", Holder: holder, Token: token, AtMs: atMs, DeadlineMs: deadlineMs}
}

func TestLeaseStream(t *testing.T) {
	calls := []LeaseCall{
		grant("a", "n1", 0, 10*ms, 1),
		{Holder: "a", Lease: "l", Kind: LeaseRelease, Node: "n1", Call: 50 * ms},
	}
	// Passes: granted, released by its holder, granted to another.
	var rec Record
	s := NewLeaseStream("n1")
	for _, ev := range []kv.Event{
		event(kv.EventPut, "a", 1, 5, 1005),
		event(kv.EventDeleted, "a", 1, 60, 1005),
		event(kv.EventPut, "b", 3, 70, 1070),
		event(kv.EventExpired, "b", 3, 1080, 1070),
	} {
		s.Event(&rec, ev, calls)
	}
	require.True(t, rec.OK(), "%v", rec.Failures)

	for name, tc := range map[string]struct {
		evs  []kv.Event
		want string
	}{
		"time back":    {[]kv.Event{event(kv.EventPut, "a", 1, 500, 1500), event(kv.EventExpired, "a", 1, 400, 300)}, "applied time went back"},
		"double grant": {[]kv.Event{event(kv.EventPut, "a", 1, 5, 1005), event(kv.EventPut, "b", 2, 100, 1100)}, "granted to b (token 2) at 100 ms while a"},
		"early expiry": {[]kv.Event{event(kv.EventPut, "a", 1, 5, 1005), event(kv.EventExpired, "a", 1, 900, 1005)}, "before its deadline"},
		"late delete":  {[]kv.Event{event(kv.EventPut, "a", 1, 5, 1005), event(kv.EventDeleted, "a", 1, 2000, 1005)}, "a lapse is Expired"},
		// b never asked to release anything.
		"foreign release": {[]kv.Event{event(kv.EventPut, "b", 3, 5, 1005), event(kv.EventDeleted, "b", 3, 60, 1005)}, "b never asked to release that tenure"},
		// a asked, but only before the tenure it was told of began.
		"stale release": {[]kv.Event{event(kv.EventPut, "a", 9, 5, 1005), event(kv.EventDeleted, "a", 9, 60, 1005)}, "a never asked to release that tenure"},
	} {
		rec := Record{}
		s := NewLeaseStream("n1")
		stale := append([]LeaseCall(nil), calls...)
		stale = append(stale, grant("a", "n1", 70*ms, 80*ms, 9))
		for _, ev := range tc.evs {
			s.Event(&rec, ev, stale)
		}
		require.Len(t, rec.Failures, 1, name)
		require.Contains(t, rec.Failures[0], tc.want, name)
		require.Contains(t, rec.Failures[0], "lease-stream: n1", name)
	}

	// A release whose holder's last grant never answered may have
	// released whatever that grant made.
	rec = Record{}
	unknown := []LeaseCall{
		{Holder: "a", Lease: "l", Kind: LeaseAcquire, Node: "n1", TTL: time.Second, Call: 0},
		{Holder: "a", Lease: "l", Kind: LeaseRelease, Node: "n1", Call: 50 * ms},
	}
	s = NewLeaseStream("n1")
	s.Event(&rec, event(kv.EventPut, "a", 4, 5, 1005), unknown)
	s.Event(&rec, event(kv.EventDeleted, "a", 4, 60, 1005), unknown)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A call refused before it reached the lease (its node was down)
	// between them tells the holder nothing: the release still may have
	// released what the unanswered grant made (raft-partitions seed 412).
	// One that reached it and was refused does tell.
	for _, notApplied := range []bool{true, false} {
		rec = Record{}
		calls := []LeaseCall{
			unknown[0],
			{Holder: "a", Lease: "l", Kind: LeaseRenew, Node: "n1", Call: 20 * ms, Answered: true, Answer: 20 * ms, NotApplied: notApplied},
			unknown[1],
		}
		s = NewLeaseStream("n1")
		s.Event(&rec, event(kv.EventPut, "a", 4, 5, 1005), calls)
		s.Event(&rec, event(kv.EventDeleted, "a", 4, 60, 1005), calls)
		if notApplied {
			require.True(t, rec.OK(), "%v", rec.Failures)
		} else {
			require.Len(t, rec.Failures, 1)
		}
	}
}

// refused is an acquire by holder through node, refused in heldBy's name.
func refused(holder, node string, call, answer time.Duration, heldBy string) LeaseCall {
	return LeaseCall{Holder: holder, Lease: "l", Kind: LeaseAcquire, Node: node, TTL: 1000 * ms,
		Call: call, Answered: true, Answer: answer, RefusedFor: heldBy}
}

func TestLeaseLapse(t *testing.T) {
	synced := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 0}}
	judge := func(clocks ClockRecord, calls ...LeaseCall) *Record {
		rec := &Record{}
		LeaseLapse(rec, calls, clocks)
		return rec
	}

	// Fails: a's grant ran out at 1010 ms; b's acquire at 1100 ms was
	// refused in a's name.
	rec := judge(synced, grant("a", "n1", 0, 10*ms, 1), refused("b", "n2", 1100*ms, 1110*ms, "a"))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "lease-lapse: acquire of lease \"l\" by b through n2 at 1.1s was refused as held by a")

	// Passes: refused within the TTL (and the slack), while a still held it.
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), refused("b", "n2", 1011*ms, 1020*ms, "a")).OK())
	// Passes: a renewed at 900 ms, so its tenure runs to 1.9 s.
	renew := grant("a", "n1", 900*ms, 905*ms, 1)
	renew.Kind = LeaseRenew
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), renew, refused("b", "n2", 1100*ms, 1110*ms, "a")).OK())
	// A renewal sent while b's acquire was on its way counts too.
	late := grant("a", "n1", 1105*ms, 1108*ms, 1)
	late.Kind = LeaseRenew
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), late, refused("b", "n2", 1100*ms, 1110*ms, "a")).OK())
	// Unjudged: a renewal by a with no answer may have applied any time.
	lost := LeaseCall{Holder: "a", Lease: "l", Kind: LeaseRenew, Node: "n1", TTL: 1000 * ms, Call: 500 * ms}
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), lost, refused("b", "n2", 1600*ms, 1610*ms, "a")).OK())
	// Passes: a's clock ran 200 ms ahead, so its deadline was later in
	// applied time than b's clock read at 1100 ms.
	ahead := flatClocks{off: map[string]time.Duration{"n1": 200 * ms, "n2": 0}}
	require.True(t, judge(ahead, grant("a", "n1", 0, 10*ms, 1), refused("b", "n2", 1100*ms, 1110*ms, "a")).OK())
	// Passes: b's node's clock stepped back 500 ms before its call.
	back := flatClocks{off: map[string]time.Duration{"n1": 0, "n2": 0}, stepNode: "n2", stepAt: 1000 * ms, step: -500 * ms}
	require.True(t, judge(back, grant("a", "n1", 0, 10*ms, 1), refused("b", "n2", 1100*ms, 1110*ms, "a")).OK())
	// Fails: a released at 500 ms, answered at 510 ms; b's acquire at
	// 600 ms was still refused in a's name.
	release := LeaseCall{Holder: "a", Lease: "l", Kind: LeaseRelease, Node: "n1", Call: 500 * ms, Answered: true, Answer: 510 * ms, Released: true}
	rec = judge(synced, grant("a", "n1", 0, 10*ms, 1), release, refused("b", "n2", 600*ms, 610*ms, "a"))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "who released it at 500ms")
	// Passes: the release was refused (a no longer held it), or came back
	// only after b's acquire was called, or a acquired again after it.
	notHeld := release
	notHeld.Released = false
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), notHeld, refused("b", "n2", 600*ms, 610*ms, "a")).OK())
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), release, refused("b", "n2", 505*ms, 610*ms, "a")).OK())
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), release, grant("a", "n1", 520*ms, 530*ms, 2), refused("b", "n2", 600*ms, 610*ms, "a")).OK())
	// Fails: refused in the name of a holder the record never granted it.
	rec = judge(synced, refused("b", "n2", 600*ms, 610*ms, "a"))
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "was never granted it")

	// Not judged: a refusal that names no holder, or the caller itself.
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), refused("b", "n2", 1100*ms, 1110*ms, "")).OK())
	require.True(t, judge(synced, grant("a", "n1", 0, 10*ms, 1), refused("a", "n2", 1100*ms, 1110*ms, "a")).OK())
}
