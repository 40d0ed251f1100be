package flow

import (
	"fmt"

	"github.com/fenceline/fenceline/core/ring"
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
	owner, ok := s.ring.Owner(ring.ClassOf(req.Flow), req.Flow)
	switch {
	case !ok:
		s.settle(c, Response{}, unavailable(ErrNoOwner))
	case owner == s.env.ID:
		s.serve(s.mIdx, req, func(resp Response, err error) { s.settle(c, resp, err) })
	default:
		s.nextID++
		id := s.nextID
		c.id, c.to = id, owner
		s.calls[id] = c
		err := s.send(owner, msg{Kind: FrameOp, ID: id, Session: s.session, M: s.mIdx, Req: &req})
		if err == nil {
			return
		}
		delete(s.calls, id)
		c.id = 0
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
	if c.id != 0 {
		delete(s.calls, c.id)
	}
	s.permits++
	c.done(resp, err)
}
