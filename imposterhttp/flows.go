package imposterhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/imposter"
)

// This file: stateful imposters. A request to an imposter whose stubs
// use scenarios reads its flow's scenario states from the flow store,
// lets the engine match with them, and applies the matched stub's
// transition before answering. Where the request is served is the
// routing decision (core/routing): here, each store call going to the
// flow's owner by itself (RoutePerOp), or the whole request forwarded
// once to the owner (RouteForward), which then runs every read and
// transition locally. Any store failure is a 503 naming why, never an
// answer from a state the flow was not in.

// Flows is the flow store as imposters use it, and the directory that
// names a flow's owner.
type Flows interface {
	Do(ctx context.Context, req flow.Request) (flow.Response, error)
	OwnerOf(ctx context.Context, flow string) (routing.Owner, error)
}

// RouteMode is how a request for a flow owned elsewhere reaches the
// owner's state.
type RouteMode uint8

const (
	// RoutePerOp serves the request here; each store call is one RPC to
	// the owner (the flow store's own routing, fenced at the owner).
	RoutePerOp RouteMode = iota
	// RouteForward forwards the whole request to the owner once.
	RouteForward
)

// ParseRouteMode reads a -route flag.
func ParseRouteMode(s string) (RouteMode, error) {
	switch s {
	case "per-op":
		return RoutePerOp, nil
	case "forward":
		return RouteForward, nil
	}
	return 0, errors.New(`want "per-op" or "forward"`)
}

func (m RouteMode) String() string {
	if m == RouteForward {
		return "forward"
	}
	return "per-op"
}

// Headers of the cluster's own.
const (
	// ForwardedHeader is the loop guard a forwarded request carries,
	// naming the client it came from ("ip:port", which the owner records
	// as requestFrom): it is never forwarded again, and the imposter's
	// stubs never see it.
	ForwardedHeader = "X-Fenceline-Forwarded"
	// UnavailableHeader is on every 503 the flow state caused: why.
	UnavailableHeader = imposter.UnavailableHeader
)

// Bounds on a stateful request: its store calls together (each has the
// store's own deadline too), and a forward's whole round trip.
const (
	stateTimeout   = 5 * time.Second
	forwardTimeout = 30 * time.Second
)

// UseFlows makes the server's stateful imposters keep their state in f,
// routed by mode.
func (s *Server) UseFlows(f Flows, mode RouteMode) { s.flows, s.route = f, mode }

// httpWorld is a stateful request's world on real TCP: every call
// blocks, so ServeStateful runs straight through on the connection's
// goroutine.
type httpWorld struct {
	ctx  context.Context
	s    *Server
	sv   *served
	wr   *wireRequest
	from string // the client, for the loop guard
}

func (w httpWorld) Store(req flow.Request, done func(flow.Response, error)) {
	done(w.s.flows.Do(w.ctx, req))
}

func (w httpWorld) OwnerOf(key string, done func(routing.Owner, error)) {
	done(w.s.flows.OwnerOf(w.ctx, key))
}

func (w httpWorld) Forward(owner routing.Owner, done func(imposter.Outcome, error)) {
	done(w.s.forward(w.sv, w.wr, w.from, owner))
}

func (w httpWorld) Turn(f func(release func(), err error)) {
	select {
	case w.sv.turn <- struct{}{}:
		f(func() { <-w.sv.turn }, nil)
	case <-w.ctx.Done():
		f(nil, w.ctx.Err())
	}
}

func (w httpWorld) Engine(f func(imp *imposter.Imposter)) {
	w.sv.mu.Lock()
	defer w.sv.mu.Unlock()
	f(w.sv.imp)
}

// respondStateful is the answer to a request for a stateful imposter, or
// the owner's when forwarded. done means the outcome is final (a 503 or a
// forwarded answer): no proxying follows.
func (s *Server) respondStateful(sv *served, wr *wireRequest, req *imposter.Request) (out imposter.Outcome, done bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	forwarded := wr.forwarded
	var res imposter.Served
	imposter.ServeStateful(httpWorld{ctx: ctx, s: s, sv: sv, wr: wr, from: req.RequestFrom},
		imposter.Route{Forward: s.route == RouteForward && !wr.tcp, Forwarded: forwarded},
		req, func(r imposter.Served, e error) { res, err = r, e })
	if res.Transition != nil && !res.Moved {
		s.lostRaces.Add(1) // another request moved the state first: this move was dropped
	}
	return res.Outcome, res.Final, err
}

