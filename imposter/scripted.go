package imposter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/script"
)

// This file: JavaScript injection (package script) in an imposter.
//
// Functions are compiled when first called, as mountebank evaluates them
// only then (a syntax error fails the request, not the creation). A stub
// that carries JavaScript makes its imposter scripted: its requests are
// matched and answered under the imposter's lock, one at a time on each
// member, with the imposter's injection state (ServeScripted).
//
// Whether a node runs injected code at all is the node's decision
// (-allowInjection): without it the API refuses such an imposter at
// creation (InjectionErrors), and a member that did not allow it answers
// a request that would run code with an error instead.

// ErrInjectionOff is a function that would run on a node that does not
// allow injection.
var ErrInjectionOff = errors.New("JavaScript injection is not allowed on this node (it runs without -allowInjection)")

// Injection messages, mountebank's with the flag named as fenceline's.
const (
	msgInjectionNotAllowed = "JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag"
	msgShellNotAllowed     = "Shell execution is not allowed unless fenceline is run with the -allowInjection flag"
)

// UseScripts gives the imposter what its injected JavaScript runs with;
// nil (the default) refuses to run any. An engine inherited from an
// earlier definition (Inherit) keeps its state.
func (imp *Imposter) UseScripts(h *script.Host) { imp.scriptHost = h }

// HasJavaScript reports whether any stub carries JavaScript.
func (imp *Imposter) HasJavaScript() bool { return imp.javascript }

// Scripted reports whether any stub carries JavaScript that may read or
// change the injection state (script.MayReachState): such a request is
// served by ServeScripted. An imposter whose JavaScript cannot reach the
// state is served as any other, its functions run where they are met.
func (imp *Imposter) Scripted() bool { return imp.scripted }

// Close stops the imposter's script engine (its timers), if it has one.
func (imp *Imposter) Close() {
	if imp.js != nil {
		imp.js.Close()
	}
}

// engine is the imposter's script engine, made at first use.
func (imp *Imposter) engine() (*script.Engine, error) {
	if imp.scriptHost == nil {
		return nil, ErrInjectionOff
	}
	if imp.js == nil {
		imp.js = script.New(*imp.scriptHost)
	}
	return imp.js, nil
}

// scriptRequest is the request as injected functions see it: mountebank's
// request object, JSON.
func (r *Request) scriptRequest() []byte {
	if r.scriptJSON == nil {
		v := r.Value()
		v.Delete("timestamp")
		r.scriptJSON = Marshal(v, 0)
	}
	return r.scriptJSON
}

// injectionError turns a function's failure into mountebank's error: the
// injection point's message, the call as source, the thrown message as
// data.
func injectionError(err error, src, args string) error {
	var se *script.Error
	if !errors.As(err, &se) {
		return &Error{Code: CodeInvalidInjection, Message: err.Error()}
	}
	source := "(" + src + ")(" + args + ");"
	if se.Point == "invalid wait injection" {
		source = src
	}
	return &Error{Code: CodeInvalidInjection, Message: se.Point, Source: source, Data: se.Data, Name: "Error"}
}

// stateError is a failure of the state itself (it does not load, does
// not serialize, or is past its bound) in mountebank's error shape.
func stateError(err error) error {
	var se *script.Error
	if errors.As(err, &se) {
		return &Error{Code: CodeInvalidInjection, Message: se.Point, Data: se.Data}
	}
	return err
}

// injectedPredicate runs an inject predicate; a failure fails the
// request (Request.scriptErr), as mountebank answers it with a 500.
func (p *Predicate) injected(r *Request) bool {
	if r.scriptErr != nil {
		return false
	}
	if r.js == nil {
		r.scriptErr = &Error{Code: CodeInvalidInjection, Message: ErrInjectionOff.Error()}
		return false
	}
	ok, err := r.js.Predicate(p.src, r.scriptRequest())
	if err != nil {
		r.scriptErr = injectionError(err, p.src, "config, logger, imposterState")
		return false
	}
	return ok
}

// injectResponse runs an inject response: the is response it made.
func (imp *Imposter) injectResponse(r *Request, src string) (*Object, error) {
	js, err := imp.engine()
	if err != nil {
		return nil, &Error{Code: CodeInvalidInjection, Message: err.Error()}
	}
	out, err := js.Respond(r.scriptCtx(), src, r.scriptRequest())
	if err != nil {
		return nil, injectionError(err, src, "config, injectState, logger, done, imposterState")
	}
	return resultObject(out)
}

