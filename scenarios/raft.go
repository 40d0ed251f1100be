package scenarios

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
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
	nodes []*sim.Machine
	byID  map[dial.NodeID]*sim.Machine
	live  map[string]*consensus.Node
	cfg   consensus.Config

	// With flowCfg set, every node also runs a flow store (core/node).
	flowCfg *flow.Config
	flows   map[string]*flow.Store

	hist *linearizability.History
	// leaseCalls is every lease call clients made, in call order.
	leaseCalls []checker.LeaseCall
	// streams judges each node's watch stream; a restart or a skip in the
	// stream starts a new one.
	streams map[string]*checker.LeaseStream

	// Replica agreement: the first digest seen at each applied index, and
	// the voters seen at each membership index.
	digestAt   map[uint64]uint64
	digestBy   map[uint64]string
	votersAt   map[uint64]string
	eventsSeen map[string]eventCursor
	// votes is every vote a node granted, as the network saw it sent.
	votes []checker.VoteGrant
	// memberships is the record of every committed membership and the
	// instant the first node applied it.
	memberships []checker.MembershipChange
	seenM       map[uint64]bool
	// Promotions: nodes seen as learners, and those already judged when
	// first seen as voters.
	wasLearner map[dial.NodeID]bool
	promoted   map[dial.NodeID]bool

	// clientDeadline bounds how long a client waits for any answer.
	clientDeadline time.Duration
	// faults describes the faults a scenario injected on its own (not
	// through Chaos), for the run's report.
	faults string
	// The client workloads started (with ClientsOff, the ones that would
	// have been): their work is reported for the floors.
	kvClients, leaseClients int
	// timing is the protocol timings the run drew.
	timing timing
}

type eventCursor struct {
	inc     uint64
	version uint64
}

func newRaftCluster(run *Run, names []string, founders int, netCfg netsim.Config, disk sim.DiskConfig) *raftCluster {
	k := run.Kernel
	c := &raftCluster{
		run:            run,
		k:              k,
		nw:             netsim.New(k, netCfg),
		byID:           map[dial.NodeID]*sim.Machine{},
		live:           map[string]*consensus.Node{},
		flows:          map[string]*flow.Store{},
		hist:           linearizability.NewHistory(0),
		streams:        map[string]*checker.LeaseStream{},
		digestAt:       map[uint64]uint64{},
		digestBy:       map[uint64]string{},
		votersAt:       map[uint64]string{},
		eventsSeen:     map[string]eventCursor{},
		wasLearner:     map[dial.NodeID]bool{},
		seenM:          map[uint64]bool{1: true},
		promoted:       map[dial.NodeID]bool{},
		clientDeadline: 3 * time.Second,
	}
	c.nw.Watch(func(s netsim.Sending) {
		if s.Fate != netsim.Sent || len(s.Frame) == 0 || s.Frame[0] != 1 {
			return
		}
		if info, err := consensus.DecodeFrame(s.Frame); err == nil && info.Kind == consensus.FrameVoteResp && !info.Reject {
			c.votes = append(c.votes, checker.VoteGrant{Voter: info.From, Candidate: info.To, Term: info.Term, At: c.k.Now()})
		}
	})
	b := run.Bugs()
	c.cfg = consensus.Config{KV: kv.Config{Bugs: b}, Journal: journal.Config{Bugs: b}, Bugs: b}
	c.timing = drawTiming(run)
	c.timing.applyConsensus(&c.cfg)
	var boot []consensus.Member
	var founding []dial.NodeID
	for _, name := range names[:founders] {
		boot = append(boot, consensus.NewMember(name, name+":7000"))
		founding = append(founding, dial.IDFromName(name))
	}
	c.memberships = []checker.MembershipChange{{Index: 1, Voters: founding}}
	k.OnNodePanic(func(n *sim.Machine, v any) {
		run.Fail("node-panic", "%s: %v", n.Name(), v)
	})
	supervise(run)
	for i, name := range names {
		name := name
		founder := i < founders
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			cfg := c.cfg
			cfg.Name, cfg.Addr = name, name+":7000"
			if founder {
				cfg.Bootstrap = boot
			}
			if c.flowCfg != nil {
				nd, err := node.Open(node.Config{Consensus: cfg, Flow: *c.flowCfg}, node.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand})
				if err != nil {
					err = haltOnIO(err)
					run.Fail("boot", "%s: %v", name, err)
					delete(c.live, name)
					delete(c.flows, name)
					return dial.HandlerFunc(func(dial.NodeID, []byte) {})
				}
				c.live[name], c.flows[name] = nd.Consensus, nd.Flow
				nd.Consensus.OnMembership(c.recordMembership)
				return nd
			}
			cn, err := consensus.Open(cfg, consensus.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand})
			if err != nil {
				err = haltOnIO(err)
				run.Fail("boot", "%s: %v", name, err)
				delete(c.live, name)
				return dial.HandlerFunc(func(dial.NodeID, []byte) {})
			}
			c.live[name] = cn
			cn.OnMembership(c.recordMembership)
			return cn
		}, c.nw, disk)
		c.nodes = append(c.nodes, n)
		c.byID[n.ID()] = n
	}
	return c
}

