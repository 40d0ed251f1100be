package shard

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/fenceline/fenceline/clock"
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
	inflight       *commit    // the commit the backend is working on; nil: none
	spare          []Mutation // the last commit's buffer, for the next pending
	// behind holds the flows whose latest changes a full queue left in
	// memory (PutReplica): each is handed to the writer as one unit when
	// the queue has room (drainBehind), in the order of its last change.
	// While any flow is behind, Put refuses, so pending keeps the order
	// of the Puts' sequence numbers.
	behind map[string]*flowState[V]
	queued uint64 // the last Put handed to pending; every Put up to it is there or written
	// bounded counts what MaxPending bounds in pending: the mutations
	// Puts, flows behind and DropKeys queued, and their units (the
	// writer's own housekeeping is queued past the bound).
	bounded queuedCount

	flushT, syncT, purgeT clock.Timer
	waitT                 clock.Timer // the oldest waiter's MaxWait (armWait)
	lingering             bool        // flushT is an async write's linger (armLinger)
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

	// behindKeys: while the flow is behind, each key changed since, and
	// whether its value is to be written (or the key deleted); behindMeta:
	// its metadata is to be written too. nil while the flow is not behind.
	behindKeys map[string]bool
	behindMeta bool

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
	seq   uint64        // a WhenDurable: the Put it waits for
	floor int64         // a WhenFloorDurable: the clock floor it waits for (0: none)
	by    time.Duration // the clock's Mono reading at which MaxWait runs out
	fn    func(error)
}

// Open recovers a shard from its backend: every stored flow, minus those
// dead past their grace, which the writer removes in the background.
// A value the codec cannot decode is an error naming it, never skipped.
func Open[V any](cfg Config, env Env, codec Codec[V]) (*Shard[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Shard[V]{cfg: cfg.withDefaults(), env: env, codec: codec, flows: map[string]*flowState[V]{}, behind: map[string]*flowState[V]{}}
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
	ms := s.env.Clock.Now().UnixMilli()
	if ms > s.lastMs {
		s.lastMs = ms
	}
	if s.cfg.Bugs.NoExpiryClamp {
		return ms // lastMs is still the latest reading, for the invariants
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

// Pending is the number of mutations not yet written: waiting for the
// writer, or on their way to the backend.
func (s *Shard[V]) Pending() int {
	if s.inflight != nil {
		return len(s.pending) + len(s.inflight.batch)
	}
	return len(s.pending)
}

// Put sets keys of a flow (and, when meta is non-nil, its metadata) in
// memory at once, and hands them to the writer in mode. It never waits:
// a caller that must not answer before the write is durable calls
// WhenDurable next. It refuses, changing nothing, when the writer's queue
// is full (ErrBusy) or the backend has failed.
func (s *Shard[V]) Put(flow string, changes map[string]V, meta []byte, mode Mode) error {
	return s.put(flow, changes, meta, mode, false)
}

// PutReplica is Put for a copy the node holds for another, the owner's
// push of a write it has answered: the owner counts this copy among the
// write's holders, so a full queue must not refuse it. At MaxPending (or
// while another flow is behind) the changes are applied in memory at once
// and the flow is marked behind: the writer takes the keys changed, with
// the values memory then holds, as one unit once the queue has room. What
// waits so is bounded by the keys the shard holds, however long the disk
// takes. It refuses only as Put does for a stopped or failed writer.
func (s *Shard[V]) PutReplica(flow string, changes map[string]V, meta []byte, mode Mode) error {
	return s.put(flow, changes, meta, mode, !s.cfg.Bugs.RefusedPush)
}

func (s *Shard[V]) put(flow string, changes map[string]V, meta []byte, mode Mode, replica bool) error {
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
	// Late: no room in the queue, or another flow ahead of it behind.
	late := disk && (len(s.behind) > 0 || !s.roomFor(len(changes)+1))
	if late && !replica {
		s.stats.Busy++
		return ErrBusy
	}
	if f == nil {
		f = &flowState[V]{name: flow, keys: map[string]V{}, hidx: -1}
		s.flows[flow] = f
	}
	s.stats.Puts++
	queuedBefore := len(s.pending)
	if late {
		s.stats.Behind++
		if f.behindKeys == nil {
			f.behindKeys = map[string]bool{}
			s.behind[flow] = f
		}
	}
	modeChanged := f.mode != mode
	f.mode = mode
	put := func(k string, v V) {
		f.keys[k] = v
		switch {
		case late:
			f.behindKeys[k] = persist
		case persist:
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k, Value: s.codec.Encode(v)})
		case disk:
			// A memory-only write over a key the backend holds: delete it
			// there, or a restart would bring the older value back.
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k})
		}
	}
	if len(changes) == 1 { // one key, the common write: no key slice to sort
		for k, v := range changes { //fenceline:unordered one entry: one order
			put(k, v)
		}
	} else {
		keys := make([]string, 0, len(changes))
		for k := range changes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			put(k, changes[k])
		}
	}
	if meta != nil {
		f.meta = append([]byte(nil), meta...)
	}
	if persist && (meta != nil || modeChanged || !f.onDisk) {
		if late {
			f.behindMeta = true
		} else {
			s.pending = append(s.pending, Mutation{Flow: flow, Key: metaKey, Value: append([]byte{byte(mode)}, f.meta...)})
		}
	}
	switch {
	case late:
		// A flow behind waits for its turn with a sequence number of its
		// own, above every one in pending, so WhenDurable holds a read of
		// it until its unit is written and synced.
		s.seq++
		f.lastSeq = s.seq
	case persist:
		s.seq++
		f.lastSeq = s.seq
		s.queued = s.seq
	}
	if !late {
		s.endUnit()
		s.bounded.add(len(s.pending) - queuedBefore)
	}
	if persist {
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
	switch {
	case mode == Sync || s.count > s.cfg.MaxFlows:
		s.armFlush()
	case len(s.pending) > 0 || len(s.behind) > 0:
		s.armLinger()
	}
	return nil
}

