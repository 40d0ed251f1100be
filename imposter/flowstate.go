package imposter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
)

// This file: per-flow state for stateful stubs. An imposter's
// `_rift.flowState` object (RiftCluster's spelling, so its imposter files
// work here) says where a request's flow id comes from and how the flow
// is kept; stubs with `scenarioName` gate on, and move, a scenario's state
// in the request's flow. The engine stays pure: it names the flow and the
// keys it needs, the caller reads them from the flow store, and the
// engine answers with the state read and returns the transition to apply.

// FlowState is an imposter's resolved `_rift.flowState` knobs.
type FlowState struct {
	// Header names the header the flow id comes from; empty: the port
	// (flowIdSource "imposter_port").
	Header          string
	TTLSeconds      int
	Durability      string // sync, async, none
	ReadConsistency string // strong, local
	ContextScope    string // imposter, tenant, fleet
	Tenant          string // the tenant, for contextScope "tenant"
	// Set names the knobs the imposter gave; the rest are defaults.
	Set map[string]bool
}

// The knobs' defaults.
const (
	DefaultTTLSeconds = 300
	StateStarted      = "Started" // a scenario's state before any transition
)

// flowKnobs lists the knobs in the order GET prints them.
var flowKnobs = []string{"flowIdSource", "ttlSeconds", "durability", "readConsistency", "contextScope", "tenant"}

// parseFlowState reads `_rift.flowState` (absent: every default). A bad
// value is an error naming the field and what it may be.
func parseFlowState(creation *Object) (FlowState, error) {
	fs := FlowState{TTLSeconds: DefaultTTLSeconds, Durability: "async", ReadConsistency: "strong", ContextScope: "imposter", Set: map[string]bool{}}
	rift, ok := creation.Get("_rift")
	if !ok || rift == nil {
		return fs, nil
	}
	ro, isObj := rift.(*Object)
	if !isObj {
		return fs, badData("'_rift' must be an object", rift)
	}
	v, ok := ro.Get("flowState")
	if !ok || v == nil {
		return fs, nil
	}
	o, isObj := v.(*Object)
	if !isObj {
		return fs, badData("'_rift.flowState' must be an object", v)
	}
	for _, k := range o.Keys() {
		if !slices.Contains(flowKnobs, k) {
			return fs, badData(fmt.Sprintf("'_rift.flowState.%s' is not a flowState field; the fields are %s", k, strings.Join(flowKnobs, ", ")), v)
		}
		fs.Set[k] = true
	}
	oneOf := func(field string, dst *string, allowed ...string) error {
		x, ok := o.Get(field)
		if !ok {
			return nil
		}
		s, isStr := x.(string)
		if !isStr || !slices.Contains(allowed, s) {
			return badData(fmt.Sprintf("'_rift.flowState.%s' must be one of %s", field, quoteAll(allowed)), x)
		}
		*dst = s
		return nil
	}
	if x, ok := o.Get("flowIdSource"); ok {
		s, _ := x.(string)
		switch {
		case s == "imposter_port":
		case strings.HasPrefix(s, "header:") && validHeaderName(s[len("header:"):]):
			fs.Header = s[len("header:"):]
		default:
			return fs, badData(`'_rift.flowState.flowIdSource' must be "imposter_port" or "header:<Name>"`, x)
		}
	}
	if x, ok := o.Get("ttlSeconds"); ok {
		f, isNum := x.(float64)
		if !isNum || f < 1 || f != float64(int(f)) || f > 1<<31 {
			return fs, badData("'_rift.flowState.ttlSeconds' must be a whole number of seconds, at least 1", x)
		}
		fs.TTLSeconds = int(f)
	}
	for _, e := range []error{
		oneOf("durability", &fs.Durability, "sync", "async", "none"),
		oneOf("readConsistency", &fs.ReadConsistency, "strong", "local"),
		oneOf("contextScope", &fs.ContextScope, "imposter", "tenant", "fleet"),
	} {
		if e != nil {
			return fs, e
		}
	}
	if x, ok := o.Get("tenant"); ok {
		s, isStr := x.(string)
		if !isStr || ring.ValidateTenant(s) != nil {
			return fs, badData("'_rift.flowState.tenant' must be a non-empty string without ':'", x)
		}
		fs.Tenant = s
	}
	if (fs.ContextScope == "tenant") != (fs.Tenant != "") {
		return fs, badData(`'_rift.flowState.tenant' is required with contextScope "tenant", and only with it`, v)
	}
	return fs, nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// validHeaderName reports a header name HTTP allows (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return false
		}
	}
	return true
}

