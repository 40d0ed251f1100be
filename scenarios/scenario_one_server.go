package scenarios

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/rollout"
	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/imposter"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "one-server",
		Summary: "clients send admin changes, imposter requests and reads of recorded requests each to any member, as behind a " +
			"round-robin balancer, through partitions, crashes and clock faults; what they see is held to one server's answers",
		// 45 s: the clients held past calm for the floors get about eight
		// seconds before the convergence checks need the rest; at 40 s it
		// was three, and a restart at calm whose flows each wait out an
		// AdoptWait of up to 2.3 s left too few cycle steps (seed 233).
		Duration: 45 * time.Second,
		Bugs: []Bug{
			{Name: "answer-before-reconciled", Window: 10, MinCaught: 8},
			{Name: "local-records-only", Window: 10, MinCaught: 8},
			{Name: "local-cycle", Window: 10, MinCaught: 8},
		},
		Floors:     []Floor{{"admin-ok", 20}, {"imposter-ok", 200}, {"cycle-ok", 10}, {"gathers-ok", 10}, {"faults", 3}},
		DiskStalls: true,
		Checkers:   plus(flowCheckers, "config-rollout", "recorded-requests", "cycle-linearizability", "one-server-served"),
		Run:        runOneServer,
	})
}

// The scenario's model of a cluster behind one address. Every node runs
// a shell beside its core, as the real node runs imposterhttp: it serves
// the imposter definitions its node applied from the log, reconciling
// after a delay that stands for binding and closing ports (so a member
// that applied a change may still serve the old definition for a
// while), and reports to the rollout service what it serves. Admin
// changes go through consensus and wait for the rollout (core/rollout);
// imposter requests are served by the shared engine (imposter.Serve),
// a stub's response cycle advanced at its owner in the flow store; a
// read of recorded requests asks every member over a simulated HTTP hop
// (imposter.GatherFrom, MergeRecords). Clients send each call to any
// member.
//
// Every imposter has two stubs: /gen answers its definition's tag, which
// every admin change of its stubs replaces, so an answer names the
// change that made it; /cycle cycles through oneCycleLen responses
// "<cycle>|c<i>", cycle naming the stub (its id, which the cluster keys
// its cycle by), so an answer names the cycle and its place in it.

const (
	oneCycleLen   = 40
	oneInstallMax = 30 * time.Millisecond // how long a shell's pass may take to bind
	oneShellEvery = 100 * time.Millisecond
	oneHopTimeout = 2 * time.Second // a gather's wait for each member
)

var onePorts = []int{7101, 7102}

// oneDefinition is the creation request of port's imposter.
func oneDefinition(port int, tag, cycle string) *imposter.Object {
	var resp []string
	for i := range oneCycleLen {
		resp = append(resp, fmt.Sprintf(`{"is":{"body":"%s|c%d"}}`, cycle, i))
	}
	v, err := imposter.Parse(fmt.Sprintf(`{"protocol":"http","port":%d,"recordRequests":true,"stubs":[`+
		`{"predicates":[{"equals":{"path":"/gen"}}],"responses":[{"is":{"body":%q}}]},`+
		`{"predicates":[{"equals":{"path":"/cycle"}}],"responses":[%s]}]}`, port, tag, strings.Join(resp, ",")))
	if err != nil {
		panic(err)
	}
	return v.(*imposter.Object)
}

func oneKey(port int) string { return "imposter/" + strconv.Itoa(port) }

// oneState is an imposter's configuration after an admin op: absent, or
// its creation, reset count, tag and cycle.
type oneState struct {
	absent            bool
	inc, tag, cycle   string
	resets            int
	knownNotToHaveRun bool // the op certainly changed nothing
}

// adminOp is one admin call on a port, as its client saw it.
type adminOp struct {
	port, seq   int
	kind        string
	via         string
	state       oneState // what it sets, if it applied
	call, ret   time.Duration
	ok, unknown bool
	unconfirmed []string
	status      string
}

// oneReq is one imposter request and what its client saw.
type oneReq struct {
	id         string
	client     int
	member     *sim.Machine
	port       int
	path       string
	call, ret  time.Duration
	answered   bool // 200 or refused
	refused    bool
	status     int
	tag, cycle string
	place      int64 // the cycle's counter, from the body's index
	inc        string
	resets     int
	cycFlow    string // the cycle it stepped in the store, if it did
	storeOp    int    // the store op of its cycle step (-1: none)
}

// gatherOp is one read of an imposter's recorded requests.
type gatherOp struct {
	port      int
	via       *sim.Machine
	call, ret time.Duration
	ok        bool
	inc       string
	resets    int
	ids       []string
	count     int
	missing   []string
}