// roomFor reports whether the writer's queue takes a unit of n mutations:
// within MaxPending, or alone into an empty queue (a unit larger than the
// whole bound, refused always, would leave its flow's adoption or move
// waiting for ever).
func (s *Shard[V]) roomFor(n int) bool {
	return s.Pending() == 0 || s.Pending()+n <= s.cfg.MaxPending
}

// drainBehind hands the writer the flows behind, in the order of their
// last change, while the queue has room (a unit larger than the whole
// queue goes into an empty one alone, as a Put's does). Each is one unit:
// the keys changed since it fell behind, with the values memory holds now
// (or deleted, where the last change was memory-only or the key is gone),
// and its metadata.
func (s *Shard[V]) drainBehind() {
	if len(s.behind) == 0 {
		return
	}
	order := make([]*flowState[V], 0, len(s.behind))
	for _, f := range s.behind {
		order = append(order, f)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].lastSeq < order[j].lastSeq })
	for _, f := range order {
		if !s.roomFor(len(f.behindKeys) + 1) {
			break
		}
		if s.cfg.Bugs.ForgetBehind {
			s.unmarkBehind(f) // the planted bug: off the list, never queued
			continue
		}
		queuedBefore := len(s.pending)
		keys := make([]string, 0, len(f.behindKeys))
		for k := range f.behindKeys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, ok := f.keys[k]
			if ok && f.behindKeys[k] {
				s.pending = append(s.pending, Mutation{Flow: f.name, Key: k, Value: s.codec.Encode(v)})
			} else {
				s.pending = append(s.pending, Mutation{Flow: f.name, Key: k})
			}
		}
		if f.behindMeta {
			s.pending = append(s.pending, Mutation{Flow: f.name, Key: metaKey, Value: append([]byte{byte(f.mode)}, f.meta...)})
		}
		s.endUnit()
		s.bounded.add(len(s.pending) - queuedBefore)
		if f.mode == Sync {
			s.pendingSync = true
		}
		s.queued = f.lastSeq
		s.unmarkBehind(f)
	}
}

// unmarkBehind takes f off the behind list. Once none is behind, every
// Put is in pending or written.
func (s *Shard[V]) unmarkBehind(f *flowState[V]) {
	if f.behindKeys == nil {
		return
	}
	f.behindKeys, f.behindMeta = nil, false
	delete(s.behind, f.name)
	if len(s.behind) == 0 {
		s.queued = s.seq
	}
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
	s.wait(waiter{seq: f.lastSeq, fn: fn})
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
	if s.cfg.Bugs.WaitRefused {
		fn(ErrClosed) // the planted bug: a floor behind taken for a writer stopped
		return
	}
	s.wait(waiter{floor: atMs, fn: fn})
}

// wait holds w until the fsync that covers it, or MaxWait. Waiters are
// held in the order they came, so their MaxWaits run out in that order
// too: the oldest is first, and one timer, for it, serves them all. At
// MaxWaiters the oldest is answered at once to make room.
func (s *Shard[V]) wait(w waiter) {
	w.by = s.env.Clock.Mono() + s.cfg.MaxWait
	switch {
	case s.cfg.Bugs.UntimedWaits:
		w.by += 1000 * time.Hour // the planted bug: longer than any run
	case s.cfg.Bugs.EarlyCut:
		w.by -= s.cfg.MaxWait * 9 / 10 // the planted bug
	}
	var cut []waiter
	if n := len(s.waiters) + 1 - s.cfg.MaxWaiters; n > 0 {
		cut = append(cut, s.waiters[:n]...)
		s.waiters = append(s.waiters[:0], s.waiters[n:]...)
	}
	s.waiters = append(s.waiters, w)
	s.pendingSync = true
	s.armFlush()
	s.armWait()
	s.cutWaits(cut)
}

