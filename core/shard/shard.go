package shard

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/halt"
)

// Codec turns a store's values into backend bytes and back, and tells the
// shard when each value expires. The shard never looks inside a value
// otherwise.
type Codec[V any] interface {
	Encode(v V) []byte
	Decode(b []byte) (V, error)
	// Expiry returns the wall time, in ms, from which reads no longer see
	// v, and whether v is a value at all (false for a tombstone).
	Expiry(v V) (atMs int64, live bool)
}

// Config configures a shard. Zero fields take defaults.
type Config struct {
	// MaxFlows bounds the live flows a node holds (a flow is live while
	// any of its keys is an unexpired value). Beyond it the least recently
	// used flows are evicted whole, never key by key: a half-evicted
	// scenario is torn state. Default 100 000.
	MaxFlows int
	// SyncEvery is the async mode's group fsync interval: the most of
	// this copy's acknowledged async writes a crash can take. Default 50ms.
	SyncEvery time.Duration
	// CommitDelay is how long the writer lingers before it writes a batch,
	// so that concurrent writers share one fsync. Zero writes at the next
	// turn of the node's loop, which already groups every request that
	// queued while the last fsync ran. The simulator sets it to model a
	// disk's fsync latency.
	CommitDelay time.Duration
	// MaxPending bounds the mutations waiting for the writer. At the
	// bound Put refuses with ErrBusy and changes nothing. Default 65 536.
	MaxPending int
	// MaxBatch bounds the mutations in one backend write. Default 4096.
	MaxBatch int
	// MaxBatchBytes bounds the bytes (flow ids, keys, values) in one
	// backend write, well under what a backend takes in one record.
	// A single Put larger than either bound is written whole. Default 16 MiB.
	MaxBatchBytes int
	// PurgeEvery is how often the writer removes flows that have been
	// dead (every key expired or deleted) for GraceMs. Default 1s.
	PurgeEvery time.Duration
	// GraceMs is how long a dead flow's tombstones and expired entries
	// are kept. A stale copy elsewhere (a replica that missed the delete)
	// can bring a value back through a merge only while the entry that
	// shadows it is gone and the value itself has not expired; every
	// value expires at most the longest TTL after it was written, so a
	// grace of at least that TTL plus the clock skew makes purging safe
	// on every copy independently, with no coordination. Default 1h+1min.
	GraceMs int64

	Bugs bugs.Set
}

func (c Config) withDefaults() Config {
	if c.MaxFlows == 0 {
		c.MaxFlows = 100_000
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = 50 * time.Millisecond
	}
	if c.MaxPending == 0 {
		c.MaxPending = 1 << 16
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 4096
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 16 << 20
	}
	if c.PurgeEvery == 0 {
		c.PurgeEvery = time.Second
	}
	if c.GraceMs == 0 {
		c.GraceMs = 3_660_000
	}
	return c
}

// Validate reports why a configuration cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MaxFlows < 1 || c.SyncEvery <= 0 || c.CommitDelay < 0 || c.MaxPending < 1 || c.MaxBatch < 1 || c.MaxBatchBytes < 1 ||
		c.PurgeEvery <= 0 || c.GraceMs < 0 {
		return fmt.Errorf("shard: every bound must be positive: %+v", c)
	}
	return nil
}

// Env is what a shard is handed.
type Env struct {
	Clock   clock.Clock
	Backend Backend // nil: memory only (every mode behaves as None)
}

// Errors.
var (
	// ErrBusy: the writer's queue is full. Nothing was changed.
	ErrBusy = errors.New("shard: writer queue full")
)

// Stats count the writer's work.
type Stats struct {
	Puts      uint64 // Put calls that changed the shard
	Batches   uint64 // backend writes
	Fsyncs    uint64 // backend writes with sync, and Syncs
	SyncAcks  uint64 // WhenDurable answers that waited for an fsync
	Evicted   uint64 // flows evicted over the cap
	Purged    uint64 // dead flows removed after their grace
	Busy      uint64 // Puts refused at MaxPending
	Recovered int    // flows found on the backend at open
}

// metaKey is the backend key that holds a flow's mode and its store's
// metadata. Stores never use the empty key (the flow store refuses it).
const metaKey = ""

