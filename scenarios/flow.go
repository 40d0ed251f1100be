package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

// flowHarness drives the flow store on top of a raftCluster: clients
// pinned to nodes doing flow operations on a few hot flows and many cold
// ones, the record of every handoff where the design accepts loss, and the
// flow checkers.
type flowHarness struct {
	*raftCluster
	flowHist *linearizability.History
	// lossy: per flow, the virtual times at which a new owner adopted it
	// without hearing from the previous owner. Acknowledged writes the
	// previous owner never pushed may be lost there, by design; the
	// linearizability check is split at these points and they are
	// counted.
	lossy     map[string][]time.Duration
	lossCount int
	deadline  time.Duration
	aeEvery   time.Duration
	calm      time.Duration // when the faults stop
	perNode   int           // clients pinned to each node
	allFlows  []string
}

func startFlowCluster(c *raftCluster, cfg flow.Config) *flowHarness {
	h := &flowHarness{raftCluster: c, flowHist: linearizability.NewHistory(0), lossy: map[string][]time.Duration{}}
	cfg2 := cfg
	c.flowCfg = &cfg2
	h.deadline = cfg2.Deadline
	if h.deadline == 0 {
		h.deadline = 2 * time.Second
	}
	h.aeEvery = cfg2.AntiEntropy
	if h.aeEvery == 0 {
		h.aeEvery = 5 * time.Second
	}
	boots := map[string]int{}
	c.onFlowBoot = func(name string, s *flow.Store) {
		// These scenarios write in async mode on a lossy network: a
		// restarted owner may have lost, with its last fsync interval,
		// writes whose pushes the network dropped too. That loss is the
		// async promise (durability-restart holds each mode to its
		// promise exactly); mark it at every flow the node owns.
		if boots[name]++; boots[name] > 1 {
			for _, f := range h.allFlows {
				if owner, _ := s.Owner(f); owner == s.ID() {
					h.lossy[f] = append(h.lossy[f], c.k.Now())
					h.lossCount++
				}
			}
		}
		s.OnAdopted(func(f string, m uint64, fromPrev bool) {
			// Under the founding membership (m_idx 1) a flow has had one
			// owner only: nothing was written before its first adoption,
			// and that owner's restarts are marked at its boot (below).
			if !fromPrev && m > 1 {
				h.lossy[f] = append(h.lossy[f], c.k.Now())
				h.lossCount++
				c.k.Logf("%s adopted %s at m_idx %d without its previous owner: accepted-loss point", name, f, m)
			}
		})
	}
	return h
}

// Flows: a few hot ones every client hits, and many cold ones, in
// imposter-port scope and header scope.
func flowIDs(cold int) (hot, all []string) {
	hot = []string{ring.ImposterKey(8080, "8080"), ring.ImposterKey(8080, "hot-a"), ring.ImposterKey(9090, "9090")}
	all = append(all, hot...)
	for i := 0; i < cold; i++ {
		all = append(all, ring.ImposterKey(8080, fmt.Sprintf("user-%d", i)))
	}
	return hot, all
}

var flowKeys = []string{"a", "b", "c"}

// startFlowClients runs perNode closed-loop clients pinned to each node in
// pinned (each client always calls the same node, as a client behind one
// node's load balancer would).
func (h *flowHarness) startFlowClients(pinned []*sim.Node, perNode int, hot, all []string, until time.Duration) {
	r := h.k.Stream("workload/flow")
	h.allFlows = all
	id := 0
	for _, n := range pinned {
		for i := 0; i < perNode; i++ {
			client, node := id, n
			id++
			h.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(client), func() {
				h.flowStep(client, node, r, hot, all, until)
			})
		}
	}
}

// startOwnedClients adds count clients pinned to n that work on the flows
// n owns right now: the clients of an owner about to be deposed, which
// keep calling it on its side of a partition.
func (h *flowHarness) startOwnedClients(n *sim.Node, count int, until time.Duration) {
	s := h.flows[n.Name()]
	if s == nil || !n.Up() {
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
	r := h.k.Stream("workload/owned/" + n.Name())
	for i := 0; i < count; i++ {
		client := 1000 + len(h.flowHist.Ops())%1000*10 + i
		h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, r, owned, owned, until)
		})
	}
}

