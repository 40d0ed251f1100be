package flow

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/fleet"
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
	// ContactSince is the monotonic instant from which this node has been
	// in unbroken contact with the leader it follows, or has led in its
	// term. Before it, the node may have been cut off, stopped, or
	// following another leader, and may hold a membership two changes
	// old: D-17 lets it serve again as soon as it hears a leader.
	ContactSince() time.Duration
	// Confirm answers once this node has applied everything committed
	// when it was called, as a quorum confirms (a ReadIndex barrier).
	// Errors mean only "no answer".
	Confirm(done func(error))
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

// Fleet is the fleet of raft groups this node's group belongs to, as the
// store needs it (core/fleet): a flow whose partition another group
// holds is sent to that group's owner, never served here.
type Fleet interface {
	// Group is this node's group.
	Group() int
	// Directory is the group directory in force, as this node last
	// applied it from the control group; nil while it has none, when
	// every flow is refused.
	Directory() *fleet.Directory
	// Fences is what this node's group's own log has fenced of the
	// partitions moving out of it (fleet.Fences), as this node last
	// applied it.
	Fences() fleet.Fences
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
	// Worker runs the shard's backend calls beside the loop (shard.Worker);
	// nil: on the loop.
	Worker shard.Worker
	// Fleet, when set, places this node's group in a fleet of several;
	// nil: the group is the whole fleet and holds every flow.
	Fleet Fleet
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
	// issued is the largest write counter this incarnation stamped
	// (nextTuple): each write's counter is above it, so no two writes of
	// an incarnation share a tuple.
	issued uint64
	// recovered: this is not the node's first boot, so its copies came
	// from disk and may lack the async writes its crash lost; reconciled
	// marks the flows adopted since, whose copies are whole again.
	recovered  bool
	reconciled map[string]bool
	inflight   map[servedKey]bool // requests being served (a sync write waits for its fsync)

	permits int
	nextID  uint64
	localID uint64           // numbers the calls served here (fileLocal)
	session uint64           // drawn at boot: tells this incarnation's request ids apart
	calls   map[uint64]*call // calls waiting: sent to owners, or served here, by id

	served      map[servedKey]msg // answers given, for duplicate requests
	servedOrder []servedKey       // oldest first

	mIdx     uint64
	voters   []dial.NodeID
	ring     ring.Ring
	prevRing ring.Ring // the membership before mIdx, as this node saw it
	havePrev bool
	adopted  map[string]uint64 // flow -> m_idx at which this node adopted it
	servedAt map[string]uint64 // flow -> the latest m_idx at which this node served it (never forgotten)
	prevMIdx uint64            // the membership index before mIdx, as this node saw it
	adopting map[string]*adoption
	// move is the copy of a partition move this node drives (move.go);
	// nil when none.
	move *mover
	// mIdxSince is when this store first saw mIdx in force (its
	// monotonic clock): an adoption's wait counts from there.
	mIdxSince time.Duration
	fencedAt  map[string]uint64 // flow -> m_idx a newer owner announced while adopting it
	// confirmedAt is when the last confirmation that this node's
	// membership is current was asked for (its monotonic clock; valid
	// only with confirmed): it holds while contact lasts from before it.
	confirmedAt  time.Duration
	confirmed    bool
	confirming   bool            // a confirmation is in flight,
	confirmingAt time.Duration   // asked for then
	awaiting     []func(ok bool) // requests held until it answers (await)
	awaitT       clock.Timer     // refuses them if it has not, by then
	aeTimer      clock.Timer
	aeCursor     int // where the next anti-entropy answer starts in its list
	stopped      bool

	// Counters, for scenarios and benchmarks.
	Shed, Served, Pushed, Merged, Pruned, Adoptions, AERounds, BadFrames, Evicted, Released uint64
}