type oneRun struct {
	h       *flowHarness
	k       *sim.Kernel
	bugs    bool
	shells  map[string]*oneShell
	ports   map[int][]*adminOp
	reqs    []*oneReq
	byID    map[string]*oneReq
	gathers []*gatherOp
	cycHist *linearizability.History
	calm    time.Duration
	rng     *rand.Rand // hops' latencies

	adminOK, impOK, cycleOK, gathersOK int
}

// oneShell is a node's shell: the imposters it serves, built from what
// its node applied.
type oneShell struct {
	x       *oneRun
	m       *sim.Machine
	inc     uint64
	env     *sim.Env
	nd      *node.Node
	rng     *rand.Rand
	imps    map[int]*shellImp
	passing bool
	again   bool
	lastRev uint64
	served  uint64
	waiters []func()
	// booting: the shell has not caught up since its node started, and
	// serves nothing yet (the real node binds no imposter port).
	booting bool
}

// shellImp is one imposter a shell serves.
type shellImp struct {
	version uint64
	stored  imposter.Stored
	imp     *imposter.Imposter
	// partial: installed when the node booted, from its journal: the
	// requests it recorded before it went down are gone.
	partial bool
}

func runOneServer(run *Run) error {
	k := run.Kernel
	voters := 3 + k.Stream("knobs/size").IntN(3)
	h, _, _, calm := flowSetup(run, voters, 0, flow.Config{})
	x := &oneRun{h: h, k: k, shells: map[string]*oneShell{}, ports: map[int][]*adminOp{}, byID: map[string]*oneReq{},
		cycHist: linearizability.NewHistory(0), calm: calm, rng: k.Stream("workload/hops")}
	x.bugs = run.Bugs().LocalCycle
	h.onBoot = x.boot
	for _, n := range h.nodes {
		n.Start()
	}
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	run.Knob("faults", faults)
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	chaos := StartChaos(run, h.nw, h.nodes, faults, calm)
	h.startChecks(100 * time.Millisecond)
	h.holdForFloors(calm, func() bool { return x.cycleOK < run.Floor("cycle-ok") })
	for i, p := range onePorts {
		x.startAdmin(i, p)
	}
	x.startClients()
	x.startGathers()
	if err := h.settleMembersThen(calm, func(*sim.Machine) bool { return true }, nil, chaos, nil); err != nil {
		return err
	}
	x.check()
	run.Did("admin-ok", x.adminOK)
	run.Did("imposter-ok", x.impOK)
	run.Did("cycle-ok", x.cycleOK)
	run.Did("gathers-ok", x.gathersOK)
	run.Logf("one-server: admin ok=%d imposter ok=%d cycle ok=%d gathers ok=%d", x.adminOK, x.impOK, x.cycleOK, x.gathersOK)
	return nil
}

// --- the shell

// boot starts a node's shell as the real node's starts: it serves nothing
// until a linearizable read has caught its node up with the cluster's
// configuration (what its journal holds may be older than a change it
// confirmed before it went down: the commit index is not synced), then
// serves it and follows.
func (x *oneRun) boot(m *sim.Machine, env *sim.Env, nd *node.Node) {
	sh := &oneShell{x: x, m: m, inc: m.Incarnation(), env: env, nd: nd, imps: map[int]*shellImp{},
		rng: x.k.Stream(fmt.Sprintf("shell/%s/%d", m.Name(), m.Incarnation())), booting: true}
	x.shells[m.Name()] = sh
	nd.OnBehind(func(uint64) {
		if !sh.booting {
			sh.reconcile(nil)
		}
	})
	var catchUp func()
	catchUp = func() {
		nd.Consensus.Barrier(func(err error) {
			if err != nil {
				env.Clock.AfterFunc(oneShellEvery, catchUp)
				return
			}
			sh.install(sh.read(), true)
			sh.booting = false
			var tick func()
			tick = func() {
				if sh.nd.Consensus.Revision() != sh.lastRev {
					sh.reconcile(nil)
				}
				env.Clock.AfterFunc(oneShellEvery, tick)
			}
			env.Clock.AfterFunc(oneShellEvery, tick)
		})
	}
	env.Clock.AfterFunc(0, catchUp)
}

// shell is the shell of a machine that is up, or nil.
func (x *oneRun) shell(m *sim.Machine) *oneShell {
	sh := x.shells[m.Name()]
	if sh == nil || !m.Up() || sh.inc != m.Incarnation() || sh.booting {
		return nil
	}
	return sh
}

