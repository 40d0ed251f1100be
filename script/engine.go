// Package script runs mountebank's JavaScript injection: the functions an
// imposter's stubs carry as strings (inject predicates and responses,
// decorate, wait functions, predicateGenerators, endOfRequestResolver),
// in an embedded engine (goja, pure Go), with the small part of Node.js
// that mountebank's documented examples use.
//
// One Engine serves one imposter. It holds the imposter's injection
// state (the object every function sees as config.state), its timers and
// its outbound requests. Every entry into JavaScript — a call, a timer's
// callback, an answer to an outbound request — runs under the engine's
// lock with a time budget: past it the code is interrupted, and the call
// fails with an error saying so. What a call returns is bounded in size.
//
// Injection is remote code execution by design, as in mountebank: the
// functions come from whoever may create imposters. The engine is no
// sandbox against them: it gives them no file system, no processes and
// no network except through Host.HTTP (the node's egress policy), and it
// bounds their time and, through a heap watchdog (watchdog.go), their
// memory: one allocation larger than what is left below the watchdog's
// bound still happens before it is noticed.
package script

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

//go:embed prelude.js
var preludeSrc string

var prelude = goja.MustCompile("prelude.js", preludeSrc, false)

// Bounds.
const (
	// DefaultBudget is how long one call may take, from entering the
	// function to its answer (an asynchronous answer included), and how
	// long any later entry (a timer, an outbound answer) may run.
	DefaultBudget = 5 * time.Second
	// MaxResultBytes bounds what one call may return (a response, a
	// decorated response, generated predicates), as JSON, and the state
	// object between calls.
	MaxResultBytes = 8 << 20
	// MaxTimers bounds the timers one engine may have pending; a
	// setTimeout past it throws.
	MaxTimers = 1000
	// MaxFunctions bounds the compiled functions an engine keeps; past
	// it the cache starts over.
	MaxFunctions = 1024
	// MaxLogBytes bounds one log line a function writes.
	MaxLogBytes = 16 << 10
	// MaxOutbound bounds one engine's outbound requests in flight.
	MaxOutbound = 64
)

// HTTPRequest is an outbound request a function makes (require('http')).
type HTTPRequest struct {
	Scheme, Host string
	Port         int
	Method, Path string
	Headers      [][2]string
	Body         []byte
}

// HTTPResponse is its answer.
type HTTPResponse struct {
	Status  int
	Headers [][2]string
	Body    []byte
}

// Host is what an engine needs from where it runs.
type Host struct {
	// Log takes the lines functions write (logger, console) and the
	// engine's own reports; level is debug, info, warn or error.
	Log func(level, msg string)
	// HTTP makes an outbound request under the node's egress policy; nil
	// refuses every one.
	HTTP func(ctx context.Context, r HTTPRequest) (HTTPResponse, error)
	// Env is process.env.
	Env map[string]string
	// Shell runs a shellTransform behavior's command with the request
	// and the response (JSON): its output. The engine never calls it; it
	// travels with the rest of what injection needs.
	Shell func(command, request, response string) ([]byte, error)
	// Scope prefixes the logger's lines, as mountebank's "[http:4545] ".
	Scope string
	// Budget bounds each entry into JavaScript (DefaultBudget if 0).
	Budget time.Duration
}

// Error is a function that failed: it threw, ran past its budget, or
// returned what cannot be used. Point is mountebank's message for the
// injection point ("invalid response injection"); Data is the error's
// message.
type Error struct {
	Point string
	Data  string
}

func (e *Error) Error() string { return e.Point + ": " + e.Data }

// ErrClosed is a call on an engine whose imposter is gone.
var ErrClosed = errors.New("the imposter's script engine is closed")