// recordMembership notes the first instant any node applied a membership.
func (c *raftCluster) recordMembership(ms consensus.Membership) {
	if c.seenM[ms.Index] {
		return
	}
	c.seenM[ms.Index] = true
	c.checkPromotions(ms)
	voters := make([]dial.NodeID, len(ms.Voters))
	for i, m := range ms.Voters {
		voters[i] = m.ID
	}
	c.memberships = append(c.memberships, checker.MembershipChange{Index: ms.Index, Voters: voters, At: c.k.Now()})
}

// node returns the consensus node running on machine n, if it is up.
func (c *raftCluster) node(n *sim.Machine) *consensus.Node {
	if !n.Up() {
		return nil
	}
	return c.live[n.Name()]
}

// call runs f against machine n's consensus node as a client request
// arriving there; it reports false (refused) if the node is down.
func (c *raftCluster) call(n *sim.Machine, f func(*consensus.Node)) bool {
	cn := c.node(n)
	if cn == nil {
		return false
	}
	return n.Exec(func() { f(cn) })
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

// kvValues are the values clients write; the empty one is a value too.
var kvValues = []string{"a", "b", "c", ""}

func (c *raftCluster) startKVClients(count int, until time.Duration) {
	c.kvClients += count
	if c.run.ClientsOff {
		return
	}
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
	var opID int
	giveUp := func() {
		if a.once() {
			c.hist.GiveUp(opID, "client deadline", c.k.Now())
			next()
		}
	}
	refuse := func(why string) {
		if a.once() {
			c.hist.Refuse(opID, why, c.k.Now())
			next()
		}
	}
	unknownOrRefused := func(err error) {
		if consensus.Unknown(err) {
			if a.once() {
				c.hist.GiveUp(opID, err.Error(), c.k.Now())
				next()
			}
			return
		}
		refuse(err.Error())
	}
	// propose runs one write: an answered one is recorded by applied,
	// which returns what the history keeps of it.
	propose := func(op kv.Op, applied func(kv.Result) linearizability.KVOutput) {
		if !c.call(n, func(cn *consensus.Node) {
			cn.Propose(op, func(res kv.Result, err error) {
				switch {
				case err != nil:
					unknownOrRefused(err)
				case res.Err != nil:
					refuse(res.Err.Error())
				default:
					if a.once() {
						c.hist.Return(opID, applied(res), c.k.Now())
						next()
					}
				}
			})
		}) {
			refuse("node down")
		}
	}
	switch pick := r.IntN(20); {
	case pick >= 17:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVDelete}, now)
		propose(kv.Delete(key), func(res kv.Result) linearizability.KVOutput {
			delete(cl.lastSeen, key)
			return linearizability.KVOutput{Found: res.Found, Version: res.Version}
		})
	case pick < 7:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVPut, Value: value}, now)
		propose(kv.Put(key, []byte(value)), func(res kv.Result) linearizability.KVOutput {
			cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
			return linearizability.KVOutput{Version: res.Version}
		})
	case pick < 13:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVGet}, now)
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
					c.hist.Return(opID, out, c.k.Now())
					next()
				}
			})
		})
		if !ok {
			refuse("node down")
		}
	default:
		seen := cl.lastSeen[key]
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVCas, Expect: seen.Version, Value: value}, now)
		guard := kv.VersionIs(key, seen.Version)
		guard.Value = seen.Value // what the value-guard bug compares instead
		if seen.Version == 0 && r.IntN(2) == 0 {
			guard = kv.Absent(key) // the other way to say "absent"
		}
		propose(kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Put(key, []byte(value))}, nil), func(res kv.Result) linearizability.KVOutput {
			out := linearizability.KVOutput{Succeeded: res.Succeeded}
			if res.Succeeded {
				out.Version = res.Version
				cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
			}
			return out
		})
	}
	if !a.done {
		c.k.After(c.clientDeadline, sim.EvClient, uint64(opID), giveUp)
	}
}