// shellRead is what a pass read: the revision, then each port's entry.
type shellRead struct {
	rev     uint64
	entries map[int]kv.Entry
}

func (sh *oneShell) read() shellRead {
	cn := sh.nd.Consensus
	r := shellRead{rev: cn.Revision(), entries: map[int]kv.Entry{}}
	for _, p := range onePorts {
		if e, ok := cn.LocalGet(oneKey(p)); ok {
			r.entries[p] = e
		}
	}
	return r
}

// reconcile runs a pass (or one more, after the pass in flight), then
// done, if set.
func (sh *oneShell) reconcile(done func()) {
	if done != nil {
		sh.waiters = append(sh.waiters, done)
	}
	if sh.passing {
		sh.again = true
		return
	}
	sh.passing = true
	r := sh.read()
	waiters := sh.waiters
	sh.waiters = nil
	sh.env.Clock.AfterFunc(sim.Between(sh.rng, 0, oneInstallMax), func() {
		sh.install(r, false)
		sh.passing = false
		for _, w := range waiters {
			w()
		}
		if sh.again {
			sh.again = false
			sh.reconcile(nil)
		}
	})
}

// install makes the shell serve what r read, and reports it served.
func (sh *oneShell) install(r shellRead, booting bool) {
	for _, p := range onePorts {
		e, ok := r.entries[p]
		cur := sh.imps[p]
		switch {
		case !ok:
			delete(sh.imps, p)
			continue
		case cur != nil && cur.version == e.Version:
			continue
		}
		st, err := imposter.DecodeStored(e.Value)
		var imp *imposter.Imposter
		if err == nil {
			imp, err = st.Build(p, sh.x.bugs)
		}
		if err != nil {
			sh.x.h.run.Fail("one-server-served", "%s cannot build the imposter on %d: %v", sh.m.Name(), p, err)
			continue
		}
		// A restarted node lost the requests it recorded before; a node
		// that starts for the first time had none.
		si := &shellImp{version: e.Version, stored: st, imp: imp, partial: booting && sh.m.Incarnation() > 1}
		if cur != nil && cur.stored.Incarnation == st.Incarnation {
			imp.Inherit(cur.imp)
			si.partial = cur.partial
			if cur.stored.Resets != st.Resets {
				imp.ResetRequests()
				si.partial = false
			}
		}
		sh.imps[p] = si
	}
	sh.lastRev = r.rev
	sh.served = max(sh.served, r.rev)
	sh.nd.Rollout.Served(r.rev)
}

// --- admin

// startAdmin runs one admin client for port: one call at a time, each to
// any member.
func (x *oneRun) startAdmin(i, port int) {
	r := x.k.Stream(fmt.Sprintf("workload/admin/%d", port))
	client := 100 + i
	var step func()
	step = func() {
		if x.k.Now() >= x.h.run.Duration-2*time.Second {
			return
		}
		x.admin(client, port, r, func() {
			x.k.After(sim.Between(r, 200*time.Millisecond, 900*time.Millisecond), sim.EvClient, uint64(client), step)
		})
	}
	x.k.After(sim.Between(r, 0, 300*time.Millisecond), sim.EvClient, uint64(client), step)
}

