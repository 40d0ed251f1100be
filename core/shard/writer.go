package shard

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/core/halt"
)

// This file: the writer, which batches
// mutations to the backend, decides when to fsync and answers the
// durability waits, all on the node's loop.

func (s *Shard[V]) armFlush() {
	if s.flushT == nil && !s.stopped {
		s.flushT = s.env.Clock.AfterFunc(s.cfg.CommitDelay, s.flush)
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

// flush is the writer's turn: evict over the cap, write what is pending
// in batches (the last one synced if a waiter or the async interval asks),
// then answer the waiters the fsync covered.
func (s *Shard[V]) flush() {
	if s.flushT != nil {
		s.flushT.Stop()
		s.flushT = nil
	}
	if s.stopped {
		return
	}
	s.enforceCap()
	if s.env.Backend == nil || s.err != nil {
		s.pending, s.units = s.pending[:0], s.units[:0]
		s.answer()
		return
	}
	wantSync := s.pendingSync
	s.pendingSync = false
	if wantSync {
		s.floorMs = s.NowMs()
		s.pending = append(s.pending, Mutation{Flow: clockFlow, Key: clockKey, Value: binary.LittleEndian.AppendUint64(nil, uint64(s.floorMs))})
		s.endUnit()
	}
	for len(s.pending) > 0 && s.err == nil {
		n := s.nextBatch()
		last := n == len(s.pending)
		sync := last && wantSync
		if err := s.env.Backend.Write(s.pending[:n], sync); err != nil {
			if s.retryInstead() {
				return
			}
			s.fail(fmt.Errorf("shard: write: %w", err))
			break
		}
		s.stats.Batches++
		// Moved down rather than resliced: pending keeps its capacity,
		// and the next turn appends without growing it again.
		m := copy(s.pending, s.pending[n:])
		clear(s.pending[m:])
		s.pending = s.pending[:m]
		rest := s.units[:0]
		for _, end := range s.units {
			if end > n {
				rest = append(rest, end-n)
			}
		}
		s.units = rest
		if sync {
			s.stats.Fsyncs++
			s.unsynced = false
		} else {
			s.unsynced = true
		}
	}
	if s.err == nil {
		s.pending, s.units = s.pending[:0], s.units[:0]
		s.written = s.seq
		switch {
		case wantSync && s.unsynced:
			if err := s.env.Backend.Sync(); err != nil {
				if s.retryInstead() {
					return
				}
				s.fail(fmt.Errorf("shard: sync: %w", err))
				break
			}
			s.stats.Fsyncs++
			fallthrough
		case wantSync:
			s.unsynced = false
			s.durable = s.written
			s.durableFloorMs = s.floorMs
		}
	}
	s.answer()
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
