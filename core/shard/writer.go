package shard

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/core/halt"
)

// This file: the writer, which batches mutations to the backend, decides
// when to fsync and answers the durability waits. It decides on the
// node's loop; the backend's calls run beside it (Env.Worker).

// armFlush calls the writer at CommitDelay, sooner than a linger.
func (s *Shard[V]) armFlush() {
	if s.lingering {
		s.flushT.Stop()
		s.flushT, s.lingering = nil, false
	}
	if s.flushT == nil && !s.stopped {
		s.flushT = s.env.Clock.AfterFunc(s.cfg.CommitDelay, s.flush)
	}
}

// armLinger calls the writer for an async write: AsyncDelay from now,
// unless a turn is due already.
func (s *Shard[V]) armLinger() {
	if s.flushT == nil && !s.stopped {
		s.flushT = s.env.Clock.AfterFunc(max(s.cfg.CommitDelay, s.cfg.AsyncDelay), s.flush)
		s.lingering = true
	}
}

func (s *Shard[V]) armSync() {
	if s.syncT == nil && !s.stopped {
		s.syncT = s.env.Clock.AfterFunc(s.cfg.SyncEvery, func() {
			s.syncT = nil
			s.pendingSync = true
			s.flush()
		})
	}
}

func (s *Shard[V]) armPurge() {
	s.purgeT = s.env.Clock.AfterFunc(s.cfg.PurgeEvery, func() {
		if s.stopped {
			return
		}
		s.purge()
		s.armPurge()
	})
}

// flush is the writer's turn: evict over the cap, then hand everything
// pending to the backend as one commit (in batches of at most MaxBatch,
// the last one synced if a waiter or the async interval asks). The commit
// runs beside the loop (Env.Worker); its completion, commitDone, answers
// the waiters the fsync covered. While a commit is in flight the next one
// gathers whatever arrives (group commit): a turn that finds one in
// flight leaves the rest to its completion.
func (s *Shard[V]) flush() {
	if s.flushT != nil {
		s.flushT.Stop()
		s.flushT, s.lingering = nil, false
	}
	if s.stopped {
		return
	}
	s.enforceCap()
	if s.env.Backend == nil || s.err != nil {
		s.pending, s.units, s.bounded = s.pending[:0], s.units[:0], queuedCount{}
		for _, f := range s.behind { //fenceline:unordered each one unmarked: nothing will be written
			s.unmarkBehind(f)
		}
		s.answer()
		return
	}
	if s.inflight != nil {
		return
	}
	s.drainBehind()
	wantSync := s.pendingSync
	if len(s.pending) == 0 && !wantSync {
		return
	}
	s.pendingSync = false
	if wantSync {
		s.floorMs = s.NowMs()
		// A unit of its own: batchCuts takes what follows the last unit
		// as one.
		s.pending = append(s.pending, Mutation{Flow: clockFlow, Key: clockKey, Value: binary.LittleEndian.AppendUint64(nil, uint64(s.floorMs))})
	}
	c := &commit{seq: s.queued, floorMs: s.floorMs, sync: wantSync}
	c.cuts = s.batchCuts(nil)
	// The commit takes pending whole; the next one fills the buffer the
	// last commit gave back, so neither grows again once warm.
	c.batch, s.pending, s.spare = s.pending, s.spare[:0], nil
	s.units = s.units[:0]
	c.bounded, s.bounded = s.bounded, queuedCount{}
	s.inflight = c
	s.stats.Commits++
	if s.cfg.Bugs.AckAtSubmit && c.sync {
		s.durable, s.durableFloorMs = c.seq, c.floorMs // the planted bug
		s.answer()
	}
	backend := s.env.Backend
	work := func() error { return c.run(backend) }
	if s.env.Worker == nil {
		s.commitDone(c, work())
		return
	}
	s.env.Worker.Go(work, func(err error) { s.commitDone(c, err) })
}