// admin makes one admin call on port through a member: a linearizable
// read of the definition, a change guarded by its version, then the
// rollout; after an answer, a probe of /gen through every member (what
// a test does next).
func (x *oneRun) admin(client, port int, r *rand.Rand, next func()) {
	via := x.h.nodes[r.IntN(len(x.h.nodes))]
	ops := x.ports[port]
	op := &adminOp{port: port, seq: len(ops), via: via.Name(), call: x.k.Now()}
	x.ports[port] = append(ops, op)
	pick := r.IntN(100)
	answered := false
	finish := func(ok, unknown bool, status string, unconfirmed []string) {
		if answered {
			return
		}
		answered = true
		op.ret, op.ok, op.unknown, op.status, op.unconfirmed = x.k.Now(), ok, unknown, status, unconfirmed
		x.k.Logf("admin %d/%d %s via %s: %s unconfirmed %v (called %v)", port, op.seq, op.kind, op.via, status, unconfirmed, op.call)
		if !ok && !unknown {
			op.state.knownNotToHaveRun = true
		}
		if ok {
			x.adminOK++
			// The client's next calls start from its own world, when the
			// answer reached it: not inside the node that answered.
			x.k.After(0, sim.EvClient, uint64(client), func() {
				for _, m := range x.h.nodes {
					x.request(client, m, port, "/gen", nil)
				}
			})
		}
		next()
	}
	x.k.After(8*time.Second, sim.EvClient, uint64(client), func() { finish(false, true, "client deadline", nil) })
	sh := x.shell(via)
	if sh == nil {
		finish(false, false, "refused: member down", nil)
		return
	}
	inc := via.Incarnation()
	alive := func() bool { return via.Up() && via.Incarnation() == inc }
	cn := sh.nd.Consensus
	via.Exec(func() {
		cn.Barrier(func(err error) {
			if err != nil {
				finish(false, false, "barrier: "+err.Error(), nil)
				return
			}
			key := oneKey(port)
			e, exists := cn.LocalGet(key)
			guard := kv.Absent(key)
			var cur imposter.Stored
			if exists {
				guard = kv.VersionIs(key, e.Version)
				var err error
				if cur, err = imposter.DecodeStored(e.Value); err != nil {
					x.h.run.Fail("one-server-served", "port %d holds an undecodable definition: %v", port, err)
					finish(false, false, "bad definition", nil)
					return
				}
			}
			name := fmt.Sprintf("p%d-%d", port, op.seq)
			var kop kv.Op
			next := cur
			switch {
			case !exists:
				op.kind = "create"
				next = imposter.Stored{Incarnation: name, Creation: oneDefinition(port, name, name), StubIDs: []string{name, name}}
			case pick < 30:
				op.kind = "change-gen" // the /gen stub replaced, the cycle kept
				next.Creation = oneDefinition(port, name, cur.StubIDs[1])
				next.StubIDs = []string{name, cur.StubIDs[1]}
			case pick < 55:
				op.kind = "restart-cycle"
				next.Creation = oneDefinition(port, cur.StubIDs[0], name)
				next.StubIDs = []string{cur.StubIDs[0], name}
			case pick < 75:
				op.kind = "reset-requests"
				next.Resets++
			case pick < 88:
				op.kind = "replace"
				next = imposter.Stored{Incarnation: name, Creation: oneDefinition(port, name, name), StubIDs: []string{name, name}}
			default:
				op.kind = "delete"
			}
			if op.kind == "delete" {
				op.state = oneState{absent: true}
				kop = kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Delete(key)}, nil)
			} else {
				op.state = oneState{inc: next.Incarnation, tag: next.StubIDs[0], cycle: next.StubIDs[1], resets: next.Resets}
				kop = kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Put(key, next.Encode())}, nil)
			}
			cn.Propose(kop, func(res kv.Result, err error) {
				switch {
				case err != nil:
					finish(false, consensus.Unknown(err), "propose: "+err.Error(), nil)
					return
				case res.Err != nil || !res.Succeeded:
					finish(false, false, "refused by its guard", nil)
					return
				}
				// Served here first, then everywhere: the rollout.
				sh.reconcile(nil)
				sh.nd.Rollout.Await(res.Revision, func(rr rollout.Result, err error) {
					if !alive() {
						return
					}
					if err != nil {
						finish(false, true, "rollout: "+err.Error(), nil)
						return
					}
					var names []string
					for _, id := range rr.Missing {
						names = append(names, x.h.byID[id].Name())
					}
					finish(true, false, "ok", names)
				})
			})
		})
	})
}

// --- imposter requests

// startClients runs closed-loop clients, each sending every request to
// any member.
func (x *oneRun) startClients() {
	if x.h.run.ClientsOff {
		return
	}
	n := 3 + x.k.Stream("knobs/one-clients").IntN(4)
	x.h.run.Knob("imposter_clients", n)
	for c := range n {
		client := 6000 + c
		r := x.k.Stream(fmt.Sprintf("workload/one/%d", client))
		var step func()
		step = func() {
			if x.k.Now() >= x.h.run.Duration-3*time.Second {
				return
			}
			port := onePorts[r.IntN(len(onePorts))]
			path := "/gen"
			// Cycles are flow writes: they stop at calm (or once the run
			// has done enough of them, floorHold), so that the replicas'
			// convergence is judged on a quiet store.
			if r.IntN(100) < 55 && (x.k.Now() < x.calm || x.h.hold.keeps(x.h, x.calm)) {
				path = "/cycle"
			}
			m := x.h.nodes[r.IntN(len(x.h.nodes))]
			if _, send := opOf(x.h.run, "o", client); !send {
				x.k.After(time.Millisecond, sim.EvClient, uint64(client), step)
				return
			}
			x.request(client, m, port, path, func() {
				x.k.After(time.Duration(r.IntN(25))*time.Millisecond, sim.EvClient, uint64(client), step)
			})
		}
		x.k.After(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(client), step)
	}
}