// clockFlow and clockKey hold the shard's clock floor: the highest wall
// time it has seen, written with every fsync. A restarted node starts its
// clamp there, so an entry that expired before a crash stays expired even
// if the node's clock came back behind. No store names a flow "".
const clockFlow, clockKey = "", "clock"

// Shard is one node's FlowShard: every flow the node owns or replicates,
// in memory for reads and on the backend for restarts. It is the single
// writer of its backend: it batches mutations, decides when to fsync, and
// answers durability waits, all on the node's loop.
type Shard[V any] struct {
	cfg   Config
	env   Env
	codec Codec[V]

	flows map[string]*flowState[V]
	// The LRU of live flows: head is the least recently used.
	head, tail *flowState[V]
	count      int
	due        dueHeap[V] // every flow, by its next deadline (death, then purge)

	pending     []Mutation
	units       []int  // where each Put's mutations end in pending: a batch is cut only there
	pendingSync bool   // a waiter needs the next write to sync
	unsynced    bool   // the backend holds writes not yet fsynced
	seq         uint64 // the last persisted Put
	written     uint64 // every Put up to this is in the backend
	durable     uint64 // every Put up to this is fsynced
	// durableFloorMs is the clock floor the last fsync made durable: a
	// restart's clamp starts at least there.
	durableFloorMs int64
	waiters        []waiter

	flushT, syncT, purgeT clock.Timer
	lastMs                int64
	floorMs               int64 // the clock floor last handed to the writer
	diskFlows             int   // flows the backend may hold
	err                   error // sticky backend failure
	stopped               bool
	onEvict               func(flow string)
	onDrop                func(flow string)
	stats                 Stats
}

type flowState[V any] struct {
	name    string
	keys    map[string]V
	meta    []byte
	mode    Mode
	onDisk  bool   // the backend may hold keys of this flow
	lastSeq uint64 // the last persisted Put of this flow

	liveUntil int64 // while now < liveUntil the flow counts toward the cap
	purgeAt   int64

	prev, next *flowState[V]
	inLRU      bool
	hidx       int // index in due, -1 when absent
}

// dueAt is the flow's next deadline: when it dies if it is counted,
// otherwise when it is purged.
func (f *flowState[V]) dueAt() int64 {
	if f.inLRU {
		return f.liveUntil
	}
	return f.purgeAt
}

type waiter struct {
	seq   uint64 // a WhenDurable: the Put it waits for
	floor int64  // a WhenFloorDurable: the clock floor it waits for (0: none)
	fn    func(error)
}

// Open recovers a shard from its backend: every stored flow, minus those
// dead past their grace, which the writer removes in the background.
// A value the codec cannot decode is an error naming it, never skipped.
func Open[V any](cfg Config, env Env, codec Codec[V]) (*Shard[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Shard[V]{cfg: cfg.withDefaults(), env: env, codec: codec, flows: map[string]*flowState[V]{}}
	if env.Backend != nil {
		if err := s.recover(); err != nil {
			return nil, err
		}
	}
	s.armPurge()
	return s, nil
}

func (s *Shard[V]) recover() error {
	var f *flowState[V]
	var order []*flowState[V]
	var prev *Mutation
	err := s.env.Backend.Scan(func(m Mutation) error {
		// Everything below assumes each flow's keys arrive together.
		if prev != nil && (m.Flow < prev.Flow || m.Flow == prev.Flow && m.Key <= prev.Key) {
			return fmt.Errorf("shard: recover: the backend's scan is out of (flow, key) order at %q/%q", m.Flow, m.Key)
		}
		prev = &m
		if m.Flow == clockFlow {
			if m.Key == clockKey && len(m.Value) == 8 {
				if !s.cfg.Bugs.NoFloorRecovery {
					s.lastMs = int64(binary.LittleEndian.Uint64(m.Value))
				}
				return nil
			}
			return fmt.Errorf("shard: recover: bad clock record %q=%x", m.Key, m.Value)
		}
		if f == nil || f.name != m.Flow {
			s.diskFlows++
			f = &flowState[V]{name: m.Flow, keys: map[string]V{}, onDisk: true, hidx: -1}
			s.flows[m.Flow] = f
			order = append(order, f)
		}
		if m.Key == metaKey {
			if len(m.Value) == 0 || !Mode(m.Value[0]).Valid() {
				return fmt.Errorf("shard: recover: flow %q: bad metadata %x", m.Flow, m.Value)
			}
			f.mode, f.meta = Mode(m.Value[0]), m.Value[1:]
			return nil
		}
		v, err := s.codec.Decode(m.Value)
		if err != nil {
			return fmt.Errorf("shard: recover: flow %q key %q: %w", m.Flow, m.Key, err)
		}
		f.keys[m.Key] = v
		return nil
	})
	if err != nil {
		return err
	}
	s.stats.Recovered = len(order)
	s.floorMs = s.lastMs
	s.durableFloorMs = s.lastMs
	// The backend keeps no recency; a flow that lives longer was most
	// likely written later, so it enters the LRU later.
	now := s.NowMs()
	for _, f := range order {
		s.computeDeadlines(f)
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].liveUntil < order[j].liveUntil })
	for _, f := range order {
		if f.purgeAt <= now {
			s.drop(f)
			continue
		}
		if f.liveUntil > now {
			s.lruPush(f)
		}
		heap.Push(&s.due, f)
	}
	if len(s.pending) > 0 || s.count > s.cfg.MaxFlows {
		s.armFlush()
	}
	return nil
}

