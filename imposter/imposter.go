package imposter

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/script"
)

// MaxRecordedRequests bounds the requests an imposter with recordRequests
// keeps: past it the oldest are dropped (numberOfRequests still counts
// every request). mountebank keeps them all, until it runs out of memory.
const MaxRecordedRequests = 10000

// Imposter is one imposter's configuration and state: its stubs in order,
// their response cycles, and its recorded requests. It is not safe for
// concurrent use; the HTTP layer serializes calls to it.
type Imposter struct {
	Protocol string
	Port     int
	// Mode is a tcp imposter's encoding of data: "text" (UTF-8) or
	// "binary" (base64).
	Mode string
	// KeyPEM and CertPEM are an https imposter's key and certificate: the
	// creation request's, or the ones the server generated.
	KeyPEM, CertPEM string
	Name            string
	RecordRequests  bool
	AllowCORS       bool
	// header is the creation request without its stubs, for printing.
	header          *Object
	defaultResponse *Object // nil: none
	stubs           []*Stub
	noMatch         *response // what a request no stub matches gets

	NumberOfRequests int
	// requests holds the newest recorded requests, at most
	// MaxRecordedRequests and MaxRecordedBytes.
	requests recordRing
	// lastAtNs and recSeq stamp recorded requests (count): arrival times
	// that never go back, and this member's own order.
	lastAtNs int64
	recSeq   uint64
	// clustered says the imposter is one of a cluster's (Clustered): its
	// stubs' response cycles are the cluster's, advanced at each cycle's
	// owner, and its proxyAlways recordings are stored by the cluster and
	// placed on every member; otherwise each stub keeps its place here,
	// and recordings are placed here.
	clustered  bool
	localCycle bool
	// scope names the creation and recording generation the imposter
	// was built for (Stored.Scope): in proxyOnce signatures and recorded
	// stubs' cycle keys, so nothing of an earlier one is taken for its.
	scope string

	flow FlowState // _rift.flowState
	// scenarios are the scenario names the stubs use, sorted; rebuilt
	// (never changed in place) whenever the stubs change, so that a
	// request asks Stateful without walking every stub.
	scenarios []string
	// recorded names the proxyOnce signatures whose recordings this
	// imposter holds (AddRecording places each once).
	recorded map[string]bool
	// stubsGen counts changes of the stub list (stubsChanged), so that a
	// match made outside the lock knows whether it still holds.
	stubsGen uint64
	// files is what lookup behaviors read their CSV files through
	// (UseFiles); nil: a lookup answers with an error.
	files Files
	// log takes the imposter's log lines (UseLog); nil: none.
	log func(msg string)

	// scripted: a stub carries JavaScript (scripted.go); scriptHost is
	// what it runs with (UseScripts; nil: it may not run), js the engine,
	// made at first use, and incarnation names the creation whose
	// injection state it keeps (ScriptStateFlow).
	javascript  bool // a stub carries JavaScript
	scripted    bool // ... which may reach the injection state
	scriptHost  *script.Host
	js          *script.Engine
	incarnation string
}

// Stub is one compiled stub.
type Stub struct {
	config     *Object // as created (behaviors upcast), echoed by GET
	predicates []*Predicate
	responses  []*response
	cycle      cycle // response indexes, each repeated `repeat` times
	next       int
	empty      *response
	// scenario, when set, names the scenario the stub gates on (gated:
	// it matches only when the scenario is in state required) or moves
	// (moves: to state to).
	scenario, required, to string
	gated, moves           bool
	// defIndex is the stub's place in its imposter's definition; -1 for
	// a stub that is not in it (a proxy's recording, one added through
	// the engine's API).
	defIndex int
	// javascript: a predicate, response or behavior carries JavaScript;
	// shell: a shellTransform runs a command (InjectionErrors).
	javascript, shell bool
	// reachesState: some of its JavaScript may reach the injection state
	// (script.MayReachState).
	reachesState bool
	// decoded: the predicates compare bytes, a binary tcp imposter's
	// (decodePredicates).
	decoded bool
	// id names the stub across edits of its imposter (AssignStubIDs): a
	// stub keeps its place in its response cycle while its id lives, as
	// mountebank keeps a stub's place until the stub is replaced. Empty
	// for a stub given none.
	id string
}

type response struct {
	is        *Object // exactly one of is, fault, proxy, inject
	inject    string  // an inject response's function
	fault     string
	proxy     *proxyConfig
	behaviors []behavior
	// answer is what an is response without behaviors always answers
	// (a CORS preflight aside), made on first use.
	answer *Outcome
}

// Faults a response may name.
const (
	FaultReset  = "CONNECTION_RESET_BY_PEER"
	FaultRandom = "RANDOM_DATA_THEN_CLOSE"
)

