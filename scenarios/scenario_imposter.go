package scenarios

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/imposter"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "imposter-scenarios",
		Summary: "clients on every node drive stateful imposters (a four-state scenario, flows by header, some shared fleet-wide or within a tenant) " +
			"through partitions, crashes, clock faults, a join and a removal; requests forwarded once to flow owners, or each store call routed",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "gate-local-read", Window: 10, MinCaught: 8},
			// Only seeds that route by forwarding (about half) can
			// catch it.
			{Name: "forward-fallback", Window: 100, MinCaught: 35},
			// Found here (seed 1302); 3 of 60 with conf_stalls aimed.
			{Name: "stale-membership", Window: 60, MinCaught: 2},
		},
		Floors:     []Floor{{"imposter-ok", 50}, {"moves", 1}, {"faults", 3}, {"membership-changes", 1}},
		DiskStalls: true,
		ConfStalls: true,
		Checkers:   plus(flowCheckers, "scenario-linearizability", "imposter-served"),
		Run:        runImposterScenarios,
	})
}

// The scenario every imposter of the run serves: states Started, A, B and
// C; /stepN moves one step along Started → A → B → C → A, each a gate and
// a compare-and-set; /jump moves to B with no gate (a plain set); /peek
// moves nothing. Every answer names the state its gate read ("A"), or the
// state it read and moved from ("A>"), so a client sees what the flow
// held: the simulator's record of what each request was served from.
const (
	scenarioName = "s"
	jumpTo       = "B"
)

var scenarioSteps = []struct{ path, from, to string }{
	{"/step1", imposter.StateStarted, "A"}, {"/step2", "A", "B"}, {"/step3", "B", "C"}, {"/step4", "C", "A"},
}

var scenarioStates = []string{imposter.StateStarted, "A", "B", "C"}

// scenarioImposter is the creation request of one imposter: port, scope
// (and the tenant, for the tenant scope).
func scenarioImposter(port int, scope, tenant string) string {
	var stubs []string
	stub := func(path, required, moveTo, body string) {
		s := fmt.Sprintf(`{"scenarioName":%q,"predicates":[{"equals":{"path":%q}}],"responses":[{"is":{"body":%q}}]`, scenarioName, path, body)
		if required != "" {
			s += fmt.Sprintf(`,"requiredScenarioState":%q`, required)
		}
		if moveTo != "" {
			s += fmt.Sprintf(`,"newScenarioState":%q`, moveTo)
		}
		stubs = append(stubs, s+"}")
	}
	for _, st := range scenarioSteps {
		stub(st.path, st.from, st.to, st.from+">")
		for _, x := range scenarioStates {
			if x != st.from {
				stub(st.path, x, "", x)
			}
		}
	}
	for _, x := range scenarioStates {
		stub("/peek", x, "", x)
	}
	stub("/jump", "", jumpTo, "jump")
	tenantField := ""
	if tenant != "" {
		tenantField = fmt.Sprintf(`,"tenant":%q`, tenant)
	}
	return fmt.Sprintf(`{"protocol":"http","port":%d,"_rift":{"flowState":{"flowIdSource":"header:X-Flow","contextScope":%q%s}},"stubs":[%s]}`,
		port, scope, tenantField, strings.Join(stubs, ","))
}

// The imposters: 7001 keeps a flow per header value to itself; 7002 and
// 7003 share theirs fleet-wide, so one flow is driven through both; 7004
// and 7005 share theirs within tenant acme, and 7006's tenant, beta,
// shares with neither.
var scenarioPorts = []struct {
	port          int
	scope, tenant string
}{{7001, "imposter", ""}, {7002, "fleet", ""}, {7003, "fleet", ""}, {7004, "tenant", "acme"}, {7005, "tenant", "acme"}, {7006, "tenant", "beta"}}