// stepCycle advances a shared response cycle at its owner and answers
// with the response there; final means a 503 (the step failed), which
// needs no more work.
func (s *Server) stepCycle(sv *served, wr *wireRequest, req *imposter.Request, c *imposter.Cycle) (imposter.Outcome, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	var res imposter.Served
	var err error
	imposter.StepCycle(httpWorld{ctx: ctx, s: s, sv: sv, wr: wr, from: req.RequestFrom}, req, c,
		func(r imposter.Served, e error) { res, err = r, e })
	return res.Outcome, res.Final, err
}

// forwardClient carries forwarded requests to owners: bounded, no
// redirects followed, no transparent gzip, certificates not checked (an
// https imposter's own certificate is self-signed).
var forwardClient = newRawClient(256, forwardTimeout)

// forward sends the request to the owner's imposter (the owner's host,
// the same port) with the loop guard, and answers what the owner
// answered. The request goes as the client sent it (headers in its order
// and case, the body framed as it came, in one piece: framedHeaders),
// and the answer comes back as the owner wrote it, so that a
// forwarded request is recorded, and answered, as one served here. Any
// failure is a 503: the request is never served here instead.
func (s *Server) forward(sv *served, wr *wireRequest, from string, owner routing.Owner) (imposter.Outcome, error) {
	addr := owner.Addr
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:] // an admin API over TLS: its host is what counts
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return imposter.Outcome{}, fmt.Errorf("%w: owner address %q: %v", imposter.ErrForward, owner.Addr, err)
	}
	sv.mu.Lock()
	scheme, port := sv.imp.Protocol, sv.def.Port
	sv.mu.Unlock()
	target := wr.target
	if !strings.HasPrefix(target, "/") {
		target = "/" // absent or absolute-form: the path is all that is routed
	}
	req := &outRequest{method: wr.method, target: target, body: wr.body, chunked: wr.chunked}
	for _, h := range wr.headers {
		if !strings.EqualFold(h[0], ForwardedHeader) { // the cluster's own; set below
			req.headers = append(req.headers, h)
		}
	}
	req.headers = append(framedHeaders(req.headers, wr.chunked, len(wr.body)), [2]string{ForwardedHeader, s.forwardedValue(from, req.method, req.target)})
	resp, err := forwardClient.do(context.Background(), scheme, net.JoinHostPort(host, strconv.Itoa(port)), req)
	if err != nil {
		return imposter.Outcome{}, fmt.Errorf("%w: %v", imposter.ErrForward, err)
	}
	return imposter.Outcome{StatusCode: resp.status, Body: resp.body, Headers: groupHeaders(resp.headers)}, nil
}

// MemoryFlows is a flow store in memory, for a server alone (this
// package's tests): one owner, itself, and no expiry.
type MemoryFlows struct {
	mu    sync.Mutex
	flows map[string]map[string][]byte
}

// NewMemoryFlows returns an empty store.
func NewMemoryFlows() *MemoryFlows { return &MemoryFlows{flows: map[string]map[string][]byte{}} }

// OwnerOf implements Flows: every flow is this server's.
func (m *MemoryFlows) OwnerOf(context.Context, string) (routing.Owner, error) {
	return routing.Owner{View: routing.Local, MIdx: 1}, nil
}

// Do implements Flows for the operations imposters use.
func (m *MemoryFlows) Do(_ context.Context, req flow.Request) (flow.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.flows[req.Flow]
	if f == nil {
		f = map[string][]byte{}
		m.flows[req.Flow] = f
	}
	switch req.Op {
	case flow.OpGet:
		v, ok := f[req.Key]
		return flow.Response{Found: ok, Value: slices.Clone(v)}, nil
	case flow.OpGetAll:
		return flow.Response{All: maps.Clone(f)}, nil
	case flow.OpSet:
		f[req.Key] = slices.Clone(req.Value)
		return flow.Response{}, nil
	case flow.OpDelete:
		delete(f, req.Key)
		return flow.Response{}, nil
	case flow.OpIncr:
		n, err := strconv.ParseInt(string(f[req.Key]), 10, 64)
		if _, ok := f[req.Key]; !ok {
			n, err = 0, nil
		}
		if err != nil {
			return flow.Response{}, fmt.Errorf("%w: %w", flow.ErrUnavailable, flow.ErrNotInteger)
		}
		n += req.Delta
		f[req.Key] = []byte(strconv.FormatInt(n, 10))
		return flow.Response{Int: n}, nil
	case flow.OpCas:
		cur, ok := f[req.Key]
		if (req.ExpectAbsent && ok) || (!req.ExpectAbsent && (!ok || !bytes.Equal(cur, req.Expect))) {
			return flow.Response{}, nil
		}
		f[req.Key] = slices.Clone(req.Value)
		return flow.Response{Succeeded: true}, nil
	}
	return flow.Response{}, flow.ErrBadRequest
}

