package imposter

import (
	"errors"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/routing"
)

// This file: serving one request to a stateful imposter, the same way in
// every world. The HTTP server runs it on real TCP with blocking calls;
// the simulator runs it on a node's loop with callbacks. The steps, in
// order:
//
//  1. name the request's flow (FlowOf);
//  2. in forward mode, decide where it is served (routing.Decide): here,
//     forwarded once to the owner, or refused;
//  3. here: read the flow's scenario states in one call (from the owner:
//     StateRead), match with them (RespondIn), and apply the matched
//     stub's transition (Apply) before answering.
//
// Any store failure is a 503 naming why, never an answer from a state the
// flow may not be in; a forward that fails is a 503 too.

// World is what serving a stateful request needs from where it runs.
// Each call's done runs exactly once.
type World interface {
	// Store runs one flow-store operation.
	Store(req flow.Request, done func(flow.Response, error))
	// OwnerOf names a flow's owner at this node's membership.
	OwnerOf(flow string, done func(routing.Owner, error))
	// Forward sends the request, once, with the loop guard, to the
	// owner's imposter on the same port; done gets the owner's answer,
	// or an error if none came.
	Forward(owner routing.Owner, done func(Outcome, error))
	// Engine runs f with the imposter, serialized with every other use
	// of it (the HTTP server holds the imposter's lock).
	Engine(f func(imp *Imposter))
	// Turn runs f once no other request of the imposter holds its
	// script section on this node (ServeScripted), until f calls
	// release; or gives err if the wait for it gave up.
	Turn(f func(release func(), err error))
}

// Route is how this node routes stateful requests, and this request.
type Route struct {
	Forward   bool     // RouteForward: whole requests go to the owner
	Forwarded bool     // this request carries the loop guard
	Bugs      bugs.Set // planted bugs (the simulator's)
}

// Served is a stateful request's answer.
type Served struct {
	Outcome Outcome
	// Final: the outcome needs no more work (a 503, or the owner's
	// answer to a forward); otherwise it may still be a proxy call.
	Final bool
	// Unavailable names why the answer is a 503 ("" if it is not).
	Unavailable string
	// Transition is the move the matched stub asked for, if any; Moved
	// says whether the store made it (a gated move lost to another
	// request is dropped).
	Transition *Transition
	Moved      bool
	// Forwarded: the owner served it.
	Forwarded bool
	// Cycled: the answer came from a shared cycle, at Place (the
	// cycle's counter after this request's step).
	Cycled bool
	Place  int64
}

// UnavailableHeader is on every 503 that flow state caused: why.
const UnavailableHeader = "X-Fenceline-Unavailable"

// Reasons of 503s besides the flow store's (flow.Reason).
const ReasonForwardFailed = "forward_failed"

// ErrForward is a forward that got no answer from the owner.
var ErrForward = errors.New("the forward to the flow's owner got no answer")

// UnavailableOutcome is the 503 a stateful request gets when its flow's
// state cannot be read or changed.
func UnavailableOutcome(reason string) Outcome {
	body := Marshal(NewObject().Set("errors", []any{(&Error{Code: "unavailable",
		Message: "flow state unavailable: " + reason}).Value()}), 0)
	return Outcome{StatusCode: 503, Body: body,
		Headers: []Header{{Name: "content-type", Values: []string{"application/json"}}, {Name: UnavailableHeader, Values: []string{reason}}}}
}

func unavailableServed(reason string) Served {
	return Served{Outcome: UnavailableOutcome(reason), Final: true, Unavailable: reason}
}