// startLeaseClients runs holders that take, renew and release one lease
// from random nodes, recording what each came to believe it held.
func (c *raftCluster) startLeaseClients(count int, ttl time.Duration, until time.Duration) {
	c.leaseClients += count
	if c.run.ClientsOff {
		return
	}
	r := c.k.Stream("workload/lease")
	for i := 0; i < count; i++ {
		holder := fmt.Sprintf("h%d", i+1)
		c.k.At(sim.Between(r, 0, 200*time.Millisecond), sim.EvClient, xxhash.Sum64String(holder), func() {
			c.leaseStep(holder, r, ttl, until, nil)
		})
	}
}

const leaseName = "scheduler"

// leaseStep makes one lease call. With boundary set, it is a renewal
// through that node, made exactly a TTL after the call that last granted
// the lease through it: the node stamps it with the tenure's deadline, to
// the millisecond unless a clock moved, and it must find the lease lapsed.
func (c *raftCluster) leaseStep(holder string, r interface{ IntN(int) int }, ttl, until time.Duration, boundary *sim.Machine) {
	if c.k.Now() >= until {
		return
	}
	next := func(d time.Duration) {
		c.k.After(d, sim.EvClient, xxhash.Sum64String(holder), func() { c.leaseStep(holder, r, ttl, until, nil) })
	}
	n := c.nodes[r.IntN(len(c.nodes))]
	ttlMs := ttl.Milliseconds()
	var op kv.Op
	kind := checker.LeaseRelease
	switch pick := r.IntN(10); {
	case boundary != nil:
		n = boundary
		op, kind = kv.LeaseRenew(leaseName, holder, ttlMs), checker.LeaseRenew
		c.run.Did("boundary-renewals", 1)
	case pick < 5:
		op, kind = kv.LeaseAcquire(leaseName, holder, ttlMs), checker.LeaseAcquire
	case pick < 8:
		op, kind = kv.LeaseRenew(leaseName, holder, ttlMs), checker.LeaseRenew
	default:
		op = kv.LeaseRelease(leaseName, holder)
	}
	// From the moment it asks to release, the holder no longer counts on
	// the lease, whatever becomes of the request: the call is its record.
	c.leaseCalls = append(c.leaseCalls, checker.LeaseCall{Holder: holder, Lease: leaseName, Kind: kind, Node: n.Name(), TTL: ttl, Call: c.k.Now()})
	call := len(c.leaseCalls) - 1
	a := &answer{}
	pace := ttl / 3
	ok := c.call(n, func(cn *consensus.Node) {
		cn.Propose(op, func(res kv.Result, err error) {
			if !a.once() {
				return
			}
			lc := &c.leaseCalls[call]
			if !consensus.Unknown(err) {
				lc.Answered, lc.Answer = true, c.k.Now()
			}
			if err == nil && res.Err == nil && kind != checker.LeaseRelease {
				lc.Granted, lc.Token = true, res.Lease.Token
				checker.LeaseAnswer(c.run, *lc, res.Lease)
				if r.IntN(4) == 0 {
					// Probe the deadline itself, not somewhere before it.
					at := lc.Call + ttl
					c.k.At(at, sim.EvClient, xxhash.Sum64String(holder), func() { c.leaseStep(holder, r, ttl, until, n) })
					return
				}
			}
			next(time.Duration(r.IntN(int(pace) + 1)))
		})
	})
	if !ok {
		a.once()
		c.leaseCalls[call].Answered, c.leaseCalls[call].Answer = true, c.k.Now()
		next(pace)
		return
	}
	c.k.After(c.clientDeadline, sim.EvClient, xxhash.Sum64String(holder), func() {
		if a.once() {
			next(pace)
		}
	})
}

// grants counts the grants and renewals clients were told of.
func (c *raftCluster) grants() int {
	n := 0
	for _, lc := range c.leaseCalls {
		if lc.Granted {
			n++
		}
	}
	return n
}

// clocks is the simulator's record of the cluster's clocks, for the
// lease checker.
type clocks struct{ c *raftCluster }

func (cl clocks) OffsetAt(node string, t time.Duration) time.Duration {
	for _, n := range cl.c.nodes {
		if n.Name() == node {
			return n.Clock().OffsetAt(t)
		}
	}
	panic("scenarios: no node " + node)
}