// Value is the knobs as GET shows them: each resolved value, and whether
// the imposter set it or it is the default.
func (fs FlowState) Value() *Object {
	o := NewObject()
	src := "imposter_port"
	if fs.Header != "" {
		src = "header:" + fs.Header
	}
	vals := []any{src, float64(fs.TTLSeconds), fs.Durability, fs.ReadConsistency, fs.ContextScope, fs.Tenant}
	for i, k := range flowKnobs {
		if k == "tenant" && fs.Tenant == "" {
			continue
		}
		from := "default"
		if fs.Set[k] {
			from = "set"
		}
		o.Set(k, NewObject().Set("value", vals[i]).Set("from", from))
	}
	return o
}

// ScopedFlow is the flow key of a raw flow id: the id under its scope's
// prefix (i<port>:, t<tenant>:, f:), as the ring places it.
func (imp *Imposter) ScopedFlow(id string) string {
	switch imp.flow.ContextScope {
	case "fleet":
		return ring.FleetKey(id)
	case "tenant":
		return ring.TenantKey(imp.flow.Tenant, id)
	}
	return ring.ImposterKey(uint16(imp.Port), id)
}

// FlowOf is the scoped flow a request's state lives in: the flowIdSource
// header's value, or the port when the header is absent or empty.
func (imp *Imposter) FlowOf(r *Request) string {
	id := ""
	if imp.flow.Header != "" && r.Headers != nil {
		if k, ok := headerName(r.Headers, imp.flow.Header); ok {
			v, _ := r.Headers.Get(k)
			if arr, isArr := v.([]any); isArr && len(arr) > 0 {
				v = arr[0]
			}
			id = ToString(v)
		}
	}
	if id == "" {
		id = strconv.Itoa(imp.Port)
	}
	return imp.ScopedFlow(id)
}

// FlowState is the imposter's resolved knobs.
func (imp *Imposter) FlowState() FlowState { return imp.flow }

// Stateful reports whether any stub gates on or moves a scenario: only
// then does a request touch flow state.
func (imp *Imposter) Stateful() bool { return len(imp.scenarios) > 0 }

// Scenarios lists the scenario names the stubs use, sorted. The slice is
// shared: callers must not change it (it is replaced, never modified,
// when the stubs change).
func (imp *Imposter) Scenarios() []string { return imp.scenarios }

// stubsChanged rebuilds what is derived from the stubs.
func (imp *Imposter) stubsChanged() {
	imp.stubsGen++
	var names []string
	imp.scripted, imp.javascript = false, false
	if imp.Mode == "binary" {
		imp.decodePredicates()
	}
	for _, st := range imp.stubs {
		imp.scripted = imp.scripted || st.reachesState
		imp.javascript = imp.javascript || st.javascript
		if st.scenario != "" && !slices.Contains(names, st.scenario) {
			names = append(names, st.scenario)
		}
	}
	slices.Sort(names)
	imp.scenarios = names
}

// ScenarioKey is the flow key holding a scenario's state.
func ScenarioKey(name string) string { return "scenario:" + name }

// Transition is a scenario move a matched stub asks for. With Gated, it
// is a compare-and-set from the state the gate read (From; FromAbsent
// when the key was absent, which reads as Started); without, a plain set.
type Transition struct {
	Flow       string
	Scenario   string
	Gated      bool
	From       string
	FromAbsent bool
	To         string
}

// States is what a flow holds for an imposter's scenarios: the state of
// each scenario that has one (absent: Started).
type States map[string]string