// OnEvict registers what to do with a flow evicted over the cap. The
// hook must remove the flow (Drop) or make it dead (tombstones, as an
// owner does so that the eviction holds on every copy). Without a hook
// the shard drops the flow.
func (s *Shard[V]) OnEvict(fn func(flow string)) { s.onEvict = fn }

// OnDrop registers a hook told of every flow the shard removes (purged
// after its grace, evicted, dropped), so its store can forget what it
// kept about the flow.
func (s *Shard[V]) OnDrop(fn func(flow string)) { s.onDrop = fn }

// NowMs is the shard's clock in wall ms, clamped so it never goes back:
// an entry that expired stays expired when the node's clock steps back.
func (s *Shard[V]) NowMs() int64 {
	if s.cfg.Bugs.NoExpiryClamp {
		return s.env.Clock.Now().UnixMilli()
	}
	if ms := s.env.Clock.Now().UnixMilli(); ms > s.lastMs {
		s.lastMs = ms
	}
	return s.lastMs
}

// Get returns a flow's keys and marks it recently used. The map belongs
// to the shard: read it, never write it, and do not keep it past the
// next Put.
func (s *Shard[V]) Get(flow string) map[string]V {
	f := s.flows[flow]
	if f == nil {
		return nil
	}
	s.touch(f)
	return f.keys
}

// Peek is Get without marking the flow used (anti-entropy, checkers).
func (s *Shard[V]) Peek(flow string) map[string]V {
	if f := s.flows[flow]; f != nil {
		return f.keys
	}
	return nil
}

// Meta returns a flow's store metadata and mode.
func (s *Shard[V]) Meta(flow string) ([]byte, Mode, bool) {
	f := s.flows[flow]
	if f == nil {
		return nil, 0, false
	}
	return f.meta, f.mode, true
}