// scopedFlow is the flow the imposter on port keeps id's state in, by
// the documented scopes (i<port>:<id>, f:<id>, t<tenant>:<id>), written
// out here rather than asked of the engine under test
// (imposter.ScopedFlow): a model that asked the engine would share flows
// exactly as the engine does, right or wrong.
func scopedFlow(port int, id string) string {
	for _, p := range scenarioPorts {
		if p.port != port {
			continue
		}
		switch p.scope {
		case "fleet":
			return "f:" + id
		case "tenant":
			return "t" + p.tenant + ":" + id
		}
		return fmt.Sprintf("i%d:%s", port, id)
	}
	panic(fmt.Sprintf("scenarios: no imposter on port %d", port))
}

// impRun is the simulator's record of an imposter run.
type impRun struct {
	h       *flowHarness
	forward bool
	bugs    bugs.Set
	rng     *rand.Rand // forwards' latencies
	// engines are each node's compiled imposters, by node and port.
	engines map[string]map[int]*imposter.Imposter
	ids     []string
	// hist is what clients saw, as operations on each flow's scenario
	// key (the flow store's model: a gate read is a get, a move a
	// compare-and-set or a set).
	hist                             *linearizability.History
	ok, unavailable, moves, forwards int
	served                           map[string]bool // member+flow pairs answered after the heal
	// requests are every request made, in order. One whose outcome the
	// client never learned (no answer, a 503, a crash, the run's end) is
	// recorded when the run ends, not when the client gave up: a request
	// forwarded to an owner may still make its store calls after the
	// forwarding node answered 503, and only then is it known which move
	// it asked for and, by the flow history's record, until when that
	// move could take effect.
	requests []*request
}

// request is one client request: whether its client saw its answer, and
// what it may have changed if not.
type request struct {
	answered bool
	maybe    func(end time.Duration)
}

// reqRec is one request's record across its hops, from the store's
// answers on whichever node served it: when its gate read was answered,
// and when its move was, and whether the compare-and-set succeeded.
type reqRec struct {
	readAt, moveAt time.Duration
	moveOK         bool
	// move is the move's store call, once made: its input, and its op in
	// the flow history (whose bound says how long it could take effect).
	move   *linearizability.FlowInput
	moveOp int
}

func runImposterScenarios(run *Run) error {
	k := run.Kernel
	founders := 3 + k.Stream("knobs/size").IntN(3)
	h, _, _, calm := flowSetup(run, founders, 1, flow.Config{})
	x := &impRun{h: h, bugs: run.Bugs(), rng: k.Stream("workload/forward"), engines: map[string]map[int]*imposter.Imposter{},
		hist: linearizability.NewHistory(0), served: map[string]bool{}}
	r := k.Stream("knobs/imposter")
	x.forward = r.IntN(2) == 0
	route := "per-op"
	if x.forward {
		route = "forward"
	}
	run.Knob("route", route)
	for i := range 3 + r.IntN(8) {
		x.ids = append(x.ids, fmt.Sprintf("u%d", i))
	}
	run.Knob("flow_ids", len(x.ids))
	for _, n := range h.nodes {
		x.engines[n.Name()] = map[int]*imposter.Imposter{}
		for _, p := range scenarioPorts {
			v, err := imposter.Parse(scenarioImposter(p.port, p.scope, p.tenant))
			if err != nil {
				return err
			}
			imp, err := imposter.New(v.(*imposter.Object), p.port)
			if err != nil {
				return err
			}
			x.engines[n.Name()][p.port] = imp
		}
	}
	founderNodes := h.nodes[:founders]
	for _, n := range founderNodes {
		n.Start()
	}
	faults := DrawFaults(k.Stream("knobs/faults"), founders)
	run.Knob("faults", faults)
	DrawClocks(run, founderNodes, 300*time.Millisecond, 100)
	chaos := StartChaos(run, h.nw, founderNodes, faults, calm)
	// Held on both floors the clients make: a run whose faults left the
	// cluster unavailable most of the time keeps its clients past calm
	// (checkServed's peeks after calm count towards imposter-ok too).
	h.holdForFloors(calm, func() bool { return x.moves < run.Floor("moves") || x.ok < run.Floor("imposter-ok") })
	x.startClients(h.nodes, calm)
	h.startChecks(100 * time.Millisecond)
	x.changeMembership(founderNodes, h.nodes[founders], calm)

	member := func(n *sim.Machine) bool { return h.isMember(n.ID()) }
	if err := h.settleMembersThen(calm, member, x.flowKeys(), chaos, func(members []*sim.Machine) {
		x.checkServed(members, 3*time.Second)
	}); err != nil {
		return err
	}
	for _, r := range x.requests {
		if !r.answered {
			r.maybe(k.Now())
		}
	}
	h.run.History("scenario-linearizability", x.hist)
	h.run.TimeCheck("scenario-linearizability", func() {
		checker.ScenarioLinearizable(h.run, x.hist, checker.CutTimes(h.cuts), h.run.CheckTimeout)
	})
	run.Did("imposter-ok", x.ok)
	run.Did("moves", x.moves)
	run.Logf("imposters: ok=%d unavailable=%d moves=%d forwards=%d", x.ok, x.unavailable, x.moves, x.forwards)
	return nil
}

