package flow

import (
	"fmt"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/dial"
)

// This file: the bounded bridge from a caller to the owner: a permit or
// shed at once, the deadline, and the one RPC to a remote owner.

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
	dir, away := s.elsewhere(req.Flow)
	if req.Read == Local && (req.Op == OpGet || req.Op == OpGetAll) && !away {
		// (Another group's flow has no copy here: its reads go to its
		// owner, a stronger read than the one asked for.)
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
	if away {
		s.callElsewhere(c, dir, req)
		return
	}
	owner := s.ownerOf(s.ring, req.Flow)
	switch {
	case owner == 0:
		s.settle(c, Response{}, unavailable(ErrNoOwner))
	case owner == s.env.ID:
		s.fileLocal(c)
		s.serve(s.mIdx, req, func(resp Response, err error) { s.settle(c, resp, err) })
	default:
		err := s.call(c, owner, msg{Kind: FrameOp, M: s.mIdx, Req: &req})
		if err != nil && s.cfg.Bugs.LocalFallback {
			// The planted bug: degrade to the local copy, the fork the
			// design exists to prevent.
			resp, changed, _, aerr := s.apply(req, false)
			_ = s.commit(req.Flow, changed, req.Mode)
			s.settle(c, resp, aerr)
			return
		}
		s.sendFailed(c, err)
	}
}

// callElsewhere sends req to its owner in the group that holds its
// partition, by the directory dir, with the epoch and the group's
// membership index it was routed by: one hop, and the owner's checks
// (admit, then its own m_idx fence) refuse it if either has moved. No
// directory is a refusal.
func (s *Store) callElsewhere(c *call, dir *fleet.Directory, req Request) {
	if dir == nil {
		s.settle(c, Response{}, unavailable(fmt.Errorf("%w: no group directory yet", ErrNoOwner)))
		return
	}
	r := dir.Resolve(req.Flow)
	if r.Moving {
		// No group serves it until its move publishes it: refused here,
		// rather than by the group it leaves, a hop later.
		s.settle(c, Response{}, unavailable(fmt.Errorf("%w: since epoch %d", fleet.ErrMoving, r.Epoch)))
		return
	}
	s.sendFailed(c, s.call(c, r.Owner, msg{Kind: FrameGroupOp, M: r.MIdx, Epoch: r.Epoch, Req: &req}))
}

// call sends m, a request, to the owner to as c's RPC: c waits for its
// answer only if it went (no answer can come before Send returns: it
// comes on the loop, later). The send's error is returned.
func (s *Store) call(c *call, to dial.NodeID, m msg) error {
	s.nextID++
	m.ID, m.Session = s.nextID, s.session
	if err := s.send(to, m); err != nil {
		return err
	}
	c.id, c.to = m.ID, to
	s.calls[c.id] = c
	return nil
}

// fileLocal files a call this node serves itself among the calls
// waiting, so that Stop answers it too: an owner's call may wait for an
// adoption, a floor or an fsync, and an orderly stop answers every caller
// (only a crash leaves one to its deadline). Its id has the top bit set,
// so no answer frame, whose ids are nextID's, can name it; nor can its
// owner, 0, match a sender.
func (s *Store) fileLocal(c *call) {
	if s.cfg.Bugs.StopForgetsLocal {
		return // the planted bug: Stop answers only the calls sent to owners
	}
	s.localID++
	c.id = 1<<63 | s.localID
	s.calls[c.id] = c
}

// sendFailed settles c unavailable if its request could not be sent
// (err, from call); known not applied.
func (s *Store) sendFailed(c *call, err error) {
	if err != nil {
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
	if c.id != 0 {
		delete(s.calls, c.id)
	}
	s.permits++
	c.done(resp, err)
}