// request sends one request to member m's imposter on port, and records
// what the client saw; then, if set, runs next.
func (x *oneRun) request(client int, m *sim.Machine, port int, path string, next func()) {
	q := &oneReq{id: fmt.Sprintf("%d/%d", client, len(x.reqs)), client: client, member: m, port: port, path: path,
		call: x.k.Now(), storeOp: -1}
	x.reqs = append(x.reqs, q)
	x.byID[q.id] = q
	done := false
	finish := func(status int, body string) {
		if done {
			return
		}
		done = true
		q.ret, q.status = x.k.Now(), status
		switch {
		case status == 0:
		case status == -1:
			q.answered, q.refused = true, true
		case status == 200:
			q.answered = true
			x.impOK++
			if path == "/gen" {
				q.tag = body
			} else {
				cyc, idx, _ := strings.Cut(body, "|c")
				i, err := strconv.Atoi(idx)
				if err != nil {
					x.h.run.Fail("one-server-served", "%s answered %s on %d with %q", m.Name(), path, port, body)
					break
				}
				q.cycle, q.place = cyc, int64(i)+1
				x.cycleOK++
			}
		}
		if q.cycle != "" {
			// What the client saw: one step of the cycle, to this place.
			op := x.cycHist.Call(q.client, ring.SequenceKey(uint16(port), q.cycle), oneStep, q.call)
			x.cycHist.Return(op, linearizability.FlowOutput{Int: q.place}, q.ret)
		}
		if next != nil {
			next()
		}
	}
	sh := x.shell(m)
	if sh == nil {
		finish(0, "") // down: the connection is refused, and nothing is judged
		return
	}
	si := sh.imps[port]
	if si == nil {
		finish(-1, "") // up, but not serving the port: refused
		return
	}
	inc := m.Incarnation()
	q.inc, q.resets = si.stored.Incarnation, si.stored.Resets
	req := &imposter.Request{Method: "GET", Path: path, Query: imposter.NewObject(),
		Headers: imposter.NewObject().Set("X-Req", q.id), RequestFrom: "client:1", IP: "client"}
	x.k.After(x.h.deadline+2*time.Second, sim.EvClient, uint64(client), func() { finish(0, "") })
	m.Exec(func() {
		req.Arrived = sh.env.Clock.Now()
		w := &oneWorld{x: x, sh: sh, si: si, q: q}
		imposter.Serve(w, imposter.Route{}, req, func(res imposter.Served, err error) {
			if !m.Up() || m.Incarnation() != inc {
				return // the client's connection broke
			}
			status := res.Outcome.StatusCode
			if err != nil {
				status = 500
			}
			if status != 200 && status != 503 {
				x.h.run.Fail("one-server-served", "%s answered %s on %d with %d: %v %s", m.Name(), path, port, status, err, res.Outcome.Body)
			}
			finish(status, string(res.Outcome.Body))
		})
	})
}

// oneWorld is a request's world on a simulated member: the shell's
// imposter, and the flow store through the harness's record.
type oneWorld struct {
	x  *oneRun
	sh *oneShell
	si *shellImp
	q  *oneReq
}

// Turn: the scenario's imposters run no JavaScript (none is scripted).
func (w *oneWorld) Turn(f func(release func(), err error)) { f(func() {}, nil) }

func (w *oneWorld) Engine(f func(imp *imposter.Imposter)) {
	// The imposter the shell serves now on the port, as the real
	// server's, which a change swaps in place.
	if cur := w.sh.imps[w.q.port]; cur != nil && cur.stored.Incarnation == w.si.stored.Incarnation {
		w.si = cur
	}
	f(w.si.imp)
}

func (w *oneWorld) Store(req flow.Request, done func(flow.Response, error)) {
	q := w.q
	if req.Op == flow.OpIncr {
		q.cycFlow = req.Flow
	}
	w.x.h.storeRetrying(q.client, q.member, req, func(op int) { q.storeOp = op }, done)
}

func (w *oneWorld) OwnerOf(string, func(routing.Owner, error)) {
	panic("one-server: its imposters keep no flow state")
}

func (w *oneWorld) Forward(routing.Owner, func(imposter.Outcome, error)) {
	panic("one-server: its imposters keep no flow state")
}

// --- reads of recorded requests

func (x *oneRun) startGathers() {
	if x.h.run.ClientsOff {
		return
	}
	r := x.k.Stream("workload/gathers")
	client := 7000
	var step func()
	step = func() {
		if x.k.Now() >= x.h.run.Duration-3*time.Second {
			return
		}
		port := onePorts[r.IntN(len(onePorts))]
		m := x.h.nodes[r.IntN(len(x.h.nodes))]
		x.gather(client, m, port, func() {
			x.k.After(sim.Between(r, 150*time.Millisecond, 600*time.Millisecond), sim.EvClient, uint64(client), step)
		})
	}
	x.k.After(sim.Between(r, 500*time.Millisecond, time.Second), sim.EvClient, uint64(client), step)
}