// Engine is one imposter's JavaScript. Its methods may be called from any
// goroutine; calls are serialized.
type Engine struct {
	host   Host
	budget time.Duration

	mu     sync.Mutex // held by whatever runs JavaScript
	rt     *goja.Runtime
	api    *goja.Object // the prelude's calls
	calls  map[string]goja.Callable
	fns    map[string]fnEntry
	timers map[int64]*time.Timer
	nextID int64
	closed bool
	// outbound counts the outbound requests in flight (MaxOutbound).
	outbound int
	// settled is closed (and replaced) whenever a box settles: every
	// call waiting for an answer looks again.
	settled chan struct{}

	// stateText is the state as last synchronized (SetState or State):
	// while what the cluster holds is the same text, the live object
	// (with what JSON does not carry) stays.
	stateText string

	// gen numbers the entries into JavaScript, so that a budget timer
	// that fires late interrupts nothing after its own entry.
	imu   sync.Mutex
	gen   uint64
	armed uint64      // the entry the budget timer is armed for
	timer *time.Timer // the budget timer (enter)
}

type fnEntry struct {
	v   goja.Value
	err error
}

// New makes an engine.
func New(h Host) *Engine {
	if h.Budget <= 0 {
		h.Budget = DefaultBudget
	}
	if h.Log == nil {
		h.Log = func(string, string) {}
	}
	e := &Engine{host: h, budget: h.Budget, fns: map[string]fnEntry{}, timers: map[int64]*time.Timer{}, settled: make(chan struct{}), stateText: "{}"}
	e.rt = goja.New()
	e.rt.SetMaxCallStackSize(2000)
	e.rt.SetFieldNameMapper(goja.UncapFieldNameMapper())
	v, err := e.rt.RunProgram(prelude)
	if err != nil {
		panic("script: the prelude does not run: " + err.Error())
	}
	fn, _ := goja.AssertFunction(v)
	api, err := fn(goja.Undefined(), e.rt.GlobalObject(), e.hostObject())
	if err != nil {
		panic("script: the prelude does not run: " + err.Error())
	}
	e.api = api.ToObject(e.rt)
	e.calls = map[string]goja.Callable{}
	for _, k := range e.api.Keys() {
		if f, ok := goja.AssertFunction(e.api.Get(k)); ok {
			e.calls[k] = f
		}
	}
	return e
}

// Close stops the engine's timers; later calls fail with ErrClosed.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for id, t := range e.timers {
		t.Stop()
		delete(e.timers, id)
	}
}

// enter runs f, JavaScript, within the budget: past it the runtime is
// interrupted. Under e.mu.
func (e *Engine) enter(f func() error) error {
	e.imu.Lock()
	e.gen++
	g := e.gen
	e.armed = g
	e.imu.Unlock()
	// One timer per engine, armed for each entry (entries never overlap:
	// they all run under e.mu); it interrupts the entry it was armed for.
	if e.timer == nil {
		e.timer = time.AfterFunc(e.budget, func() {
			e.imu.Lock()
			g := e.armed
			e.imu.Unlock()
			e.interruptIf(g, errBudget)
		})
	} else {
		e.timer.Reset(e.budget)
	}
	watch(e, g)
	err := safely(f)
	unwatch(e)
	e.timer.Stop()
	e.imu.Lock()
	e.gen++
	e.imu.Unlock()
	e.rt.ClearInterrupt()
	return err
}

// safely runs f, a panic inside the engine becoming an error: a bug in
// goja or a host function must fail the call, never the node.
func safely(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the script engine failed: %v", p)
		}
	}()
	return f()
}

// interruptIf stops the entry g, if it is still running.
func (e *Engine) interruptIf(g uint64, why error) {
	e.imu.Lock()
	if e.gen == g {
		e.rt.Interrupt(why)
	}
	e.imu.Unlock()
}

var (
	errBudget = errors.New("budget")
	errMemory = errors.New("memory")
)

// message is what a failure of JavaScript says: the thrown error's
// message, or that the budget ran out.
func (e *Engine) message(err error) string {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if ie.Value() == errMemory {
			return fmt.Sprintf("the function was stopped: the node's heap passed %d MiB while it ran", MaxHeapBytes>>20)
		}
		return fmt.Sprintf("the function ran past its time budget of %v and was stopped", e.budget)
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return e.errorText(ex.Value())
	}
	var se *goja.CompilerSyntaxError
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}

func (e *Engine) errorText(v goja.Value) string {
	f := e.calls["errorText"]
	s, err := f(goja.Undefined(), v)
	if err != nil {
		return "an error that cannot be printed"
	}
	return s.String()
}

