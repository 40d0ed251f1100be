package scenarios

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// raftCluster is the harness the consensus scenarios share: machines, the
// consensus node running on each, client workloads that record histories,
// and the checkers that judge them from outside the nodes.
type raftCluster struct {
	run   *Run
	k     *sim.Kernel
	nw    *netsim.Network
	nodes []*sim.Node
	byID  map[dial.NodeID]*sim.Node
	live  map[string]*consensus.Node
	cfg   consensus.Config

	// With flowCfg set, every node also runs a flow store (core/node).
	flowCfg *flow.Config
	flows   map[string]*flow.Store
	// onFlowBoot, if set, runs on every flow store a node boots.
	onFlowBoot func(name string, s *flow.Store)

	hist   *linearizability.History
	leases *leaseLedger
	// tenures is each node's view of each lease, rebuilt from its watch
	// stream; a restart forgets it (the stream restarts after a snapshot).
	tenures map[string]map[string]tenure

	// Replica agreement: the first digest seen at each applied index, and
	// the voters seen at each membership index.
	digestAt   map[uint64]uint64
	digestBy   map[uint64]string
	votersAt   map[uint64]string
	eventsSeen map[string]eventCursor

	// clientDeadline bounds how long a client waits for any answer.
	clientDeadline time.Duration
}

type eventCursor struct {
	inc     uint64
	version uint64
	atMs    int64
}

// raftBugs switches the consensus layer's planted bugs from the run.
func raftBugs(run *Run) (kv.Bugs, journal.Bugs) {
	var kb kv.Bugs
	for _, name := range kv.BugNames() {
		if run.Bug(name) {
			if err := kb.Enable(name); err != nil {
				panic(err)
			}
		}
	}
	return kb, journal.Bugs{TrustTail: run.Bug(bugJournalTrustTail)}
}

const bugJournalTrustTail = "journal-trust-tail"

func newRaftCluster(run *Run, names []string, founders int, netCfg netsim.Config, disk sim.DiskConfig) *raftCluster {
	k := run.Kernel
	c := &raftCluster{
		run:            run,
		k:              k,
		nw:             netsim.New(k, netCfg),
		byID:           map[dial.NodeID]*sim.Node{},
		live:           map[string]*consensus.Node{},
		flows:          map[string]*flow.Store{},
		hist:           linearizability.NewHistory(0),
		leases:         newLeaseLedger(),
		tenures:        map[string]map[string]tenure{},
		digestAt:       map[uint64]uint64{},
		digestBy:       map[uint64]string{},
		votersAt:       map[uint64]string{},
		eventsSeen:     map[string]eventCursor{},
		clientDeadline: 3 * time.Second,
	}
	kb, jb := raftBugs(run)
	c.cfg = consensus.Config{KV: kv.Config{Bugs: kb}, Journal: journal.Config{Bugs: jb}}
	var boot []consensus.Member
	for _, name := range names[:founders] {
		boot = append(boot, consensus.NewMember(name, name+":7000"))
	}
	k.OnNodePanic(func(n *sim.Node, v any) {
		run.Fail("node-panic", "%s: %v", n.Name(), v)
	})
	for i, name := range names {
		name := name
		founder := i < founders
		n := k.AddNode(name, func(env *sim.Env) dial.Handler {
			cfg := c.cfg
			cfg.Name, cfg.Addr = name, name+":7000"
			if founder {
				cfg.Bootstrap = boot
			}
			if c.flowCfg != nil {
				nd, err := node.Open(node.Config{Consensus: cfg, Flow: *c.flowCfg}, node.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand})
				if err != nil {
					run.Fail("boot", "%s: %v", name, err)
					delete(c.live, name)
					delete(c.flows, name)
					return dial.HandlerFunc(func(dial.NodeID, []byte) {})
				}
				c.live[name], c.flows[name] = nd.Consensus, nd.Flow
				if c.onFlowBoot != nil {
					c.onFlowBoot(name, nd.Flow)
				}
				return nd
			}
			cn, err := consensus.Open(cfg, consensus.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand})
			if err != nil {
				run.Fail("boot", "%s: %v", name, err)
				delete(c.live, name)
				return dial.HandlerFunc(func(dial.NodeID, []byte) {})
			}
			c.live[name] = cn
			return cn
		}, c.nw, disk)
		c.nodes = append(c.nodes, n)
		c.byID[n.ID()] = n
	}
	return c
}