// flowKeys are the scoped flows the clients drive.
func (x *impRun) flowKeys() []string {
	var keys []string
	for _, p := range scenarioPorts {
		for _, id := range x.ids {
			if f := scopedFlow(p.port, id); !slices.Contains(keys, f) {
				keys = append(keys, f)
			}
		}
	}
	return keys
}

// changeMembership joins the extra node, then removes a founder, while
// the faults go on: ownership moves twice under load.
func (x *impRun) changeMembership(founders []*sim.Machine, extra *sim.Machine, calm time.Duration) {
	h, k := x.h, x.h.k
	r := k.Stream("knobs/membership")
	joinAt := sim.Between(r, 2*time.Second, 6*time.Second)
	removeAt := joinAt + sim.Between(r, 4*time.Second, 8*time.Second)
	victim := founders[r.IntN(len(founders))]
	h.run.Knob("membership", fmt.Sprintf("join %s at %v; remove %s at %v", extra.Name(), joinAt, victim.Name(), removeAt))
	done := map[string]bool{}
	var ask func(what string, f func(cn *consensus.Node, done func(error)), until func() bool)
	ask = func(what string, f func(cn *consensus.Node, done func(error)), until func() bool) {
		if until() || k.Now() >= calm {
			return
		}
		for _, via := range founders {
			if via.Up() && via != victim && h.call(via, func(cn *consensus.Node) { f(cn, func(error) {}) }) {
				break
			}
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String(what), func() {
			if until() {
				if !done[what] {
					done[what] = true
					h.run.Did("membership-changes", 1)
				}
				return
			}
			ask(what, f, until)
		})
	}
	k.At(joinAt, sim.EvClient, xxhash.Sum64String("join"), func() {
		extra.Start()
		ask("join", func(cn *consensus.Node, done func(error)) {
			cn.AddLearner(consensus.NewMember(extra.Name(), extra.Name()+":7000"), done)
		}, func() bool { return h.isMember(extra.ID()) })
	})
	k.At(removeAt, sim.EvClient, xxhash.Sum64String("remove"), func() {
		ask("remove", func(cn *consensus.Node, done func(error)) { cn.RemoveMember(victim.ID(), done) },
			func() bool { return !h.isMember(victim.ID()) })
	})
}

// startClients runs closed-loop clients pinned to each node until calm,
// or past it while the run is under its floors (floorHold).
func (x *impRun) startClients(nodes []*sim.Machine, until time.Duration) {
	if x.h.run.ClientsOff {
		return
	}
	r := x.h.k.Stream("workload/imposter")
	client := 0
	for _, n := range nodes {
		for range x.h.perNode {
			c, node := 5000+client, n
			client++
			own := x.h.k.Stream(fmt.Sprintf("workload/imposter/%d", c)) // its k-th request is its own (Run.Op)
			x.h.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(c), func() { x.clientStep(c, node, own, until) })
		}
	}
}

