package flow

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Control is what the flow store asks of the control plane (core/consensus
// answers it): the committed membership in force, and D-17.
type Control interface {
	// Membership returns the committed membership in force and, when
	// known, the one applied just before it.
	Membership() Membership
	// IsIsolated reports that this node knows no current leader, or
	// leads without a quorum's recent acknowledgement.
	IsIsolated() bool
}

// Membership is what the store needs of a committed membership.
type Membership struct {
	Index  uint64 // m_idx
	Voters []dial.NodeID
	// PrevIndex and PrevVoters are the membership just before Index;
	// PrevIndex is 0 when the control plane does not know it (it restored
	// Index from a snapshot). Adoption asks the owner under PrevVoters,
	// never under whatever membership this store happened to see last: a
	// node that applied two changes at once must not skip the owner
	// between them.
	PrevIndex  uint64
	PrevVoters []dial.NodeID
}

// Rand is the seeded source a store draws its timer jitter from.
type Rand interface{ Int64N(n int64) int64 }

// Env is what a store is handed.
type Env struct {
	ID dial.NodeID
	// Epoch is the node's boot counter, durable and strictly increasing
	// across restarts (core/node keeps it). Write counters are issued
	// above Epoch<<32, so a restarted owner's writes outrank every write
	// its earlier incarnations issued at the same m_idx.
	Epoch uint64
	Clock clock.Clock
	Net   dial.Sender // frames go out with FramePrefix as their first byte
	Ctl   Control
	Rand  Rand
	// Backend is the FlowShard's disk; nil keeps every flow in memory
	// only (tests, and nodes without a data dir).
	Backend shard.Backend
}

// Store is one node's flow store. Like all of core/, it is a single-
// threaded state machine: Do, HandleFrame and its timers run on the node's
// loop, one at a time.
type Store struct {
	cfg Config
	env Env

	// The shard: every key this node owns or replicates, in memory and
	// on disk (core/shard).
	sh *shard.Shard[Value]
	// recovered: this is not the node's first boot, so its copies came
	// from disk and may lack the async writes its crash lost; reconciled
	// marks the flows adopted since, whose copies are whole again.
	recovered  bool
	reconciled map[string]bool
	inflight   map[servedKey]bool // requests being served (a sync write waits for its fsync)

	permits int
	nextID  uint64
	session uint64           // drawn at boot: tells this incarnation's request ids apart
	calls   map[uint64]*call // requests sent to owners, by id

	served      map[servedKey]msg // answers given, for duplicate requests
	servedOrder []servedKey       // oldest first

	mIdx       uint64
	voters     []dial.NodeID
	ring       ring.Ring
	prevRing   ring.Ring // the membership before mIdx, as this node saw it
	havePrev   bool
	adopted    map[string]uint64 // flow -> m_idx at which this node adopted it
	servedAt   map[string]uint64 // flow -> the latest m_idx at which this node served it (never forgotten)
	prevMIdx   uint64            // the membership index before mIdx, as this node saw it
	adopting   map[string]*adoption
	fencedAt   map[string]uint64 // flow -> m_idx a newer owner announced while adopting it
	aeTimer    clock.Timer
	aeCursor   int // where the next anti-entropy answer starts in its list
	stopped    bool
	nowForTest func() time.Time

	// Counters, for scenarios and benchmarks.
	Shed, Served, Pushed, Merged, Pruned, Adoptions, AERounds, BadFrames, Evicted uint64
}

type call struct {
	to      dial.NodeID // the owner it was sent to; 0 if served here
	done    func(Response, error)
	timer   clock.Timer
	settled bool
}

// New returns a store and starts its anti-entropy timer.
func New(cfg Config, env Env) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	sh, err := shard.Open[Value](cfg.Shard, shard.Env{Clock: env.Clock, Backend: env.Backend}, valueCodec{})
	if err != nil {
		return nil, fmt.Errorf("flow: %w", err)
	}
	s := &Store{
		cfg:        cfg,
		env:        env,
		sh:         sh,
		recovered:  env.Epoch > 1,
		reconciled: map[string]bool{},
		inflight:   map[servedKey]bool{},
		calls:      map[uint64]*call{},
		adopted:    map[string]uint64{},
		servedAt:   map[string]uint64{},
		adopting:   map[string]*adoption{},
		fencedAt:   map[string]uint64{},
		served:     map[servedKey]msg{},
		session:    uint64(env.Rand.Int64N(1<<62)) + 1,
	}
	s.permits = s.cfg.Permits
	s.sh.OnEvict(s.evict)
	s.sh.OnDrop(s.dropped)
	for _, f := range s.sh.Flows() {
		if meta, _, _ := s.sh.Meta(f); len(meta) > 0 {
			s.servedAt[f] = decodeServed(meta)
		}
	}
	s.refresh()
	if s.cfg.Bugs.NoReadopt {
		// The planted bug: trust this node's disk for the flows it served
		// at this membership, as if the crash had lost nothing.
		for _, f := range sortedKeys(s.servedAt) {
			if s.servedAt[f] == s.mIdx && ownerOf(s.ring, f) == s.env.ID {
				s.adopted[f] = s.mIdx
			}
		}
	}
	s.armAntiEntropy()
	return s, nil
}