// gather reads port's recorded requests through member m as the real
// server's GET does: a linearizable read, the shell's pass, then every
// member's part over a hop, merged.
func (x *oneRun) gather(client int, m *sim.Machine, port int, next func()) {
	g := &gatherOp{port: port, via: m, call: x.k.Now()}
	x.gathers = append(x.gathers, g)
	done := false
	finish := func() {
		if done {
			return
		}
		done = true
		g.ret = x.k.Now()
		next()
	}
	x.k.After(8*time.Second, sim.EvClient, uint64(client), finish)
	sh := x.shell(m)
	if sh == nil {
		finish()
		return
	}
	inc := m.Incarnation()
	alive := func() bool { return m.Up() && m.Incarnation() == inc }
	m.Exec(func() {
		sh.nd.Consensus.Barrier(func(err error) {
			if err != nil {
				finish()
				return
			}
			sh.reconcile(func() {
				if !alive() {
					return
				}
				si := sh.imps[port]
				if si == nil {
					finish() // 404: nothing to judge
					return
				}
				g.inc, g.resets = si.stored.Incarnation, si.stored.Resets
				x.collect(client, m, sh, port, g, func() {
					g.ok = true
					x.gathersOK++
					finish()
				})
			})
		})
	})
}

// collect asks every member but m (imposter.GatherFrom) for its part,
// over a hop that the network's partitions cut, and merges.
func (x *oneRun) collect(client int, m *sim.Machine, sh *oneShell, port int, g *gatherOp, done func()) {
	ms := sh.nd.Consensus.Membership()
	var members []uint64
	for _, mb := range append(slices.Clone(ms.Voters), ms.Learners...) {
		members = append(members, uint64(mb.ID))
	}
	slices.Sort(members)
	parts := []imposter.Records{}
	var missing []string
	if p, ok, partial := x.part(sh, port, g.inc, g.resets); ok {
		parts = append(parts, p)
		if partial {
			missing = append(missing, m.Name()+" (restarted)")
		}
	}
	ask := imposter.GatherFrom(uint64(m.ID()), members, x.h.run.Bugs())
	pending := len(ask)
	answered := map[uint64]bool{}
	finished := false
	end := func() {
		if finished {
			return
		}
		finished = true
		for _, id := range ask {
			if !answered[id] {
				missing = append(missing, x.h.byID[dial.NodeID(id)].Name())
			}
		}
		slices.Sort(missing)
		merged := imposter.MergeRecords(parts, imposter.MaxRecordedRequests)
		g.count, g.missing = merged.Count, missing
		for _, rq := range merged.Requests {
			hs, _ := rq.Get("headers")
			id, _ := hs.(*imposter.Object).Get("X-Req")
			g.ids = append(g.ids, imposter.ToString(id))
		}
		done()
	}
	if pending == 0 {
		end()
		return
	}
	from := m
	fromInc := m.Incarnation()
	x.k.After(oneHopTimeout, sim.EvClient, uint64(client), func() {
		if from.Up() && from.Incarnation() == fromInc {
			end()
		}
	})
	for _, id := range ask {
		to := x.h.byID[dial.NodeID(id)]
		there, back := sim.Between(x.rng, time.Millisecond, 8*time.Millisecond), sim.Between(x.rng, time.Millisecond, 8*time.Millisecond)
		x.k.After(there, sim.EvClient, uint64(client), func() {
			tsh := x.shell(to)
			if !x.h.nw.Reachable(from.ID(), to.ID()) || tsh == nil {
				return // no answer: named missing at the timeout
			}
			to.Exec(func() {
				p, ok, partial := x.part(tsh, port, g.inc, g.resets)
				x.k.After(back, sim.EvClient, uint64(client), func() {
					if finished || !x.h.nw.Reachable(to.ID(), from.ID()) || !from.Up() || from.Incarnation() != fromInc {
						return
					}
					answered[id] = true
					if ok {
						parts = append(parts, p)
						if partial {
							missing = append(missing, to.Name()+" (restarted)")
						}
					}
					if pending--; pending == 0 {
						end()
					}
				})
			})
		})
	}
}

// part is a shell's records of port's imposter, if it runs the same
// creation at the same reset; partial if it may have lost some (it
// installed the imposter when it booted).
func (x *oneRun) part(sh *oneShell, port int, inc string, resets int) (imposter.Records, bool, bool) {
	si := sh.imps[port]
	if si == nil || si.stored.Incarnation != inc || si.stored.Resets != resets {
		return imposter.Records{}, false, false
	}
	return si.imp.LocalRecords(uint64(sh.m.ID())), true, si.partial
}