// fn compiles a function's text once.
func (e *Engine) fn(src string) (goja.Value, error) {
	if f, ok := e.fns[src]; ok {
		return f.v, f.err
	}
	if len(e.fns) >= MaxFunctions {
		clear(e.fns)
	}
	var f fnEntry
	p, err := goja.Compile("injection", "("+src+"\n)", false)
	if err == nil {
		err = e.enter(func() error {
			var rerr error
			f.v, rerr = e.rt.RunProgram(p)
			return rerr
		})
	}
	if err == nil {
		if _, ok := goja.AssertFunction(f.v); !ok {
			err = errors.New("the injection is not a function")
		}
	}
	f.err = err
	e.fns[src] = f
	return f.v, err
}

// callAPI calls one of the prelude's calls with fn compiled from src.
func (e *Engine) callAPI(point, name, src string, args ...any) (goja.Value, error) {
	if e.closed {
		return nil, ErrClosed
	}
	fv, err := e.fn(src)
	if err != nil {
		return nil, &Error{Point: point, Data: e.message(err)}
	}
	call := e.calls[name]
	vals := []goja.Value{fv}
	for _, a := range args {
		vals = append(vals, e.rt.ToValue(a))
	}
	var out goja.Value
	err = e.enter(func() error {
		var cerr error
		out, cerr = call(goja.Undefined(), vals...)
		return cerr
	})
	if err != nil {
		e.host.Log("error", fmt.Sprintf("%sinjection X=> %s\n    source: %s", e.host.Scope, e.message(err), src))
		return nil, &Error{Point: point, Data: e.message(err)}
	}
	return out, nil
}

// Predicate runs an inject predicate on the request (JSON): whether it
// returned something truthy.
func (e *Engine) Predicate(src string, request []byte) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.callAPI("invalid predicate injection", "predicate", src, string(request))
	if err != nil {
		return false, err
	}
	return v.ToBoolean(), nil
}

type yieldKey struct{}

// WithYield makes a call's wait for an asynchronous answer go through
// yield (which runs the wait it is given): the caller can let go of its
// own locks meanwhile, as node serves other requests while a function
// waits for its callback.
func WithYield(ctx context.Context, yield func(wait func())) context.Context {
	return context.WithValue(ctx, yieldKey{}, yield)
}

// Respond runs an inject response: the response it returns or passes to
// its callback, as JSON ("" for a value that is not an object, which
// answers with the defaults).
func (e *Engine) Respond(ctx context.Context, src string, request []byte) ([]byte, error) {
	return e.boxed(ctx, "invalid response injection", "respond", src, string(request))
}

// Decorate runs a decorate behavior on the response (JSON): the response
// it leaves.
func (e *Engine) Decorate(ctx context.Context, src string, request, response []byte) ([]byte, error) {
	return e.boxed(ctx, "invalid decorator injection", "decorate", src, string(request), string(response))
}

