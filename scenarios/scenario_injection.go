package scenarios

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/imposter"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/script"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "injected-counter",
		Summary: "clients on every node drive one imposter whose injected JavaScript counts requests in its state, " +
			"through partitions, crashes and clock faults; every count a client is answered must be the one counter's",
		Duration: 30 * time.Second,
		Bugs: []Bug{
			{Name: "local-state", Window: 10, MinCaught: 8},
		},
		Floors:     []Floor{{"counted", 40}, {"faults", 3}},
		DiskStalls: true,
		Checkers:   plus(flowCheckers, "counter-linearizability", "imposter-served"),
		Run:        runInjectedCounter,
	})
}

// counterPort is the imposter's port; its one stub counts in the
// injection state and answers the count.
const counterPort = 4590

// counterForms are the ways a run's imposter counts, one drawn per run
// (knob counter_form): through config.state in a response, through the
// positional injectState and imposterState arguments (named so that
// their text never says "state": only their place makes them the
// state), in a predicate, and in a decorate behavior. Each reaches the
// state by another path the server must recognize.
var counterForms = []struct{ name, stubs string }{
	{"config-state", `[{"responses":[{"inject":"(config) => { config.state.n = (config.state.n || 0) + 1; return { body: String(config.state.n) }; }"}]}]`},
	{"inject-state", `[{"responses":[{"inject":"function (request, s) { s.n = (s.n || 0) + 1; return { body: String(s.n) }; }"}]}]`},
	{"imposter-state", `[{"responses":[{"inject":"function (request, s, logger, cb, imp) { imp.n = (imp.n || 0) + 1; return { body: String(imp.n) }; }"}]}]`},
	{"predicate", `[{"predicates":[{"inject":"(config, logger, st) => { st.n = (st.n || 0) + 1; return true; }"}],
		"responses":[{"inject":"(config, s, logger, cb, st) => ({ body: String(st.n) })"}]}]`},
	{"nested-predicate", `[{"predicates":[{"and":[{"not":{"inject":"(config, logger, st) => { st.n = (st.n || 0) + 1; return false; }"}}]}],
		"responses":[{"inject":"(config, s, logger, cb, st) => ({ body: String(st.n) })"}]}]`},
	{"decorate", `[{"responses":[{"is":{"body":"x"},"behaviors":[{"decorate":"(config) => { config.state.n = (config.state.n || 0) + 1; config.response.body = String(config.state.n); }"}]}]}]`},
}

// counterKey is the key the counter's history is kept under (the model's:
// the state's count as an incrementing integer).
const counterKey = "n"

type counterRun struct {
	h    *flowHarness
	bugs bugs.Set
	// engines are each node's imposter, turns each node's script turn.
	engines map[string]*imposter.Imposter
	turns   map[string]*turnQueue
	flowKey string
	hist    *linearizability.History
	// unknown are the requests whose outcome the client never learned;
	// each is recorded at the end as an increment that may have happened,
	// bounded by its compare-and-set's store call.
	unknown                         []func(end time.Duration)
	counted, conflicts, unavailable int
}