// --- the checkers

func (x *oneRun) check() {
	x.checkRollout()
	x.checkRecords()
	x.checkCycles()
	x.checkServedAfterCalm()
}

// stateAt is the states an op at index k of port's admin ops and any
// later one called before by may have left: what a member that
// confirmed op k may serve at by.
func (x *oneRun) allowed(port, k int, by time.Duration) []oneState {
	ops := x.ports[port]
	out := []oneState{ops[k].state}
	for _, op := range ops[k+1:] {
		if op.call < by && !op.state.knownNotToHaveRun {
			out = append(out, op.state)
		}
	}
	return out
}

// confirmedFor is the latest admin op on port answered before t whose
// answer did not name member: every member it did not name serves it.
func (x *oneRun) confirmedFor(port int, member string, t time.Duration) (int, bool) {
	ops := x.ports[port]
	for k := len(ops) - 1; k >= 0; k-- {
		op := ops[k]
		if op.ok && op.ret < t && !slices.Contains(op.unconfirmed, member) {
			return k, true
		}
	}
	return 0, false
}

// checkRollout: a request sent to a member after an admin change was
// answered, and the answer did not name the member, is served by that
// change or a later one: never the definition before it, never a
// refused connection while the change left the imposter in place.
func (x *oneRun) checkRollout() {
	for _, q := range x.reqs {
		if !q.answered || (q.status != 200 && !q.refused) {
			continue
		}
		k, ok := x.confirmedFor(q.port, q.member.Name(), q.call)
		if !ok {
			continue
		}
		allowed := x.allowed(q.port, k, q.ret)
		fits := slices.ContainsFunc(allowed, func(s oneState) bool {
			switch {
			case q.refused:
				return s.absent
			case q.path == "/gen":
				return !s.absent && s.tag == q.tag
			default:
				return !s.absent && s.cycle == q.cycle
			}
		})
		if fits {
			continue
		}
		op := x.ports[q.port][k]
		what := "answered " + q.tag + q.cycle
		if q.refused {
			what = "refused the connection"
		}
		x.h.run.Fail("config-rollout", "request %s %s on %d sent to %s at %v %s, after admin op %d (%s via %s, answered at %v, unconfirmed %v) left %+v",
			q.id, q.path, q.port, q.member.Name(), q.call, what, op.seq, op.kind, op.via, op.ret, op.unconfirmed, op.state)
		return
	}
}

// checkRecords: a read of recorded requests shows every request answered
// before it under the creation and reset it shows, once, unless the
// member that took it is named missing; nothing that was not sent; each
// member's requests in its order, and requests further apart than the
// clocks' skew in real-time order; a count equal to the list.
func (x *oneRun) checkRecords() {
	cl := clocks{x.h.raftCluster}
	for _, g := range x.gathers {
		if !g.ok {
			continue
		}
		seen := map[string]int{}
		for i, id := range g.ids {
			if j, dup := seen[id]; dup {
				x.h.run.Fail("recorded-requests", "a read of %d via %s at %v shows request %s twice (at %d and %d)", g.port, g.via.Name(), g.call, id, j, i)
				return
			}
			seen[id] = i
			q := x.byID[id]
			if q == nil || q.port != g.port {
				x.h.run.Fail("recorded-requests", "a read of %d via %s at %v shows request %s, which was not sent to it", g.port, g.via.Name(), g.call, id)
				return
			}
		}
		if len(g.ids) < imposter.MaxRecordedRequests && g.count != len(g.ids) {
			x.h.run.Fail("recorded-requests", "a read of %d via %s at %v counts %d requests and lists %d", g.port, g.via.Name(), g.call, g.count, len(g.ids))
			return
		}
		missing := func(m *sim.Machine) bool {
			return slices.ContainsFunc(g.missing, func(s string) bool { return s == m.Name() || s == m.Name()+" (restarted)" })
		}
		moved := x.movedBefore(g.port, g.inc, g.resets, g.ret)
		for _, q := range x.reqs {
			if q.port != g.port || !q.answered || q.refused || q.ret >= g.call || q.inc != g.inc || q.resets != g.resets || moved {
				continue
			}
			if _, ok := seen[q.id]; !ok && !missing(q.member) {
				x.h.run.Fail("recorded-requests", "a read of %d via %s at %v (creation %s, reset %d, missing %v) leaves out request %s, which %s answered at %v",
					g.port, g.via.Name(), g.call, g.inc, g.resets, g.missing, q.id, q.member.Name(), q.ret)
				return
			}
		}
		for i := 1; i < len(g.ids); i++ {
			for j := 0; j < i; j++ {
				a, b := x.byID[g.ids[j]], x.byID[g.ids[i]] // a is listed before b
				if b.ret == 0 || a.ret == 0 || b.ret >= a.call {
					continue // b did not end before a began (or is still open): either order
				}
				_, hi := cl.offsets(0, b.ret)
				lo, _ := cl.offsets(a.call, a.ret)
				if b.member == a.member || a.call-b.ret > hi-lo {
					x.h.run.Fail("recorded-requests", "a read of %d via %s at %v lists %s (%s, %v..%v) before %s (%s, %v..%v), which ended before it began",
						g.port, g.via.Name(), g.call, a.id, a.member.Name(), a.call, a.ret, b.id, b.member.Name(), b.call, b.ret)
					return
				}
			}
		}
	}
}

