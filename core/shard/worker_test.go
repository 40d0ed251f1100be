package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/halt"
)

// handWorker is a Worker the test drives: work runs when the test says
// the disk finished it, and its done with it, as a real worker posts it.
type handWorker struct {
	queue []func()
}

func (w *handWorker) Go(work func() error, done func(error)) {
	w.queue = append(w.queue, func() { done(work()) })
}

// complete finishes the oldest work handed over.
func (w *handWorker) complete(t *testing.T) {
	t.Helper()
	require.NotEmpty(t, w.queue, "no work in flight")
	job := w.queue[0]
	w.queue = w.queue[1:]
	job()
}

func (w *handWorker) Settle() {
	for len(w.queue) > 0 {
		job := w.queue[0]
		w.queue = w.queue[1:]
		job()
	}
}

func newAsyncRig(t *testing.T, cfg Config) (*Shard[val], *Memory, *handWorker, *clock.Manual) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	mem, w := NewMemory(), &handWorker{}
	s, err := Open[val](noLinger(cfg), Env{Clock: clk, Backend: mem, Worker: w}, codec{})
	require.NoError(t, err)
	return s, mem, w, clk
}

func putOne(t *testing.T, s *Shard[val], clk *clock.Manual, flow string, mode Mode) {
	t.Helper()
	require.NoError(t, s.Put(flow, map[string]val{"k": {data: flow, exp: clk.Now().UnixMilli() + 10_000}}, nil, mode))
}

// A sync write is answered when its commit's completion comes back, never
// when the commit is handed to the disk; writes that arrive while a commit
// is in flight go to the disk together in the next one (group commit).
func TestAsyncWriterAnswersAtCompletionAndGroupsCommits(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{})
	answered := map[string]bool{}
	wait := func(flow string) {
		s.WhenDurable(flow, func(err error) { require.NoError(t, err); answered[flow] = true })
	}
	putOne(t, s, clk, "a", Sync)
	wait("a")
	clk.Advance(0) // the writer's turn: the commit goes to the worker
	require.Len(t, w.queue, 1)
	require.False(t, answered["a"], "handed to the disk is not durable")

	for i := range 50 {
		flow := fmt.Sprintf("b%d", i)
		putOne(t, s, clk, flow, Sync)
		wait(flow)
	}
	clk.Advance(0)
	require.Len(t, w.queue, 1, "one commit in flight at a time")
	require.Equal(t, 3+50*2, s.Pending(), "a's key, meta and clock floor in flight; fifty keys and metas waiting")

	w.complete(t)
	require.True(t, answered["a"])
	require.False(t, answered["b0"], "b0 is not in the first commit")
	require.Equal(t, 1, mem.Syncs)
	clk.Advance(0)
	require.Len(t, w.queue, 1)
	w.complete(t)
	for i := range 50 {
		require.True(t, answered[fmt.Sprintf("b%d", i)])
	}
	require.Equal(t, 2, mem.Syncs, "the fifty writes that gathered share one fsync")
	require.Equal(t, uint64(2), s.Stats().Commits)
	require.Zero(t, s.Pending())
}

// The planted AckAtSubmit bug answers while the fsync is in flight.
func TestAckAtSubmitBugAnswersBeforeCompletion(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{Bugs: bugs.Set{AckAtSubmit: true}})
	putOne(t, s, clk, "a", Sync)
	answered := false
	s.WhenDurable("a", func(error) { answered = true })
	clk.Advance(0)
	require.Len(t, w.queue, 1)
	require.True(t, answered)
	require.Zero(t, mem.Syncs, "answered with nothing on disk")
}

// A node that stops (a crash) with a commit in flight answers nothing
// from it; the bound on pending counts the commit in flight.
func TestAsyncWriterStopAndBound(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{MaxPending: 6})
	putOne(t, s, clk, "a", Sync) // k and meta: two mutations
	answered := false
	s.WhenDurable("a", func(error) { answered = true })
	clk.Advance(0) // in flight: a's two and the clock floor
	require.Equal(t, 3, s.Pending())
	putOne(t, s, clk, "b", Async) // two more: five
	require.ErrorIs(t, s.Put("c", map[string]val{"k": {data: "c", exp: clk.Now().UnixMilli() + 10_000}}, nil, Async), ErrBusy,
		"the commit in flight counts toward MaxPending")
	s.Stop()
	w.complete(t)
	require.False(t, answered, "a stopped node answers nothing")
	require.Equal(t, 1, mem.Writes, "the work itself ran: the disk may hold it, as after a crash")
}