// Stop cancels the store's timers and fails the calls in flight.
func (s *Store) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.sh.Stop()
	if s.aeTimer != nil {
		s.aeTimer.Stop()
	}
	ids := make([]uint64, 0, len(s.calls))
	for id := range s.calls {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s.settle(s.calls[id], Response{}, unavailable(ErrCrashed))
	}
}

// Close stops the store and closes its shard, writing and fsyncing
// everything pending: the orderly shutdown of a real node.
func (s *Store) Close() error {
	if s.stopped {
		return shard.ErrClosed
	}
	err := s.sh.Close()
	s.Stop()
	return err
}

// refresh picks up a new committed membership. A flow this node owned and
// had adopted under the previous membership, and still owns, stays
// adopted: its copy is the authority. Every other flow it now owns must
// be adopted before it is served.
func (s *Store) refresh() {
	ms := s.env.Ctl.Membership()
	m := ms.Index
	if m == s.mIdx && s.ring.Len() == len(ms.Voters) {
		return
	}
	old, oldM := s.ring, s.mIdx
	s.prevMIdx, s.prevRing, s.havePrev = ms.PrevIndex, ring.New(ms.PrevVoters), ms.PrevIndex > 0
	s.mIdx, s.voters, s.ring = m, ms.Voters, ring.New(ms.Voters)
	// Carry an adoption over only from the membership just before this
	// one, and only if this store saw it: a store that skipped a step may
	// have missed an owner in between.
	carry := s.havePrev && oldM == ms.PrevIndex
	// A fence set below the membership now in force is spent: the owner
	// checks refuse callers at older m_idx anyway.
	for _, f := range sortedFlows(s.fencedAt) {
		if s.fencedAt[f] <= m {
			delete(s.fencedAt, f)
		}
	}
	for _, f := range sortedFlows(s.adopted) {
		at := s.adopted[f]
		wasOwner := old.Len() > 0 && ownerOf(old, f) == s.env.ID
		if carry && at == oldM && wasOwner && ownerOf(s.ring, f) == s.env.ID {
			s.adopted[f] = m
			s.servedAt[f] = m
		} else if !s.cfg.Bugs.StaleAdoption {
			delete(s.adopted, f)
		}
	}
}

func ownerOf(r ring.Ring, flow string) dial.NodeID {
	id, _ := r.Owner(ring.ClassFlow, flow)
	return id
}

