package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

// Flows: a few hot ones every client hits, and many cold ones, in
// imposter-port scope and header scope.
func flowIDs(cold int) (hot, all []string) {
	hot = []string{ring.ImposterKey(8080, "8080"), ring.ImposterKey(8080, "hot-a"), ring.ImposterKey(9090, "9090")}
	all = append(all, hot...)
	for i := 0; i < cold; i++ {
		id := fmt.Sprintf("user-%d", i)
		if i%8 == 7 {
			// Every eighth is long, as a token a client sends for its
			// flow id may be: past the bytes the ring hashes on the stack
			// (core/ring), within the store's bound on a key.
			id += "-" + strings.Repeat("t", 300)
		}
		all = append(all, ring.ImposterKey(8080, id))
	}
	// And the shortest id the store takes, one byte, which the ring
	// places by that byte alone: "s" is a response cycle's class.
	all = append(all, "s")
	return hot, all
}

var flowKeys = []string{"a", "b", "c"}

// startFlowClients runs perNode closed-loop clients pinned to each node in
// pinned (each client always calls the same node, as a client behind one
// node's load balancer would).
func (h *flowHarness) startFlowClients(pinned []*sim.Machine, perNode int, hot, all []string, until time.Duration) {
	h.allFlows = all
	if h.run.ClientsOff {
		return
	}
	r := h.k.Stream(fmt.Sprintf("workload/flow%s", h.clientStream()))
	id := h.clientBase
	for _, n := range pinned {
		for i := 0; i < perNode; i++ {
			client, node := id, n
			id++
			// Each client draws from its own stream, so that its k-th
			// operation is the same request whatever the others do
			// (Run.Op: an operation is named by client and ordinal).
			own := h.k.Stream(fmt.Sprintf("workload/flow/%d", client))
			h.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(client), func() {
				h.flowStep(client, node, own, hot, all, until)
			})
		}
	}
}

// startOwnedClients adds count clients pinned to n that work on the flows
// n owns right now: the clients of an owner about to be deposed, which
// keep calling it on its side of a partition.
func (h *flowHarness) startOwnedClients(n *sim.Machine, count int, until time.Duration) {
	s := h.flows[n.Name()]
	if s == nil || !n.Up() || h.run.ClientsOff {
		return
	}
	var owned []string
	for _, f := range h.allFlows {
		if id, _ := s.Owner(f); id == n.ID() {
			owned = append(owned, f)
		}
	}
	if len(owned) == 0 {
		return
	}
	h.ownedStarts++
	r := h.k.Stream("workload/owned/" + n.Name())
	for i := 0; i < count; i++ {
		client := 1000 + 10*h.ownedStarts + i
		own := h.k.Stream(fmt.Sprintf("workload/owned/%d", client))
		h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, own, owned, owned, until)
		})
	}
}

func (h *flowHarness) flowStep(client int, n *sim.Machine, r interface {
	IntN(int) int
	Int64N(int64) int64
}, hot, all []string, stopAt time.Duration) {
	if h.k.Now() >= stopAt && !h.hold.keeps(h, stopAt) {
		return
	}
	next := func() {
		h.k.After(time.Duration(r.IntN(20))*time.Millisecond, sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, r, hot, all, stopAt)
		})
	}
	f := all[r.IntN(len(all))]
	if r.IntN(10) < 7 {
		f = hot[r.IntN(len(hot))]
	}
	key := flowKeys[r.IntN(len(flowKeys))]
	val := kvValues[r.IntN(len(kvValues))]
	var req flow.Request
	var in linearizability.FlowInput
	switch pick := r.IntN(100); {
	case pick < 30:
		req, in = flow.Request{Op: flow.OpGet}, linearizability.FlowInput{Op: linearizability.FlowGet}
	case pick < 48:
		req, in = flow.Request{Op: flow.OpSet, Value: []byte(val)}, linearizability.FlowInput{Op: linearizability.FlowSet, Value: val}
	case pick < 55:
		// A scenario transition: several keys in one step.
		entries, model := map[string][]byte{}, map[string]string{}
		for _, k := range flowKeys[:1+r.IntN(len(flowKeys))] {
			v := kvValues[r.IntN(len(kvValues))]
			entries[k], model[k] = []byte(v), v
		}
		req = flow.Request{Op: flow.OpSetAll, Entries: entries}
		in = linearizability.FlowInput{Op: linearizability.FlowSetAll, Entries: linearizability.EncodeFlowAll(model)}
	case pick < 65:
		absent := r.IntN(2) == 0
		exp := kvValues[r.IntN(len(kvValues))]
		req = flow.Request{Op: flow.OpCas, Value: []byte(val), Expect: []byte(exp), ExpectAbsent: absent}
		in = linearizability.FlowInput{Op: linearizability.FlowCas, Value: val, Expect: exp, ExpectAbsent: absent}
		if absent {
			req.Expect, in.Expect = nil, ""
		}
	case pick < 80:
		key = "n" // counters live apart from the letter values, so most incrs succeed
		req, in = flow.Request{Op: flow.OpIncr, Delta: 1}, linearizability.FlowInput{Op: linearizability.FlowIncr, Delta: 1}
	case pick < 85:
		req, in = flow.Request{Op: flow.OpDelete}, linearizability.FlowInput{Op: linearizability.FlowDelete}
	case pick < 97:
		req, in = flow.Request{Op: flow.OpGetAll}, linearizability.FlowInput{Op: linearizability.FlowGetAll}
	default:
		req, in = flow.Request{Op: flow.OpClear}, linearizability.FlowInput{Op: linearizability.FlowClear}
	}
	req.Flow = f
	if req.Op != flow.OpGetAll && req.Op != flow.OpClear && req.Op != flow.OpSetAll {
		req.Key, in.Key = key, key
	}
	if _, send := opOf(h.run, "f", client); !send {
		next()
		return
	}
	h.flowCall(client, n, req, in, func(flow.Response, error) { next() })
}