// node returns the consensus node running on machine n, if it is up.
func (c *raftCluster) node(n *sim.Node) *consensus.Node {
	if !n.Up() {
		return nil
	}
	return c.live[n.Name()]
}

// call runs f against machine n's consensus node as a client request
// arriving there; it reports false (refused) if the node is down.
func (c *raftCluster) call(n *sim.Node, f func(*consensus.Node)) bool {
	cn := c.node(n)
	if cn == nil {
		return false
	}
	return n.Do(func() { f(cn) })
}

// answer wraps a client's callback so that only the first of "the node
// answered" and "the client gave up" counts, and an answer from a process
// that crashed after the call cannot arrive.
type answer struct{ done bool }

func (a *answer) once() bool {
	if a.done {
		return false
	}
	a.done = true
	return true
}

// kvClient is one closed-loop client: one operation in flight at a time,
// against a random node, on a small key set with a small value domain so
// that A → B → A happens.
type kvClient struct {
	id       int
	lastSeen map[string]kv.Entry
}

var kvKeys = []string{"k1", "k2", "k3"}
var kvValues = []string{"a", "b", "c"}

func (c *raftCluster) startKVClients(count int, until time.Duration) {
	r := c.k.Stream("workload/kv")
	for i := 0; i < count; i++ {
		cl := &kvClient{id: i, lastSeen: map[string]kv.Entry{}}
		c.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(i), func() { c.kvStep(cl, r, until) })
	}
}

func (c *raftCluster) kvStep(cl *kvClient, r interface{ IntN(int) int }, until time.Duration) {
	if c.k.Now() >= until {
		return
	}
	next := func() {
		c.k.After(time.Duration(r.IntN(30))*time.Millisecond, sim.EvClient, uint64(cl.id), func() { c.kvStep(cl, r, until) })
	}
	n := c.nodes[r.IntN(len(c.nodes))]
	key := kvKeys[r.IntN(len(kvKeys))]
	value := kvValues[r.IntN(len(kvValues))]
	now := c.k.Now()
	a := &answer{}
	var op int
	giveUp := func() {
		if a.once() {
			c.hist.GiveUp(op, "client deadline", c.k.Now())
			next()
		}
	}
	refuse := func(why string) {
		if a.once() {
			c.hist.Refuse(op, why, c.k.Now())
			next()
		}
	}
	unknownOrRefused := func(err error) {
		if consensus.Unknown(err) {
			if a.once() {
				c.hist.GiveUp(op, err.Error(), c.k.Now())
				next()
			}
			return
		}
		refuse(err.Error())
	}
	switch pick := r.IntN(10); {
	case pick < 4:
		op = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVPut, Value: value}, now)
		ok := c.call(n, func(cn *consensus.Node) {
			cn.Propose(kv.Put(key, []byte(value)), func(res kv.Result, err error) {
				switch {
				case err != nil:
					unknownOrRefused(err)
				case res.Err != nil:
					refuse(res.Err.Error())
				default:
					if a.once() {
						c.hist.Return(op, linearizability.KVOutput{Version: res.Version}, c.k.Now())
						cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
						next()
					}
				}
			})
		})
		if !ok {
			refuse("node down")
		}
	case pick < 8:
		op = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVGet}, now)
		ok := c.call(n, func(cn *consensus.Node) {
			cn.Read(key, func(e kv.Entry, found bool, err error) {
				if err != nil {
					unknownOrRefused(err)
					return
				}
				if a.once() {
					out := linearizability.KVOutput{Found: found}
					if found {
						out.Value, out.Version = string(e.Value), e.Version
						cl.lastSeen[key] = e
					}
					c.hist.Return(op, out, c.k.Now())
					next()
				}
			})
		})
		if !ok {
			refuse("node down")
		}
	default:
		seen := cl.lastSeen[key]
		op = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVCas, Expect: seen.Version, Value: value}, now)
		guard := kv.VersionIs(key, seen.Version)
		guard.Value = seen.Value // what the value-guard bug compares instead
		ok := c.call(n, func(cn *consensus.Node) {
			cn.Propose(kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Put(key, []byte(value))}, nil), func(res kv.Result, err error) {
				switch {
				case err != nil:
					unknownOrRefused(err)
				case res.Err != nil:
					refuse(res.Err.Error())
				default:
					if a.once() {
						out := linearizability.KVOutput{Succeeded: res.Succeeded}
						if res.Succeeded {
							out.Version = res.Version
							cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
						}
						c.hist.Return(op, out, c.k.Now())
						next()
					}
				}
			})
		})
		if !ok {
			refuse("node down")
		}
	}
	if !a.done {
		c.k.After(c.clientDeadline, sim.EvClient, uint64(op), giveUp)
	}
}