// resultObject parses what a function returned ("" answers with the
// defaults, as mountebank reads fields of a value that has none).
func resultObject(out []byte) (*Object, error) {
	if len(out) == 0 {
		return NewObject(), nil
	}
	v, err := Parse(string(out))
	if err != nil {
		return nil, &Error{Code: CodeInvalidInjection, Message: "the injection's result is not JSON: " + err.Error()}
	}
	o, ok := v.(*Object)
	if !ok {
		return NewObject(), nil
	}
	return o, nil
}

// decorateBehavior runs a function on the response made so far.
type decorateBehavior struct{ src string }

func (d decorateBehavior) apply(r *Request, is *Object, _ Files) (time.Duration, error) {
	if r.js == nil {
		return 0, &Error{Code: CodeInvalidInjection, Message: ErrInjectionOff.Error()}
	}
	out, err := r.js.Decorate(r.scriptCtx(), d.src, r.scriptRequest(), Marshal(is, 0))
	if err != nil {
		return 0, injectionError(err, d.src, "config, response, logger")
	}
	o, err := resultObject(out)
	if err != nil {
		return 0, err
	}
	replaceObject(is, o)
	return 0, nil
}

// waitFunction is a wait behavior given as a string: a number of
// milliseconds mountebank's parseInt reads from it, else a function
// returning them.
type waitFunction struct{ src string }

func (w waitFunction) apply(r *Request, _ *Object, _ Files) (time.Duration, error) {
	if ms, ok := parseIntPrefix(w.src); ok {
		return clampWait(float64(ms)), nil
	}
	if r.js == nil {
		return 0, &Error{Code: CodeInvalidInjection, Message: ErrInjectionOff.Error()}
	}
	ms, err := r.js.Wait(w.src)
	if err != nil {
		return 0, injectionError(err, w.src, "")
	}
	return clampWait(ms), nil
}

// parseIntPrefix reads an integer the way JavaScript's parseInt does:
// leading space, a sign, then digits; false if there are none.
func parseIntPrefix(s string) (int64, bool) {
	s = strings.TrimLeft(s, " \t\n\r")
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == i {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:j], 10, 64)
	if err != nil {
		return MaxWaitMs, true
	}
	return n, true
}

// generateInjected runs a predicateGenerator's inject: the predicates it
// adds to the recorded stub.
func generateInjected(r *Request, src string) ([]any, error) {
	if r.js == nil {
		return nil, &Error{Code: CodeInvalidInjection, Message: ErrInjectionOff.Error()}
	}
	out, err := r.js.Generate(src, r.scriptRequest())
	if err != nil {
		return nil, injectionError(err, src, "config")
	}
	v, err := Parse(string(out))
	if err != nil {
		return nil, &Error{Code: CodeInvalidInjection, Message: "invalid predicateGenerator injection", Data: err.Error()}
	}
	list, _ := v.([]any)
	return list, nil
}

// replaceObject makes dst what src is (src is not used after).
func replaceObject(dst, src *Object) { *dst = *src }

// withScript readies r for matching and answering by imp: the engine its
// functions run in (nil when imp runs none, or may not).
func (imp *Imposter) withScript(r *Request) {
	if imp.javascript && r.js == nil {
		r.js, _ = imp.engine()
	}
	if imp.scriptHost != nil {
		r.shell = imp.scriptHost.Shell
	}
}

// scanInjection sets the stub's javascript and shell flags from its
// compiled predicates and responses.
func (st *Stub) scanInjection() {
	// reach: src, run at an injection point whose state argument is at
	// statePos, may reach the injection state.
	reach := func(src string, statePos int) {
		st.javascript = true
		st.reachesState = st.reachesState || script.MayReachState(src, statePos)
	}
	var predReach func(ps []*Predicate)
	predReach = func(ps []*Predicate) {
		for _, p := range ps {
			if p.op == "inject" {
				reach(p.src, 2) // (config, logger, imposterState)
			}
			predReach(p.subs)
		}
	}
	predReach(st.predicates)
	for _, r := range st.responses {
		if r.inject != "" {
			reach(r.inject, 1) // (config, injectState, logger, callback, imposterState)
		}
		if r.proxy != nil {
			if r.proxy.decorate != "" {
				reach(r.proxy.decorate, -1) // a decorate of the recording: (config, response, logger)
			}
			for _, g := range r.proxy.generators {
				if g.inject != "" {
					reach(g.inject, -1) // (config), config without state
				}
			}
		}
		for _, b := range r.behaviors {
			switch b := b.(type) {
			case decorateBehavior:
				reach(b.src, -1)
			case waitFunction:
				// Any string is injection to mountebank's validator, even
				// "5"; only one that is no number is run.
				st.javascript = true
				if _, isNumber := parseIntPrefix(b.src); !isNumber {
					reach(b.src, -1) // called with no arguments
				}
			case shellTransform:
				st.shell = true
			}
		}
	}
}