// New compiles an imposter from its creation request. port is the port it
// listens on (the request's, or the one assigned). Every error is a *Error
// in mountebank's words.
func New(creation *Object, port int) (*Imposter, error) {
	imp := &Imposter{Port: port, header: NewObject()}
	proto, _ := creation.Get("protocol")
	imp.Protocol, _ = proto.(string)
	switch imp.Protocol {
	case "http", "https":
	case "tcp":
		if err := imp.compileTCP(creation); err != nil {
			return nil, err
		}
	case "smtp":
		// Mail is accepted and recorded; stubs match it, and their
		// responses are not sent anywhere, as in mountebank.
	case "":
		return nil, badData("'protocol' is a required field", nil)
	default:
		return nil, &Error{Code: CodeCannotStart, Message: fmt.Sprintf("the %s protocol is not supported", imp.Protocol)}
	}
	for i := range creation.Len() {
		k, v := creation.At(i)
		if k != "stubs" {
			imp.header.Set(k, Clone(v))
		}
	}
	if v, ok := creation.Get("name"); ok {
		imp.Name, _ = v.(string)
	}
	if v, ok := creation.Get("recordRequests"); ok {
		imp.RecordRequests = truthy(v)
	}
	if v, ok := creation.Get("allowCORS"); ok {
		imp.AllowCORS = truthy(v)
	}
	if v, ok := creation.Get("defaultResponse"); ok && v != nil {
		o, ok := v.(*Object)
		if !ok {
			return nil, badData("defaultResponse must be an object", v)
		}
		imp.defaultResponse = o
	}
	var err error
	if imp.flow, err = parseFlowState(creation); err != nil {
		return nil, err
	}
	if v, ok := creation.Get("endOfRequestResolver"); ok && v != nil {
		o, isObj := v.(*Object)
		src, _ := o.Get("inject")
		if s, isStr := src.(string); !isObj || !isStr || s == "" {
			return nil, badData("endOfRequestResolver must be an object with an inject function", v)
		}
	}
	if err := CheckRegexTotal(creation); err != nil {
		return nil, err // before compiling any: see MaxImposterRegexInsts
	}
	if v, ok := creation.Get("stubs"); ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, badData("'stubs' must be an array", v)
		}
		for i, s := range list {
			st, err := NewStub(s)
			if err != nil {
				return nil, err
			}
			st.defIndex = i
			imp.stubs = append(imp.stubs, st)
		}
	}
	imp.stubsChanged()
	return imp, nil
}

// CheckProtocol validates an imposter's protocol field.
func CheckProtocol(proto any) error {
	switch proto {
	case "http", "https", "tcp", "smtp":
		return nil
	case nil:
		return badData("'protocol' is a required field", nil)
	}
	return badData(fmt.Sprintf("the %s protocol is not yet supported", ToString(proto)), nil)
}

// NewStub compiles one stub.
func NewStub(v any) (*Stub, error) {
	st, err := newStub(v)
	var e *Error
	switch {
	case !errors.As(err, &e):
	case e.stubSource:
		e.Source = string(Marshal(v, 0))
	case e.Code == CodeInvalidInjection && e.Source == nil:
		e.Source = v // mountebank names the whole stub
	}
	return st, err
}

func newStub(v any) (*Stub, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, badData("each stub must be an object", v)
	}
	o = Clone(o).(*Object)
	st := &Stub{config: o, defIndex: -1}
	if err := st.compileScenario(o); err != nil {
		return nil, err
	}
	if ps, ok := o.Get("predicates"); ok && ps != nil {
		list, ok := ps.([]any)
		if !ok {
			return nil, badData("'predicates' must be an array", o)
		}
		for _, p := range list {
			cp, err := CompilePredicate(p)
			if err != nil {
				return nil, err
			}
			st.predicates = append(st.predicates, cp)
		}
	}
	rs, _ := o.Get("responses")
	list, ok := rs.([]any)
	if !ok || len(list) == 0 {
		return nil, badData("'responses' must be a non-empty array", o)
	}
	for i, r := range list {
		ro, ok := r.(*Object)
		if !ok {
			return nil, badData("each response must be an object", r)
		}
		upcastBehaviors(ro)
		cr, repeat, err := compileResponse(ro)
		if err != nil {
			return nil, err
		}
		st.responses = append(st.responses, cr)
		st.cycle.add(i, repeat)
	}
	st.scanInjection()
	return st, nil
}