type call struct {
	id      uint64      // its key in Store.calls while it waits; 0 if answered at once
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
	sh, err := shard.Open[Value](cfg.Shard, shard.Env{Clock: env.Clock, Backend: env.Backend, Worker: env.Worker}, valueCodec{})
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
		for _, f := range slices.Sorted(maps.Keys(s.servedAt)) {
			if s.servedAt[f] == s.mIdx && s.ownerOf(s.ring, f) == s.env.ID {
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
	s.StopMove()
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
	s.mIdxSince = s.env.Clock.Mono()
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
		wasOwner := old.Len() > 0 && s.ownerOf(old, f) == s.env.ID
		if carry && at == oldM && wasOwner && s.ownerOf(s.ring, f) == s.env.ID {
			s.adopted[f] = m
			s.servedAt[f] = m
		} else if !s.cfg.Bugs.StaleAdoption {
			delete(s.adopted, f)
		}
	}
}

// elsewhere reports whether flow's partition is another group's, by the
// directory in force (returned; nil when the node has none yet, when no
// flow is this group's to serve).
func (s *Store) elsewhere(flow string) (*fleet.Directory, bool) {
	if s.env.Fleet == nil || s.cfg.Bugs.GroupBlind {
		return nil, false
	}
	d := s.env.Fleet.Directory()
	return d, d == nil || !d.Holds(s.env.Fleet.Group(), flow)
}

// holds is the owner's check that its group holds flow's partition: a
// node of another group never serves it, not even when a caller with an
// older directory sent it here.
func (s *Store) holds(flow string) error {
	switch d, away := s.elsewhere(flow); {
	case !away && d != nil && !s.cfg.Bugs.RouteStaleEpoch:
		// The directory gives the partition to this group since e; the
		// group's own log may have fenced a move of it since (a
		// directory that lags the control group's): then it moves.
		if _, e := d.HolderOf(flow); s.env.Fleet.Fences().AtKey(flow) >= e {
			return fmt.Errorf("%w: fenced by this group's log at epoch %d or later", fleet.ErrMoving, e)
		}
		return nil
	case !away:
		return nil
	case d == nil:
		return fmt.Errorf("%w: no group directory yet", fleet.ErrElsewhere)
	default:
		return fmt.Errorf("%w: directory epoch %d", fleet.ErrElsewhere, d.Epoch())
	}
}

// admit is the receiver's check of a request another group routed here
// with epoch (fleet.Directory.Admit).
//
// A node in no fleet has no directory either: another group's request
// is refused there too, and a node with no directory yet cannot vouch
// for any route.
func (s *Store) admit(flow string, epoch uint64) error {
	var d *fleet.Directory
	if s.env.Fleet != nil {
		d = s.env.Fleet.Directory()
	}
	if d == nil {
		return fmt.Errorf("%w: no group directory here", fleet.ErrAhead)
	}
	return d.Admit(s.env.Fleet.Group(), flow, epoch)
}

// ownerOf is flow's owner in r: the top of its rendezvous placement; 0
// when r has no voters.
func (s *Store) ownerOf(r ring.Ring, flow string) dial.NodeID {
	if s.cfg.Bugs.ModuloOwner && r.Len() > 0 {
		// The planted bug: the voter the flow's hash picks, modulo the
		// voters' count, in id order.
		v := r.Voters()
		slices.Sort(v)
		return v[xxhash.Sum64String(flow)%uint64(len(v))]
	}
	id, _ := r.Owner(ring.ClassOf(flow), flow)
	return id
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

// PermitsInUse is how many of the bridge's permits calls hold now.
func (s *Store) PermitsInUse() int { return s.cfg.Permits - s.permits }

// Flows returns the ids of every flow this node holds a copy of, sorted.
func (s *Store) Flows() []string { return s.sh.Flows() }

// Shard returns the node's FlowShard counters and how many live flows it
// holds, for scenarios and benchmarks.
func (s *Store) Shard() (shard.Stats, int) { return s.sh.Stats(), s.sh.Live() }

// MIdx is the membership index in force at this node: the one the store
// works at from its next step. Like every getter here it changes nothing:
// a checker that asks must not move the store along.
func (s *Store) MIdx() uint64 { return s.env.Ctl.Membership().Index }

// Owner returns the owner of flow under the membership in force at this
// node; in a fleet, for a flow another group holds, its owner by the
// directory (none while the node has no directory).
func (s *Store) Owner(flow string) (dial.NodeID, bool) {
	if d, away := s.elsewhere(flow); away {
		if d == nil {
			return 0, false
		}
		id := d.Resolve(flow).Owner
		return id, id != 0
	}
	id := s.ownerOf(s.ringNow(), flow)
	return id, id != 0
}

// Placement returns the owner and successors of flow under the membership
// in force at this node.
func (s *Store) Placement(flow string) []dial.NodeID {
	return s.ringNow().Placement(ring.ClassOf(flow), flow).Nodes()
}

// ringNow is the ring of the membership in force, without refreshing.
func (s *Store) ringNow() ring.Ring {
	if ms := s.env.Ctl.Membership(); ms.Index != s.mIdx || len(ms.Voters) != s.ring.Len() {
		return ring.New(ms.Voters)
	}
	return s.ring
}

func sortedFlows[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Adopted reports whether this node serves flow at the membership in
// force (it owns it and has adopted it). A store that has not yet taken a
// step under that membership has adopted nothing under it.
func (s *Store) Adopted(flow string) bool {
	if s.MIdx() != s.mIdx {
		return false
	}
	return s.adopted[flow] == s.mIdx && s.ownerOf(s.ring, flow) == s.env.ID
}

// nextTuple is the tuple of a write over prev in era (Store.era): this
// m_idx, a counter above this incarnation's floor (Epoch<<32), above
// every counter it issued before, and above prev's, this node. The
// floor keeps two incarnations from issuing one tuple; the counter
// issued keeps two writes of one incarnation apart even where prev says
// nothing (a key whose earlier write was purged after its grace, or
// evicted with its flow: the key's next write restarted at the floor,
// and a replica still holding the old write took the new one for it).
// A write of many keys stamps them in key order: the counter makes the
// order reach the tuples.
func (s *Store) nextTuple(era uint64, prev Tuple) Tuple {
	v := max(s.issued, s.incarnationFloor())
	if s.cfg.Bugs.KeyCounter {
		v = s.incarnationFloor()
	}
	if prev.MIdx == s.mIdx && prev.Era == era {
		// A counter from another m_idx or era says nothing about this
		// one: the tuple outranks it by its m_idx or era already.
		v = max(v, prev.V)
	}
	s.issued = v + 1
	return Tuple{Era: era, MIdx: s.mIdx, V: s.issued, Origin: s.env.ID}
}

// incarnationFloor is the counter this incarnation's tuples are issued
// above (nextTuple), room for 2^32 writes an incarnation. It is also the
// merge floor's counter (merge): every tuple at an m_idx that this
// incarnation did not stamp is below it, which holds only while the two
// are one number, so both read it here.
func (s *Store) incarnationFloor() uint64 { return s.env.Epoch << 32 }

// era is the era this node's group writes flow in (Tuple): 0 outside a
// fleet and while the directory holds its partition where the table first
// put it, otherwise the epoch at which the directory assigned it here.
func (s *Store) era(flow string) uint64 {
	if s.env.Fleet == nil {
		return 0
	}
	if d := s.env.Fleet.Directory(); d != nil {
		return d.EraOf(flow)
	}
	return 0
}
