package flow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/fenceline/fenceline/core/shard"
)

// This file: the owner path: the owner's checks, in order, then apply
// and answer.

// serve is the owner's side of an operation: its checks, in order, each
// with its own refusal, then apply, stamp, write, push, answer.
func (s *Store) serve(callerM uint64, req Request, reply func(Response, error)) {
	s.refresh()
	if !s.cfg.Bugs.NoFence && callerM != s.mIdx {
		reply(Response{}, unavailable(fmt.Errorf("%w: caller at %d, owner at %d", ErrFenced, callerM, s.mIdx)))
		return
	}
	err := s.mayServe(req.Flow)
	if err == errUnconfirmed && s.await(func(ok bool) {
		if !ok {
			reply(Response{}, unavailable(errUnconfirmed))
			return
		}
		s.serve(callerM, req, reply)
	}) {
		return
	}
	if errors.Is(err, ErrNotAdopted) {
		// Refused, known not applied; the caller may ask again once the
		// adoption is done. A flow nobody holds, in a cluster whose
		// membership has not changed lately, is adopted at once when
		// there is nobody to ask.
		s.startAdoption(req.Flow, req.Mode)
		err = s.mayServe(req.Flow)
	}
	if err != nil {
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
				reply(Response{}, waitFailed(ferr))
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
			s.sh.WhenDurable(req.Flow, func(werr error) {
				if werr != nil {
					reply(Response{}, waitFailed(werr))
					return
				}
				reply(resp, err)
			})
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
			reply(Response{}, waitFailed(err))
			return
		}
		reply(resp, nil)
	})
}

// waitFailed is the answer to a request whose durability wait failed:
// the disk did not answer within the shard's MaxWait (a stalled disk;
// the write may still reach it), or it failed (the node stops). Either
// way the outcome is unknown.
func waitFailed(err error) error {
	if errors.Is(err, shard.ErrWaitTimeout) {
		return unavailable(ErrDiskSlow)
	}
	return unavailable(fmt.Errorf("%w: %v", ErrDisk, err))
}

// mayServe is the owner's checks after the caller's m_idx, in order: its
// group holds the flow's partition (core/fleet); it is the owner; no newer owner has fenced the flow; it is not isolated
// (D-17); it has adopted the flow at this m_idx. Whatever writes a flow as
// its owner (a request, an eviction) passes them first.
func (s *Store) mayServe(flow string) error {
	if err := s.holds(flow); err != nil {
		return err
	}
	switch {
	case s.ownerOf(s.ring, flow) != s.env.ID:
		return ErrNotOwner
	case !s.cfg.Bugs.NoFence && s.fencedAt[flow] > s.mIdx:
		return fmt.Errorf("%w: a newer owner adopted it at %d", ErrFenced, s.fencedAt[flow])
	case !s.cfg.Bugs.NoD17 && s.env.Ctl.IsIsolated():
		return ErrIsolated
	case !s.cfg.Bugs.UnconfirmedOwner && !s.current():
		return errUnconfirmed
	case !s.cfg.Bugs.NoAdoption && s.adopted[flow] != s.mIdx && !(s.cfg.Bugs.StaleAdoption && s.adopted[flow] != 0):
		return ErrNotAdopted
	}
	return nil
}