// Close settles the worker: everything pending is written and fsynced.
func TestAsyncWriterCloseSettles(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{})
	putOne(t, s, clk, "a", Async)
	clk.Advance(0)
	require.Len(t, w.queue, 1)
	putOne(t, s, clk, "b", Async)
	require.NoError(t, s.Close())
	require.Empty(t, w.queue)
	require.Equal(t, 1, mem.Syncs, "Close's last commit fsyncs both")
	got := map[string]bool{}
	require.NoError(t, mem.Scan(func(m Mutation) error { got[m.Flow] = true; return nil }))
	require.True(t, got["a"] && got["b"])
}

// A shard with no backend (memory only) closes at once with writes
// pending: it has nothing to write them to or sync.
func TestMemoryOnlyShardCloses(t *testing.T) {
	clk := clock.NewManual(time.UnixMilli(1_000_000))
	s, err := Open[val](noLinger(Config{}), Env{Clock: clk}, codec{})
	require.NoError(t, err)
	putOne(t, s, clk, "a", Async)
	putOne(t, s, clk, "b", Sync)
	answered := false
	s.WhenDurable("b", func(err error) { answered = err == nil })
	require.True(t, answered, "memory only: every mode behaves as none")
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Close(), ErrClosed)
}

// A failed commit stops the node (core/halt) and answers no waiter.
func TestAsyncWriterFailureHalts(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{})
	s.env.Backend = &failingSync{Memory: mem, fail: true}
	putOne(t, s, clk, "a", Sync)
	acked := false
	s.WhenDurable("a", func(err error) { acked = true })
	clk.Advance(0)
	defer func() {
		h, ok := recover().(halt.Halt)
		require.True(t, ok, "the writer must halt the node")
		require.ErrorIs(t, h.Reason, errEIO)
		require.False(t, acked)
	}()
	w.complete(t)
	t.Fatal("the writer carried on after a failed commit")
}

// An async write waits AsyncDelay for company, so one commit carries every
// async write of the span; a sync write cuts the wait short and carries
// them with it; a linger that runs out during a commit goes as soon as
// the commit completes.
func TestAsyncWritesLingerForCompany(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{AsyncDelay: 5 * time.Millisecond})
	putOne(t, s, clk, "a", Async)
	clk.Advance(time.Millisecond)
	putOne(t, s, clk, "b", Async)
	clk.Advance(3 * time.Millisecond)
	require.Empty(t, w.queue, "4 ms in: both still wait")
	clk.Advance(time.Millisecond)
	require.Len(t, w.queue, 1, "at 5 ms one commit takes both")
	w.complete(t)
	require.Equal(t, 1, mem.Writes)

	putOne(t, s, clk, "c", Async)
	clk.Advance(time.Millisecond)
	putOne(t, s, clk, "d", Sync)
	answered := false
	s.WhenDurable("d", func(error) { answered = true })
	clk.Advance(0)
	require.Len(t, w.queue, 1, "the sync write does not wait: it takes c along")
	w.complete(t)
	require.True(t, answered)
	require.Equal(t, 2, mem.Writes)

	putOne(t, s, clk, "e", Async)
	clk.Advance(5 * time.Millisecond)
	require.Len(t, w.queue, 1)
	putOne(t, s, clk, "f", Async) // its linger runs out during e's commit
	clk.Advance(5 * time.Millisecond)
	require.Len(t, w.queue, 1, "one commit in flight at a time")
	w.complete(t)
	clk.Advance(0)
	require.Len(t, w.queue, 1, "f's linger ran out during the commit: it goes at once")
	putOne(t, s, clk, "g", Async) // arrives during f's commit, which completes at once
	w.complete(t)
	clk.Advance(time.Millisecond)
	require.Empty(t, w.queue, "a completion does not cut g's linger short")
	clk.Advance(4 * time.Millisecond)
	require.Len(t, w.queue, 1)
	w.complete(t)
	got := map[string]bool{}
	require.NoError(t, mem.Scan(func(m Mutation) error { got[m.Flow] = true; return nil }))
	for _, f := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		require.True(t, got[f], "%s on disk", f)
	}
}