func (x *impRun) clientStep(client int, n *sim.Machine, r *rand.Rand, until time.Duration) {
	if x.h.k.Now() >= until && !x.h.hold.keeps(x.h, until) {
		return
	}
	port := scenarioPorts[r.IntN(len(scenarioPorts))].port
	id := x.ids[r.IntN(len(x.ids))]
	var path string
	switch pick := r.IntN(100); {
	case pick < 80:
		path = scenarioSteps[pick/20].path
	case pick < 95:
		path = "/peek"
	default:
		path = "/jump"
	}
	next := func(int) {
		x.h.k.After(time.Duration(r.IntN(20))*time.Millisecond, sim.EvClient, uint64(client), func() { x.clientStep(client, n, r, until) })
	}
	if _, send := opOf(x.h.run, "i", client); !send {
		next(0)
		return
	}
	x.request(client, n, port, id, path, next)
}

// request sends one request to n's imposter on port, for flow id, and
// records what the client saw; then gets the status (0: no answer).
func (x *impRun) request(client int, n *sim.Machine, port int, id, path string, then func(status int)) {
	h, k := x.h, x.h.k
	key := scopedFlow(port, id)
	call := k.Now()
	rec := &reqRec{}
	answered := false
	inc := n.Incarnation()
	req := &imposter.Request{Method: "GET", Path: path, Query: imposter.NewObject(), Headers: imposter.NewObject().Set("X-Flow", id),
		RequestFrom: "client:1", IP: "client"}
	// What a request may have changed, if its answer never came: the
	// move, if its store call was made, while that call could take
	// effect (the flow history's bound on it).
	maybe := func(at time.Duration) {
		if rec.move == nil {
			return // no move was asked of the store: nothing changed
		}
		op := x.hist.Call(client, key, *rec.move, call)
		x.hist.GiveUp(op, "no answer", at)
		if store := h.flowHist.Op(rec.moveOp); store.Bounded {
			x.hist.Bound(op, store.Until)
		}
	}
	r := &request{maybe: maybe}
	x.requests = append(x.requests, r)
	finish := func(res imposter.Served, err error) {
		if answered {
			return
		}
		answered = true
		now := k.Now()
		if !n.Up() || n.Incarnation() != inc {
			// The node crashed: the client's connection broke.
			then(0)
			return
		}
		status := res.Outcome.StatusCode
		if err != nil || status != 200 {
			if err == nil && status != 503 {
				h.run.Fail("imposter-served", "%s %s on %s for flow %s answered %d: %s", n.Name(), path, key, id, status, res.Outcome.Body)
			}
			x.unavailable++
			then(status)
			return
		}
		x.ok++
		r.answered = true
		if res.Moved {
			x.moves++
		}
		x.record(client, key, path, string(res.Outcome.Body), call, now, rec)
		then(status)
	}
	k.After(h.deadline+2*time.Second, sim.EvClient, uint64(client), func() { finish(imposter.Served{}, errors.New("client deadline")) })
	if !n.Exec(func() {
		imposter.ServeStateful(&simWorld{x: x, n: n, port: port, rec: rec, client: client, req: req},
			imposter.Route{Forward: x.forward, Bugs: x.bugs}, req, finish)
	}) {
		answered, r.answered = true, true
		then(0) // the node is down: refused, nothing happened
	}
}

func casInput(from, to string) linearizability.FlowInput {
	in := linearizability.FlowInput{Op: linearizability.FlowCas, Key: imposter.ScenarioKey(scenarioName), Value: to, Expect: from}
	if from == imposter.StateStarted {
		in.Expect, in.ExpectAbsent = "", true // Started is the key's absence: nothing here writes it
	}
	return in
}