// InjectionErrors is what mountebank's validator says of an imposter
// with JavaScript or shell injection on a node that allows neither: one
// error per stub that has any, with the stub as source, the
// endOfRequestResolver's first and then the stubs from last to first (as
// mountebank lists them).
func (imp *Imposter) InjectionErrors() []error {
	var errs []error
	if v, ok := imp.header.Get("endOfRequestResolver"); ok && v != nil {
		errs = append(errs, &Error{Code: CodeInvalidInjection, Message: msgInjectionNotAllowed, Source: v})
	}
	for i := len(imp.stubs) - 1; i >= 0; i-- {
		errs = append(errs, imp.stubs[i].InjectionErrors()...)
	}
	return errs
}

// InjectionErrors is what the validator says of one stub (see
// Imposter.InjectionErrors).
func (st *Stub) InjectionErrors() []error {
	var errs []error
	if st.javascript {
		errs = append(errs, &Error{Code: CodeInvalidInjection, Message: msgInjectionNotAllowed, Source: st.config})
	}
	if st.shell {
		errs = append(errs, &Error{Code: CodeInvalidInjection, Message: msgShellNotAllowed, Source: st.config})
	}
	return errs
}

// The injection state across a cluster: one value in the flow store,
// under a flow of the imposter's own, read (from its owner) before a
// scripted request is matched and written back with a compare-and-set
// after it is answered, if the functions changed it. It is stored as
// "<written at, Unix ms>\n<JSON>" and written again when older than
// stateRefresh, so that an idle state outlives the store's TTL as long
// as requests read it within it.
const (
	stateKey     = "state"
	stateTTLMs   = 3_600_000      // the flow store's longest TTL
	stateRefresh = stateTTLMs / 3 // rewritten unchanged past this age
)

// MaxStateBytes bounds the injection state, as JSON: what one value of
// the flow store holds (its default MaxValueBytes, 16 KiB), less room
// for the write time in front. A change past it fails its request (500,
// invalid injection) and is dropped.
const MaxStateBytes = 16<<10 - 32

// ReasonStateConflict is the 503 of a scripted request whose change of
// the injection state lost to another member's change made meanwhile:
// its answer was made from a state that is no longer the cluster's, so
// it is not given, and its change is dropped.
const ReasonStateConflict = "injection_state_conflict"

// ReasonScriptBusy is the 503 of a scripted request that waited past its
// bound for the requests ahead of it on this member.
const ReasonScriptBusy = "injection_busy"

// ScriptStateFlow is the flow holding the imposter's injection state:
// its port and creation (a new creation starts with an empty state;
// changing the stubs keeps it).
func (imp *Imposter) ScriptStateFlow() string {
	return "i" + strconv.Itoa(imp.Port) + ":~injection:" + imp.incarnation
}

// scriptState is the injection state as read from the store.
type scriptState struct {
	raw    []byte // the stored value, nil if absent
	text   string // its JSON ("{}" when absent)
	atMs   int64
	loaded bool
}

func decodeScriptState(resp flow.Response) scriptState {
	s := scriptState{text: "{}"}
	if !resp.Found {
		return s
	}
	s.raw = resp.Value
	head, body, ok := strings.Cut(string(resp.Value), "\n")
	if at, err := strconv.ParseInt(head, 10, 64); ok && err == nil {
		s.atMs, s.text = at, body
	}
	return s
}