// Do runs one operation. done runs exactly once, on the node's loop: with
// the answer, or with an error wrapping ErrUnavailable (Known tells whether
// the operation certainly did not apply), ErrNotInteger or ErrBadRequest.
// Do never waits for a permit and no call outlives the deadline.
func (s *Store) Do(req Request, done func(Response, error)) {
	if err := s.cfg.check(req); err != nil {
		done(Response{}, err)
		return
	}
	s.refresh()
	if req.Read == Local && (req.Op == OpGet || req.Op == OpGetAll) {
		resp, _, _, err := s.apply(req, true)
		done(resp, err)
		return
	}
	if s.stopped || s.permits == 0 {
		s.Shed++
		done(Response{}, unavailable(ErrShed))
		return
	}
	s.permits--
	c := &call{done: done}
	c.timer = s.env.Clock.AfterFunc(s.cfg.Deadline, func() { s.settle(c, Response{}, unavailable(ErrTimeout)) })
	owner, ok := s.ring.Owner(ring.ClassFlow, req.Flow)
	switch {
	case !ok:
		s.settle(c, Response{}, unavailable(ErrNoOwner))
	case owner == s.env.ID:
		s.serve(s.mIdx, req, func(resp Response, err error) { s.settle(c, resp, err) })
	default:
		s.nextID++
		id := s.nextID
		c.to = owner
		s.calls[id] = c
		err := s.send(owner, msg{Kind: FrameOp, ID: id, Session: s.session, M: s.mIdx, Req: &req})
		if err == nil {
			return
		}
		delete(s.calls, id)
		if s.cfg.Bugs.LocalFallback {
			// The planted bug: degrade to the local copy, the fork the
			// design exists to prevent.
			resp, changed, _, aerr := s.apply(req, false)
			_ = s.commit(req.Flow, changed, req.Mode)
			s.settle(c, resp, aerr)
			return
		}
		s.settle(c, Response{}, unavailable(fmt.Errorf("%w: %v", ErrSend, err)))
	}
}

// settle answers a call once and frees its permit.
func (s *Store) settle(c *call, resp Response, err error) {
	if c.settled {
		return
	}
	c.settled = true
	c.timer.Stop()
	for id, other := range s.calls { //fenceline:unordered finds the one entry pointing at c; order cannot matter
		if other == c {
			delete(s.calls, id)
		}
	}
	s.permits++
	c.done(resp, err)
}

// serve is the owner's side of an operation: its checks, in order, each
// with its own refusal, then apply, stamp, write, push, answer.
func (s *Store) serve(callerM uint64, req Request, reply func(Response, error)) {
	s.refresh()
	if !s.cfg.Bugs.NoFence && callerM != s.mIdx {
		reply(Response{}, unavailable(fmt.Errorf("%w: caller at %d, owner at %d", ErrFenced, callerM, s.mIdx)))
		return
	}
	if err := s.mayServe(req.Flow); err != nil {
		if errors.Is(err, ErrNotAdopted) {
			s.startAdoption(req.Flow, req.Mode)
		}
		reply(Response{}, unavailable(err))
		return
	}
	resp, changed, hiddenMs, err := s.apply(req, false)
	if hiddenMs > 0 && !s.cfg.Bugs.NoFloorWait {
		// The answer hides an entry because it expired: not before the
		// clock floor on disk covers that expiry, or a crash and a clock
		// stepped back could show the entry again to a later read.
		s.sh.WhenFloorDurable(hiddenMs, func(ferr error) {
			if ferr != nil {
				reply(Response{}, unavailable(fmt.Errorf("%w: %v", ErrDisk, ferr)))
				return
			}
			s.finishServe(req, resp, changed, err, reply)
		})
		return
	}
	s.finishServe(req, resp, changed, err, reply)
}

// finishServe is serve after apply: commit, push and answer, each in the
// flow's mode.
func (s *Store) finishServe(req Request, resp Response, changed map[string]Value, err error, reply func(Response, error)) {
	if err != nil {
		if req.Mode == shard.Sync {
			// Even a refusal (not an integer, too many keys) tells of
			// the flow's state: not before that state is on disk.
			s.sh.WhenDurable(req.Flow, func(error) { reply(resp, err) })
			return
		}
		reply(resp, err)
		return
	}
	if err := s.commit(req.Flow, changed, req.Mode); err != nil {
		// Refused before anything changed: known not applied.
		reply(Response{}, unavailable(fmt.Errorf("%w: %v", ErrBusy, err)))
		return
	}
	s.Served++
	s.push(req.Flow, changed, req.Mode)
	if req.Mode != shard.Sync {
		reply(resp, nil)
		return
	}
	// Sync: answer once the flow is on disk — reads too, so that no
	// client is ever shown a value a crash could still take back.
	s.sh.WhenDurable(req.Flow, func(err error) {
		if err != nil {
			reply(Response{}, unavailable(fmt.Errorf("%w: %v", ErrDisk, err)))
			return
		}
		reply(resp, nil)
	})
}