// Flows returns the flows held, sorted.
func (s *Shard[V]) Flows() []string {
	out := make([]string, 0, len(s.flows))
	for name := range s.flows {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Len is the number of flows held, dead ones included; Live is the
// number counted against MaxFlows.
func (s *Shard[V]) Len() int  { return len(s.flows) }
func (s *Shard[V]) Live() int { return s.count }

// Stats returns the writer's counters.
func (s *Shard[V]) Stats() Stats { return s.stats }

// Pending is the number of mutations waiting for the writer.
func (s *Shard[V]) Pending() int { return len(s.pending) }

// Put sets keys of a flow (and, when meta is non-nil, its metadata) in
// memory at once, and hands them to the writer in mode. It never waits:
// a caller that must not answer before the write is durable calls
// WhenDurable next. It refuses, changing nothing, when the writer's queue
// is full (ErrBusy) or the backend has failed.
func (s *Shard[V]) Put(flow string, changes map[string]V, meta []byte, mode Mode) error {
	switch {
	case s.stopped:
		return ErrClosed
	case s.err != nil:
		return s.err
	case !mode.Valid():
		return fmt.Errorf("shard: put %q: %w", flow, ErrBadMode)
	}
	f := s.flows[flow]
	persist := mode != None && s.env.Backend != nil
	disk := persist || (f != nil && f.onDisk)
	if disk && len(s.pending)+len(changes)+1 > s.cfg.MaxPending {
		s.stats.Busy++
		return ErrBusy
	}
	if f == nil {
		f = &flowState[V]{name: flow, keys: map[string]V{}, hidx: -1}
		s.flows[flow] = f
	}
	s.stats.Puts++
	modeChanged := f.mode != mode
	f.mode = mode
	keys := make([]string, 0, len(changes))
	for k := range changes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := changes[k]
		f.keys[k] = v
		switch {
		case persist:
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k, Value: s.codec.Encode(v)})
		case disk:
			// A memory-only write over a key the backend holds: delete it
			// there, or a restart would bring the older value back.
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k})
		}
	}
	if meta != nil {
		f.meta = append([]byte(nil), meta...)
	}
	if persist && (meta != nil || modeChanged || !f.onDisk) {
		s.pending = append(s.pending, Mutation{Flow: flow, Key: metaKey, Value: append([]byte{byte(mode)}, f.meta...)})
	}
	s.endUnit()
	if persist {
		s.seq++
		f.lastSeq = s.seq
		if !f.onDisk {
			f.onDisk = true
			s.diskFlows++
		}
		switch mode {
		case Async:
			s.armSync()
		case Sync:
			// Synced at the writer's next turn even if nobody waits (a
			// replica's copy of a sync push, an owner's tombstones).
			s.pendingSync = true
		}
	}
	s.computeDeadlines(f)
	s.place(f)
	s.touch(f)
	if len(s.pending) > 0 || s.count > s.cfg.MaxFlows {
		s.armFlush()
	}
	return nil
}

// WhenDurable runs fn once everything handed to the writer for flow is
// fsynced: at once if it already is, otherwise after the group fsync that
// covers it, with that fsync's error. Sync-mode callers answer in fn.
func (s *Shard[V]) WhenDurable(flow string, fn func(error)) {
	f := s.flows[flow]
	if s.cfg.Bugs.AckBeforeSync || f == nil || f.lastSeq <= s.durable || s.env.Backend == nil {
		fn(s.err)
		return
	}
	if s.stopped {
		fn(ErrClosed)
		return
	}
	s.waiters = append(s.waiters, waiter{seq: f.lastSeq, fn: fn})
	s.pendingSync = true
	s.armFlush()
}

// WhenFloorDurable runs fn once the clock floor on disk is at least atMs:
// at once if it is, else after the fsync that takes it there. A read that
// hides an entry because it expired at atMs waits for it before it
// answers: otherwise a crash, and a clock stepped back before the restart,
// could show the entry again to a later read. Only reads of entries that
// expired since the last floor reached the disk ever wait.
func (s *Shard[V]) WhenFloorDurable(atMs int64, fn func(error)) {
	if atMs <= s.durableFloorMs || s.env.Backend == nil {
		fn(s.err)
		return
	}
	if s.stopped {
		fn(ErrClosed)
		return
	}
	s.waiters = append(s.waiters, waiter{floor: atMs, fn: fn})
	s.pendingSync = true
	s.armFlush()
}

// Drop removes a whole flow, from memory at once and from the backend
// with the next write.
// DropKeys removes keys of a flow from this copy, from memory at once and
// from the backend with the next write: a replica pruning what the owner's
// copy, the authority, no longer holds. A flow left with no key is dropped
// whole. At the queue's bound it refuses with ErrBusy, changing nothing.
func (s *Shard[V]) DropKeys(flow string, keys []string) error {
	f := s.flows[flow]
	switch {
	case f == nil || len(keys) == 0:
		return nil
	case s.stopped:
		return ErrClosed
	case s.err != nil:
		return s.err
	case f.onDisk && len(s.pending)+len(keys) > s.cfg.MaxPending:
		s.stats.Busy++
		return ErrBusy
	}
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := f.keys[k]; !ok {
			continue
		}
		delete(f.keys, k)
		if f.onDisk && s.env.Backend != nil {
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k})
		}
	}
	if len(f.keys) == 0 {
		s.drop(f)
	} else {
		s.endUnit()
		s.computeDeadlines(f)
		s.place(f)
	}
	if len(s.pending) > 0 {
		s.armFlush()
	}
	return nil
}