// boxed runs a call whose answer may come later (a callback, a Promise),
// waiting for it within the budget with the lock released, so that the
// engine's timers and outbound answers can run.
func (e *Engine) boxed(ctx context.Context, point, name, src string, args ...any) ([]byte, error) {
	deadline := time.Now().Add(e.budget)
	e.mu.Lock()
	v, err := e.callAPI(point, name, src, args...)
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	box := v.ToObject(e.rt)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	wait := func(f func()) { f() }
	if y, ok := ctx.Value(yieldKey{}).(func(func())); ok {
		wait = y
	}
	for !box.Get("done").ToBoolean() {
		settled := e.settled
		e.mu.Unlock()
		const answered, late, abandoned = 0, 1, 2
		why := answered
		wait(func() {
			select {
			case <-settled:
			case <-timer.C:
				why = late
			case <-ctx.Done():
				why = abandoned
			}
		})
		switch why {
		case late:
			e.mu.Lock()
			if box.Get("done").ToBoolean() {
				continue
			}
			box.Set("done", true) // a late answer is dropped
			e.mu.Unlock()
			msg := fmt.Sprintf("no answer within the time budget of %v", e.budget)
			e.host.Log("error", fmt.Sprintf("%sinjection X=> %s\n    source: %s", e.host.Scope, msg, src))
			return nil, &Error{Point: point, Data: msg}
		case abandoned:
			e.mu.Lock()
			box.Set("done", true)
			e.mu.Unlock()
			return nil, &Error{Point: point, Data: "the request was abandoned: " + ctx.Err().Error()}
		}
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	if ev := box.Get("error"); ev != nil && !goja.IsUndefined(ev) {
		msg := e.errorText(ev)
		e.host.Log("error", fmt.Sprintf("%sinjection X=> %s\n    source: %s", e.host.Scope, msg, src))
		return nil, &Error{Point: point, Data: msg}
	}
	return e.stringify(point, box.Get("value"))
}

// stringify turns a result into JSON within MaxResultBytes: "" for
// undefined or a value that is not an object; null is an error, as
// mountebank fails reading a field of it.
func (e *Engine) stringify(point string, v goja.Value) ([]byte, error) {
	if v == nil || goja.IsUndefined(v) {
		return nil, nil
	}
	if goja.IsNull(v) {
		return nil, &Error{Point: point, Data: "Cannot read properties of null (reading 'statusCode')"}
	}
	if _, ok := v.(*goja.Object); !ok {
		return nil, nil
	}
	f := e.calls["stringify"]
	var s goja.Value
	err := e.enter(func() error {
		var serr error
		s, serr = f(goja.Undefined(), v)
		return serr
	})
	if err != nil {
		return nil, &Error{Point: point, Data: e.message(err)}
	}
	if s == nil || goja.IsUndefined(s) {
		return nil, nil
	}
	str := s.String()
	if len(str) > MaxResultBytes {
		return nil, &Error{Point: point, Data: fmt.Sprintf("the result is %d bytes of JSON, more than the %d allowed", len(str), MaxResultBytes)}
	}
	return []byte(str), nil
}

// Wait runs a wait behavior's function: the milliseconds it returns
// (a value that is no number counts as 0, where node's setTimeout would
// wait 1 ms).
func (e *Engine) Wait(src string) (float64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.callAPI("invalid wait injection", "wait", src)
	if err != nil {
		return 0, err
	}
	f := v.ToFloat()
	if f != f || f < 0 {
		f = 0
	}
	return f, nil
}

// Generate runs a predicateGenerator's inject: the predicates it
// returns, as a JSON array.
func (e *Engine) Generate(src string, request []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.callAPI("invalid predicateGenerator injection", "generate", src, string(request))
	if err != nil {
		return nil, err
	}
	s := v.String()
	if len(s) > MaxResultBytes {
		return nil, &Error{Point: "invalid predicateGenerator injection", Data: "the predicates are more than the bytes allowed"}
	}
	return []byte(s), nil
}

// EndOfRequest runs a tcp imposter's endOfRequestResolver on the data
// received so far (a string in text mode, a Buffer in binary mode).
func (e *Engine) EndOfRequest(src string, data []byte, text bool) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, err := e.callAPI("invalid endOfRequestResolver injection", "endOfRequest", src, e.rt.NewArrayBuffer(data), text)
	if err != nil {
		return false, err
	}
	return v.ToBoolean(), nil
}

// State is the state object as JSON.
func (e *Engine) State() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.calls["getState"]
	var s goja.Value
	err := e.enter(func() error {
		var serr error
		s, serr = f(goja.Undefined())
		return serr
	})
	if err != nil {
		return "", &Error{Point: "invalid state", Data: e.message(err)}
	}
	if s == nil || goja.IsUndefined(s) {
		return "{}", nil
	}
	if len(s.String()) > MaxResultBytes {
		return "", &Error{Point: "invalid state", Data: fmt.Sprintf("the state is more than %d bytes of JSON", MaxResultBytes)}
	}
	e.stateText = s.String()
	return e.stateText, nil
}

// SetState makes the state object the one text (JSON) describes, unless
// the engine's is that already: then the live object stays, with what
// JSON does not carry.
func (e *Engine) SetState(text string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if text == "" {
		text = "{}"
	}
	if text == e.stateText && e.stateText != "" {
		return nil
	}
	f := e.calls["setState"]
	err := e.enter(func() error {
		_, serr := f(goja.Undefined(), e.rt.ToValue(text))
		return serr
	})
	if err != nil {
		return &Error{Point: "invalid state", Data: e.message(err)}
	}
	e.stateText = text
	return nil
}