// ServeStateful serves r, a request to a stateful imposter, in w.
func ServeStateful(w World, rt Route, r *Request, done func(Served, error)) {
	var key string
	w.Engine(func(imp *Imposter) { key = imp.FlowOf(r) })
	if !rt.Forward {
		serveHere(w, rt, key, r, false, done)
		return
	}
	w.OwnerOf(key, func(owner routing.Owner, err error) {
		if err != nil {
			done(unavailableServed(flow.Reason(err)), nil)
			return
		}
		switch d := routing.Decide(routing.Input{Active: true, Forwarded: rt.Forwarded, HasFlow: true, Owner: owner}); d.Action {
		case routing.Refuse:
			done(unavailableServed(d.Reason), nil)
		case routing.Forward:
			w.Forward(owner, func(out Outcome, err error) {
				switch {
				case err == nil:
					done(Served{Outcome: out, Final: true, Forwarded: true}, nil)
				case rt.Bugs.ForwardFallback:
					serveHere(w, rt, key, r, true, done) // the planted bug: a local answer
				default:
					done(unavailableServed(ReasonForwardFailed), nil)
				}
			})
		default: // Serve, ServeFenced: here, each store call fenced at the owner
			serveHere(w, rt, key, r, false, done)
		}
	})
}

// serveHere reads the states, matches, advances a shared cycle, and
// applies the transition. local reads this node's copy (only the planted
// bugs do).
func serveHere(w World, rt Route, key string, r *Request, local bool, done func(Served, error)) {
	var read flow.Request
	w.Engine(func(imp *Imposter) { read = imp.StateRead(key) })
	if local || rt.Bugs.GateLocalRead {
		read.Read = flow.Local
	}
	w.Store(read, func(resp flow.Response, err error) {
		if err != nil {
			done(unavailableServed(flow.Reason(err)), nil)
			return
		}
		var out Outcome
		var cyc *Cycle
		var tr *Transition
		var write flow.Request
		var rerr error
		w.Engine(func(imp *Imposter) {
			out, cyc, tr, rerr = imp.RespondIn(r, key, imp.StatesOf(resp))
			if tr != nil {
				write = imp.Apply(tr)
			}
		})
		move := func(sv Served) {
			if tr == nil {
				done(sv, nil)
				return
			}
			w.Store(write, func(wresp flow.Response, err error) {
				if err != nil {
					// The move may have applied or not: the client cannot be
					// told which state it was answered from, so it is not.
					done(unavailableServed(flow.Reason(err)), nil)
					return
				}
				sv.Transition, sv.Moved = tr, !tr.Gated || wresp.Succeeded
				done(sv, nil)
			})
		}
		if rerr != nil {
			done(Served{Outcome: out}, rerr)
			return
		}
		if cyc == nil {
			move(Served{Outcome: out})
			return
		}
		StepCycle(w, r, cyc, func(s Served, err error) {
			if err != nil || s.Final {
				done(s, err)
				return
			}
			move(s)
		})
	})
}

// Serve serves r to any imposter in w: a stateful one through
// ServeStateful; a stateless one here, its match's shared cycle (if any)
// advanced at the cycle's owner. The HTTP server serves a stateless
// request whose stub does not cycle without this detour.
func Serve(w World, rt Route, r *Request, done func(Served, error)) {
	var stateful bool
	w.Engine(func(imp *Imposter) { stateful = imp.Stateful() })
	if stateful {
		ServeStateful(w, rt, r, done)
		return
	}
	var out Outcome
	var cyc *Cycle
	var err error
	w.Engine(func(imp *Imposter) { out, cyc, err = imp.Respond(r) })
	if cyc == nil || err != nil {
		done(Served{Outcome: out}, err)
		return
	}
	StepCycle(w, r, cyc, done)
}

// StepCycle advances a shared cycle at its owner (one increment in the
// flow store) and answers with the response its new place names. A
// store failure is a 503 naming why, never an answer from a place the
// cycle may not be at: the step may have applied or not.
func StepCycle(w World, r *Request, c *Cycle, done func(Served, error)) {
	w.Store(c.Step, func(resp flow.Response, err error) {
		if err != nil {
			done(unavailableServed(flow.Reason(err)), nil)
			return
		}
		var out Outcome
		w.Engine(func(imp *Imposter) { out, err = imp.RespondAt(r, c, resp.Int) })
		done(Served{Outcome: out, Cycled: true, Place: resp.Int}, err)
	})
}