func runInjectedCounter(run *Run) error {
	k := run.Kernel
	founders := 3 + k.Stream("knobs/size").IntN(3)
	h, _, _, calm := flowSetup(run, founders, 0, flow.Config{})
	x := &counterRun{h: h, bugs: run.Bugs(), engines: map[string]*imposter.Imposter{}, turns: map[string]*turnQueue{},
		hist: linearizability.NewHistory(0)}
	form := counterForms[k.Stream("knobs/counter").IntN(len(counterForms))]
	run.Knob("counter_form", form.name)
	creation := fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":%s}`, counterPort, form.stubs)
	stored := imposter.Stored{Incarnation: "c1", Creation: mustObject(creation), StubIDs: []string{"c1.0"}}
	for _, n := range h.nodes {
		imp, err := stored.Build(counterPort, false)
		if err != nil {
			return err
		}
		// The functions are synchronous and draw nothing at random: the
		// engine's budget never fires in a run's real time, and every
		// node computes the same answers from the same state.
		imp.UseScripts(&script.Host{Budget: time.Minute})
		x.engines[n.Name()] = imp
		x.turns[n.Name()] = &turnQueue{k: k}
		x.flowKey = imp.ScriptStateFlow()
	}
	for _, n := range h.nodes[:founders] {
		n.Start()
	}
	faults := DrawFaults(k.Stream("knobs/faults"), founders)
	run.Knob("faults", faults)
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	chaos := StartChaos(run, h.nw, h.nodes, faults, calm)
	h.holdForFloors(calm, func() bool { return x.counted < run.Floor("counted") })
	x.startClients(calm)
	h.startChecks(100 * time.Millisecond)
	member := func(n *sim.Machine) bool { return h.isMember(n.ID()) }
	if err := h.settleMembersThen(calm, member, []string{x.flowKey}, chaos, func([]*sim.Machine) {}); err != nil {
		return err
	}
	for _, u := range x.unknown {
		u(k.Now())
	}
	run.History("counter-linearizability", x.hist)
	run.TimeCheck("counter-linearizability", func() {
		checker.CounterLinearizable(run, x.hist, checker.CutTimes(h.cuts), run.CheckTimeout)
	})
	run.Did("counted", x.counted)
	run.Logf("injected counter: counted=%d conflicts=%d unavailable=%d", x.counted, x.conflicts, x.unavailable)
	return nil
}

func mustObject(text string) *imposter.Object {
	v, err := imposter.Parse(text)
	if err != nil {
		panic(err)
	}
	return v.(*imposter.Object)
}

func (x *counterRun) startClients(until time.Duration) {
	if x.h.run.ClientsOff {
		return
	}
	r := x.h.k.Stream("workload/counter")
	client := 0
	for _, n := range x.h.nodes {
		for range x.h.perNode {
			c, node := 7000+client, n
			client++
			own := x.h.k.Stream(fmt.Sprintf("workload/counter/%d", c))
			x.h.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(c), func() { x.step(c, node, own, until) })
		}
	}
}

func (x *counterRun) step(client int, n *sim.Machine, r *rand.Rand, until time.Duration) {
	if x.h.k.Now() >= until && !x.h.hold.keeps(x.h, until) {
		return
	}
	next := func() {
		x.h.k.After(time.Duration(r.IntN(30))*time.Millisecond, sim.EvClient, uint64(client), func() { x.step(client, n, r, until) })
	}
	if _, send := opOf(x.h.run, "c", client); !send {
		next()
		return
	}
	x.request(client, n, next)
}

// counterReq is one request's store calls: its compare-and-set's op in
// the store's history, once made.
type counterReq struct {
	casOp int
	cas   bool
}