// startLeaseClients runs holders that take, renew and release one lease
// from random nodes, recording what each came to believe it held.
func (c *raftCluster) startLeaseClients(count int, ttl time.Duration, until time.Duration) {
	r := c.k.Stream("workload/lease")
	for i := 0; i < count; i++ {
		holder := fmt.Sprintf("h%d", i+1)
		c.k.At(sim.Between(r, 0, 200*time.Millisecond), sim.EvClient, xxhash.Sum64String(holder), func() {
			c.leaseStep(holder, r, ttl, until)
		})
	}
}

const leaseName = "scheduler"

func (c *raftCluster) leaseStep(holder string, r interface{ IntN(int) int }, ttl, until time.Duration) {
	if c.k.Now() >= until {
		return
	}
	next := func(d time.Duration) {
		c.k.After(d, sim.EvClient, xxhash.Sum64String(holder), func() { c.leaseStep(holder, r, ttl, until) })
	}
	n := c.nodes[r.IntN(len(c.nodes))]
	ttlMs := ttl.Milliseconds()
	var op kv.Op
	var kind string
	switch pick := r.IntN(10); {
	case pick < 5:
		op, kind = kv.LeaseAcquire(leaseName, holder, ttlMs), "acquire"
	case pick < 8:
		op, kind = kv.LeaseRenew(leaseName, holder, ttlMs), "renew"
	default:
		op, kind = kv.LeaseRelease(leaseName, holder), "release"
	}
	if kind == "release" {
		// From the moment it asks, the holder no longer counts on the
		// lease, whatever becomes of the request.
		c.leases.releasing(holder)
	}
	a := &answer{}
	pace := ttl / 3
	ok := c.call(n, func(cn *consensus.Node) {
		cn.Propose(op, func(res kv.Result, err error) {
			if !a.once() {
				return
			}
			if err == nil && res.Err == nil && kind != "release" {
				c.leases.granted(holder, res)
			}
			next(time.Duration(r.IntN(int(pace) + 1)))
		})
	})
	if !ok {
		a.once()
		next(pace)
		return
	}
	c.k.After(c.clientDeadline, sim.EvClient, xxhash.Sum64String(holder), func() {
		if a.once() {
			next(pace)
		}
	})
}

// startChecks samples every node on a timer: replica agreement, membership
// agreement and the watch stream's own rules.
func (c *raftCluster) startChecks(every time.Duration) {
	var tick func()
	tick = func() {
		c.checkNow()
		c.k.After(every, sim.EvCheck, 0, tick)
	}
	c.k.After(every, sim.EvCheck, 0, tick)
}

func (c *raftCluster) checkNow() {
	for _, n := range c.nodes {
		cn := c.node(n)
		if cn == nil {
			continue
		}
		idx, dig := cn.Digest()
		if idx > 0 {
			if prev, ok := c.digestAt[idx]; !ok {
				c.digestAt[idx], c.digestBy[idx] = dig, n.Name()
			} else if prev != dig {
				c.run.Fail("replica-agreement", "%s and %s applied index %d to different states (%016x vs %016x)",
					c.digestBy[idx], n.Name(), idx, prev, dig)
			}
		}
		ms := cn.Membership()
		if ms.Index > 0 {
			voters := fmt.Sprint(memberNames(ms.Voters))
			if prev, ok := c.votersAt[ms.Index]; !ok {
				c.votersAt[ms.Index] = voters
			} else if prev != voters {
				c.run.Fail("replica-agreement", "%s has voters %s at membership index %d; another node had %s",
					n.Name(), voters, ms.Index, prev)
			}
		}
		c.checkEvents(n, cn)
	}
}

