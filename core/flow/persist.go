package flow

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/fenceline/fenceline/core/shard"
)

// This file: the glue to the FlowShard: committing changes, merging
// copies, eviction over the cap, and the clamped clock.

// commit writes changed keys to the shard in mode, with the flow's
// metadata if it changed. It fails, changing nothing, when the shard
// refuses (its writer is full, or its disk failed).
func (s *Store) commit(flow string, changed map[string]Value, mode shard.Mode) error {
	return s.commitVia(s.sh.Put, flow, changed, mode)
}

// commitVia is commit through put: the shard's Put, or its PutReplica for
// a push, which a full queue does not refuse.
func (s *Store) commitVia(put func(string, map[string]Value, []byte, shard.Mode) error, flow string, changed map[string]Value, mode shard.Mode) error {
	if len(changed) == 0 {
		return nil // a read: nothing to write, not even the note
	}
	return put(flow, changed, s.metaFor(flow), mode)
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
func (s *Store) repairMode(m shard.Mode) shard.Mode {
	if s.cfg.Bugs.RepairToDisk {
		return shard.Async
	}
	if m == shard.None {
		return shard.None
	}
	return shard.Async
}

// merge keeps, key by key, the value with the larger fencing tuple. It is
// the only way a copy from elsewhere enters the shard. A merge the shard
// refuses (its writer full) changes nothing and says so: a repair may
// drop it, because anti-entropy repeats it, but an adoption must not
// count the copy as heard.
func (s *Store) merge(flow string, in map[string]Value, mode shard.Mode) error {
	return s.mergeVia(s.sh.Put, flow, in, mode)
}

// mergePush is merge for an owner's push. The owner has answered its
// client and counts this copy among the write's holders (the async
// promise), so the shard takes it even with its writer's queue full
// (PutReplica): a push refused there left the write one copy short until
// anti-entropy came round, and a crash of the others meanwhile lost it.
func (s *Store) mergePush(flow string, in map[string]Value, mode shard.Mode) error {
	return s.mergeVia(s.sh.PutReplica, flow, in, mode)
}

func (s *Store) mergeVia(put func(string, map[string]Value, []byte, shard.Mode) error, flow string, in map[string]Value, mode shard.Mode) error {
	if len(in) == 0 {
		return nil
	}
	f := s.sh.Peek(flow)
	// A flow this node serves took every copy it will ever take when it
	// adopted it; a copy stamped before the adoption arriving later (a
	// late answer, a deposed owner's push in flight, a replica's copy of
	// what this node wrote at this same m_idx before a restart) would bring
	// back what a lossy adoption dropped, so it is refused. Only the owner
	// at an m_idx stamps tuples of it, and each incarnation from its own
	// floor up (nextTuple): every tuple this incarnation did not stamp
	// since it adopted is below (m_idx, its floor). (With the m_idx alone
	// as the floor, a restarted owner that adopted without the replica
	// holding its earlier write served the flow without it, then took the
	// replica's late copy and served it with: imposter-scenarios seed 312.)
	var floor Tuple
	if at, ok := s.adopted[flow]; ok && at == s.mIdx {
		floor = Tuple{Era: s.era(flow), MIdx: at, V: s.incarnationFloor()}
	} else if a := s.adopting[flow]; a != nil && a.committing && a.m == s.mIdx {
		floor = Tuple{Era: s.era(flow), MIdx: a.m, V: s.incarnationFloor()} // adopted, waiting only for its fsync
	}
	// The copy is written whole when every key of it is newer (a push,
	// mostly): the shard only reads the map it is handed, so in serves.
	taken := 0
	for k, v := range in { //fenceline:unordered counting
		if cur, ok := f[k]; !v.Tuple.Less(floor) && (!ok || cur.Tuple.Less(v.Tuple)) {
			taken++
		}
	}
	changed := in
	if taken < len(in) {
		changed = make(map[string]Value, taken)
		for k, v := range in { //fenceline:unordered fills changed, key by key
			if v.Tuple.Less(floor) {
				continue
			}
			if cur, ok := f[k]; !ok || cur.Tuple.Less(v.Tuple) {
				changed[k] = v
			}
		}
	}
	if err := s.commitVia(put, flow, changed, mode); err != nil {
		return err
	}
	s.Merged += uint64(len(changed))
	return nil
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
	era := s.era(flow)
	changed := map[string]Value{}
	for _, k := range slices.Sorted(maps.Keys(f)) {
		if !f[k].Tomb {
			changed[k] = Value{Tomb: true, Tuple: s.nextTuple(era, f[k].Tuple), ExpiresAtMs: now}
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
	if s.adopted[flow] == s.mIdx && s.ownerOf(s.ring, flow) == s.env.ID {
		return
	}
	delete(s.adopted, flow)
	delete(s.servedAt, flow)
	delete(s.reconciled, flow)
}

// now is the node's wall clock, clamped by the shard so it never goes
// back: an entry a read saw expire stays expired after a clock step.
func (s *Store) now() time.Time {
	return time.UnixMilli(s.sh.NowMs())
}