// state reads a scenario's state: Started when absent.
func (s States) state(name string) (string, bool) {
	v, ok := s[name]
	if !ok {
		return StateStarted, false
	}
	return v, true
}

// compileScenario reads a stub's scenario fields.
func (st *Stub) compileScenario(o *Object) error {
	str := func(k string) (string, bool, error) {
		v, ok := o.Get(k)
		if !ok || v == nil {
			return "", false, nil
		}
		s, isStr := v.(string)
		if !isStr || s == "" {
			return "", true, badData(fmt.Sprintf("'%s' must be a non-empty string", k), o)
		}
		return s, true, nil
	}
	var err error
	var has bool
	if st.scenario, _, err = str("scenarioName"); err != nil {
		return err
	}
	if st.required, has, err = str("requiredScenarioState"); err != nil {
		return err
	}
	st.gated = has
	var moves bool
	if st.to, moves, err = str("newScenarioState"); err != nil {
		return err
	}
	st.moves = moves
	if st.scenario == "" && (st.gated || st.moves) {
		return badData("'requiredScenarioState' and 'newScenarioState' need 'scenarioName'", o)
	}
	return nil
}

// RespondIn is Respond for a stateful imposter: states is what the
// request's flow holds (read by the caller), and a stub whose gate the
// state does not pass does not match. It returns the matched stub's
// transition, if any, for the caller to apply before answering, and the
// Cycle to advance (RespondAt) if the stub's response comes from a
// shared cycle.
func (imp *Imposter) RespondIn(r *Request, flow string, states States) (Outcome, *Cycle, *Transition, error) {
	imp.count(r)
	st := imp.find(r, states)
	if r.scriptErr != nil {
		return Outcome{}, nil, nil, r.scriptErr // an inject predicate failed
	}
	out, cyc, err := imp.answer(r, st)
	if st == nil || st.scenario == "" || !st.moves || err != nil {
		return out, cyc, nil, err
	}
	tr := &Transition{Flow: flow, Scenario: st.scenario, To: st.to}
	if st.gated {
		cur, present := states.state(st.scenario)
		tr.Gated, tr.From, tr.FromAbsent = true, cur, !present
	}
	return out, cyc, tr, nil
}

// The store requests a stateful request makes, built here so that every
// driver (the HTTP server, the simulator) makes the same ones.

// StateRead is the one read of a flow's scenario states: every key of
// the flow, from the owner (readConsistency strong) or this node's copy
// (local).
func (imp *Imposter) StateRead(flowKey string) flow.Request {
	read := flow.Strong
	if imp.flow.ReadConsistency == "local" {
		read = flow.Local
	}
	return flow.Request{Flow: flowKey, Op: flow.OpGetAll, Read: read}
}

// StatesOf reads the scenario states out of a StateRead's answer.
func (imp *Imposter) StatesOf(resp flow.Response) States {
	states := States{}
	for _, n := range imp.Scenarios() {
		if v, ok := resp.All[ScenarioKey(n)]; ok {
			states[n] = string(v)
		}
	}
	return states
}

// Write is a write to a flow with the imposter's TTL and durability.
func (imp *Imposter) Write(flowKey string, op flow.Op) flow.Request {
	mode, _ := shard.ParseMode(imp.flow.Durability) // checked at creation
	return flow.Request{Flow: flowKey, Op: op, TTLMs: int64(imp.flow.TTLSeconds) * 1000, Mode: mode}
}

// Apply is the store request that makes a transition: a compare-and-set
// from the state the gate read (absent: expect absent), or a plain set
// without a gate.
func (imp *Imposter) Apply(tr *Transition) flow.Request {
	if !tr.Gated {
		req := imp.Write(tr.Flow, flow.OpSet)
		req.Key, req.Value = ScenarioKey(tr.Scenario), []byte(tr.To)
		return req
	}
	req := imp.Write(tr.Flow, flow.OpCas)
	req.Key, req.Value = ScenarioKey(tr.Scenario), []byte(tr.To)
	req.Expect, req.ExpectAbsent = []byte(tr.From), tr.FromAbsent
	return req
}