// checkEvents reads the watch events a node applied since the last look
// and holds them to the lease rules: applied time never goes back, and an
// Expired event only reports a lease whose deadline had passed.
func (c *raftCluster) checkEvents(n *sim.Node, cn *consensus.Node) {
	cur := c.eventsSeen[n.Name()]
	if cur.inc != n.Incarnation() {
		// A restarted node replays from its snapshot: watch it afresh.
		cur = eventCursor{inc: n.Incarnation()}
		c.tenures[n.Name()] = map[string]tenure{}
	}
	for {
		evs, err := cn.Events(cur.version, 256)
		if err != nil {
			// The node's event log no longer reaches back to our cursor
			// (a burst of changes, or a snapshot installed): resume from
			// what it still holds; the gap is not judged, and what we knew
			// of its leases is stale.
			cur.version = cn.Revision()
			c.tenures[n.Name()] = map[string]tenure{}
			break
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.AtMs < cur.atMs {
				c.run.Fail("lease-safety", "%s: applied time went back from %d to %d ms at index %d", n.Name(), cur.atMs, ev.AtMs, ev.Index)
			}
			cur.atMs = max(cur.atMs, ev.AtMs)
			if ev.Space == kv.SpaceLease {
				c.leases.checkEvent(c.run, n.Name(), c.tenures[n.Name()], ev)
			}
			if ev.Space == kv.SpaceLease && ev.Kind == kv.EventExpired && ev.DeadlineMs > ev.AtMs {
				c.run.Fail("lease-safety", "%s: lease %s of %s expired at %d ms, before its deadline %d", n.Name(), ev.Key, ev.Holder, ev.AtMs, ev.DeadlineMs)
			}
			// A lapse is reported as Expired, never Deleted: a lease
			// past its deadline expires before anything else applies, so
			// a Deleted (a release) always finds the lease still valid.
			if ev.Space == kv.SpaceLease && ev.Kind == kv.EventDeleted && ev.DeadlineMs <= ev.AtMs {
				c.run.Fail("lease-safety", "%s: lease %s of %s reported Deleted at %d ms, after its deadline %d: a lapse is Expired", n.Name(), ev.Key, ev.Holder, ev.AtMs, ev.DeadlineMs)
			}
			cur.version = ev.Version
		}
	}
	c.eventsSeen[n.Name()] = cur
}

func memberNames(ms []consensus.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	sort.Strings(out)
	return out
}

// checkLinearizable runs porcupine over the KV history.
func (c *raftCluster) checkLinearizable() {
	for _, res := range linearizability.CheckKV(c.hist, 20*time.Second) {
		switch res.Verdict {
		case porcupine.Illegal:
			c.run.Fail("kv-linearizability", "key %s: %d operations are not linearizable:%s", res.Key, res.Ops, res.Describe)
		case porcupine.Unknown:
			// porcupine's timeout is wall-clock: say so, but never let it
			// decide a verdict (it would differ between machines).
			c.run.Logf("kv-linearizability: key %s: check timed out (%d ops); not judged", res.Key, res.Ops)
		}
	}
}