// request sends one request to n's imposter and records what the client
// saw: a count is an increment that returned it; a conflict is nothing
// (the write lost, nothing changed); anything else unknown.
func (x *counterRun) request(client int, n *sim.Machine, then func()) {
	h, k := x.h, x.h.k
	call := k.Now()
	inc := n.Incarnation()
	rec := &counterReq{}
	answered := false
	req := &imposter.Request{Method: "GET", Path: "/", Query: imposter.NewObject(), Headers: imposter.NewObject(),
		RequestFrom: "client:1", IP: "client", Arrived: n.Clock().Now()}
	unknown := func(end time.Duration) {
		if !rec.cas {
			return // no write was asked of the store: nothing changed
		}
		op := x.hist.Call(client, counterKey, linearizability.FlowInput{Op: linearizability.FlowIncr, Key: counterKey, Delta: 1}, call)
		x.hist.GiveUp(op, "no answer", end)
		if store := h.flowHist.Op(rec.casOp); store.Bounded {
			x.hist.Bound(op, store.Until)
		}
	}
	finish := func(res imposter.Served, err error) {
		if answered {
			return
		}
		answered = true
		if !n.Up() || n.Incarnation() != inc {
			x.unknown = append(x.unknown, unknown)
			then()
			return
		}
		switch status := res.Outcome.StatusCode; {
		case err == nil && status == 200:
			v, perr := strconv.ParseInt(string(res.Outcome.Body), 10, 64)
			if perr != nil {
				h.run.Fail("imposter-served", "%s answered %q, no count", n.Name(), res.Outcome.Body)
				break
			}
			x.counted++
			op := x.hist.Call(client, counterKey, linearizability.FlowInput{Op: linearizability.FlowIncr, Key: counterKey, Delta: 1}, call)
			x.hist.Return(op, linearizability.FlowOutput{Int: v}, k.Now())
		case err == nil && status == 503 && res.Unavailable == imposter.ReasonStateConflict:
			x.conflicts++ // the compare-and-set lost: nothing changed
		case err == nil && status == 503:
			x.unavailable++
			x.unknown = append(x.unknown, unknown)
		default:
			h.run.Fail("imposter-served", "%s answered %d (%v): %s", n.Name(), status, err, res.Outcome.Body)
		}
		then()
	}
	k.After(h.deadline+3*time.Second, sim.EvClient, uint64(client), func() {
		if !answered {
			answered = true
			x.unknown = append(x.unknown, unknown)
			then()
		}
	})
	if !n.Exec(func() {
		// Routed as the server routes it: the imposter says whether its
		// functions may reach the state.
		w := &counterWorld{x: x, n: n, client: client, rec: rec}
		if x.engines[n.Name()].Scripted() {
			imposter.ServeScripted(w, imposter.Route{Bugs: x.bugs}, req, finish)
		} else {
			imposter.Serve(w, imposter.Route{Bugs: x.bugs}, req, finish)
		}
	}) {
		answered = true
		then() // the node is down: refused, nothing happened
	}
}

// counterWorld is a request's world on one node.
type counterWorld struct {
	x      *counterRun
	n      *sim.Machine
	client int
	rec    *counterReq
}

func (w *counterWorld) Store(req flow.Request, done func(flow.Response, error)) {
	w.x.h.storeRetrying(w.client, w.n, req, func(op int) {
		if req.Op == flow.OpCas {
			w.rec.cas, w.rec.casOp = true, op
		}
	}, done)
}

func (w *counterWorld) OwnerOf(string, func(routing.Owner, error)) {
	panic("injected-counter routes per operation: no owner is asked for")
}

func (w *counterWorld) Forward(routing.Owner, func(imposter.Outcome, error)) {
	panic("injected-counter routes per operation: nothing is forwarded")
}

func (w *counterWorld) Engine(f func(imp *imposter.Imposter)) { f(w.x.engines[w.n.Name()]) }

func (w *counterWorld) Turn(f func(release func(), err error)) {
	w.x.turns[w.n.Name()].take(w.n, f)
}

// turnQueue is a node's script turn for its imposter: one request at a
// time, the others waiting in order, as the HTTP server's turn channel.
// A crash ends every turn (the waiters' connections broke with it).
type turnQueue struct {
	k       *sim.Kernel
	inc     uint64
	busy    bool
	waiting []func()
}

func (q *turnQueue) take(n *sim.Machine, f func(release func(), err error)) {
	if q.inc != n.Incarnation() {
		q.inc, q.busy, q.waiting = n.Incarnation(), false, nil
	}
	inc := q.inc
	run := func() {
		q.busy = true
		released := false
		f(func() {
			if released || q.inc != inc {
				return
			}
			released = true
			if len(q.waiting) == 0 {
				q.busy = false
				return
			}
			next := q.waiting[0]
			q.waiting = q.waiting[1:]
			q.k.After(0, sim.EvClient, 0, func() {
				if q.inc == inc && n.Up() && n.Incarnation() == inc {
					n.Exec(next)
				}
			})
		}, nil)
	}
	if q.busy {
		q.waiting = append(q.waiting, run)
		return
	}
	run()
}