// mayServe is the owner's checks after the caller's m_idx, in order: it
// is the owner; no newer owner has fenced the flow; it is not isolated
// (D-17); it has adopted the flow at this m_idx. Whatever writes a flow as
// its owner (a request, an eviction) passes them first.
func (s *Store) mayServe(flow string) error {
	switch {
	case ownerOf(s.ring, flow) != s.env.ID:
		return ErrNotOwner
	case !s.cfg.Bugs.NoFence && s.fencedAt[flow] > s.mIdx:
		return fmt.Errorf("%w: a newer owner adopted it at %d", ErrFenced, s.fencedAt[flow])
	case !s.cfg.Bugs.NoD17 && s.env.Ctl.IsIsolated():
		return ErrIsolated
	case !s.cfg.Bugs.NoAdoption && s.adopted[flow] != s.mIdx && !(s.cfg.Bugs.StaleAdoption && s.adopted[flow] != 0):
		return ErrNotAdopted
	}
	return nil
}

// apply runs req against this node's copy. It returns the answer, the
// keys a write changed, stamped with the next fencing tuple (the caller
// commits them), and, for a read, the latest expiry of an entry it hid
// because it had expired (0 if none). With readOnly it refuses to write.
func (s *Store) apply(req Request, readOnly bool) (resp Response, changed map[string]Value, hiddenMs int64, err error) {
	f := s.sh.Get(req.Flow)
	// One instant for the whole operation: a set-all's keys expire
	// together, and a get-all sees one moment of the flow.
	nowMs := s.now().UnixMilli()
	reads := req.Op == OpGet || req.Op == OpGetAll
	get := func(key string) (Value, bool) {
		v, ok := f[key]
		if ok && !v.Tomb && v.ExpiresAtMs != 0 && nowMs >= v.ExpiresAtMs {
			if reads {
				hiddenMs = max(hiddenMs, v.ExpiresAtMs)
			}
			return v, false
		}
		if !ok || v.Tomb {
			return v, false
		}
		return v, true
	}
	if readOnly && req.Op.writes() {
		return Response{}, nil, 0, fmt.Errorf("%w: local reads only", ErrBadRequest)
	}
	changed = map[string]Value{}
	write := func(key string, data []byte, tomb bool, ttlMs int64) {
		prev := f[key]
		v := Value{Data: append([]byte(nil), data...), Tomb: tomb, Tuple: s.nextTuple(prev.Tuple)}
		if ttlMs == 0 {
			ttlMs = s.cfg.DefaultTTLMs
		}
		v.ExpiresAtMs = nowMs
		if !tomb {
			v.ExpiresAtMs += ttlMs
		}
		changed[key] = v
	}
	if req.Op.writes() && req.Op != OpClear && req.Op != OpDelete {
		// A flow is a small map: bounded so that its copy always fits one
		// frame (adoption and anti-entropy send flows whole).
		added := 0
		if _, exists := f[req.Key]; req.Op != OpSetAll && !exists {
			added = 1
		}
		for k := range req.Entries { //fenceline:unordered counting
			if _, exists := f[k]; !exists {
				added++
			}
		}
		if added > 0 && len(f)+added > s.cfg.MaxFlowKeys {
			return Response{}, nil, 0, fmt.Errorf("%w: flow %s has %d keys; %d more is over the most a flow may hold, %d", ErrBadRequest, req.Flow, len(f), added, s.cfg.MaxFlowKeys)
		}
	}
	switch req.Op {
	case OpGet:
		v, ok := get(req.Key)
		resp.Found = ok
		if ok {
			resp.Value = v.Data
		}
	case OpGetAll:
		resp.All = map[string][]byte{}
		for _, k := range sortedKeys(f) {
			if v, ok := get(k); ok {
				resp.All[k] = v.Data
			}
		}
	case OpSet:
		write(req.Key, req.Value, false, req.TTLMs)
		resp.Succeeded = true
	case OpDelete:
		v, ok := get(req.Key)
		resp.Found = ok
		_ = v
		if ok {
			write(req.Key, nil, true, 0)
		}
	case OpCas:
		v, ok := get(req.Key)
		if (req.ExpectAbsent && !ok) || (!req.ExpectAbsent && ok && string(v.Data) == string(req.Expect)) {
			write(req.Key, req.Value, false, req.TTLMs)
			resp.Succeeded = true
		}
	case OpIncr:
		var cur int64
		if v, ok := get(req.Key); ok {
			n, err := strconv.ParseInt(string(v.Data), 10, 64)
			if err != nil {
				return Response{}, nil, 0, fmt.Errorf("%w: %q", ErrNotInteger, v.Data)
			}
			cur = n
		}
		resp.Int = cur + req.Delta
		write(req.Key, []byte(strconv.FormatInt(resp.Int, 10)), false, req.TTLMs)
	case OpClear:
		for _, k := range sortedKeys(f) {
			if _, ok := get(k); ok {
				write(k, nil, true, 0)
			}
		}
		resp.Succeeded = true
	case OpSetAll:
		for _, k := range sortedKeys(req.Entries) {
			write(k, req.Entries[k], false, req.TTLMs)
		}
		resp.Succeeded = true
	}
	return resp, changed, hiddenMs, nil
}