// checkLiveness runs after the calm phase has lasted settle: some node
// must lead with a quorum's acknowledgement, and a write through every
// node must be applied.
func (c *raftCluster) checkLiveness(members []*sim.Node, settle time.Duration, done func()) {
	c.k.After(settle, sim.EvCheck, xxhash.Sum64String("liveness"), func() {
		leaders := 0
		for _, n := range members {
			if cn := c.node(n); cn != nil && cn.IsLeader() {
				leaders++
			}
		}
		if leaders != 1 {
			c.run.Fail("liveness", "%d nodes lead with a quorum %v after the faults healed", leaders, settle)
		}
		// A probe write through every node, retried every 100ms (a node
		// may still be learning who leads), must be applied within 3s.
		pending := map[string]error{}
		deadline := c.k.Now() + 3*time.Second
		var probe func(n *sim.Node)
		probe = func(n *sim.Node) {
			name := n.Name()
			if _, waiting := pending[name]; !waiting || c.k.Now() >= deadline {
				return
			}
			c.call(n, func(cn *consensus.Node) {
				cn.Propose(kv.Put("probe/"+name, []byte("ok")), func(res kv.Result, err error) {
					if _, waiting := pending[name]; !waiting {
						return // an earlier attempt's late answer; one success is enough
					}
					if err == nil && res.Err == nil {
						delete(pending, name)
						return
					}
					if err == nil {
						err = res.Err
					}
					pending[name] = err
				})
			})
			c.k.After(100*time.Millisecond, sim.EvCheck, xxhash.Sum64String("probe "+name), func() { probe(n) })
		}
		for _, n := range members {
			pending[n.Name()] = fmt.Errorf("no answer")
			probe(n)
		}
		c.k.At(deadline, sim.EvCheck, xxhash.Sum64String("probe"), func() {
			for _, n := range members {
				if err, ok := pending[n.Name()]; ok {
					c.run.Fail("liveness", "no write through %s was applied within 3s of a healed, settled cluster (last: %v)\n%s",
						n.Name(), err, c.statusLines())
				}
			}
			if done != nil {
				done()
			}
		})
	})
}

// leaseLedger is the lease checker's memory. Clients record which tenure
// (token) each holder knew it held and which tenures each holder asked to
// release; every node's watch stream is replayed against the rules:
//
//   - no grant to one holder while another holder's tenure is valid (not
//     released, not expired, deadline not passed) in applied time;
//   - a tenure ends by Deleted only if its holder asked to release it
//     (any outcome: a release whose answer was lost still counts);
//   - applied time never goes back; Expired only reports a passed
//     deadline, Deleted only a tenure still valid.
type leaseLedger struct {
	token    map[string]uint64          // holder -> token of its last known grant
	releases map[string]map[uint64]bool // holder -> tokens it asked to release (0: a grant it never learned of)
}

type tenure struct {
	holder     string
	token      uint64
	deadlineMs int64
	valid      bool
}

func newLeaseLedger() *leaseLedger {
	return &leaseLedger{token: map[string]uint64{}, releases: map[string]map[uint64]bool{}}
}

func (l *leaseLedger) granted(holder string, res kv.Result) { l.token[holder] = res.Lease.Token }

func (l *leaseLedger) releasing(holder string) {
	if l.releases[holder] == nil {
		l.releases[holder] = map[uint64]bool{}
	}
	l.releases[holder][l.token[holder]] = true
	l.releases[holder][0] = true
}

// checkEvent judges one lease event from one node's stream, in order.
func (l *leaseLedger) checkEvent(run *Run, node string, tenures map[string]tenure, ev kv.Event) {
	t := tenures[ev.Key]
	switch ev.Kind {
	case kv.EventPut:
		if t.valid && t.holder != ev.Holder && t.deadlineMs > ev.AtMs {
			run.Fail("lease-safety", "%s: lease %q granted to %s (token %d) at %d ms while %s (token %d) held it until %d ms",
				node, ev.Key, ev.Holder, ev.Token, ev.AtMs, t.holder, t.token, t.deadlineMs)
		}
		tenures[ev.Key] = tenure{holder: ev.Holder, token: ev.Token, deadlineMs: ev.DeadlineMs, valid: true}
	case kv.EventDeleted:
		if asked := l.releases[ev.Holder]; !asked[ev.Token] && !asked[0] {
			run.Fail("lease-safety", "%s: lease %q of %s (token %d) was released at %d ms, but %s never asked to release it",
				node, ev.Key, ev.Holder, ev.Token, ev.AtMs, ev.Holder)
		}
		delete(tenures, ev.Key)
	case kv.EventExpired:
		delete(tenures, ev.Key)
	}
}

// statusLines describes every node's raft state, for a failure message.
func (c *raftCluster) statusLines() string {
	var out string
	for _, n := range c.nodes {
		st := "down"
		if cn := c.node(n); cn != nil {
			st = cn.Status()
		}
		out += fmt.Sprintf("    %s (%v): %s\n", n.Name(), n.ID(), st)
	}
	return out
}
