package scenarios

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// flowHarness drives the flow store on top of a raftCluster: clients
// pinned to nodes doing flow operations on a few hot flows and many cold
// ones, the simulator's record of who served each operation and which
// handover frames were lost, and the flow checkers.
type flowHarness struct {
	*raftCluster
	flowHist *linearizability.History
	deadline time.Duration
	aeEvery  time.Duration
	calm     time.Duration // when the faults stop
	perNode  int           // clients pinned to each node
	allFlows []string

	// While a client call runs on a node (synchronously, inside Do),
	// calling is that node, callOp the history op (-1: none), arriveBy
	// the latest instant any frame it sent can arrive, and forwarded
	// whether it sent the request on to an owner.
	calling   dial.NodeID
	callOp    int
	arriveBy  time.Duration
	forwarded bool
	// takenAt is when the node took the last client call: its local
	// time, later than the call while it is busy in fsyncs.
	takenAt time.Duration
	// waited is, per history op, how long its answer waited for the
	// answering node's fsyncs (checker.Bridge).
	waited map[int]time.Duration
	// opFrames maps a request frame in flight (by its first byte's
	// address: the network hands watchers the sender's own slice) to its
	// history op; applied records, per op, the node that first received
	// it and when: where and when an owner applies a request.
	opFrames map[*byte]opFrame
	applied  map[int]checker.FlowService
	services []checker.FlowService
	// contacts are the raft frames the network delivered, for the D-17
	// checker.
	contacts []checker.Contact
	// lostHandovers are the adoption frames the network lost; handovers
	// the adoption answers it delivered.
	lostHandovers []lostFrame
	handovers     []handover
	firstAsk      map[adoptionKey]time.Duration
	cuts          []checker.FlowCut
}

type lostFrame struct {
	flow     string
	from, to dial.NodeID
	at       time.Duration
}

// handover is an adoption answer the network delivered; asked is when
// the adopter first sent an ask of that adoption to anyone (the
// network's record of the adoption's start, at the latest).
type handover struct {
	flow                   string
	from, to               dial.NodeID
	sent, delivered, asked time.Duration
}

// adoptionKey names one adoption: its adopter (and the adopter's
// incarnation: ids start over on a restart), flow and id.
type adoptionKey struct {
	by   dial.NodeID
	inc  uint64
	flow string
	id   uint64
}

func startFlowCluster(c *raftCluster, cfg flow.Config) *flowHarness {
	h := &flowHarness{raftCluster: c, flowHist: linearizability.NewHistory(0), callOp: -1,
		opFrames: map[*byte]opFrame{}, firstAsk: map[adoptionKey]time.Duration{}, waited: map[int]time.Duration{}, applied: map[int]checker.FlowService{}}
	cfg2 := cfg
	c.timing.applyFlow(&cfg2)
	c.flowCfg = &cfg2
	h.deadline = cfg2.Deadline
	if h.deadline == 0 {
		h.deadline = 2 * time.Second
	}
	h.aeEvery = cfg2.AntiEntropy
	if h.aeEvery == 0 {
		h.aeEvery = 5 * time.Second
	}
	c.nw.Watch(h.watch)
	return h
}