// commit writes changed keys to the shard in mode, with the flow's
// metadata if it changed. It fails, changing nothing, when the shard
// refuses (its writer is full, or its disk failed).
func (s *Store) commit(flow string, changed map[string]Value, mode shard.Mode) error {
	if len(changed) == 0 {
		return nil // a read: nothing to write, not even the note
	}
	return s.sh.Put(flow, changed, s.metaFor(flow), mode)
}

// metaFor returns the flow's metadata to store if it differs from what
// the shard holds: the m_idx at which this node last served it.
func (s *Store) metaFor(flow string) []byte {
	at := s.servedAt[flow]
	if at == 0 {
		return nil
	}
	if m, _, ok := s.sh.Meta(flow); ok && decodeServed(m) == at {
		return nil
	}
	return encodeServed(at)
}

// repairMode is how a copy that arrives to repair another is written: a
// none flow stays in memory; every other is written async, because its
// source still holds it and the next round (or adoption) repeats it. A
// replica's fsync adds nothing an owner's sync write relies on: the owner
// answers after its own.
func repairMode(m shard.Mode) shard.Mode {
	if m == shard.None {
		return shard.None
	}
	return shard.Async
}

// merge keeps, key by key, the value with the larger fencing tuple. It is
// the only way a copy from elsewhere enters the shard. A merge the shard
// refuses is dropped: anti-entropy repeats it.
func (s *Store) merge(flow string, in map[string]Value, mode shard.Mode) {
	if len(in) == 0 {
		return
	}
	f := s.sh.Peek(flow)
	// A flow this node serves took every copy it will ever take when it
	// adopted it; a copy from an older membership arriving later (a late
	// answer, a deposed owner's push in flight) would bring back what a
	// lossy adoption dropped, so it is refused.
	floor := uint64(0)
	if at, ok := s.adopted[flow]; ok && at == s.mIdx {
		floor = at
	} else if a := s.adopting[flow]; a != nil && a.committing && a.m == s.mIdx {
		floor = a.m // adopted, waiting only for its fsync
	}
	changed := map[string]Value{}
	for _, k := range sortedKeys(in) {
		if in[k].Tuple.MIdx < floor {
			continue
		}
		if cur, ok := f[k]; !ok || cur.Tuple.Less(in[k].Tuple) {
			changed[k] = in[k]
		}
	}
	if len(changed) > 0 && s.commit(flow, changed, mode) == nil {
		s.Merged += uint64(len(changed))
	}
}