// Reload makes the next SetState load its text whatever the engine's
// object is: that object is not one the cluster may hold (it does not
// serialize, or is past the state's bound).
func (e *Engine) Reload() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stateText = ""
}

// hostObject is the Go side the prelude sees as host.
func (e *Engine) hostObject() *goja.Object {
	o := e.rt.NewObject()
	env := e.rt.NewObject()
	for k, v := range e.host.Env {
		_ = env.Set(k, v)
	}
	_ = o.Set("env", env)
	_ = o.Set("scope", e.host.Scope)
	_ = o.Set("log", func(level, msg string) {
		if len(msg) > MaxLogBytes {
			msg = msg[:MaxLogBytes] + "…"
		}
		e.host.Log(level, msg)
	})
	_ = o.Set("wake", func() {
		close(e.settled)
		e.settled = make(chan struct{})
	})
	_ = o.Set("decode", func(s, enc string) goja.ArrayBuffer { return e.rt.NewArrayBuffer(decode(s, enc)) })
	_ = o.Set("encode", func(b goja.ArrayBuffer, enc string) string { return encode(b.Bytes(), enc) })
	_ = o.Set("parseURL", func(s string) (map[string]any, error) {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		if u.RawQuery != "" {
			path += "?" + u.RawQuery
		}
		return map[string]any{"protocol": u.Scheme + ":", "hostname": u.Hostname(), "port": u.Port(), "path": path}, nil
	})
	_ = o.Set("timer", e.setTimer)
	_ = o.Set("clear", func(id int64) {
		if t, ok := e.timers[id]; ok {
			t.Stop()
			delete(e.timers, id)
		}
	})
	_ = o.Set("http", e.httpCall)
	return o
}

// setTimer arms a timer whose callback runs as its own entry (under the
// lock, within the budget). Called from JavaScript: under e.mu.
func (e *Engine) setTimer(fn goja.Callable, ms float64, repeat bool, args []goja.Value) (int64, error) {
	if len(e.timers) >= MaxTimers {
		return 0, fmt.Errorf("more than %d timers pending", MaxTimers)
	}
	if ms != ms || ms < 1 {
		ms = 1
	}
	e.nextID++
	id := e.nextID
	d := time.Duration(ms * float64(time.Millisecond))
	var fire func()
	fire = func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.closed {
			return
		}
		if _, ok := e.timers[id]; !ok {
			return // cleared
		}
		if repeat {
			e.timers[id] = time.AfterFunc(d, fire)
		} else {
			delete(e.timers, id)
		}
		e.job("a timer", func() error { _, err := fn(goja.Undefined(), args...); return err })
	}
	e.timers[id] = time.AfterFunc(d, fire)
	return id, nil
}

// job runs a callback outside any call: a failure is logged, as node
// would report an uncaught exception, and goes no further. Under e.mu.
func (e *Engine) job(what string, f func() error) {
	if err := e.enter(f); err != nil {
		e.host.Log("error", fmt.Sprintf("%sinjection X=> %s in %s", e.host.Scope, e.message(err), what))
	}
}

// httpCall starts an outbound request; its answer runs cb as an entry
// of its own. At most MaxOutbound are in flight; past that, and where
// the host gives no HTTP, cb gets an error at once (as its own entry,
// after this one). Called from JavaScript: under e.mu.
func (e *Engine) httpCall(spec *goja.Object, cb goja.Callable) {
	req := HTTPRequest{
		Scheme: spec.Get("scheme").String(), Host: spec.Get("host").String(), Port: int(spec.Get("port").ToInteger()),
		Method: spec.Get("method").String(), Path: spec.Get("path").String(),
	}
	if ab, ok := spec.Get("body").Export().(goja.ArrayBuffer); ok {
		req.Body = ab.Bytes()
	}
	if hs, ok := spec.Get("headers").Export().([]any); ok {
		for _, h := range hs {
			if kv, ok := h.([]any); ok && len(kv) == 2 {
				req.Headers = append(req.Headers, [2]string{fmt.Sprint(kv[0]), fmt.Sprint(kv[1])})
			}
		}
	}
	call := e.host.HTTP
	if call == nil {
		call = func(context.Context, HTTPRequest) (HTTPResponse, error) {
			return HTTPResponse{}, errors.New("outbound requests are not available to injected JavaScript here")
		}
	}
	if e.outbound >= MaxOutbound {
		call = func(context.Context, HTTPRequest) (HTTPResponse, error) {
			return HTTPResponse{}, fmt.Errorf("more than %d outbound requests in flight", MaxOutbound)
		}
	}
	e.outbound++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), e.budget)
		resp, err := call(ctx, req)
		cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.outbound--
		if e.closed {
			return
		}
		e.job("an http answer", func() error {
			if err != nil {
				_, cerr := cb(goja.Undefined(), e.rt.ToValue(err.Error()))
				return cerr
			}
			hs := make([]any, len(resp.Headers))
			for i, h := range resp.Headers {
				hs[i] = []any{h[0], h[1]}
			}
			_, cerr := cb(goja.Undefined(), goja.Null(), e.rt.ToValue(resp.Status), e.rt.ToValue(hs), e.rt.ToValue(e.rt.NewArrayBuffer(resp.Body)))
			return cerr
		})
	}()
}