// watch reads the network's record for the flow checkers.
func (h *flowHarness) watch(s netsim.Sending) {
	// A delivered frame is taken by its node when the node is free: at
	// its local time, after the fsyncs it is still busy in.
	var taken time.Duration
	if s.Fate == netsim.Delivered {
		taken = h.byID[s.To].Local()
	}
	if len(s.Frame) > 0 && s.Frame[0] != flow.FramePrefix && s.Fate == netsim.Delivered {
		if info, err := consensus.DecodeFrame(s.Frame); err == nil {
			h.contacts = append(h.contacts, checker.Contact{To: s.To, From: s.From, At: taken, FromLeader: info.FromLeader(), Ack: info.ToLeader()})
		}
		return
	}
	if len(s.Frame) == 0 || s.Frame[0] != flow.FramePrefix {
		return
	}
	switch s.Fate {
	case netsim.Sent:
		if info, err := flow.DecodeFrame(s.Frame); err == nil && info.Kind == flow.FrameAdopt {
			if key := (adoptionKey{s.From, h.byID[s.From].Incarnation(), info.Flow, info.ID}); h.firstAsk[key] == 0 {
				h.firstAsk[key] = s.At
			}
		}
		if s.From != h.calling {
			return
		}
		h.arriveBy = max(h.arriveBy, s.ArriveBy)
		if info, err := flow.DecodeFrame(s.Frame); err == nil && info.Kind == flow.FrameOp {
			h.forwarded = true
			if h.callOp >= 0 {
				h.opFrames[&s.Frame[0]] = opFrame{op: h.callOp, copies: s.Copies}
			}
		}
	case netsim.Delivered:
		if of, ok := h.opFrames[&s.Frame[0]]; ok {
			h.frameFate(s)
			// Each copy of the request can take effect when it is taken,
			// which a busy owner does after its arrival.
			op := h.flowHist.Op(of.op)
			if op.Bounded && taken > op.Until {
				h.flowHist.Bound(of.op, taken)
			}
			if _, first := h.applied[of.op]; !first && op.Return == 0 {
				h.applied[of.op] = checker.FlowService{Flow: op.Key, Node: s.To, At: taken}
			}
			return
		}
		if info, err := flow.DecodeFrame(s.Frame); err == nil && info.Kind == flow.FrameAdoptResp {
			asked, ok := h.firstAsk[adoptionKey{s.To, h.byID[s.To].Incarnation(), info.Flow, info.ID}]
			if !ok {
				asked = s.At // an answer to no ask the network carried
			}
			h.handovers = append(h.handovers, handover{flow: info.Flow, from: s.From, to: s.To, sent: s.At, delivered: taken, asked: asked})
		}
	case netsim.Lost:
		if _, ok := h.opFrames[&s.Frame[0]]; ok {
			h.frameFate(s)
			return
		}
		if info, err := flow.DecodeFrame(s.Frame); err == nil && (info.Kind == flow.FrameAdopt || info.Kind == flow.FrameAdoptResp) {
			h.lostHandovers = append(h.lostHandovers, lostFrame{flow: info.Flow, from: s.From, to: s.To, at: h.k.Now()})
		}
	}
}

// opFrame is a client's request on its way to an owner: its history op
// and how many of its copies the network has yet to deliver or lose.
type opFrame struct{ op, copies int }

// frameFate counts one copy of a request frame delivered or lost, and
// forgets the frame when none is left in flight.
func (h *flowHarness) frameFate(s netsim.Sending) {
	of := h.opFrames[&s.Frame[0]]
	if of.copies--; of.copies <= 0 {
		delete(h.opFrames, &s.Frame[0])
		return
	}
	h.opFrames[&s.Frame[0]] = of
}

// faultRecord is the simulator's record that FlowCuts reads.
type faultRecord struct{ h *flowHarness }

func (r faultRecord) Crashed(node dial.NodeID, from, to time.Duration) (bool, time.Duration) {
	return r.h.byID[node].CrashedDuring(from, to)
}

func (r faultRecord) Cut(a, b dial.NodeID, from, to time.Duration) bool {
	return r.h.nw.CutDuring(a, b, from, to)
}

// HandedOver counts an answer only if it reached the adopter before the
// adoption could have completed without it: an adoption may complete once
// AdoptWait has passed since it began (on the adopter's clock, which may
// run 0.1% fast), and an answer that comes later may be ignored by design,
// even if it comes before the adopter first serves the flow.
func (r faultRecord) HandedOver(f string, a, b dial.NodeID, from, to time.Duration) bool {
	wait := r.h.flowCfg.AdoptWait - r.h.flowCfg.AdoptWait/1000
	for _, ho := range r.h.handovers {
		if ho.flow == f && ho.from == a && ho.to == b && ho.sent >= from && ho.delivered <= to && ho.delivered < ho.asked+wait {
			return true
		}
	}
	return false
}