// --- the scenario admin routes

// scenarioFlow reads the flow a scenario admin call is about: the raw
// flowId given (the query's or the body's), or the port, under the
// imposter's scope.
func scenarioFlow(sv *served, raw string) (key string, imp *imposter.Imposter, names []string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if raw == "" {
		raw = strconv.Itoa(sv.def.Port)
	}
	// imp's flow knobs never change; its stubs may (under sv.mu), so the
	// names are read here.
	return sv.imp.ScopedFlow(raw), sv.imp, sv.imp.Scenarios()
}

// ScopedFlow is the flow key of flow id on the imposter at port, under
// its contextScope; false if this node runs no imposter there.
func (s *Server) ScopedFlow(port int, id string) (string, bool) {
	s.mu.Lock()
	sv := s.imposters[port]
	s.mu.Unlock()
	if sv == nil {
		return "", false
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.imp.ScopedFlow(id), true
}

// scenarioBody reads a scenario admin call's body and its optional
// flowId, answering 400 itself.
func scenarioBody(w http.ResponseWriter, r *http.Request) (*imposter.Object, string, bool) {
	v, ok := readJSON(w, r)
	if !ok {
		return nil, "", false
	}
	body, _ := v.(*imposter.Object)
	if body == nil {
		body = imposter.NewObject()
	}
	fv, _ := body.Get("flowId")
	flowID, isStr := fv.(string)
	if fv != nil && !isStr {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "'flowId' must be a string"})
		return nil, "", false
	}
	return body, flowID, true
}

// writeFlowError answers a flow store error: 503 naming why.
func writeFlowError(w http.ResponseWriter, err error) {
	reason := flow.Reason(err)
	w.Header().Set(UnavailableHeader, reason)
	writeErrors(w, http.StatusServiceUnavailable, &imposter.Error{Code: "unavailable", Message: "flow state unavailable: " + reason})
}

// getScenarios answers every scenario's state in a flow (?flowId=).
func (s *Server) getScenarios(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	key, imp, names := scenarioFlow(sv, r.URL.Query().Get("flowId"))
	ctx, cancel := context.WithTimeout(r.Context(), stateTimeout)
	defer cancel()
	resp, err := s.flows.Do(ctx, imp.StateRead(key))
	if err != nil {
		writeFlowError(w, err)
		return
	}
	list := []any{}
	for _, n := range names {
		st := imposter.StateStarted
		if v, set := resp.All[imposter.ScenarioKey(n)]; set {
			st = string(v)
		}
		list = append(list, imposter.NewObject().Set("name", n).Set("state", st))
	}
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("flowId", key).Set("scenarios", list))
}

// putScenarioState sets a scenario's state in a flow:
// {"state": "...", "flowId": "..."}.
func (s *Server) putScenarioState(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	body, flowID, ok := scenarioBody(w, r)
	if !ok {
		return
	}
	st, _ := body.Get("state")
	state, isStr := st.(string)
	if !isStr || state == "" {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData,
			Message: "the body must be {\"state\": \"<a non-empty string>\", \"flowId\": \"<optional string>\"}"})
		return
	}
	key, imp, names := scenarioFlow(sv, flowID)
	name := r.PathValue("name")
	if !slices.Contains(names, name) {
		writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeNoSuchResource,
			Message: "no stub of this imposter names the scenario " + strconv.Quote(name)})
		return
	}
	req := imp.Write(key, flow.OpSet)
	req.Key, req.Value = imposter.ScenarioKey(name), []byte(state)
	ctx, cancel := context.WithTimeout(r.Context(), stateTimeout)
	defer cancel()
	if _, err := s.flows.Do(ctx, req); err != nil {
		writeFlowError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("flowId", key).Set("name", name).Set("state", state))
}

// resetScenarios puts every scenario of a flow back to Started (its key
// deleted): {"flowId": "..."}, or the port's flow with no body.
func (s *Server) resetScenarios(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	_, flowID, ok := scenarioBody(w, r)
	if !ok {
		return
	}
	key, imp, names := scenarioFlow(sv, flowID)
	ctx, cancel := context.WithTimeout(r.Context(), stateTimeout)
	defer cancel()
	for _, n := range names {
		req := imp.Write(key, flow.OpDelete)
		req.Key = imposter.ScenarioKey(n)
		if _, err := s.flows.Do(ctx, req); err != nil {
			writeFlowError(w, err)
			return
		}
	}
	list := []any{}
	for _, n := range names {
		list = append(list, imposter.NewObject().Set("name", n).Set("state", imposter.StateStarted))
	}
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("flowId", key).Set("scenarios", list))
}