// record turns an answer into operations on the flow's scenario key: the
// gate's read over [call, readAt], and the move it asked for over
// [readAt, moveAt], with the store's answer to it.
func (x *impRun) record(client int, key, path, body string, call, now time.Duration, rec *reqRec) {
	readAt, moveAt := rec.readAt, rec.moveAt
	if readAt == 0 || readAt > now {
		readAt = now
	}
	if moveAt < readAt || moveAt > now {
		moveAt = now
	}
	if path == "/jump" {
		op := x.hist.Call(client, key, linearizability.FlowInput{Op: linearizability.FlowSet, Key: imposter.ScenarioKey(scenarioName), Value: jumpTo}, call)
		x.hist.Return(op, linearizability.FlowOutput{}, moveAt)
		return
	}
	state, moved := strings.CutSuffix(body, ">")
	read := x.hist.Call(client, key, linearizability.FlowInput{Op: linearizability.FlowGet, Key: imposter.ScenarioKey(scenarioName)}, call)
	out := linearizability.FlowOutput{Found: state != imposter.StateStarted, Value: state}
	if !out.Found {
		out.Value = ""
	}
	x.hist.Return(read, out, readAt)
	if !moved {
		return
	}
	for _, st := range scenarioSteps {
		if st.path == path {
			op := x.hist.Call(client, key, casInput(state, st.to), readAt)
			x.hist.Return(op, linearizability.FlowOutput{Succeeded: rec.moveOK}, moveAt)
		}
	}
}

// checkServed: after the heal, a /peek for every flow through every
// member is answered 200 within settle+5s (retried while owners adopt).
func (x *impRun) checkServed(members []*sim.Machine, settle time.Duration) {
	k := x.h.k
	k.After(settle, sim.EvCheck, xxhash.Sum64String("imposters-served"), func() {
		deadline := k.Now() + 5*time.Second
		var pending []string
		for i, n := range members {
			for _, p := range scenarioPorts {
				for _, id := range x.ids {
					n, port, id, what := n, p.port, id, fmt.Sprintf("%s %d %s", n.Name(), p.port, id)
					pending = append(pending, what)
					client := 9000 + i*1000 + port%10*100 + slices.Index(x.ids, id)
					var try func()
					try = func() {
						if x.served[what] || k.Now() >= deadline {
							return
						}
						x.request(client, n, port, id, "/peek", func(status int) {
							if status == 200 {
								x.served[what] = true
							}
						})
						k.After(200*time.Millisecond, sim.EvCheck, xxhash.Sum64String(what), try)
					}
					try()
				}
			}
		}
		k.At(deadline, sim.EvCheck, xxhash.Sum64String("imposters-served-check"), func() {
			gone := x.h.removedSince(members)
			for _, what := range pending {
				if node, _, _ := strings.Cut(what, " "); !x.served[what] && !gone[node] {
					x.h.run.Fail("imposter-served", "a /peek through %s (node, port, flow id) was not answered within 5s of a healed cluster", what)
				}
			}
		})
	})
}

// simWorld is a stateful request's world on a simulated node: the flow
// store's calls go through the harness's record, and a forward is an
// HTTP hop the simulator carries, over the same partitions as the
// network.
type simWorld struct {
	x      *impRun
	n      *sim.Machine
	port   int
	rec    *reqRec
	client int
	req    *imposter.Request
}

func (w *simWorld) Store(req flow.Request, done func(flow.Response, error)) {
	h := w.x.h
	h.storeRetrying(w.client, w.n, req, func(op int) {
		if in := storeInput(req); in.Op == linearizability.FlowCas || in.Op == linearizability.FlowSet {
			in.Key = imposter.ScenarioKey(scenarioName)
			w.rec.move, w.rec.moveOp = &in, op
		}
	}, func(resp flow.Response, err error) {
		switch {
		case err != nil:
		case req.Op == flow.OpGetAll:
			w.rec.readAt = h.k.Now()
		case req.Op == flow.OpCas, req.Op == flow.OpSet:
			w.rec.moveAt, w.rec.moveOK = h.k.Now(), req.Op == flow.OpSet || resp.Succeeded
		}
		done(resp, err)
	})
}

// storeRetrying makes a store call as the real node does: a fresh event
// on the node, so that the harness's bookkeeping of the call in progress
// never nests inside another's, and again after flow.RetryPause while
// the owner adopts the flow, within the store's deadline. called gets
// each attempt's op in the flow history.
func (h *flowHarness) storeRetrying(client int, n *sim.Machine, req flow.Request, called func(op int), done func(flow.Response, error)) {
	var attempt int
	var waited time.Duration
	var try func()
	try = func() {
		h.k.After(0, sim.EvClient, uint64(client), func() {
			op := h.flowCall(client, n, req, storeInput(req), func(resp flow.Response, err error) {
				if pause, again := flow.RetryPause(err, attempt); again && waited+pause < h.deadline && n.Up() {
					attempt++
					waited += pause
					h.k.After(pause, sim.EvClient, uint64(client), try)
					return
				}
				done(resp, err)
			})
			called(op)
		})
	}
	try()
}