// armWait times the oldest waiter's MaxWait, unless a timer is set
// already (it is for the same waiter, or an older one that has gone:
// expireWaits then sets the next).
func (s *Shard[V]) armWait() {
	if s.waitT != nil || len(s.waiters) == 0 || s.stopped {
		return
	}
	s.waitT = s.env.Clock.AfterFunc(max(s.waiters[0].by-s.env.Clock.Mono(), 0), s.expireWaits)
}

// expireWaits answers every waiter whose MaxWait has run out.
func (s *Shard[V]) expireWaits() {
	s.waitT = nil
	if s.stopped {
		return
	}
	now := s.env.Clock.Mono()
	n := 0
	for n < len(s.waiters) && s.waiters[n].by <= now {
		n++
	}
	cut := append([]waiter(nil), s.waiters[:n]...)
	s.waiters = append(s.waiters[:0], s.waiters[n:]...)
	s.armWait()
	s.cutWaits(cut)
}

// cutWaits answers waiters ErrWaitTimeout. It runs them last, after the
// shard's state is whole: an answer may call the shard again.
func (s *Shard[V]) cutWaits(cut []waiter) {
	for _, w := range cut {
		s.stats.WaitsCut++
		w.fn(ErrWaitTimeout)
	}
}

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
	case f.onDisk && !s.roomFor(len(keys)):
		s.stats.Busy++
		return ErrBusy
	}
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	queuedBefore := len(s.pending)
	for _, k := range keys {
		if _, ok := f.keys[k]; !ok {
			continue
		}
		delete(f.keys, k)
		delete(f.behindKeys, k) // the delete below is the key's last change
		if f.onDisk && s.env.Backend != nil {
			s.pending = append(s.pending, Mutation{Flow: flow, Key: k})
		}
	}
	s.bounded.add(len(s.pending) - queuedBefore) // the drop below, if any, is housekeeping
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

// Drop removes a whole flow, from memory at once and from the backend
// with the next write.
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
	s.unmarkBehind(f) // the deletes below are its last change
	if f.onDisk && !s.cfg.Bugs.DiskCountDrift {
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

// batchCuts appends to cuts where each backend write of pending ends:
// each takes as many whole units as fit MaxBatch and MaxBatchBytes, and
// at least one unit.
func (s *Shard[V]) batchCuts(cuts []int) []int {
	first, prev, bytes := 0, 0, 0 // the current write starts at first; the last unit ended at prev
	cut := func(end int) {
		ub := 0
		for _, m := range s.pending[prev:end] {
			ub += len(m.Flow) + len(m.Key) + len(m.Value)
		}
		if prev > first && (end-first > s.cfg.MaxBatch || bytes+ub > s.cfg.MaxBatchBytes) {
			cuts = append(cuts, prev)
			first, bytes = prev, 0
		}
		bytes += ub
		prev = end
	}
	for _, end := range s.units {
		cut(end)
	}
	if prev < len(s.pending) {
		cut(len(s.pending))
	}
	if prev > first {
		cuts = append(cuts, prev)
	}
	return cuts
}

// Stop abandons the shard, as a crash does: timers stop, nothing more is
// written, and waiters are never answered (their node is gone).
func (s *Shard[V]) Stop() {
	s.stopped = true
	for _, t := range []clock.Timer{s.flushT, s.syncT, s.purgeT, s.waitT} {
		if t != nil {
			t.Stop()
		}
	}
}

// Close writes and fsyncs everything pending, answers the waiters, and
// closes the backend. It waits for the worker (Worker.Settle): only an
// orderly shutdown calls it.
func (s *Shard[V]) Close() error {
	if s.stopped {
		return ErrClosed
	}
	// A turn of the writer takes the whole queue and at least one flow
	// behind, and the last one syncs: turns, each waited for, until
	// nothing is pending or behind and the sync is done, or the writer
	// has failed. A commit in flight at the start holds the sync asked
	// here to the next turn, and every turn is settled before the next
	// test, so nothing is in flight when the loop ends. (A shard with no
	// backend has nothing to sync: its one turn drops what is pending.)
	s.pendingSync = s.env.Backend != nil
	for s.err == nil && (len(s.pending) > 0 || len(s.behind) > 0 || s.pendingSync) {
		s.flush() // takes no turn while a commit is in flight
		if s.env.Worker == nil {
			continue // the turn ran on the loop
		}
		if s.cfg.Bugs.CloseUnsettled {
			break
		}
		s.env.Worker.Settle()
	}
	s.Stop()
	if s.env.Backend == nil {
		return s.err
	}
	if err := s.env.Backend.Close(); err != nil && s.err == nil {
		s.err = err
	}
	return s.err
}