// current reports that this node has confirmed, since its contact with its
// leader last began, that the membership it serves under is current, and
// asks for that confirmation when it has not. D-17 stops an owner that is
// cut off; it does not stop one that hears its leader again before it has
// applied what was committed meanwhile. Such a node (back from a
// partition, restarted, or following a new leader) may hold the
// membership under which it owned a flow while two changes moved the flow
// to another owner, who served it, and back: it would serve its old copy
// at its old membership, to its own clients, and the writes the other
// owner took would win over what it answered (ownership-returns, whose
// lagger is cut off while the spare goes in and out). Once a barrier
// asked for after contact began has answered, this node has applied every
// membership committed before it asked, and from then on it hears each
// new one within its isolation window, as D-17 assumes. So does a node
// whose contact has lasted AdoptWait, by the assumption the adoption wait
// already makes. Until then it refuses as an isolated owner does (serve
// first holds the request for the barrier's answer: await).
func (s *Store) current() bool {
	since := s.env.Ctl.ContactSince()
	if s.confirmed && s.confirmedAt >= since {
		return true
	}
	if s.env.Clock.Mono()-since >= s.cfg.AdoptWait {
		// Contact unbroken for AdoptWait: the leader has had that long
		// to bring this node every entry committed before it began,
		// which the adoption wait already assumes of a reachable node.
		// A node too far for a barrier to come back within the proposal
		// timeout still serves (bridge-saturation's owner, 0.2 to 0.9 s
		// away each way, never had one answered).
		return true
	}
	// One barrier at a time, unless the one in flight was asked for
	// before this contact began: it cannot count, and waiting for it to
	// time out would keep the owner refusing for a proposal timeout. So
	// at most one is asked for per contact, and contacts begin an
	// isolation window apart at the closest.
	if !s.confirming || s.confirmingAt < since {
		at := s.env.Clock.Mono()
		s.confirming, s.confirmingAt = true, at
		s.env.Ctl.Confirm(func(err error) {
			if err == nil && (!s.confirmed || at > s.confirmedAt) {
				s.confirmed, s.confirmedAt = true, at
			}
			// Only the latest confirmation releases what it holds: an
			// older one cannot count for the contact now.
			if s.confirmingAt == at {
				s.confirming = false
				if !s.stopped {
					s.releaseAwaiting(err == nil)
				}
			}
		})
	}
	// A confirmation answered at once (a leader's own barrier may be)
	// counts for this call.
	return s.confirmed && s.confirmedAt >= since
}

// errUnconfirmed is mayServe's refusal while the owner confirms that its
// membership is current: D-17's, since the owner cannot yet tell that it
// is not cut off from the membership in force.
var errUnconfirmed = fmt.Errorf("%w: confirming that its membership is current", ErrIsolated)

// maxAwaiting bounds the requests an owner holds while it confirms that
// its membership is current; past it a request is refused at once.
const maxAwaiting = 1024

// await holds a request until the confirmation in flight answers (fn(true):
// serve it again, from the top) or fails (fn(false): refuse it), and at
// most a quarter of the call deadline (fn(false)), so the caller hears
// within its own. A confirmation takes a round trip to the leader; holding
// the request for it costs the caller that, where a refusal would cost it
// the call. It reports false, holding nothing, at the bound.
func (s *Store) await(fn func(ok bool)) bool {
	if s.stopped || len(s.awaiting) >= maxAwaiting {
		return false
	}
	s.awaiting = append(s.awaiting, fn)
	if s.awaitT == nil {
		s.awaitT = s.env.Clock.AfterFunc(s.cfg.Deadline/4, func() {
			s.awaitT = nil
			if !s.stopped {
				s.releaseAwaiting(false)
			}
		})
	}
	return true
}

// releaseAwaiting answers every held request: served again if ok, else
// refused.
func (s *Store) releaseAwaiting(ok bool) {
	if s.awaitT != nil {
		s.awaitT.Stop()
		s.awaitT = nil
	}
	held := s.awaiting
	s.awaiting = nil
	for _, fn := range held {
		fn(ok)
	}
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
		if ok && !v.Tomb && v.ExpiresAtMs != 0 && nowMs >= v.ExpiresAtMs && !s.cfg.Bugs.ReadExpired {
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
	// Made at the first write: a read changes nothing and returns nil.
	era := uint64(0)
	if req.Op.writes() {
		era = s.era(req.Flow)
	}
	write := func(key string, data []byte, tomb bool, ttlMs int64) {
		if changed == nil {
			changed = make(map[string]Value, max(1, len(req.Entries)))
		}
		prev := f[key]
		v := Value{Data: append([]byte(nil), data...), Tomb: tomb, Tuple: s.nextTuple(era, prev.Tuple)}
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
		resp.All = make(map[string][]byte, len(f))
		for k := range f { //fenceline:unordered fills a map; hiddenMs is a max: no order reaches the answer
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
		for _, k := range slices.Sorted(maps.Keys(f)) {
			if _, ok := get(k); ok {
				write(k, nil, true, 0)
			}
		}
		resp.Succeeded = true
	case OpSetAll:
		// In key order: each write's counter is above the one before it
		// (nextTuple), so the order reaches the tuples.
		for _, k := range slices.Sorted(maps.Keys(req.Entries)) {
			write(k, req.Entries[k], false, req.TTLMs)
		}
		resp.Succeeded = true
	}
	return resp, changed, hiddenMs, nil
}