// flowCall runs req on n as client's call: recorded in the flow history
// (with in, the model's view of it) and, when served, in the record of
// where and when each flow was served, which the loss cuts read. done
// gets the store's answer; flowCall returns the call's history op.
func (h *flowHarness) flowCall(client int, n *sim.Machine, req flow.Request, in linearizability.FlowInput, done func(flow.Response, error)) (op int) {
	var until time.Duration // the latest instant the call can take effect
	f := req.Flow
	called := h.k.Now()
	op = h.flowHist.Call(client, f, in, called)
	defer func() { h.flowHist.Bound(op, until) }()
	var forwarded bool
	var taken time.Duration
	until, forwarded = h.callFlowOp(n, uint64(client), uint64(op), op, &taken, req, func(resp flow.Response, err error) {
		now := h.k.Now()
		// The call waited for the node's fsyncs twice: before the node
		// took it, and before the event that answered it ran.
		if w := (taken - called) + (now - h.k.EventAt()); w > 0 { // called is the op's Call
			h.waited[op] = w
		}
		if !forwarded && errors.Is(err, flow.ErrTimeout) && !errors.Is(err, errClientDeadline) {
			// The call sent no request, so nothing could answer it late:
			// the store sat on a refusal it could have given at once.
			h.run.Fail("bridge", "client %d's call on %s at %v sent no request and waited out its deadline", client, f, called)
		}
		if err == nil || errors.Is(err, flow.ErrNotInteger) {
			// Served: where and when it was applied, by the record.
			served, ok := checker.FlowService{Flow: f, Node: n.ID(), At: taken}, !forwarded
			if forwarded {
				served, ok = h.applied[op]
			}
			if ok {
				h.services = append(h.services, served)
				if err == nil && changes(req, resp) {
					h.writes = append(h.writes, checker.ServedWrite{Flow: f, Node: served.Node, Called: called, Answered: now})
				}
			}
		}
		delete(h.applied, op)
		switch {
		case err == nil:
			out := linearizability.FlowOutput{Found: resp.Found, Value: string(resp.Value), Succeeded: resp.Succeeded, Int: resp.Int}
			if req.Op == flow.OpGetAll {
				m := map[string]string{}
				for k, v := range resp.All { //fenceline:unordered copying into a map
					m[k] = string(v)
				}
				out.All = linearizability.EncodeFlowAll(m)
			}
			h.flowHist.Return(op, out, now)
		case errors.Is(err, flow.ErrNotInteger):
			h.flowHist.Return(op, linearizability.FlowOutput{NotInteger: true}, now)
		case errors.Is(err, errClientDeadline):
			h.flowHist.GiveUp(op, errClientDeadline.Error(), now)
		case flow.Known(err):
			h.flowHist.Refuse(op, err.Error(), now)
		default:
			h.flowHist.GiveUp(op, err.Error(), now)
		}
		done(resp, err)
	})
	return op
}

// clientStream tells the clients' draw stream of one group of a fleet
// from another's: empty for the first group (and every single cluster),
// whose streams are the ones they always were.
func (h *flowHarness) clientStream() string {
	if h.clientBase == 0 {
		return ""
	}
	return fmt.Sprintf("@%d", h.clientBase)
}

// changes reports whether req, answered resp without an error, changed
// its flow: every set, set-all and increment does, a compare-and-set
// that succeeded does. (A delete or a clear of nothing may change
// nothing.)
func changes(req flow.Request, resp flow.Response) bool {
	switch req.Op {
	case flow.OpSet, flow.OpSetAll, flow.OpIncr:
		return true
	case flow.OpCas:
		return resp.Succeeded
	}
	return false
}