// evict is the shard's hook for a flow over the cap. The owner serving
// the flow evicts it for the whole cluster: it deletes every key with
// tombstones and pushes them, as a clear would, so that no copy brings
// the flow back through anti-entropy or a later adoption. Any other node
// drops its copy only; the owner's copy is the authority, and anti-entropy
// sends it back if the owner still holds it.
//
// The owner writes only as it may serve (mayServe). A flow it may not
// write right now is kept (the shard counts it again): one being adopted
// (dropping it would throw away the copies gathered), one a newer owner
// has fenced, one whose owner is isolated (D-17), or one the writer has
// no room for. Dropping any of those on the owner alone would let a
// replica's copy return later.
func (s *Store) evict(flow string) {
	if s.stopped || s.adopting[flow] != nil {
		return
	}
	switch err := s.mayServe(flow); {
	case errors.Is(err, ErrNotOwner), errors.Is(err, ErrNotAdopted):
		s.Evicted++
		s.sh.Drop(flow) // not this node's to serve: its copy only
		return
	case err != nil:
		return
	}
	f := s.sh.Peek(flow)
	_, mode, _ := s.sh.Meta(flow)
	now := s.now().UnixMilli()
	changed := map[string]Value{}
	for _, k := range sortedKeys(f) {
		if !f[k].Tomb {
			changed[k] = Value{Tomb: true, Tuple: s.nextTuple(f[k].Tuple), ExpiresAtMs: now}
		}
	}
	if s.commit(flow, changed, mode) == nil {
		s.push(flow, changed, mode)
		s.Evicted++
	}
}

// dropped forgets what the store kept about a flow the shard removed,
// unless this node serves it (its note that it did is its authority).
func (s *Store) dropped(flow string) {
	if s.adopted[flow] == s.mIdx && ownerOf(s.ring, flow) == s.env.ID {
		return
	}
	delete(s.adopted, flow)
	delete(s.servedAt, flow)
	delete(s.reconciled, flow)
}

// now is the node's wall clock, clamped by the shard so it never goes
// back: an entry a read saw expire stays expired after a clock step.
func (s *Store) now() time.Time {
	if s.nowForTest != nil {
		return s.nowForTest()
	}
	return time.UnixMilli(s.sh.NowMs())
}

// Copy returns this node's copy of a flow, tombstones and tuples included,
// for checkers.
func (s *Store) Copy(flow string) map[string]Value {
	out := map[string]Value{}
	for k, v := range s.sh.Peek(flow) { //fenceline:unordered copying into a map
		out[k] = v
	}
	return out
}

// ID is this node's id.
func (s *Store) ID() dial.NodeID { return s.env.ID }

// Flows returns the ids of every flow this node holds a copy of, sorted.
func (s *Store) Flows() []string { return s.sh.Flows() }

// Shard returns the node's FlowShard counters and how many live flows it
// holds, for scenarios and benchmarks.
func (s *Store) Shard() (shard.Stats, int) { return s.sh.Stats(), s.sh.Live() }

// MIdx is the membership index this store works at.
func (s *Store) MIdx() uint64 { s.refresh(); return s.mIdx }

// Owner returns the owner of flow at this node's membership.
func (s *Store) Owner(flow string) (dial.NodeID, bool) {
	s.refresh()
	return s.ring.Owner(ring.ClassFlow, flow)
}

// Placement returns the owner and successors of flow at this node's
// membership.
func (s *Store) Placement(flow string) []dial.NodeID {
	s.refresh()
	return s.ring.Placement(ring.ClassFlow, flow).Nodes()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedFlows[V any](m map[string]V) []string { return sortedKeys(m) }

// Adopted reports whether this node serves flow at its current membership
// (it owns it and has adopted it).
func (s *Store) Adopted(flow string) bool {
	s.refresh()
	return s.adopted[flow] == s.mIdx && ownerOf(s.ring, flow) == s.env.ID
}

// nextTuple is the tuple of a write over prev: this m_idx, a counter above
// prev's and above this incarnation's floor (Epoch<<32), this node.
func (s *Store) nextTuple(prev Tuple) Tuple {
	floor := s.env.Epoch << 32
	if prev.MIdx != s.mIdx {
		// A counter from another m_idx says nothing about this one: start
		// at this incarnation's floor, so two incarnations never issue
		// the same tuple.
		return Tuple{MIdx: s.mIdx, V: floor + 1, Origin: s.env.ID}
	}
	return Tuple{MIdx: s.mIdx, V: max(prev.V, floor) + 1, Origin: s.env.ID}
}