// A commit is one turn of the writer on its way to the backend.
type commit struct {
	batch   []Mutation
	cuts    []int // where each backend write ends in batch
	seq     uint64
	floorMs int64
	sync    bool // the last write syncs (an empty commit only syncs)
	writes  int  // backend writes done, for the counters
	bounded queuedCount
}

// queuedCount is what the queue's bound covers in a stretch of it.
type queuedCount struct{ mutations, units int }

func (q *queuedCount) add(n int) {
	if n > 0 {
		q.mutations += n
		q.units++
	}
}

// run is the commit's backend work. It runs beside the loop and touches
// nothing of the shard but the commit itself.
func (c *commit) run(b Backend) error {
	start := 0
	for i, end := range c.cuts {
		if err := b.Write(c.batch[start:end], c.sync && i == len(c.cuts)-1); err != nil {
			return fmt.Errorf("shard: write: %w", err)
		}
		c.writes++
		start = end
	}
	return nil
}

// commitDone is a commit's completion, back on the loop: what the backend
// now holds moves the writer's marks, the waiters its fsync covered are
// answered, and whatever gathered meanwhile is the next commit.
func (s *Shard[V]) commitDone(c *commit, err error) {
	if s.inflight != c || s.stopped {
		return
	}
	s.inflight = nil
	s.stats.Batches += uint64(c.writes)
	if err != nil {
		if s.retryInstead() {
			// The planted bug: the batch goes back to be written again.
			s.pending = append(c.batch, s.pending...)
			s.bounded.mutations += c.bounded.mutations
			s.bounded.units += c.bounded.units
			s.units = nil
			s.endUnit()
			return
		}
		s.fail(err)
		s.answer()
		return
	}
	s.written = c.seq
	if c.sync {
		s.stats.Fsyncs++
		s.unsynced = false
		s.durable = max(s.durable, c.seq)
		s.durableFloorMs = max(s.durableFloorMs, c.floorMs)
	} else {
		s.unsynced = true
	}
	clear(c.batch)
	s.spare = c.batch[:0]
	s.answer()
	// What gathered meanwhile goes next: at once if a sync waits or its
	// linger ran out during the commit, else when its linger does.
	if s.pendingSync || ((len(s.pending) > 0 || len(s.behind) > 0) && s.flushT == nil) {
		s.armFlush()
	}
}

// fail handles a backend failure: the writer stops for good, and so does
// the node (core/halt). After a failed write or fsync the disk may hold
// less than the writer was told it holds, and only what a restart reads
// back can be trusted. A backend that was closed under the writer (an
// orderly shutdown racing a turn) only stops the writer.
// retryInstead is the planted RetryFailedSync bug: a failed write or
// fsync is put off to the next fsync interval instead of stopping the
// node. It reports whether the bug is on.
func (s *Shard[V]) retryInstead() bool {
	if s.cfg.Bugs.RetryFailedSync {
		s.armSync()
	}
	return s.cfg.Bugs.RetryFailedSync
}

func (s *Shard[V]) fail(err error) {
	s.err = err
	if !errors.Is(err, ErrClosed) {
		halt.Stop(err)
	}
}

// answer runs the waiters the last fsync covered, or all of them with the
// writer's error.
func (s *Shard[V]) answer() {
	if len(s.waiters) == 0 {
		return
	}
	var ready, rest []waiter
	for _, w := range s.waiters {
		done := w.seq <= s.durable
		if w.floor > 0 {
			done = w.floor <= s.durableFloorMs
		}
		if s.err != nil || done || s.env.Backend == nil {
			ready = append(ready, w)
		} else {
			rest = append(rest, w)
		}
	}
	s.waiters = rest
	if len(rest) > 0 {
		s.pendingSync = true
		s.armFlush()
	}
	for _, w := range ready {
		s.stats.SyncAcks++
		w.fn(s.err)
	}
}