func (h *flowHarness) flowStep(client int, n *sim.Node, r interface {
	IntN(int) int
	Int64N(int64) int64
}, hot, all []string, until time.Duration) {
	if h.k.Now() >= until {
		return
	}
	next := func() {
		h.k.After(time.Duration(r.IntN(20))*time.Millisecond, sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, r, hot, all, until)
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
	case pick < 55:
		req, in = flow.Request{Op: flow.OpSet, Value: []byte(val)}, linearizability.FlowInput{Op: linearizability.FlowSet, Value: val}
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
	if req.Op != flow.OpGetAll && req.Op != flow.OpClear {
		req.Key, in.Key = key, key
	}
	op := h.flowHist.Call(client, f, in, h.k.Now())
	h.callFlow(n, uint64(client), uint64(op), req, func(resp flow.Response, err error) {
		now := h.k.Now()
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
		next()
	})
}

// errClientDeadline is a client giving up on a call no node answered in
// time (its node crashed under it, or the store lost the call).
var errClientDeadline = errors.New("client deadline (node crashed?)")

// callFlow runs one flow request on node n as a client would: refused at
// once if the node is down, given up on (errClientDeadline, an unknown
// outcome) if no answer comes within the client's deadline, and a failure
// of the bridge checker if a live node answers twice or never. tag names
// the client's deadline event in the trace.
func (h *flowHarness) callFlow(n *sim.Node, client, tag uint64, req flow.Request, done func(flow.Response, error)) {
	a := &answer{}
	inc := n.Incarnation()
	store := h.flows[n.Name()]
	settle := func(resp flow.Response, err error) {
		if !a.once() {
			// The store promises one answer per call; a second one, or
			// one after the client gave up on a live node, is a bug.
			h.run.Fail("bridge", "client %d's call on %s was answered twice", client, req.Flow)
			return
		}
		done(resp, err)
	}
	if !n.Up() || store == nil {
		settle(flow.Response{}, fmt.Errorf("%w: node down", flow.ErrSend))
		return
	}
	call := h.k.Now()
	n.Do(func() { store.Do(req, settle) })
	if a.done {
		return
	}
	h.k.After(h.deadline+time.Second, sim.EvClient, tag, func() {
		if a.once() {
			if n.Up() && n.Incarnation() == inc {
				// The node lived, yet its store never answered.
				h.run.Fail("bridge", "client %d's call on %s at %v was never answered by a live node", client, req.Flow, call)
			}
			done(flow.Response{}, fmt.Errorf("%w: %w", flow.ErrTimeout, errClientDeadline))
		}
	})
}

// checkFlowLinearizable runs porcupine over every flow, split at the
// accepted-loss points.
func (h *flowHarness) checkFlowLinearizable() {
	results := linearizability.CheckFlowsSplit(h.flowHist, 20*time.Second, h.lossy)
	for _, res := range results {
		switch res.Verdict {
		case porcupine.Illegal:
			h.run.Fail("flow-linearizability", "flow %s: %d operations are not linearizable:%s", res.Flow, res.Ops, res.Describe)
		case porcupine.Unknown:
			h.run.Logf("flow-linearizability: flow %s: check timed out (%d ops); not judged", res.Flow, res.Ops)
		}
	}
}

// checkBridge holds the bridge to its promises: no call outlives the
// deadline (a call whose node crashed under it is the client's to time
// out, and is not counted), and a shed call is answered at once.
func (h *flowHarness) checkBridge() {
	for _, op := range h.flowHist.Ops() {
		if op.Return == 0 || strings.HasPrefix(op.Note, "client deadline") {
			continue
		}
		// The deadline runs on the node's clock; true time may be longer
		// by the drift (at most 500ppm in these scenarios: 0.1% covers it).
		if took := op.Return - op.Call; took > h.deadline+h.deadline/1000 {
			h.run.Fail("bridge", "client %d's call on %s took %v, over the %v deadline", op.Client, op.Key, took, h.deadline)
		}
		if strings.Contains(op.Note, flow.ErrShed.Error()) && op.Return != op.Call {
			h.run.Fail("bridge", "client %d's shed call waited %v for its refusal", op.Client, op.Return-op.Call)
		}
	}
}

// checkConvergence: after quiescence every successor's copy of a flow
// whose owner serves it carries the owner's tuples, key by key.
func (h *flowHarness) checkConvergence(members []*sim.Node) {
	// The promise is convergence within a few anti-entropy rounds of
	// quiet; a run cut short (-duration) before that is not judged.
	if quiet := h.k.Now() - h.calm; quiet < 4*h.aeEvery+h.aeEvery/2 {
		h.run.Logf("replica-convergence: %v of quiet is under 4.5 anti-entropy rounds; not judged", quiet)
		return
	}
	for _, n := range members {
		s := h.flows[n.Name()]
		if !n.Up() || s == nil {
			continue
		}
		for _, f := range s.Flows() {
			if owner, _ := s.Owner(f); owner != n.ID() || !s.Adopted(f) {
				continue
			}
			own := s.Copy(f)
			for _, id := range s.Placement(f)[1:] {
				rn := h.byID[id]
				rs := h.flows[rn.Name()]
				if !rn.Up() || rs == nil {
					continue
				}
				theirs := rs.Copy(f)
				for _, k := range sortedKeys(own) {
					if theirs[k].Tuple != own[k].Tuple {
						h.run.Fail("replica-convergence", "%s's copy of %s key %s has tuple %v; the owner %s has %v",
							rn.Name(), f, k, theirs[k].Tuple, n.Name(), own[k].Tuple)
					}
				}
			}
		}
	}
}

// checkFlowsServed: after the faults heal, a read of every hot flow
// through every member is answered (retried while the owner adopts).
func (h *flowHarness) checkFlowsServed(members []*sim.Node, hot []string, settle time.Duration) {
	h.k.After(settle, sim.EvCheck, xxhash.Sum64String("flows-served"), func() {
		deadline := h.k.Now() + 5*time.Second
		pending := map[string]error{}
		for _, n := range members {
			for _, f := range hot {
				n, f := n, f
				key := n.Name() + " " + f
				pending[key] = fmt.Errorf("no answer")
				var try func()
				try = func() {
					if _, waiting := pending[key]; !waiting || h.k.Now() >= deadline {
						return
					}
					if s := h.flows[n.Name()]; n.Up() && s != nil {
						n.Do(func() {
							s.Do(flow.Request{Flow: f, Op: flow.OpGet, Key: "a"}, func(_ flow.Response, err error) {
								if _, waiting := pending[key]; !waiting {
									return
								}
								if err == nil {
									delete(pending, key)
								} else {
									pending[key] = err
								}
							})
						})
					}
					h.k.After(200*time.Millisecond, sim.EvCheck, xxhash.Sum64String(key), try)
				}
				try()
			}
		}
		h.k.At(deadline, sim.EvCheck, xxhash.Sum64String("flows-served-check"), func() {
			for _, key := range sortedKeys(pending) {
				h.run.Fail("liveness", "flow read %s was not served within 5s of a healed cluster (last: %v)", key, pending[key])
			}
		})
	})
}

func (h *flowHarness) report() {
	ok, refused, unknown := h.flowHist.Count()
	var served, shed, adoptions uint64
	for _, name := range sortedKeys(h.flows) {
		s := h.flows[name]
		served += s.Served
		shed += s.Shed
		adoptions += s.Adoptions
	}
	h.run.Logf("flow: ops ok=%d refused=%d unknown=%d; served=%d shed=%d adoptions=%d accepted-loss-handoffs=%d",
		ok, refused, unknown, served, shed, adoptions, h.lossCount)
}