// upcastBehaviors turns the legacy _behaviors object into the behaviors
// array, in the order the old code ran them, as mountebank does when a
// response has neither behaviors nor repeat.
func upcastBehaviors(r *Object) {
	old, ok := r.Get("_behaviors")
	ob, isObj := old.(*Object)
	if !ok || !isObj {
		return
	}
	if _, has := r.Get("behaviors"); has {
		return
	}
	if _, has := r.Get("repeat"); has {
		return
	}
	var list []any
	for _, key := range []string{"wait", "lookup", "copy", "shellTransform", "decorate"} {
		v, ok := ob.Get(key)
		if !ok {
			continue
		}
		if arr, isArr := v.([]any); isArr {
			for _, x := range arr {
				list = append(list, NewObject().Set(key, x))
			}
		} else {
			list = append(list, NewObject().Set(key, v))
		}
	}
	if rep, ok := ob.Get("repeat"); ok {
		r.Set("repeat", rep)
	}
	r.Set("behaviors", append([]any{}, list...))
	r.Delete("_behaviors")
}

func compileResponse(r *Object) (*response, int, error) {
	kinds := 0
	for _, k := range []string{"is", "proxy", "inject", "fault"} {
		if v, ok := r.Get(k); ok && truthy(v) {
			kinds++
		}
	}
	if kinds > 1 {
		return nil, 0, badData("each response object must have only one response type", r)
	}
	repeat := 1
	if v, ok := r.Get("repeat"); ok {
		n, ok := repeatCount(v)
		if !ok {
			return nil, 0, badData(`"repeat" field must be an integer greater than 0`, r)
		}
		repeat = n
	}
	cr := &response{}
	var err error
	if cr.behaviors, err = compileBehaviors(r); err != nil {
		return nil, 0, err
	}
	switch {
	case has(r, "inject"):
		f, _ := r.Get("inject")
		src, ok := f.(string)
		if !ok {
			return nil, 0, badData("'inject' must be a string, representing a JavaScript function", r)
		}
		cr.inject = src
		return cr, repeat, nil
	case has(r, "proxy"):
		p, _ := r.Get("proxy")
		if cr.proxy, err = compileProxy(p, r); err != nil {
			return nil, 0, err
		}
		return cr, repeat, nil
	case has(r, "fault"):
		f, _ := r.Get("fault")
		switch f {
		case FaultReset, FaultRandom:
			cr.fault = f.(string)
			return cr, repeat, nil
		}
		// mountebank logs an unknown fault and answers as an empty is.
		cr.is = NewObject()
	case has(r, "is"):
		is, _ := r.Get("is")
		o, ok := is.(*Object)
		if !ok {
			return nil, 0, badData("'is' must be an object", r)
		}
		cr.is = o
	default:
		return nil, 0, badData("unrecognized response type", r)
	}
	if err := checkIs(cr.is); err != nil {
		return nil, 0, err
	}
	return cr, repeat, nil
}

func has(o *Object, k string) bool { v, ok := o.Get(k); return ok && truthy(v) }

