package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/imposterhttp"
	"github.com/fenceline/fenceline/realnet"
)

// Bounds of the HTTP API.
const (
	maxBody     = 64 << 10         // a request body over it is 413
	callTimeout = 10 * time.Second // the core answers far sooner: its own deadlines are ~1s
)

// api is the node's HTTP API: the cluster's status and membership, flow
// state by imposter, and metrics. Every handler reaches the core through
// the node's loop (realnet.Node.Do and Await), and through the flow
// store's bounded bridge for flow state.
type api struct {
	nd     *realnet.Node
	keys   transport.Keys
	name   string
	http   string
	log    *slog.Logger
	mux    *http.ServeMux
	flowOp *prometheus.CounterVec
	// rollout is how long admin changes waited for every member to serve
	// them, by whether every member confirmed.
	rollout *prometheus.HistogramVec
	// watchers counts open watch streams (bounded by maxWatchers).
	watchers atomic.Int64
	// imposters is mountebank's API and the imposters this node serves.
	imposters *imposterhttp.Server
	// guard is who may call the API; conns its connection budget
	// (access.go).
	guard *guard
	conns *limitListener
}

func newAPI(nd *realnet.Node, keys transport.Keys, name, httpAddr string, log *slog.Logger) *api {
	a := &api{nd: nd, keys: keys, name: name, http: httpAddr, log: log, mux: http.NewServeMux(),
		flowOp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fenceline_flow_ops_total",
			Help: "Flow-state operations through this node's API, by operation and result."}, []string{"op", "result"}),
		rollout: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fenceline_rollout_wait_seconds",
			Help:    "How long a change made through this node waited for every member to serve it, by whether every member confirmed.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 1.5, 30)}, []string{"confirmed"})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.flowOp, a.rollout, &collector{nd: nd, a: a})
	a.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	a.mux.HandleFunc("GET /_cluster/status", a.status)
	a.mux.HandleFunc("POST /_cluster/members", a.join)
	a.mux.HandleFunc("DELETE /_cluster/members/{name}", a.remove)
	a.mux.HandleFunc("PUT /_cluster/fleet/target", a.resize)
	a.mux.HandleFunc("POST /_cluster/fleet/groups", a.addGroup)
	a.mux.HandleFunc("PUT /_cluster/leases/{name}", a.leasePut)
	a.mux.HandleFunc("GET /_cluster/leases/{name}", a.leaseGet)
	a.mux.HandleFunc("DELETE /_cluster/leases/{name}", a.leaseDelete)
	a.mux.HandleFunc("GET /_cluster/watch", a.watch)
	a.mux.HandleFunc("PUT /_cluster/kv/{key}", a.kvPut)
	a.mux.HandleFunc("GET /_cluster/kv/{key}", a.kvGet)
	const fs = "/admin/imposters/{port}/flow-state/{flow}"
	a.mux.HandleFunc("GET "+fs+"/{key}", a.flowGet)
	a.mux.HandleFunc("PUT "+fs+"/{key}", a.flowPut)
	a.mux.HandleFunc("DELETE "+fs+"/{key}", a.flowDelete)
	a.mux.HandleFunc("POST "+fs+"/{key}/cas", a.flowCas)
	a.mux.HandleFunc("DELETE "+fs, a.flowClear)
	return a
}