// storeInput is a store request as the flow history's model sees it.
func storeInput(req flow.Request) linearizability.FlowInput {
	switch req.Op {
	case flow.OpGetAll:
		return linearizability.FlowInput{Op: linearizability.FlowGetAll}
	case flow.OpCas:
		return linearizability.FlowInput{Op: linearizability.FlowCas, Key: req.Key, Value: string(req.Value), Expect: string(req.Expect), ExpectAbsent: req.ExpectAbsent}
	case flow.OpSet:
		return linearizability.FlowInput{Op: linearizability.FlowSet, Key: req.Key, Value: string(req.Value)}
	case flow.OpDelete:
		return linearizability.FlowInput{Op: linearizability.FlowDelete, Key: req.Key}
	}
	return linearizability.FlowInput{Op: linearizability.FlowGet, Key: req.Key}
}

func (w *simWorld) OwnerOf(key string, done func(routing.Owner, error)) {
	cn := w.x.h.node(w.n)
	if cn == nil {
		done(routing.Owner{}, fmt.Errorf("%w: %w", flow.ErrUnavailable, flow.ErrSend))
		return
	}
	ms := cn.Membership()
	voters := make([]routing.Member, len(ms.Voters))
	for i, m := range ms.Voters {
		voters[i] = routing.Member{ID: m.ID, HTTP: m.Name} // the simulator reaches a node by name
	}
	done(routing.NewRingDirectory(w.n.ID(), routing.OneGroup, ms.Index, voters).OwnerOf(key), nil)
}

// forwardTimeout is how long a forwarding node waits for the owner.
const forwardTimeout = 2 * time.Second

func (w *simWorld) Forward(owner routing.Owner, done func(imposter.Outcome, error)) {
	x, k := w.x, w.x.h.k
	from, to := w.n, x.h.byID[owner.Node]
	x.forwards++
	answered := false
	finish := func(out imposter.Outcome, err error) {
		if !answered {
			answered = true
			done(out, err)
		}
	}
	k.After(forwardTimeout, sim.EvClient, uint64(w.client), func() {
		if from.Up() {
			from.Exec(func() { finish(imposter.Outcome{}, imposter.ErrForward) })
		}
	})
	if to == nil {
		return
	}
	there, back := sim.Between(x.rng, time.Millisecond, 8*time.Millisecond), sim.Between(x.rng, time.Millisecond, 8*time.Millisecond)
	fromInc := from.Incarnation()
	k.After(there, sim.EvClient, uint64(w.client), func() {
		if !x.h.nw.Reachable(from.ID(), to.ID()) || !to.Up() {
			return // lost: the forwarding node's timeout answers
		}
		to.Exec(func() {
			ow := &simWorld{x: x, n: to, port: w.port, rec: w.rec, client: w.client, req: w.req}
			imposter.ServeStateful(ow, imposter.Route{Forward: true, Forwarded: true, Bugs: x.bugs}, w.req, func(res imposter.Served, err error) {
				if res.Moved {
					x.moves++
				}
				out := res.Outcome
				if err != nil {
					out = imposter.Outcome{StatusCode: 500}
				}
				k.After(back, sim.EvClient, uint64(w.client), func() {
					if x.h.nw.Reachable(to.ID(), from.ID()) && from.Up() && from.Incarnation() == fromInc {
						from.Exec(func() { finish(out, nil) })
					}
				})
			})
		})
	})
}

// Turn: the scenario's imposters run no JavaScript (none is scripted).
func (w *simWorld) Turn(f func(release func(), err error)) { f(func() {}, nil) }

func (w *simWorld) Engine(f func(imp *imposter.Imposter)) { f(w.x.engines[w.n.Name()][w.port]) }