// repeatCount reads repeat as mountebank does: a number or a string, an
// error only if it reads as a whole number at most 0 (parseInt), and
// repeated as many times as a JavaScript loop "j < repeat" runs (a string
// that is not a number runs it never: the response is skipped).
func repeatCount(v any) (int, bool) {
	var n float64
	switch t := v.(type) {
	case float64:
		if t <= 0 {
			return 0, false
		}
		n = t
	case string:
		s := strings.TrimSpace(t)
		lead := strings.TrimLeft(s, "+-")
		digits := len(lead) - len(strings.TrimLeft(lead, "0123456789"))
		if digits > 0 {
			if p, err := strconv.Atoi(s[:len(s)-len(lead)+digits]); err == nil && p <= 0 {
				return 0, false
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || s == "" {
			return 0, true
		}
		n = f
	default:
		return 0, false
	}
	return int(math.Min(math.Ceil(n), 1e6)), true
}

// checkIs validates what the response would send. Its statusCode is
// not checked here: a behavior may fill it in (postProcess checks it).
func checkIs(is *Object) error {
	if h, ok := is.Get("headers"); ok && h != nil {
		if _, ok := h.(*Object); !ok {
			return badData("headers must be an object", is)
		}
	}
	return nil
}

func statusOf(v any) (int, bool) {
	var n int
	switch t := v.(type) {
	case float64:
		n = int(t)
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(t)); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n >= 100 && n <= 999
}

// Outcome is what the imposter answers a request with.
type Outcome struct {
	Fault      string // non-empty: do this to the connection instead of answering
	StatusCode int
	// Headers in order; a value is a string or several.
	Headers []Header
	Body    []byte
	Wait    time.Duration // how long to wait before answering (the wait behavior)
	// Proxy, when set, is a call to make upstream instead; its answer goes
	// to Proxied, which gives the Outcome to send.
	Proxy *ProxyCall
}

// Header is one response header and its values.
type Header struct {
	Name   string
	Values []string
}

// Respond matches the request against the stubs, in order, and produces
// the first match's next response (the default response if none
// matches). It records the request first, if the imposter records. A
// stateful imposter's requests go through RespondIn instead: here every
// scenario reads as Started.
//
// With shared cycles (Clustered), a match whose stub cycles through
// more than one response returns no outcome but a Cycle: the caller
// advances the cycle at its owner and answers with RespondAt.
func (imp *Imposter) Respond(r *Request) (Outcome, *Cycle, error) {
	if r.scriptErr != nil {
		r.scriptErr = nil // served again (a proxyOnce rematch)
	}
	imp.count(r)
	return imp.match(r, nil)
}

func (imp *Imposter) count(r *Request) {
	imp.NumberOfRequests++
	if imp.RecordRequests {
		// Stamped with an arrival time that never goes back on this
		// member (a clock stepped back cannot reorder its own requests
		// when the cluster's are merged by time) and this member's count.
		at := imp.lastAtNs
		if !r.Arrived.IsZero() {
			at = max(at, r.Arrived.UnixNano())
		}
		imp.lastAtNs = at
		imp.recSeq++
		imp.requests.add(Recorded{AtNs: at, Seq: imp.recSeq, Value: r.Value(), size: r.size()})
	}
}

// Rematch answers a request already counted and recorded: a proxyOnce
// caller that waited for another's recording matches again.
func (imp *Imposter) Rematch(r *Request) (Outcome, *Cycle, error) {
	return imp.match(r, nil)
}

// Cycle is a matched stub whose response comes from a cycle the cluster
// shares: Step advances it at its owner (one increment of a counter in
// the flow store, under the stub's sequence key), and RespondAt answers
// with the response the counter's new value names.
type Cycle struct {
	stub *Stub
	Step flow.Request
}

// cycleTTLMs is how long a shared cycle's place is kept after the stub's
// last request: the flow store's longest TTL (an hour). A stub idle for
// longer starts its cycle again.
const cycleTTLMs = 3_600_000

// Clustered makes the imposter one of a cluster's. A stub with more than
// one response to cycle through is advanced at its cycle's owner, so
// that it answers in turn whichever member takes each request
// (localCycle keeps each member's own place instead: the planted bug
// local-cycle). A proxyAlways response is not placed here but handed to
// the caller (ProxyCall.Recording), which stores it with the imposter's
// configuration for every member to place (AddAlwaysRecording).
func (imp *Imposter) Clustered(scope string, localCycle bool) {
	imp.clustered, imp.scope, imp.localCycle = true, scope, localCycle
}

// sharesCycle reports whether st's response comes from the cluster's
// cycle.
func (imp *Imposter) sharesCycle(st *Stub) bool {
	return st != nil && imp.clustered && !imp.localCycle && st.sequenced()
}

// match finds the first stub whose predicates match and whose scenario
// gate the flow's states pass, and produces its next response; or, for
// a shared cycle, the Cycle to advance.
func (imp *Imposter) match(r *Request, states States) (Outcome, *Cycle, error) {
	st := imp.find(r, states)
	if r.scriptErr != nil {
		return Outcome{}, nil, r.scriptErr // an inject predicate failed
	}
	return imp.answer(r, st)
}

// answer produces the matched stub st's next response (the default
// response if st is nil), or the Cycle to advance if it comes from a
// shared cycle.
func (imp *Imposter) answer(r *Request, st *Stub) (Outcome, *Cycle, error) {
	if imp.sharesCycle(st) {
		return Outcome{}, imp.cycleOf(st), nil
	}
	var resp *response
	if st != nil {
		resp = st.nextResponse()
	}
	out, err := imp.produce(r, st, resp)
	return out, nil, err
}

// cycleOf is the step that advances st's shared cycle.
func (imp *Imposter) cycleOf(st *Stub) *Cycle {
	mode, _ := shard.ParseMode(imp.flow.Durability) // checked at creation
	key := st.id
	if key == "" {
		// A stub with no id (a proxy's recording, which proxyAlways
		// appends responses to): named by its predicates, which every
		// member places alike and appending leaves as they are.
		p, _ := st.config.Get("predicates")
		key = fmt.Sprintf("r%016x", xxhash.Sum64(stableJSON([]any{imp.scope, p}, nil)))
	}
	return &Cycle{stub: st, Step: flow.Request{Flow: ring.SequenceKey(uint16(imp.Port), key), Op: flow.OpIncr, Key: "n", Delta: 1,
		TTLMs: cycleTTLMs, Mode: mode}}
}

// RespondAt answers a request matched to a shared cycle, with the
// response the cycle's counter names: n is the counter's value after
// this request's step (the first request's is 1).
func (imp *Imposter) RespondAt(r *Request, c *Cycle, n int64) (Outcome, error) {
	st := c.stub
	i := int((n - 1) % int64(st.cycle.len()))
	if i < 0 {
		i += st.cycle.len()
	}
	return imp.produce(r, st, st.responses[st.cycle.at(i)])
}

// find returns the first stub whose predicates match and whose scenario
// gate the flow's states pass; nil if none does.
func (imp *Imposter) find(r *Request, states States) *Stub {
	imp.withScript(r)
	if i := findIn(imp.stubs, r, states, imp.log); i >= 0 {
		return imp.stubs[i]
	}
	return nil
}

// findIn is the index of the first of stubs whose predicates match and
// whose scenario gate states pass; -1 if none does. Their selectors share
// one work budget; why a stub's predicates could not be evaluated goes to
// log (if not nil).
func findIn(stubs []*Stub, r *Request, states States, log func(string)) int {
	budget := newSelBudget()
	for i, st := range stubs {
		if st.gated {
			if cur, _ := states.state(st.scenario); cur != st.required {
				continue
			}
		}
		if st.matches(r, log, budget) {
			return i
		}
	}
	return -1
}

// produce makes the outcome of response resp of the matched stub st
// (the default response when resp is nil).
func (imp *Imposter) produce(r *Request, matched *Stub, resp *response) (Outcome, error) {
	if resp == nil {
		if imp.noMatch == nil {
			imp.noMatch = &response{is: NewObject()}
		}
		resp = imp.noMatch // the default response
	}
	if resp.fault != "" {
		return Outcome{Fault: resp.fault}, nil
	}
	imp.withScript(r)
	if resp.proxy != nil {
		return Outcome{Proxy: imp.proxyCall(r, matched, resp)}, nil
	}
	if resp.inject != "" {
		is, err := imp.injectResponse(r, resp.inject)
		if err != nil {
			return Outcome{}, err
		}
		return imp.finish(r, is, resp.behaviors)
	}
	preflight := imp.AllowCORS && r.Method == "OPTIONS"
	if len(resp.behaviors) == 0 && !preflight {
		// Nothing in the answer depends on the request: make it once.
		if resp.answer == nil {
			out, err := imp.postProcess(Clone(resp.is).(*Object), r)
			if err != nil {
				return Outcome{}, err
			}
			resp.answer = &out
		}
		return *resp.answer, nil
	}
	return imp.finish(r, Clone(resp.is).(*Object), resp.behaviors)
}

// finish runs the behaviors on is, a response the imposter's own, and
// makes the outcome.
func (imp *Imposter) finish(r *Request, is *Object, behaviors []behavior) (Outcome, error) {
	var wait time.Duration
	for _, b := range behaviors {
		d, err := b.apply(r, is, imp.files)
		if err != nil {
			return Outcome{}, err
		}
		wait += d
	}
	out, err := imp.postProcess(is, r)
	out.Wait = wait
	return out, err
}

// matches reports whether every predicate matches r, their selectors
// working within budget. A predicate that cannot be evaluated (a selector
// past the budget) does not match, and log is told.
func (st *Stub) matches(r *Request, log func(string), budget *selBudget) bool {
	for _, p := range st.predicates {
		ok, err := p.evaluateIn(r, budget)
		if err != nil && log != nil {
			log(err.Error() + "; the stub is passed over")
		}
		if !ok {
			return false
		}
	}
	return true
}

// sequenced reports whether the stub's answer depends on its place in
// its cycle: more than one distinct response to cycle through. The cycle
// lists response indexes in order (compiled in order, recordings added at
// the end), so its ends differ exactly when it holds two: a check every
// request makes, in constant time.
func (st *Stub) sequenced() bool {
	return st.cycle.len() > 0 && st.cycle.runs[0] != st.cycle.runs[len(st.cycle.runs)-1]
}

// cycle is a stub's responses in the order it serves them, run-length
// encoded: run i serves response runs[i] until position ends[i]. A
// response repeated a million times is one run, not a million entries (a
// 2 KB creation of a hundred such responses took 4.4 GB expanded).
type cycle struct {
	runs, ends []int
}

// add appends response resp, times times in a row.
func (c *cycle) add(resp, times int) {
	if times <= 0 {
		return
	}
	c.runs = append(c.runs, resp)
	c.ends = append(c.ends, c.len()+times)
}

// len is the positions in the cycle.
func (c *cycle) len() int {
	if len(c.ends) == 0 {
		return 0
	}
	return c.ends[len(c.ends)-1]
}

// at is the response served at position pos (0 <= pos < len).
func (c *cycle) at(pos int) int {
	i, _ := slices.BinarySearch(c.ends, pos+1)
	return c.runs[i]
}

func (st *Stub) nextResponse() *response {
	n := st.cycle.len()
	if n == 0 {
		if st.empty == nil {
			st.empty = &response{is: NewObject()}
		}
		return st.empty // every response repeated zero times
	}
	i := st.cycle.at(st.next % n)
	st.next = (st.next + 1) % n
	return st.responses[i]
}

// postProcess fills in defaults and writes the body as mountebank does:
// the stub's status, headers (all or nothing) and body, else the default
// response's; an object body as JSON indented by four spaces; CORS
// preflight headers; Connection: close unless set; Content-Length
// corrected if set.
//
// A status that is no HTTP status (what a copy or lookup token left, or
// a number outside 100..999) fails the request as node's writeHead fails
// mountebank's: mountebank takes any statusCode when the stub is made,
// since a behavior may fill it in.
func (imp *Imposter) postProcess(is *Object, r *Request) (Outcome, error) {
	if imp.Protocol == "tcp" {
		return imp.tcpOutcome(is)
	}
	def := imp.defaultResponse
	if def == nil {
		def = NewObject()
	}
	pick := func(k string) any {
		if v, ok := is.Get(k); ok && truthy(v) {
			return v
		}
		if v, ok := def.Get(k); ok && truthy(v) {
			return v
		}
		return nil
	}
	out := Outcome{StatusCode: 200}
	if sc := pick("statusCode"); sc != nil {
		n, ok := statusOf(sc)
		if !ok {
			return Outcome{}, &Error{Code: CodeInvalidStatus, Message: "Invalid status code: " + ToString(sc)}
		}
		out.StatusCode = n
	}
	headers := NewObject()
	if h, ok := is.Get("headers"); ok && h != nil {
		headers, _ = h.(*Object)
	} else if h, ok := def.Get("headers"); ok {
		if ho, ok := h.(*Object); ok {
			headers = ho
		}
	}
	headers = Clone(orEmpty(headers)).(*Object)
	binary := false
	if m := pick("_mode"); m != nil {
		binary = m == "binary"
	}
	var body string
	switch b := pick("body").(type) {
	case nil:
	case *Object, []any:
		body = string(Marshal(b, 4))
	default:
		body = ToString(b)
	}
	if imp.AllowCORS && r.Method == "OPTIONS" {
		reqH := orEmpty(r.Headers)
		acrh, acrm, origin := headerValue(reqH, "Access-Control-Request-Headers"), headerValue(reqH, "Access-Control-Request-Method"), headerValue(reqH, "Origin")
		if acrh != "" && acrm != "" && origin != "" {
			setHeader(headers, "Access-Control-Allow-Headers", acrh)
			setHeader(headers, "Access-Control-Allow-Methods", acrm)
			setHeader(headers, "Access-Control-Allow-Origin", origin)
		}
	}
	if binary {
		body = base64Clean.ReplaceAllString(body, "")
		if dec, err := base64.StdEncoding.DecodeString(padBase64(body)); err == nil {
			out.Body = dec
		}
	} else {
		out.Body = []byte(body)
	}
	if _, ok := headerName(headers, "Connection"); !ok {
		headers.Set("Connection", "close")
	}
	if name, ok := headerName(headers, "Content-Length"); ok {
		headers.Set(name, strconv.Itoa(len(out.Body)))
	}
	for i := range headers.Len() {
		k, v := headers.At(i)
		h := Header{Name: k}
		switch t := v.(type) {
		case []any:
			for _, x := range t {
				h.Values = append(h.Values, ToString(x))
			}
		case nil:
			continue
		default:
			h.Values = []string{ToString(t)}
		}
		out.Headers = append(out.Headers, h)
	}
	return out, nil
}

var base64Clean = regexp.MustCompile(`[^A-Za-z0-9=+/]+`)

// padBase64 tolerates missing padding, as Buffer.from(s, 'base64') does.
func padBase64(s string) string {
	s = strings.TrimRight(s, "=")
	if m := len(s) % 4; m != 0 {
		s += strings.Repeat("=", 4-m)
	}
	return s
}

// headerName finds a header case-insensitively.
func headerName(h *Object, name string) (string, bool) {
	for _, k := range h.Keys() {
		if strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

func headerValue(h *Object, name string) string {
	k, ok := headerName(h, name)
	if !ok {
		return ""
	}
	v, _ := h.Get(k)
	return ToString(v)
}

func setHeader(h *Object, name, value string) {
	if k, ok := headerName(h, name); ok {
		name = k
	}
	h.Set(name, value)
}

// --- stubs through the API

// Stubs returns how many stubs there are.
func (imp *Imposter) Stubs() int { return len(imp.stubs) }

// ReplaceStubs replaces every stub.
func (imp *Imposter) ReplaceStubs(stubs []*Stub) {
	imp.stubs = stubs
	imp.stubsChanged()
}

// The stub list is copied on every change but an append: a Candidates
// snapshot taken before the change is being read, outside the imposter's
// lock, by requests matching against it, and an append writes only past
// the snapshot's length.

// InsertStub puts a stub at index (the end if index is len).
func (imp *Imposter) InsertStub(st *Stub, index int) {
	imp.stubs = slices.Insert(slices.Clone(imp.stubs), index, st)
	imp.stubsChanged()
}

// ReplaceStub replaces the stub at index.
func (imp *Imposter) ReplaceStub(st *Stub, index int) {
	stubs := slices.Clone(imp.stubs)
	stubs[index] = st
	imp.stubs = stubs
	imp.stubsChanged()
}

// DeleteStub removes the stub at index.
func (imp *Imposter) DeleteStub(index int) {
	imp.stubs = slices.Delete(slices.Clone(imp.stubs), index, index+1)
	imp.stubsChanged()
}

// Candidates is the stubs as they are now, for matching a request
// outside the imposter's lock (Find): predicates are compiled once and
// read only, so any number of requests evaluate them at once, and a
// costly one (an XPath over a large body) holds up no other request and
// no admin call. Take it under the lock; answer with RespondFound, under
// the lock again.
type Candidates struct {
	stubs []*Stub
	gen   uint64
	log   func(string)
	// js is the engine inject predicates run in (an engine is safe to
	// call from any goroutine); nil when the imposter has none or may
	// not run them.
	js *script.Engine
}

// Candidates returns the stubs to match against (under the lock).
func (imp *Imposter) Candidates() Candidates {
	c := Candidates{stubs: imp.stubs, gen: imp.stubsGen, log: imp.log}
	if imp.javascript {
		c.js, _ = imp.engine()
	}
	return c
}

// Find is the index of the first stub whose predicates match r, -1 if
// none does; as Respond does, every scenario reads as Started. It takes
// no lock and changes nothing.
func (c Candidates) Find(r *Request) int {
	if r.js == nil {
		r.js = c.js
	}
	return findIn(c.stubs, r, nil, c.log)
}

// RespondFound is Respond for a request Find matched against c (found is
// its answer): when the stubs have not changed since c was taken it
// answers with that stub; otherwise it matches again here, under the
// lock, as Respond does. ok is false for a stateful imposter, whose
// requests go through RespondIn.
func (imp *Imposter) RespondFound(r *Request, c Candidates, found int) (Outcome, *Cycle, error) {
	imp.count(r)
	if c.gen != imp.stubsGen || imp.scripted {
		r.scriptErr = nil
		return imp.match(r, nil)
	}
	if r.scriptErr != nil {
		return Outcome{}, nil, r.scriptErr // an inject predicate failed
	}
	var st *Stub
	if found >= 0 {
		st = c.stubs[found]
	}
	return imp.answer(r, st)
}

// Inherit carries what serving old taught into imp, a newer definition
// of the same imposter: the recorded requests and their count, and the
// place in its response cycle of every stub that kept its id (mountebank
// keeps a stub's place until the stub itself is replaced; a stub given
// no id keeps it while its definition is unchanged). Stubs a proxy
// recorded into old are not carried: they were never part of its
// definition.
func (imp *Imposter) Inherit(old *Imposter) {
	imp.NumberOfRequests, imp.requests = old.NumberOfRequests, old.requests
	if old.js != nil && imp.js == nil {
		imp.js, old.js = old.js, nil // the injection state, timers and all
	}
	imp.lastAtNs, imp.recSeq = old.lastAtNs, old.recSeq
	olds := make([]string, len(old.stubs))
	for i, st := range old.stubs {
		if st.id != "" {
			olds[i] = "id:" + st.id
		} else {
			olds[i] = string(Marshal(st.config, 0))
		}
	}
	for _, st := range imp.stubs {
		b := "id:" + st.id
		if st.id == "" {
			b = string(Marshal(st.config, 0))
		}
		for i, o := range olds {
			if o == b {
				st.next, olds[i] = old.stubs[i].next, "" // each old stub once
				break
			}
		}
	}
}

// AssignStubIDs names the definition's stubs, in order, with the ids
// their stored definition keeps for them.
func (imp *Imposter) AssignStubIDs(ids []string) error {
	n := 0
	for _, st := range imp.stubs {
		if st.defIndex >= 0 {
			n++
		}
	}
	if len(ids) != n {
		return fmt.Errorf("%d stub ids for %d stubs", len(ids), n)
	}
	for _, st := range imp.stubs {
		if st.defIndex >= 0 {
			st.id = ids[st.defIndex]
		}
	}
	return nil
}

// ResetRequests forgets the recorded requests and the count.
func (imp *Imposter) ResetRequests() {
	imp.requests = recordRing{}
	imp.NumberOfRequests = 0
}

// PrintOptions are the query flags of GET /imposters.
type PrintOptions struct {
	List, Replayable, RemoveProxies bool
	// BaseURL prefixes every link ("http://" and the request's Host), as
	// mountebank makes links absolute.
	BaseURL string
	// Gathered, when set, is what the cluster recorded (MergeRecords),
	// printed instead of this member's own requests and count.
	Gathered *Gathered
}

// StubValue is stub i as GET prints it, with its link.
func (imp *Imposter) StubValue(i int, baseURL string) *Object {
	o := Clone(imp.stubs[i].config).(*Object)
	o.Set("_links", NewObject().Set("self", NewObject().Set("href", fmt.Sprintf("%s/imposters/%d/stubs/%d", baseURL, imp.Port, i))))
	return o
}

// Value is the imposter as mountebank prints it (imposterPrinter).
func (imp *Imposter) Value(opt PrintOptions) *Object {
	o := NewObject()
	o.Set("protocol", imp.Protocol)
	o.Set("port", float64(imp.Port))
	if v, ok := imp.header.Get("name"); ok && truthy(v) {
		o.Set("name", Clone(v))
	}
	if v, ok := imp.header.Get("defaultResponse"); ok && truthy(v) {
		o.Set("defaultResponse", Clone(v))
	}
	if !opt.Replayable {
		n := imp.NumberOfRequests
		if opt.Gathered != nil {
			n = opt.Gathered.Count
		}
		o.Set("numberOfRequests", float64(n))
	}
	if !opt.List {
		o.Set("recordRequests", imp.RecordRequests)
		if imp.Protocol == "tcp" {
			o.Set("mode", imp.Mode) // mountebank's tcp metadata
		}
		if imp.Protocol == "https" {
			// mountebank's https metadata, in its order.
			o.Set("key", imp.KeyPEM)
			o.Set("cert", imp.CertPEM)
			mutual, _ := imp.header.Get("mutualAuth")
			o.Set("mutualAuth", truthy(mutual))
			reject, _ := imp.header.Get("rejectUnauthorized")
			o.Set("rejectUnauthorized", truthy(reject))
			ca, _ := imp.header.Get("ca")
			o.Set("ca", Clone(ca))
		}
	}
	if v, ok := imp.header.Get("endOfRequestResolver"); ok && truthy(v) {
		o.Set("endOfRequestResolver", Clone(v))
	}
	if v, ok := imp.header.Get("allowCORS"); ok && truthy(v) {
		o.Set("allowCORS", Clone(v))
	}
	if raw, given := imp.header.Get("_rift"); !opt.List && (given || imp.Stateful()) {
		// The flow knobs: as given in the replayable view, so that it
		// replays; resolved, each marked set or default, otherwise.
		if opt.Replayable {
			if given {
				o.Set("_rift", Clone(raw))
			}
		} else {
			o.Set("_rift", NewObject().Set("flowState", imp.flow.Value()))
		}
	}
	base := fmt.Sprintf("%s/imposters/%d", opt.BaseURL, imp.Port)
	links := func() *Object {
		return NewObject().Set("self", NewObject().Set("href", base)).Set("stubs", NewObject().Set("href", base+"/stubs"))
	}
	if opt.List {
		o.Set("_links", links())
		return o
	}
	if !opt.Replayable {
		var reqs []any
		if opt.Gathered != nil {
			reqs = make([]any, len(opt.Gathered.Requests))
			for i, r := range opt.Gathered.Requests {
				reqs[i] = Clone(r)
			}
		} else {
			reqs = make([]any, 0, imp.requests.n)
			for r := range imp.records() {
				reqs = append(reqs, Clone(r.Value))
			}
		}
		o.Set("requests", reqs)
	}
	stubs := make([]any, 0, len(imp.stubs))
	for i := range imp.stubs {
		var st *Object
		if opt.Replayable {
			st = Clone(imp.stubs[i].config).(*Object)
			dropResponseTimes(st)
		} else {
			st = imp.StubValue(i, opt.BaseURL) // linked at its index before proxies go
		}
		if opt.RemoveProxies && !removeProxies(st) {
			continue
		}
		stubs = append(stubs, st)
	}
	o.Set("stubs", stubs)
	if !opt.Replayable {
		o.Set("_links", links())
	}
	return o
}

// dropResponseTimes removes _proxyResponseTime from a stub's recorded
// responses (the replayable view).
func dropResponseTimes(st *Object) {
	rs, _ := st.Get("responses")
	list, _ := rs.([]any)
	for _, r := range list {
		if ro, ok := r.(*Object); ok {
			if is, ok := ro.Get("is"); ok {
				if io, ok := is.(*Object); ok {
					io.Delete("_proxyResponseTime")
				}
			}
		}
	}
}

// removeProxies drops a stub's proxy responses; it reports whether any
// response is left.
func removeProxies(st *Object) bool {
	rs, _ := st.Get("responses")
	list, _ := rs.([]any)
	var left []any
	for _, r := range list {
		if ro, ok := r.(*Object); ok {
			if _, isProxy := ro.Get("proxy"); isProxy {
				continue
			}
		}
		left = append(left, r)
	}
	st.Set("responses", append([]any{}, left...))
	return len(left) > 0
}