// servePprof adds Go's profiling endpoints under /debug/pprof/.
func (a *api) servePprof() {
	a.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	a.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	a.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The cluster API's bodies are small; mountebank's (an imposter of a
	// thousand stubs, a recorded proxy) are bounded by imposterhttp.
	if strings.HasPrefix(r.URL.Path, "/_cluster/") || strings.HasPrefix(r.URL.Path, "/admin/") {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	}
	a.mux.ServeHTTP(w, r)
}

// --- answers

func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// failure is every error the API answers: a machine-readable reason and
// a sentence.
type failure struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func fail(w http.ResponseWriter, code int, reason, format string, args ...any) {
	writeJSON(w, code, failure{Reason: reason, Error: fmt.Sprintf(format, args...)})
}

// failErr answers an error from the core: 400 for the caller's mistakes,
// 503 naming why the backend could not serve (never a guess at a value).
func failErr(w http.ResponseWriter, err error) {
	// Anything not known to have been refused before it could apply is
	// "timeout": the outcome is unknown.
	code, reason := http.StatusServiceUnavailable, "timeout"
	switch {
	case errors.Is(err, flow.ErrBadRequest), errors.Is(err, flow.ErrNotInteger):
		code, reason = http.StatusBadRequest, "bad_request"
	case errors.Is(err, consensus.ErrLastVoter):
		code, reason = http.StatusConflict, "last_voter" // refused before it was proposed, or applied as nothing
	case errors.Is(err, flow.ErrFenced):
		reason = "fenced"
	case errors.Is(err, flow.ErrNotOwner):
		reason = "not_owner"
	case errors.Is(err, flow.ErrIsolated):
		reason = "isolated"
	case errors.Is(err, flow.ErrNotAdopted):
		reason = "not_adopted"
	case errors.Is(err, flow.ErrShed), errors.Is(err, flow.ErrBusy), errors.Is(err, realnet.ErrBusy), errors.Is(err, consensus.ErrBusy):
		reason = "shed"
	case errors.Is(err, flow.ErrSend), errors.Is(err, flow.ErrNoOwner), errors.Is(err, consensus.ErrNoLeader):
		reason = "unreachable" // not sent: nothing applied
	}
	fail(w, code, reason, "%v", err)
}

// decode reads a JSON body into v, answering 400 or 413 itself.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "bad_request", "body over %d bytes", maxBody)
			return false
		}
		fail(w, http.StatusBadRequest, "bad_request", "bad JSON body: %v", err)
		return false
	}
	return true
}

// --- cluster

type memberJSON struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	Peer string `json:"peer"`
	HTTP string `json:"http,omitempty"`
}

func membersJSON(ms []consensus.Member) []memberJSON {
	out := make([]memberJSON, len(ms))
	for i, m := range ms {
		out[i] = memberJSON{Name: m.Name, ID: m.ID.String(), Peer: m.Addr, HTTP: m.HTTP}
	}
	return out
}

type statusJSON struct {
	Name           string            `json:"name"`
	ID             string            `json:"id"`
	HTTP           string            `json:"http"`
	Peer           string            `json:"peer"`
	State          string            `json:"state"`
	Leader         string            `json:"leader"`
	Term           uint64            `json:"term"`
	MIdx           uint64            `json:"m_idx"`
	Voters         []memberJSON      `json:"voters"`
	Learners       []memberJSON      `json:"learners"`
	IsLeader       bool              `json:"is_leader"`
	BelievesLeader bool              `json:"believes_leader"`
	Isolated       bool              `json:"isolated"`
	Applied        uint64            `json:"applied"`
	Commit         uint64            `json:"commit"`
	FlowShard      shardJSON         `json:"flow_shard"`
	Transport      realnet.TCPStats  `json:"transport"`
	Envelope       map[string]uint64 `json:"envelope_dropped"`
	Bridge         map[string]int    `json:"bridge"`
	// Fleet is the node's place in a fleet of groups; absent outside
	// one.
	Fleet *fleetJSON `json:"fleet,omitempty"`
}

// fleetJSON is what a node of a fleet knows of it: its own group, its
// replica of the control group, and the group directory that replica has
// applied (absent until it has one).
type fleetJSON struct {
	Group     int            `json:"group"`
	Control   controlJSON    `json:"control"`
	Directory *directoryJSON `json:"directory,omitempty"`
}

type controlJSON struct {
	State    string       `json:"state"`
	Leader   string       `json:"leader,omitempty"`
	Voters   []memberJSON `json:"voters"`
	Learners []memberJSON `json:"learners"`
}