// A disk that stalls holds no wait past MaxWait: each is answered
// ErrWaitTimeout when its own MaxWait runs out, oldest first, and the
// fsync that comes after answers nobody twice.
func TestWaitsPastMaxWaitAreCut(t *testing.T) {
	s, _, w, clk := newAsyncRig(t, Config{MaxWait: 100 * time.Millisecond})
	got := map[string][]error{}
	wait := func(flow string) {
		s.WhenDurable(flow, func(err error) { got[flow] = append(got[flow], err) })
	}
	putOne(t, s, clk, "a", Sync)
	wait("a")
	clk.Advance(0) // a's commit goes to the disk, which does not answer
	require.Len(t, w.queue, 1)
	clk.Advance(60 * time.Millisecond)
	putOne(t, s, clk, "b", Sync)
	wait("b")
	s.WhenFloorDurable(clk.Now().UnixMilli(), func(err error) { got["floor"] = append(got["floor"], err) })
	require.NoError(t, s.CheckInvariants())

	clk.Advance(39 * time.Millisecond)
	require.Empty(t, got, "no wait is cut before its MaxWait")
	clk.Advance(time.Millisecond)
	require.Equal(t, map[string][]error{"a": {ErrWaitTimeout}}, got, "a's MaxWait ran out, b's has 60ms to go")
	require.NoError(t, s.CheckInvariants())
	clk.Advance(60 * time.Millisecond)
	require.Equal(t, map[string][]error{"a": {ErrWaitTimeout}, "b": {ErrWaitTimeout}, "floor": {ErrWaitTimeout}}, got)
	require.Equal(t, uint64(3), s.Stats().WaitsCut)

	// The disk comes back: both commits complete, and no wait is
	// answered again.
	w.complete(t)
	clk.Advance(0)
	w.complete(t)
	require.Len(t, got["a"], 1)
	require.Len(t, got["b"], 1)
	require.Len(t, got["floor"], 1)
	require.NoError(t, s.CheckInvariants())

	// A wait on a healthy disk is answered by its fsync, as before.
	putOne(t, s, clk, "c", Sync)
	wait("c")
	clk.Advance(0)
	w.complete(t)
	require.Equal(t, []error{nil}, got["c"])
	clk.Advance(time.Second)
	require.Equal(t, []error{nil}, got["c"], "an answered wait is not cut later")
}

// At MaxWaiters a new wait makes room by cutting the oldest: the list
// never passes its bound, whatever a stalled disk lets pile up.
func TestWaitersAtTheirBoundCutTheOldest(t *testing.T) {
	s, _, w, clk := newAsyncRig(t, Config{MaxWaiters: 3})
	var order []string
	for i := range 5 {
		flow := fmt.Sprintf("f%d", i)
		putOne(t, s, clk, flow, Sync)
		s.WhenDurable(flow, func(err error) { order = append(order, fmt.Sprintf("%s:%v", flow, err)) })
		clk.Advance(0)
		require.NoError(t, s.CheckInvariants())
	}
	require.Equal(t, []string{"f0:" + ErrWaitTimeout.Error(), "f1:" + ErrWaitTimeout.Error()}, order)
	w.Settle()
	clk.Advance(0)
	w.Settle()
	require.Equal(t, []string{"f0:" + ErrWaitTimeout.Error(), "f1:" + ErrWaitTimeout.Error(), "f2:<nil>", "f3:<nil>", "f4:<nil>"}, order)
	require.Equal(t, uint64(2), s.Stats().WaitsCut)
}

// The planted bug holds a wait for as long as the disk takes.
func TestUntimedWaitsBugHoldsAWaitPastMaxWait(t *testing.T) {
	s, _, w, clk := newAsyncRig(t, Config{MaxWait: 100 * time.Millisecond, Bugs: bugs.Set{UntimedWaits: true}})
	var got []error
	putOne(t, s, clk, "a", Sync)
	s.WhenDurable("a", func(err error) { got = append(got, err) })
	clk.Advance(0)
	clk.Advance(time.Hour)
	require.Empty(t, got)
	w.complete(t)
	require.Equal(t, []error{nil}, got)
}

// The planted bug early-cut cuts a wait at a tenth of MaxWait, on a
// disk that answers well within it.
func TestEarlyCutBugCutsAWaitOnAHealthyDisk(t *testing.T) {
	for _, bug := range []bool{false, true} {
		s, _, w, clk := newAsyncRig(t, Config{MaxWait: 100 * time.Millisecond, Bugs: bugs.Set{EarlyCut: bug}})
		putOne(t, s, clk, "a", Sync)
		var got []error
		s.WhenDurable("a", func(err error) { got = append(got, err) })
		clk.Advance(0)
		clk.Advance(20 * time.Millisecond) // the disk takes 20ms
		w.complete(t)
		if bug {
			require.Equal(t, []error{ErrWaitTimeout}, got)
			continue
		}
		require.Equal(t, []error{nil}, got)
	}
}

// putReplica is putOne through PutReplica, with the value given.
func putReplica(t *testing.T, s *Shard[val], clk *clock.Manual, flow, data string, mode Mode) {
	t.Helper()
	require.NoError(t, s.PutReplica(flow, map[string]val{"k": {data: data, exp: clk.Now().UnixMilli() + 10_000}}, nil, mode))
}