func (s *Shard[V]) Drop(flow string) {
	if f := s.flows[flow]; f != nil {
		s.drop(f)
		if len(s.pending) > 0 {
			s.armFlush()
		}
	}
}

func (s *Shard[V]) drop(f *flowState[V]) {
	if s.onDrop != nil {
		defer s.onDrop(f.name)
	}
	s.lruRemove(f)
	if f.hidx >= 0 {
		heap.Remove(&s.due, f.hidx)
	}
	delete(s.flows, f.name)
	if f.onDisk {
		s.diskFlows--
	}
	if f.onDisk && s.env.Backend != nil {
		keys := make([]string, 0, len(f.keys)+1)
		for k := range f.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		keys = append(keys, metaKey)
		for _, k := range keys {
			s.pending = append(s.pending, Mutation{Flow: f.name, Key: k})
		}
		s.endUnit()
	}
}

// endUnit marks the end of one atomic unit in pending (a Put, a drop):
// the writer never splits a unit across two backend writes, so a crash
// cannot keep half of a scenario transition.
func (s *Shard[V]) endUnit() {
	if n := len(s.pending); n > 0 && (len(s.units) == 0 || s.units[len(s.units)-1] != n) {
		s.units = append(s.units, n)
	}
}

// nextBatch returns how many pending mutations the next backend write
// takes: as many whole units as fit MaxBatch, and at least one unit.
func (s *Shard[V]) nextBatch() int {
	n, bytes, start := 0, 0, 0
	for _, end := range s.units {
		for _, m := range s.pending[start:end] {
			bytes += len(m.Flow) + len(m.Key) + len(m.Value)
		}
		start = end
		if n > 0 && (end > s.cfg.MaxBatch || bytes > s.cfg.MaxBatchBytes) {
			break
		}
		n = end
	}
	return n
}

// Stop abandons the shard, as a crash does: timers stop, nothing more is
// written, and waiters are never answered (their node is gone).
func (s *Shard[V]) Stop() {
	s.stopped = true
	for _, t := range []clock.Timer{s.flushT, s.syncT, s.purgeT} {
		if t != nil {
			t.Stop()
		}
	}
}