func (cl clocks) MinOffset(from, to time.Duration) time.Duration {
	lo, _ := cl.offsets(from, to)
	return lo
}

func (cl clocks) MaxOffset(from, to time.Duration) time.Duration {
	_, hi := cl.offsets(from, to)
	return hi
}

// offsets is the smallest and largest offset any node's clock had in
// [from, to].
func (cl clocks) offsets(from, to time.Duration) (lo, hi time.Duration) {
	lo, hi = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	for _, n := range cl.c.nodes {
		l, h := n.Clock().OffsetRange(from, to)
		lo, hi = min(lo, l), max(hi, h)
	}
	return lo, hi
}

// checkLeases judges the holders' beliefs at true instants.
func (c *raftCluster) checkLeases() {
	checker.LeaseExclusive(c.run, checker.LeaseBeliefs(c.leaseCalls, clocks{c}))
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

// checkPromotions judges a membership the instant the first node applies
// it: a node that was a learner and is now a voter must
// have held the log up to within the promotion lag of the promoting
// entry. What it holds is read from its own journal by the simulator,
// not from the leader's opinion of its progress. A learner promoted while
// still replaying grows the quorum with a node that cannot yet vote for
// anything current (DESIGN hazard 10).
func (c *raftCluster) checkPromotions(ms consensus.Membership) {
	lag := c.cfg.PromoteLag
	if lag == 0 {
		lag = 8 // consensus's default
	}
	for _, m := range ms.Learners {
		c.wasLearner[m.ID] = true
		delete(c.promoted, m.ID) // a node that returns is judged again
	}
	for _, m := range ms.Voters {
		if !c.wasLearner[m.ID] || c.promoted[m.ID] {
			continue
		}
		c.promoted[m.ID] = true
		c.run.Did("promotions", 1)
		n := c.byID[m.ID]
		cn := c.node(n)
		if cn == nil {
			continue // down: what it held is not judged
		}
		// The promoting entry is at ms.Index; the leader saw the learner
		// within lag of its last entry just before it, and the learner
		// has only gained since.
		if last := cn.LastIndex(); last+lag+1 < ms.Index {
			c.run.Fail("promotion", "%s became a voter at index %d holding the log only to %d: promoted more than %d entries behind",
				n.Name(), ms.Index, last, lag)
		}
	}
}

// checkEvents reads the watch events a node applied since the last look
// and holds them to the lease rules: applied time never goes back, and an
// Expired event only reports a lease whose deadline had passed.
func (c *raftCluster) checkEvents(n *sim.Machine, cn *consensus.Node) {
	cur := c.eventsSeen[n.Name()]
	if cur.inc != n.Incarnation() {
		// A restarted node replays from its snapshot: watch it afresh.
		cur = eventCursor{inc: n.Incarnation()}
		c.streams[n.Name()] = checker.NewLeaseStream(n.Name())
	}
	for {
		evs, err := cn.Events(cur.version, 256)
		if err != nil {
			// The node's event log no longer reaches back to our cursor
			// (a burst of changes, or a snapshot installed): resume from
			// what it still holds; the gap is not judged, and what we knew
			// of its leases is stale.
			cur.version = cn.Revision()
			c.streams[n.Name()].Skip()
			break
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			c.streams[n.Name()].Event(c.run, ev, c.leaseCalls)
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
	c.run.TimeCheck("kv-linearizability", func() { checker.KVLinearizable(c.run, c.hist, c.run.CheckTimeout) })
}

// checkLiveness runs after the calm phase has lasted settle: some node
// must lead with a quorum's acknowledgement, and a write through every
// node must be applied.
func (c *raftCluster) checkLiveness(members []*sim.Machine, settle time.Duration, done func()) {
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
		var probe func(n *sim.Machine)
		probe = func(n *sim.Machine) {
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

// crashRecord is the simulator's record of the cluster's crashes, for the
// durability checker.
type crashRecord struct{ c *raftCluster }

func (r crashRecord) Downs(id dial.NodeID) []checker.DownWindow {
	from, to := r.c.byID[id].DownSpans()
	out := make([]checker.DownWindow, len(from))
	for i := range from {
		out[i] = checker.DownWindow{From: from[i], To: to[i]}
	}
	return out
}

func (r crashRecord) Name(id dial.NodeID) string { return r.c.byID[id].Name() }