type directoryJSON struct {
	Epoch  uint64      `json:"epoch"`
	Groups []groupJSON `json:"groups"`
	// Target is the number of groups the partitions should be spread
	// over (node resize); Moving the partitions between a fence and
	// their publication, Misplaced those not yet where the target puts
	// them (moving ones included). A resize is done when both are 0.
	Target    int `json:"target"`
	Moving    int `json:"moving"`
	Misplaced int `json:"misplaced"`
}

type groupJSON struct {
	MIdx       uint64   `json:"m_idx"`
	Voters     []string `json:"voters"`
	Partitions int      `json:"partitions"`
}

// fleetStatus reads the node's fleet section; nil outside a fleet. It
// runs on the loop.
func fleetStatus(c *node.Node) *fleetJSON {
	g, ok := c.FleetGroup()
	if !ok {
		return nil
	}
	info, ms := c.Control.Info(), c.Control.Membership()
	f := &fleetJSON{Group: g, Control: controlJSON{State: info.State, Voters: membersJSON(ms.Voters), Learners: membersJSON(ms.Learners)}}
	if info.Leader != 0 {
		f.Control.Leader = info.Leader.String()
	}
	if d := c.Directory(); d != nil {
		dj := &directoryJSON{Epoch: d.Epoch(), Groups: make([]groupJSON, d.Groups())}
		for i := range d.Groups() {
			gr := d.Group(i)
			dj.Groups[i].MIdx = gr.MIdx
			for _, m := range gr.Voters {
				dj.Groups[i].Voters = append(dj.Groups[i].Voters, m.Name)
			}
		}
		dj.Target = d.Target()
		for p := range partition.Count {
			held, _ := d.Holder(partition.Partition(p))
			dj.Groups[held].Partitions++
			_, _, _, moving := d.Moving(partition.Partition(p))
			if moving {
				dj.Moving++
			}
			if moving || held != partition.Partition(p).Group(d.Target()) {
				dj.Misplaced++
			}
		}
		f.Directory = dj
	}
	return f
}

type shardJSON struct {
	shard.Stats
	LiveFlows int `json:"live_flows"`
}

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	var st statusJSON
	err := a.nd.Do(ctx, func(c *node.Node) {
		info, ms := c.Consensus.Info(), c.Consensus.Membership()
		st = statusJSON{Name: a.name, ID: c.Consensus.ID().String(), HTTP: a.http, Peer: a.nd.PeerAddr(),
			State: info.State, Term: info.Term, MIdx: ms.Index, Voters: membersJSON(ms.Voters), Learners: membersJSON(ms.Learners),
			IsLeader: c.Consensus.IsLeader(), BelievesLeader: c.Consensus.BelievesSelfLeader(), Isolated: c.Consensus.IsIsolated(),
			Applied: info.Applied, Commit: info.Commit, Envelope: map[string]uint64{},
			Bridge: map[string]int{"permits_in_use": c.Flow.PermitsInUse(), "shed": int(c.Flow.Shed), "served": int(c.Flow.Served)}}
		if info.Leader != 0 {
			st.Leader = info.Leader.String()
		}
		st.FlowShard.Stats, st.FlowShard.LiveFlows = c.Flow.Shard()
		st.Fleet = fleetStatus(c)
		if c.Link != nil {
			for i, n := range c.Link.Stats().Dropped {
				st.Envelope[transport.CauseNames[i]] = n
			}
		}
	})
	if err != nil {
		failErr(w, err)
		return
	}
	st.Transport = a.nd.TCPStats()
	writeJSON(w, http.StatusOK, st)
}

// --- flow state

// flowID scopes a flow as its imposter does (its contextScope), or to
// the port (scope imposter) when no imposter runs there.
func (a *api) flowID(r *http.Request) (string, bool) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		return "", false
	}
	if a.imposters != nil {
		if key, ok := a.imposters.ScopedFlow(port, r.PathValue("flow")); ok {
			return key, true
		}
	}
	return fmt.Sprintf("i%d:%s", port, r.PathValue("flow")), true
}