func (r faultRecord) Name(id dial.NodeID) string { return r.h.byID[id].Name() }

func (r faultRecord) HandoverLost(f string, a, b dial.NodeID, from, to time.Duration) bool {
	for _, l := range r.h.lostHandovers {
		if l.flow == f && l.at >= from && l.at <= to && (l.from == a && l.to == b || l.from == b && l.to == a) {
			return true
		}
	}
	return false
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
func (h *flowHarness) startFlowClients(pinned []*sim.Machine, perNode int, hot, all []string, until time.Duration) {
	h.allFlows = all
	if h.run.ClientsOff {
		return
	}
	r := h.k.Stream("workload/flow")
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
	r := h.k.Stream("workload/owned/" + n.Name())
	for i := 0; i < count; i++ {
		client := 1000 + len(h.flowHist.Ops())%1000*10 + i
		h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, r, owned, owned, until)
		})
	}
}

func (h *flowHarness) flowStep(client int, n *sim.Machine, r interface {
	IntN(int) int
	Int64N(int64) int64
}, hot, all []string, stopAt time.Duration) {
	if h.k.Now() >= stopAt {
		return
	}
	next := func() {
		h.k.After(time.Duration(r.IntN(20))*time.Millisecond, sim.EvClient, uint64(client), func() {
			h.flowStep(client, n, r, hot, all, stopAt)
		})
	}
	var until time.Duration // the latest instant the call can take effect
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
	op := h.flowHist.Call(client, f, in, h.k.Now())
	defer func() { h.flowHist.Bound(op, until) }()
	var forwarded bool
	var taken time.Duration
	until, forwarded = h.callFlowOp(n, uint64(client), uint64(op), op, &taken, req, func(resp flow.Response, err error) {
		now := h.k.Now()
		// The call waited for the node's fsyncs twice: before the node
		// took it, and before the event that answered it ran.
		if w := (taken - h.flowHist.Op(op).Call) + (now - h.k.EventAt()); w > 0 {
			h.waited[op] = w
		}
		if err == nil || errors.Is(err, flow.ErrNotInteger) {
			// Served: where and when it was applied, by the record.
			if !forwarded {
				h.services = append(h.services, checker.FlowService{Flow: f, Node: n.ID(), At: taken})
			} else if s, ok := h.applied[op]; ok {
				h.services = append(h.services, s)
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
//
// It returns the latest instant at which the request can take effect, by
// the network's record: an owner applies a request the moment it is
// served, locally inside the call or when the forwarded frame arrives, and
// a node sends a client's request once, inside the call, so no request can
// take effect after the last frame the call sent has arrived.
func (h *flowHarness) callFlow(n *sim.Machine, client, tag uint64, req flow.Request, done func(flow.Response, error)) (until time.Duration) {
	until, _ = h.callFlowOp(n, client, tag, -1, nil, req, done)
	return until
}

// callFlowOp is callFlow for history op (-1: none), which also reports
// whether the node sent the request on to an owner (else it served it
// itself, or refused it), and sets *taken, if not nil, to when the node
// took the call: later than the call while the node is busy in fsyncs.
func (h *flowHarness) callFlowOp(n *sim.Machine, client, tag uint64, op int, taken *time.Duration, req flow.Request, done func(flow.Response, error)) (until time.Duration, forwarded bool) {
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
	call := h.k.Now()
	if !n.Up() || store == nil {
		settle(flow.Response{}, fmt.Errorf("%w: node down", flow.ErrSend))
		return call, false
	}
	h.calling, h.callOp, h.arriveBy, h.forwarded, h.takenAt = n.ID(), op, call, false, call
	n.Exec(func() {
		// A busy node takes the call after its fsyncs: that is when it
		// serves it, if it does.
		h.takenAt = h.k.Now()
		if taken != nil {
			*taken = h.takenAt
		}
		store.Do(req, settle)
	})
	h.calling, h.callOp, until, forwarded = 0, -1, max(h.arriveBy, h.takenAt), h.forwarded
	if a.done {
		return until, forwarded
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
	return until, forwarded
}

// checkD17 holds every owner-side service to the isolated-owner rule,
// from the network's record. The window is the isolation window, two
// ticks for the rule's granularity, and 0.1% for the clocks' drift.
func (h *flowHarness) checkD17() {
	window := time.Duration(float64(time.Duration(h.timing.election+2)*h.timing.tick) * 1.001)
	checker.D17(h.run, h.services, h.contacts, h.memberships, window, func(id dial.NodeID) string { return h.byID[id].Name() })
}

// checkFlowLinearizable runs porcupine over every flow, split at the
// instants the simulator's record shows loss was possible.
func (h *flowHarness) checkFlowLinearizable() {
	h.cuts = checker.FlowCuts(h.services, h.memberships, faultRecord{h})
	h.run.TimeCheck("flow-linearizability", func() {
		checker.FlowLinearizable(h.run, h.flowHist, checker.CutTimes(h.cuts), h.run.CheckTimeout)
	})
}

// checkBridge holds the bridge to its promises (checker.Bridge). Clocks
// drift by at most 500ppm in these scenarios; 1000ppm covers it.
func (h *flowHarness) checkBridge() {
	checker.Bridge(h.run, h.flowHist.Ops(), h.waited, h.deadline, 1000, "client deadline", flow.ErrShed.Error())
}

// checkConvergence: after quiescence every successor's copy of a flow
// whose owner serves it carries the owner's tuples, key by key.
func (h *flowHarness) checkConvergence(members []*sim.Machine) {
	// The promise is convergence within a few anti-entropy rounds of
	// quiet; a run cut short (-duration) before that is not judged.
	if quiet := h.k.Now() - h.calm; quiet < 4*h.aeEvery+h.aeEvery/2 {
		h.run.Undecided("replica-convergence", "%v of quiet is under 4.5 anti-entropy rounds", quiet)
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
				// Both ways: a key only a replica holds is a copy the
				// owner's authority never reached.
				for _, k := range sortedKeys(theirs) {
					if _, ok := own[k]; !ok {
						h.run.Fail("replica-convergence", "%s's copy of %s holds key %s (tuple %v), which the owner %s does not",
							rn.Name(), f, k, theirs[k].Tuple, n.Name())
					}
				}
			}
		}
	}
}

// checkFlowsServed: after the faults heal, a read of every hot flow
// through every member is answered (retried while the owner adopts).
func (h *flowHarness) checkFlowsServed(members []*sim.Machine, hot []string, settle time.Duration) {
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
						n.Exec(func() {
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
	h.run.Logf("flow: ops ok=%d refused=%d unknown=%d; served=%d shed=%d adoptions=%d accepted-loss=%d",
		ok, refused, unknown, served, shed, adoptions, len(h.cuts))
	for _, c := range h.cuts {
		h.k.Logf("accepted loss: flow %s at %v: %s", c.Flow, c.At, c.Reason)
	}
	// Who served each flow when, in runs, for reading a failure in -v.
	byFlow := map[string][]checker.FlowService{}
	for _, s := range h.services {
		byFlow[s.Flow] = append(byFlow[s.Flow], s)
	}
	for _, f := range sortedKeys(byFlow) {
		ss := byFlow[f]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At < ss[j].At })
		var runs []string
		for i := 0; i < len(ss); {
			j := i
			for j+1 < len(ss) && ss[j+1].Node == ss[i].Node {
				j++
			}
			runs = append(runs, fmt.Sprintf("%s[%v..%v]x%d", h.byID[ss[i].Node].Name(), ss[i].At, ss[j].At, j-i+1))
			i = j + 1
		}
		h.k.Logf("served %s: %s", f, strings.Join(runs, " "))
	}
	h.run.Did("flow-ops-ok", ok)
	h.run.Did("calls-shed", int(shed))
}