// movedBefore reports whether an admin op on port that leaves creation
// inc at reset resets (one after the last op that set them) was called
// before t: a member that applied it has left what the read shows, and
// its records with it. Ops before that last one cannot apply after it:
// each is guarded by the version it read.
func (x *oneRun) movedBefore(port int, inc string, resets int, t time.Duration) bool {
	ops := x.ports[port]
	last := -1
	for i, op := range ops {
		if !op.state.absent && op.state.inc == inc && op.state.resets == resets {
			last = i
		}
	}
	for _, op := range ops[last+1:] {
		if op.call < t && !op.state.knownNotToHaveRun {
			return true
		}
	}
	return false
}

// checkCycles holds what clients saw of each cycle to a counter that one
// request advances by one, cluster-wide: porcupine over the answers,
// split where the flow store may have lost a write (FlowCuts). An answer
// names the place modulo the cycle's length, and the model reads it so.
func (x *oneRun) checkCycles() {
	for _, q := range x.reqs {
		if q.cycFlow != "" && q.cycle == "" {
			// Its step may have applied: the client never learned.
			op := x.cycHist.Call(q.client, q.cycFlow, oneStep, q.call)
			x.cycHist.GiveUp(op, "no answer", x.k.Now())
			if store := x.h.flowHist.Op(q.storeOp); store.Bounded {
				x.cycHist.Bound(op, store.Until)
			}
		}
	}
	x.h.run.History("cycle-linearizability", x.cycHist)
	x.h.run.TimeCheck("cycle-linearizability", func() {
		checker.CycleLinearizable(x.h.run, x.cycHist, checker.CutTimes(x.h.cuts), x.h.run.CheckTimeout)
	})
}

// checkServedAfterCalm: once the cluster healed, every admin call is
// answered, confirmed by every member, and every read of recorded
// requests asks every member: a healthy cluster answers as one server.
func (x *oneRun) checkServedAfterCalm() {
	from := x.calm + 3*time.Second
	if healed := x.h.run.Duration - 2*time.Second - from; healed < 5*time.Second {
		x.h.run.Undecided("one-server-served", "the run ended %v after the cluster healed: too soon to judge", max(0, healed))
		return
	}
	for _, p := range onePorts {
		n := 0
		for _, op := range x.ports[p] {
			if op.call < from || op.ret == 0 {
				continue
			}
			n++
			if !op.ok || len(op.unconfirmed) > 0 {
				x.h.run.Fail("one-server-served", "admin op %d on %d (%s via %s at %v) in a healed cluster: %s, unconfirmed %v",
					op.seq, p, op.kind, op.via, op.call, op.status, op.unconfirmed)
				return
			}
		}
		if n == 0 {
			x.h.run.Fail("one-server-served", "no admin op on %d was answered in the healed cluster", p)
			return
		}
	}
	for _, g := range x.gathers {
		// A member that restarted lost its records, and is named for it:
		// that is no fault of the healed cluster. One not asked is.
		unasked := slices.ContainsFunc(g.missing, func(s string) bool { return !strings.HasSuffix(s, " (restarted)") })
		if g.call >= from && g.ret != 0 && (!g.ok || unasked) && g.inc != "" {
			x.h.run.Fail("one-server-served", "a read of %d via %s at %v in a healed cluster: ok %v, missing %v", g.port, g.via.Name(), g.call, g.ok, g.missing)
			return
		}
	}
}

// oneStep is one step of a cycle, as its history records it: the cycle's
// counter seen modulo its length, as its answers show it.
var oneStep = linearizability.FlowInput{Op: linearizability.FlowIncr, Key: "n", Delta: 1, Mod: oneCycleLen}