func (a *api) call(w http.ResponseWriter, r *http.Request, op string, req flow.Request) (flow.Response, bool) {
	f, ok := a.flowID(r)
	if !ok {
		a.flowOp.WithLabelValues(op, "bad_request").Inc()
		fail(w, http.StatusBadRequest, "bad_request", "imposter port %q is not a port", r.PathValue("port"))
		return flow.Response{}, false
	}
	req.Flow = f
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	resp, owner, err := doFlow(ctx, a.nd, req)
	if err == nil && owner != 0 {
		// Who owns the flow at this node's membership, for clients that
		// measure or route: a hint, not a promise (ownership moves).
		w.Header().Set("Fenceline-Owner", owner.String())
	}
	if err != nil {
		a.flowOp.WithLabelValues(op, "error").Inc()
		failErr(w, err)
		return resp, false
	}
	a.flowOp.WithLabelValues(op, "ok").Inc()
	return resp, true
}

func (a *api) flowGet(w http.ResponseWriter, r *http.Request) {
	req := flow.Request{Op: flow.OpGet, Key: r.PathValue("key")}
	switch r.URL.Query().Get("consistency") {
	case "", "strong":
	case "local":
		req.Read = flow.Local
	default:
		fail(w, http.StatusBadRequest, "bad_request", "consistency must be strong or local")
		return
	}
	resp, ok := a.call(w, r, "get", req)
	if !ok {
		return
	}
	if !resp.Found {
		fail(w, http.StatusNotFound, "not_found", "no key %q in this flow", req.Key)
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"value": resp.Value})
}

type putBody struct {
	Value      json.RawMessage `json:"value"`
	TTLSeconds int64           `json:"ttlSeconds"`
	Durability string          `json:"durability"`
}

func (a *api) flowPut(w http.ResponseWriter, r *http.Request) {
	var b putBody
	if !decode(w, r, &b) {
		return
	}
	if len(b.Value) == 0 {
		fail(w, http.StatusBadRequest, "bad_request", `a PUT body is {"value": <json>}`)
		return
	}
	mode := shard.Async
	if b.Durability != "" {
		var err error
		if mode, err = shard.ParseMode(b.Durability); err != nil {
			fail(w, http.StatusBadRequest, "bad_request", "durability must be sync, async or none")
			return
		}
	}
	if b.TTLSeconds < 0 {
		fail(w, http.StatusBadRequest, "bad_request", "ttlSeconds must not be negative")
		return
	}
	if _, ok := a.call(w, r, "set", flow.Request{Op: flow.OpSet, Key: r.PathValue("key"), Value: b.Value,
		TTLMs: b.TTLSeconds * 1000, Mode: mode}); ok {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}

func (a *api) flowDelete(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.call(w, r, "delete", flow.Request{Op: flow.OpDelete, Key: r.PathValue("key")}); ok {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}

type casBody struct {
	Expect *json.RawMessage `json:"expect"` // absent: the key must be absent
	Value  json.RawMessage  `json:"value"`
}

func (a *api) flowCas(w http.ResponseWriter, r *http.Request) {
	var b casBody
	if !decode(w, r, &b) {
		return
	}
	if len(b.Value) == 0 {
		fail(w, http.StatusBadRequest, "bad_request", `a cas body is {"expect": <json, or absent for an absent key>, "value": <json>}`)
		return
	}
	req := flow.Request{Op: flow.OpCas, Key: r.PathValue("key"), Value: b.Value, ExpectAbsent: b.Expect == nil}
	if b.Expect != nil {
		req.Expect = *b.Expect
	}
	if resp, ok := a.call(w, r, "cas", req); ok {
		writeJSON(w, http.StatusOK, map[string]bool{"succeeded": resp.Succeeded})
	}
}

func (a *api) flowClear(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.call(w, r, "clear", flow.Request{Op: flow.OpClear}); ok {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}