// Close writes and fsyncs everything pending, answers the waiters, and
// closes the backend.
func (s *Shard[V]) Close() error {
	if s.stopped {
		return ErrClosed
	}
	s.pendingSync = true
	s.flush()
	s.Stop()
	if s.env.Backend == nil {
		return s.err
	}
	if err := s.env.Backend.Close(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}

// --- the writer ---

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
			if s.cfg.Bugs.RetryFailedSync {
				s.armSync() // try again at the next fsync interval
				return
			}
			s.fail(fmt.Errorf("shard: write: %w", err))
			break
		}
		s.stats.Batches++
		s.pending = s.pending[n:]
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
		s.pending, s.units = nil, nil
		s.written = s.seq
		switch {
		case wantSync && s.unsynced:
			if err := s.env.Backend.Sync(); err != nil {
				if s.cfg.Bugs.RetryFailedSync {
					s.armSync() // try again at the next fsync interval
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

// enforceCap evicts least recently used flows until the live ones fit.
func (s *Shard[V]) enforceCap() {
	var kept []*flowState[V]
	defer func() {
		// Flows the hook kept (an owner that may not write them now)
		// count again, most recently used, and the cap waits for them.
		for _, f := range kept {
			if s.flows[f.name] == f && !f.inLRU && f.liveUntil > s.NowMs() {
				s.lruPush(f)
				heap.Fix(&s.due, f.hidx)
			}
		}
	}()
	for s.count > s.cfg.MaxFlows && s.head != nil {
		f := s.head
		s.lruRemove(f)
		heap.Fix(&s.due, f.hidx)
		s.stats.Evicted++
		if s.cfg.Bugs.EvictKeys {
			// The planted bug: evict one key, as a per-key cache would,
			// and call the flow handled.
			keys := make([]string, 0, len(f.keys))
			for k := range f.keys {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if len(keys) > 0 {
				delete(f.keys, keys[0])
				if f.onDisk && s.env.Backend != nil {
					s.pending = append(s.pending, Mutation{Flow: f.name, Key: keys[0]})
					s.endUnit()
				}
			}
			continue
		}
		if s.onEvict != nil {
			s.onEvict(f.name)
			kept = append(kept, f)
		} else {
			s.drop(f)
		}
	}
}

// purge moves flows whose last live key has expired out of the LRU, and
// removes flows dead for their grace.
//
// It also keeps the clock floor current: a node that only serves reads
// still records, within PurgeEvery, the time at which it saw entries
// expire, so a restart behind a clock step cannot show them again.
func (s *Shard[V]) purge() {
	now := s.NowMs()
	purged := 0
	for s.due.Len() > 0 && s.due[0].dueAt() <= now && purged < s.cfg.MaxBatch {
		f := s.due[0]
		if f.inLRU {
			s.lruRemove(f)
			heap.Fix(&s.due, f.hidx)
			continue
		}
		s.stats.Purged++
		purged++ // bounded per turn, so one tick never queues without limit
		s.drop(f)
	}
	if s.env.Backend != nil && s.diskFlows > 0 && now > s.floorMs {
		s.pendingSync = true
	}
	if len(s.pending) > 0 || s.pendingSync {
		s.armFlush()
	}
}

// --- deadlines and the LRU ---

// computeDeadlines sets when a flow dies (its last value expires) and
// when it may be purged (the grace after its last entry expired).
func (s *Shard[V]) computeDeadlines(f *flowState[V]) {
	var live, last int64
	for _, v := range f.keys { //fenceline:unordered taking maxima
		at, isLive := s.codec.Expiry(v)
		if isLive && at > live {
			live = at
		}
		if at > last {
			last = at
		}
	}
	if len(f.keys) == 0 {
		last = s.NowMs()
	}
	f.liveUntil, f.purgeAt = live, last+s.cfg.GraceMs
}

// place puts a flow where its deadlines say: counted if live, and in the
// deadline heap.
func (s *Shard[V]) place(f *flowState[V]) {
	if f.liveUntil > s.NowMs() {
		if !f.inLRU {
			s.lruPush(f)
		}
	} else {
		s.lruRemove(f)
	}
	if f.hidx < 0 {
		heap.Push(&s.due, f)
	} else {
		heap.Fix(&s.due, f.hidx)
	}
}

func (s *Shard[V]) touch(f *flowState[V]) {
	if f.inLRU && s.tail != f {
		s.lruRemove(f)
		s.lruPush(f)
	}
}

func (s *Shard[V]) lruPush(f *flowState[V]) {
	f.prev, f.next, f.inLRU = s.tail, nil, true
	if s.tail != nil {
		s.tail.next = f
	} else {
		s.head = f
	}
	s.tail = f
	s.count++
}

func (s *Shard[V]) lruRemove(f *flowState[V]) {
	if !f.inLRU {
		return
	}
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		s.head = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		s.tail = f.prev
	}
	f.prev, f.next, f.inLRU = nil, nil, false
	s.count--
}

// dueHeap orders flows by their next deadline, then name (deterministic).
type dueHeap[V any] []*flowState[V]

func (h dueHeap[V]) Len() int { return len(h) }
func (h dueHeap[V]) Less(i, j int) bool {
	a, b := h[i].dueAt(), h[j].dueAt()
	if a != b {
		return a < b
	}
	return h[i].name < h[j].name
}
func (h dueHeap[V]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *dueHeap[V]) Push(x any) {
	f := x.(*flowState[V])
	f.hidx = len(*h)
	*h = append(*h, f)
}
func (h *dueHeap[V]) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.hidx = -1
	return f
}