// decode turns a string into bytes as Node's Buffer.from(s, enc) does.
func decode(s, enc string) []byte {
	switch strings.ToLower(enc) {
	case "base64", "base64url":
		return DecodeBase64(s)
	case "hex":
		n := len(s) / 2 * 2
		b, err := hex.DecodeString(s[:n])
		if err != nil {
			return nil
		}
		return b
	case "latin1", "binary", "ascii":
		b := make([]byte, 0, len(s))
		for _, r := range utf16.Encode([]rune(s)) {
			b = append(b, byte(r))
		}
		return b
	case "utf16le", "ucs2", "ucs-2", "utf-16le":
		var b []byte
		for _, r := range utf16.Encode([]rune(s)) {
			b = append(b, byte(r), byte(r>>8))
		}
		return b
	}
	return []byte(s)
}

// DecodeBase64 decodes base64 (standard or URL alphabet, padding
// optional, white space skipped) as far as it is valid, as node's
// Buffer.from(s, 'base64') decodes what it can: up to the first '=' or
// character of neither alphabet, less a lone trailing character. In one
// pass over s.
func DecodeBase64(s string) []byte {
	raw := make([]byte, 0, len(s))
scan:
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-':
			c = '+'
		case c == '_':
			c = '/'
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
			continue
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
		default:
			break scan
		}
		raw = append(raw, c)
	}
	if len(raw)%4 == 1 {
		raw = raw[:len(raw)-1] // six bits make no byte
	}
	b, _ := base64.RawStdEncoding.DecodeString(string(raw))
	return b
}

// encode turns bytes into a string as Node's buf.toString(enc) does.
func encode(b []byte, enc string) string {
	switch strings.ToLower(enc) {
	case "base64":
		return base64.StdEncoding.EncodeToString(b)
	case "base64url":
		return base64.RawURLEncoding.EncodeToString(b)
	case "hex":
		return hex.EncodeToString(b)
	case "latin1", "binary":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r)
	case "ascii":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c & 0x7f)
		}
		return string(r)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// MayReachState reports whether a function's text can reach the
// injection state: it names "state" or "arguments" anywhere, or declares
// a positional parameter at or past statePos (the first argument place
// that holds a state object at its injection point; negative: none), or
// does not parse (then nobody can say). A function for which it is false
// can reach the state only through a computed property name
// (config['st' + 'ate']) or by handing config to code that reads every
// property: it runs without the cluster's state being read or written.
func MayReachState(src string, statePos int) bool {
	if strings.Contains(src, "state") || strings.Contains(src, "arguments") {
		return true
	}
	prog, err := parser.ParseFile(nil, "", "("+src+"\n)", 0)
	if err != nil || len(prog.Body) != 1 {
		return true
	}
	st, ok := prog.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return true
	}
	var params *ast.ParameterList
	switch f := st.Expression.(type) {
	case *ast.FunctionLiteral:
		params = f.ParameterList
	case *ast.ArrowFunctionLiteral:
		params = f.ParameterList
	default:
		return true
	}
	if params == nil {
		return false
	}
	if params.Rest != nil {
		return statePos >= 0
	}
	return statePos >= 0 && len(params.List) > statePos
}