// A replica's copy of a push is never refused for a full queue: it is
// applied in memory at once and written, with the latest value memory
// holds, once the queue has room. However many pushes come meanwhile,
// what waits is one unit a flow; a client's Put is refused until the
// flows behind are queued, so the queue keeps the order of the Puts, and
// WhenDurable holds a read of a flow behind until its unit is synced.
func TestPushesAtAFullQueueWaitInMemory(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{MaxPending: 4})
	putOne(t, s, clk, "a", Async)
	clk.Advance(0) // a's key and meta in flight: the disk is slow
	require.Len(t, w.queue, 1)
	putOne(t, s, clk, "b", Async) // four: the queue is full
	require.ErrorIs(t, s.Put("c", map[string]val{"k": {data: "c"}}, nil, Async), ErrBusy)

	for i := range 100 {
		putReplica(t, s, clk, "r", fmt.Sprint(i), Async)
		putReplica(t, s, clk, "q", fmt.Sprint(i), Sync)
		require.NoError(t, s.CheckInvariants())
	}
	require.Equal(t, "99", s.Peek("r")["k"].data, "memory holds the push at once")
	require.Equal(t, uint64(200), s.Stats().Behind)
	require.Equal(t, 4, s.Pending(), "what waits behind is not in the queue")
	durable := false
	s.WhenDurable("r", func(err error) { require.NoError(t, err); durable = true })
	require.ErrorIs(t, s.Put("c", map[string]val{"k": {data: "c"}}, nil, Async), ErrBusy,
		"a flow behind is queued before any later Put")

	w.complete(t) // a written; b, then r (two mutations) go next, and q waits
	clk.Advance(0)
	require.False(t, durable)
	require.Equal(t, 5, s.Pending(), "b's two, r's two and the clock floor the wait asks for")
	require.ErrorIs(t, s.Put("c", map[string]val{"k": {data: "c"}}, nil, Async), ErrBusy, "q is still behind")
	w.complete(t)
	clk.Advance(0)
	require.True(t, durable, "q's sync push synced r's unit with its own")
	w.Settle()
	clk.Advance(0)
	w.Settle()
	require.NoError(t, s.CheckInvariants())
	require.Zero(t, s.Pending())
	require.NoError(t, s.Put("c", map[string]val{"k": {data: "c"}}, nil, Async), "nothing behind: Puts are taken again")

	got := map[string]string{}
	require.NoError(t, mem.Scan(func(m Mutation) error {
		if m.Key == "k" {
			got[m.Flow] = string(m.Value)
		}
		return nil
	}))
	require.Equal(t, "99", got["r"][:2], "the disk holds the last push")
	require.Equal(t, "99", got["q"][:2])
	require.LessOrEqual(t, mem.Writes, 6, "one unit a flow behind, not a write a push")
}

// A key dropped while its flow is behind leaves the list with its own
// delete; a flow dropped whole leaves it too. Close writes what is behind.
func TestDropsAndCloseOfFlowsBehind(t *testing.T) {
	s, mem, w, clk := newAsyncRig(t, Config{MaxPending: 3})
	putOne(t, s, clk, "a", Async)
	clk.Advance(0) // two in flight
	require.NoError(t, s.PutReplica("r", map[string]val{"x": {data: "1", exp: clk.Now().UnixMilli() + 10_000}, "y": {data: "2", exp: clk.Now().UnixMilli() + 10_000}}, nil, Async))
	putReplica(t, s, clk, "gone", "1", Async)
	putReplica(t, s, clk, "kept", "1", Async)
	require.NoError(t, s.DropKeys("r", []string{"x"}))
	s.Drop("gone")
	require.NoError(t, s.CheckInvariants())
	require.NoError(t, s.Close())
	require.Empty(t, w.queue)
	var got []string
	require.NoError(t, mem.Scan(func(m Mutation) error {
		if m.Key != metaKey && m.Flow != clockFlow {
			got = append(got, m.Flow+"/"+m.Key)
		}
		return nil
	}))
	require.Equal(t, []string{"a/k", "kept/k", "r/y"}, got)
}

// The planted bug refuses the push, as a client's Put is refused.
func TestRefusedPushBugRefusesAtAFullQueue(t *testing.T) {
	s, _, _, clk := newAsyncRig(t, Config{MaxPending: 2, Bugs: bugs.Set{RefusedPush: true}})
	putOne(t, s, clk, "a", Async)
	clk.Advance(0)
	require.ErrorIs(t, s.PutReplica("r", map[string]val{"k": {data: "1"}}, nil, Async), ErrBusy)
	require.Nil(t, s.Peek("r"))
}