// ServeScripted serves r, a request to a scripted imposter: read the
// injection state, serve it (Serve: a stateful imposter's flow state
// and a shared cycle as for any request), then write the state back
// with a compare-and-set from what was read, if the functions changed
// it. turn holds the imposter's script section on this member from the
// read to the write, so that on one member its requests change the
// state one after another, as in mountebank's one process.
//
// A read or a write that fails is a 503 naming the store's reason (the
// write may have applied); a write that lost to another member's is a
// 503 ReasonStateConflict. Never an answer made from a state the cluster
// no longer holds.
func ServeScripted(w World, rt Route, r *Request, done func(Served, error)) {
	w.Turn(func(release func(), err error) {
		if err != nil {
			done(unavailableServed(ReasonScriptBusy), nil)
			return
		}
		finish := func(s Served, err error) { release(); done(s, err) }
		if rt.Bugs.LocalState {
			Serve(w, rt, r, finish) // the planted bug: this member's state, never the cluster's
			return
		}
		var read flow.Request
		w.Engine(func(imp *Imposter) {
			read = flow.Request{Flow: imp.ScriptStateFlow(), Op: flow.OpGet, Key: stateKey}
		})
		w.Store(read, func(resp flow.Response, err error) {
			if err != nil {
				finish(unavailableServed(flow.Reason(err)), nil)
				return
			}
			before := decodeScriptState(resp)
			var serr error
			w.Engine(func(imp *Imposter) {
				if js, err := imp.engine(); err == nil {
					serr = js.SetState(before.text)
				}
			})
			if serr != nil {
				finish(Served{}, stateError(serr))
				return
			}
			Serve(w, rt, r, func(s Served, err error) {
				var after string
				var write flow.Request
				var werr error
				w.Engine(func(imp *Imposter) {
					js, jerr := imp.engine()
					if jerr != nil {
						return
					}
					after, werr = js.State()
					if werr == nil && len(after) > MaxStateBytes {
						werr = &script.Error{Point: "invalid state", Data: fmt.Sprintf(
							"the injection state is %d bytes of JSON, more than the %d the cluster keeps: the change is dropped", len(after), MaxStateBytes)}
					}
					if werr != nil {
						return
					}
					now := r.Arrived.UnixMilli()
					if after == before.text && (before.raw == nil || now-before.atMs < stateRefresh) {
						return
					}
					if before.raw == nil && after == "{}" {
						return
					}
					write = flow.Request{Flow: imp.ScriptStateFlow(), Op: flow.OpCas, Key: stateKey,
						Value: []byte(strconv.FormatInt(now, 10) + "\n" + after), Expect: before.raw, ExpectAbsent: before.raw == nil,
						TTLMs: stateTTLMs, Mode: imp.stateMode()}
				})
				if werr != nil {
					// The live object cannot be kept (it does not serialize,
					// or is past the bound): the next request loads what the
					// cluster holds. After a lost or unknown write no such
					// step is needed: the engine's text is then the dropped
					// change's, and it is loaded again unless the store
					// holds that same text.
					w.Engine(func(imp *Imposter) {
						if imp.js != nil {
							imp.js.Reload()
						}
					})
					finish(Served{}, stateError(werr))
					return
				}
				if write.Flow == "" {
					finish(s, err)
					return
				}
				w.Store(write, func(wresp flow.Response, werr error) {
					switch {
					case werr != nil:
						finish(unavailableServed(flow.Reason(werr)), nil)
					case !wresp.Succeeded:
						finish(unavailableServed(ReasonStateConflict), nil)
					default:
						finish(s, err)
					}
				})
			})
		})
	})
}

// stateMode is the durability the injection state is written with: sync
// unless the imposter names another in _rift.flowState.durability. With
// async, an acknowledged change can be lost with a crashed owner before
// its group fsync, and a later request then counts from the older state
// (the simulator's injected-counter finds it); with none, a restart of
// the owner and its successors forgets the state, as mountebank forgets
// its state on restart.
func (imp *Imposter) stateMode() shard.Mode {
	if imp.flow.Set["durability"] {
		if m, err := shard.ParseMode(imp.flow.Durability); err == nil {
			return m
		}
	}
	return shard.Sync
}

// MaxWaitMs bounds the wait a wait function (or a string's number) asks
// for: ten minutes.
const MaxWaitMs = 600_000

func clampWait(ms float64) time.Duration {
	ms = min(max(ms, 0), MaxWaitMs)
	return time.Duration(ms * float64(time.Millisecond))
}
