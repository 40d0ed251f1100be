package scenarios

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// The FlowShard scenarios: what survives a crash, per durability mode
// (durability-restart), and what the flow cap and TTLs may take away
// (ttl-evict).

func init() {
	Register(Scenario{
		Name: "durability-restart",
		Summary: "imposters in sync, async and none modes under steady writers; crashes of one node, of an owner with " +
			"its successors, and of the whole cluster, at random points relative to the fsyncs; each mode held to its promise",
		Duration: 40 * time.Second,
		Richness: 15,
		Bugs: []Bug{
			{Name: "ack-before-sync", Summary: "sync mode acknowledges a write before its fsync", CaughtWithin: 100},
			{Name: "no-readopt", Summary: "a restarted owner serves its own disk without pulling from its successors", CaughtWithin: 100},
		},
		Run: runDurabilityRestart,
	})
	Register(Scenario{
		Name: "ttl-evict",
		Summary: "many more flows than the per-node cap, short TTLs lapsing through partitions and clock steps; " +
			"no flow is ever partly present, no expiry or eviction is undone",
		Duration: 30 * time.Second,
		Richness: 15,
		Bugs: []Bug{
			{Name: "evict-keys", Summary: "the flow cap evicts single keys instead of whole flows", CaughtWithin: 100},
			{Name: "no-expiry-clamp", Summary: "expiry reads the node's clock unclamped, so a step back shows expired entries again", CaughtWithin: 100},
		},
		Run: runTTLEvict,
	})
}

// shardBugs reads the FlowShard's planted bugs from the run.
func shardBugs(run *Run) shard.Bugs {
	return shard.Bugs{AckBeforeSync: run.Bug("ack-before-sync"), EvictKeys: run.Bug("evict-keys"), NoExpiryClamp: run.Bug("no-expiry-clamp")}
}

// flowKeysAll are the keys every write of these scenarios sets together
// (one set-all), each to the write's version: a read that sees them
// disagree, or sees some and not others, saw a torn flow.
var flowKeysAll = []string{"a", "b", "c"}

func setAll(version int) map[string][]byte {
	out := map[string][]byte{}
	v := []byte(strconv.Itoa(version))
	for _, k := range flowKeysAll {
		out[k] = v
	}
	return out
}

// readVersion decodes a get-all of a flow written only by set-all: the
// version, 0 for an absent flow, or torn.
func readVersion(all map[string][]byte) (version int, torn bool) {
	if len(all) == 0 {
		return 0, false
	}
	if len(all) != len(flowKeysAll) {
		return 0, true
	}
	first := string(all[flowKeysAll[0]])
	for _, k := range flowKeysAll[1:] {
		if string(all[k]) != first {
			return 0, true
		}
	}
	v, err := strconv.Atoi(first)
	if err != nil || v <= 0 {
		return 0, true
	}
	return v, false
}

// --- durability-restart ---

type outcome uint8

const (
	opOK outcome = iota + 1
	opRefused
	opUnknown
)

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return opOK
	case flow.Known(err):
		return opRefused
	default:
		return opUnknown
	}
}

// durFlow is one flow of durability-restart and its history. One writer
// writes it, so versions rise in call order.
type durFlow struct {
	name      string
	mode      shard.Mode
	placement []dial.NodeID
	writes    []durWrite // index = version-1
	reads     []durRead
}

type durWrite struct {
	call, ret time.Duration
	out       outcome
}

type durRead struct {
	node      string
	call, ret time.Duration
	version   int
}

// downWindow is a span during which a node was down.
type downWindow struct{ from, to time.Duration }

type durability struct {
	h       *flowHarness
	flows   []*durFlow
	down    map[dial.NodeID][]downWindow
	window  time.Duration // how long an async write may be in a copy's memory only
	crashes int
}

func runDurabilityRestart(run *Run) error {
	k := run.Kernel
	knobs := k.Stream("knobs")
	voters := 3 + knobs.IntN(3)
	// A network that delays, duplicates and reorders but never loses:
	// the promises are about crashes, and a lost push would make an async
	// write's copies fewer than the crash schedule says.
	netCfg := netsim.DefaultConfig
	netCfg.LatencyMin = sim.Between(knobs, 100*time.Microsecond, time.Millisecond)
	netCfg.LatencyMax = netCfg.LatencyMin + sim.Between(knobs, 0, 5*time.Millisecond)
	netCfg.Dup = float64(knobs.IntN(4)) / 100
	netCfg.Reorder, netCfg.ReorderMax = float64(knobs.IntN(4))/100, 3*time.Millisecond
	disk := sim.DefaultDiskConfig
	disk.TornWriteProb = float64(knobs.IntN(5)) / 4
	commitDelay := sim.Between(knobs, 500*time.Microsecond, 4*time.Millisecond)
	perMode := 2 + knobs.IntN(4)
	calm := run.Duration * 70 / 100
	run.Knob("voters", voters)
	run.Knob("net", netCfg)
	run.Knob("disk", fmt.Sprintf("torn=%.2f", disk.TornWriteProb))
	run.Knob("commit_delay", commitDelay)
	run.Knob("flows_per_mode", perMode)
	run.Knob("calm_at", calm)

	cfg := flow.Config{AntiEntropy: 2 * time.Second, Shard: shard.Config{CommitDelay: commitDelay}}
	cfg.Bugs = flowBugs(run)
	cfg.Shard.Bugs = shardBugs(run)
	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	h := startFlowCluster(c, cfg)
	h.calm = calm
	DrawClocks(run, h.nodes, 200*time.Millisecond, 100)

	syncEvery := 50 * time.Millisecond
	d := &durability{h: h, down: map[dial.NodeID][]downWindow{},
		// An async write is on its owner's disk within the commit delay and
		// one fsync interval of being applied, and on a replica's within
		// that and the push's flight (latency, reordering). Clocks drift by
		// at most 100ppm here; a millisecond covers it.
		window: commitDelay + syncEvery + netCfg.LatencyMax + netCfg.ReorderMax + time.Millisecond}
	rg := ring.New(ids(h.nodes))
	for _, mode := range []shard.Mode{shard.Sync, shard.Async, shard.None} {
		for i := 0; i < perMode; i++ {
			name := ring.ImposterKey(8000+uint16(mode), fmt.Sprintf("user-%d", i))
			d.flows = append(d.flows, &durFlow{name: name, mode: mode, placement: rg.Placement(ring.ClassFlow, name).Nodes()})
		}
	}
	for _, n := range h.nodes {
		n.Start()
	}
	for i, f := range d.flows {
		d.startWriter(uint64(i), f, calm)
	}
	d.scheduleCrashes(calm)
	// After the last crash, every flow is read through every node: the
	// reads that judge what the crashes took.
	for i, f := range d.flows {
		d.startReader(uint64(1000+i), f, calm, run.Duration-time.Second)
	}
	h.startChecks(100 * time.Millisecond)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	h.finish(nil)
	d.check()
	h.checkBridge()
	h.checkConvergence(h.nodes)
	d.report()
	return nil
}

// startWriter runs a flow's one writer until calm: read the flow, then
// write the next version, again and again, through a random node. The
// read before each write is what notices a loss: after a crash the first
// answer a client gets is a read.
func (d *durability) startWriter(client uint64, f *durFlow, until time.Duration) {
	h := d.h
	r := h.k.Stream("workload/durability/" + f.name)
	var step func()
	next := func() { h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, client, step) }
	step = func() {
		if h.k.Now() >= until {
			return
		}
		n := h.nodes[r.IntN(len(h.nodes))]
		d.read(client, f, n, func() {
			version := len(f.writes) + 1
			f.writes = append(f.writes, durWrite{call: h.k.Now()})
			req := flow.Request{Flow: f.name, Op: flow.OpSetAll, Entries: setAll(version), Mode: f.mode}
			h.callFlow(n, client, client, req, func(_ flow.Response, err error) {
				f.writes[version-1].ret, f.writes[version-1].out = h.k.Now(), outcomeOf(err)
				next()
			})
		})
	}
	h.k.After(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, client, step)
}

// startReader reads a flow through every node in turn from one time to
// another, retrying through refusals (an owner re-adopting after a crash).
func (d *durability) startReader(client uint64, f *durFlow, from, until time.Duration) {
	h := d.h
	i := 0
	var step func()
	step = func() {
		if h.k.Now() >= until {
			return
		}
		n := h.nodes[i%len(h.nodes)]
		i++
		d.read(client, f, n, func() { h.k.After(200*time.Millisecond, sim.EvClient, client, step) })
	}
	h.k.At(from+time.Duration(client%50)*time.Millisecond, sim.EvClient, client, step)
}

// read records one get-all of f through n; then runs after it settles.
func (d *durability) read(client uint64, f *durFlow, n *sim.Node, then func()) {
	h := d.h
	call := h.k.Now()
	h.callFlow(n, client, client, flow.Request{Flow: f.name, Op: flow.OpGetAll, Mode: f.mode}, func(resp flow.Response, err error) {
		if err == nil {
			version, torn := readVersion(resp.All)
			if torn {
				h.run.Fail("durability", "flow %s (%s) read through %s at %v is torn: %q", f.name, f.mode, n.Name(), call, resp.All)
			} else {
				f.reads = append(f.reads, durRead{node: n.Name(), call: call, ret: h.k.Now(), version: version})
			}
		}
		then()
	})
}

// scheduleCrashes runs crash episodes until calm, one at a time: one
// node, or one flow's owner and successors together, or every node. The
// victims die within a 60ms span or at one instant, and all of them
// restart within 300ms of each other, so a node re-adopting after the
// crash finds every copy back within AdoptWait.
func (d *durability) scheduleCrashes(calm time.Duration) {
	h := d.h
	r := h.k.Stream("faults")
	var episode func()
	episode = func() {
		now := h.k.Now()
		if now >= calm-3*time.Second {
			return
		}
		var victims []*sim.Node
		kind := ""
		switch r.IntN(3) {
		case 0:
			kind = "one node"
			victims = []*sim.Node{h.nodes[r.IntN(len(h.nodes))]}
		case 1:
			f := d.flows[r.IntN(len(d.flows))]
			kind = "the placement of " + f.name
			for _, id := range f.placement {
				victims = append(victims, h.byID[id])
			}
		default:
			kind = "every node"
			victims = h.nodes
		}
		// Victims die at random points within 60ms (the fsync cadence is
		// 50ms), or, half the time when there are several, at one instant:
		// a power cut, which leaves every copy's last commit delay unsynced.
		spread := 60 * time.Millisecond
		if len(victims) > 1 && r.IntN(2) == 0 {
			spread = 0
			kind += " (one power cut)"
		}
		restart := now + sim.Between(r, 300*time.Millisecond, 2*time.Second)
		last := restart
		h.k.Logf("crash episode: %s", kind)
		for _, n := range victims {
			n := n
			at := now + sim.Between(r, 0, spread)
			back := restart + sim.Between(r, 0, 300*time.Millisecond)
			last = max(last, back)
			h.k.At(at, sim.EvFault, xxhash.Sum64String("crash "+n.Name()), func() {
				if n.Up() {
					d.crashes++
					d.down[n.ID()] = append(d.down[n.ID()], downWindow{from: h.k.Now(), to: back})
					n.Crash()
				}
			})
			h.k.At(back, sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
				if !n.Up() {
					n.Start()
				}
			})
		}
		h.k.At(last+sim.Between(r, 2*time.Second, 4*time.Second), sim.EvFault, xxhash.Sum64String("episode"), episode)
	}
	h.k.At(sim.Between(r, 2*time.Second, 4*time.Second), sim.EvFault, xxhash.Sum64String("episode"), episode)
}

// downDuring reports whether node id was down at some point in [from, to].
func (d *durability) downDuring(id dial.NodeID, from, to time.Duration) bool {
	for _, w := range d.down[id] {
		if w.from <= to && w.to >= from {
			return true
		}
	}
	return false
}

// lossAllowed is each mode's promise, as the crash schedule allows a
// write (called at call, applied by applied at the latest) to be missing
// from a read that began at readAt:
//   - sync: never; every disk in the simulator survives its crashes.
//   - async: only if, for some instant a at which it may have been
//     applied, every copy was down at some point within the window after
//     a: it crashed with the write in its memory only, or was down when
//     the write was pushed to it.
//   - none: only if every copy was down at some point since the write.
func (d *durability) lossAllowed(f *durFlow, call, applied, readAt time.Duration) bool {
	all := func(from, to time.Duration) bool {
		for _, id := range f.placement {
			if !d.downDuring(id, from, to) {
				return false
			}
		}
		return true
	}
	switch f.mode {
	case shard.Sync:
		return false
	case shard.None:
		return all(call, readAt)
	}
	// The instants a for which a copy was down within [a, a+window] form
	// intervals [from-window, to]; where those of every copy meet, they
	// meet at the left end of one of them, or at call.
	cands := []time.Duration{call}
	for _, id := range f.placement {
		for _, w := range d.down[id] {
			if a := w.from - d.window; a > call && a <= applied {
				cands = append(cands, a)
			}
		}
	}
	for _, a := range cands {
		if all(a, min(a+d.window, readAt)) {
			return true
		}
	}
	return false
}

// check holds every flow's reads to its mode's promise: a read sees a
// version that was written and not refused, and misses no version that
// was acknowledged (or seen by an earlier read) before it began, unless
// the crash schedule allows that loss.
func (d *durability) check() {
	for _, f := range d.flows {
		// established[v-1]: when version v was known applied: its write's
		// acknowledgement, or the end of the first read that saw it.
		established := make([]time.Duration, len(f.writes))
		for i, w := range f.writes {
			established[i] = -1
			if w.out == opOK {
				established[i] = w.ret
			}
		}
		failed := false
		for _, rd := range f.reads {
			if rd.version == 0 {
				continue
			}
			w := f.writes[rd.version-1]
			if w.out == opRefused || w.call > rd.ret {
				d.h.run.Fail("durability", "flow %s (%s): the read through %s at %v saw version %d, whose write was %s",
					f.name, f.mode, rd.node, rd.call, rd.version, map[bool]string{true: "refused", false: "not yet made"}[w.out == opRefused])
				failed = true
				break
			}
			if e := &established[rd.version-1]; *e < 0 || rd.ret < *e {
				*e = rd.ret
			}
		}
		if failed {
			continue
		}
		// Versions by when they were established, so each read finds the
		// newest version established before it began.
		order := make([]int, 0, len(f.writes))
		for i := range f.writes {
			if established[i] >= 0 {
				order = append(order, i)
			}
		}
		sort.Slice(order, func(a, b int) bool { return established[order[a]] < established[order[b]] })
		newest := make([]int, len(order)) // newest[j]: the highest version among order[:j+1]
		for j, i := range order {
			newest[j] = i + 1
			if j > 0 {
				newest[j] = max(newest[j], newest[j-1])
			}
		}
		for _, rd := range f.reads {
			j := sort.Search(len(order), func(j int) bool { return established[order[j]] >= rd.call }) - 1
			if j < 0 || newest[j] <= rd.version {
				continue
			}
			for v := rd.version + 1; v <= newest[j]; v++ {
				e := established[v-1]
				if e < 0 || e >= rd.call {
					continue
				}
				// A version first seen by a read was applied before that
				// read answered, and before its own write's answer (the
				// network here holds no frame longer than the deadline).
				applied := e
				if w := f.writes[v-1]; w.ret > 0 {
					applied = min(applied, w.ret)
				}
				if !d.lossAllowed(f, f.writes[v-1].call, applied, rd.call) {
					d.h.run.Fail("durability", "flow %s (%s, placement %s): version %d, written at %v and known applied at %v, is lost: the read through %s at %v saw version %d, and no crash schedule the %s promise allows explains it (downtime: %s)",
						f.name, f.mode, d.names(f.placement), v, f.writes[v-1].call, e, rd.node, rd.call, rd.version, f.mode, d.downtime(f.placement))
					failed = true
					break
				}
			}
			if failed {
				break
			}
		}
	}
}

func (d *durability) names(ids []dial.NodeID) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += ","
		}
		out += d.h.byID[id].Name()
	}
	return out
}

func (d *durability) downtime(ids []dial.NodeID) string {
	out := ""
	for _, id := range ids {
		out += " " + d.h.byID[id].Name() + ":"
		for _, w := range d.down[id] {
			out += fmt.Sprintf("[%v,%v]", w.from, w.to)
		}
	}
	return out
}

func (d *durability) report() {
	var writes, acked, reads int
	for _, f := range d.flows {
		writes += len(f.writes)
		reads += len(f.reads)
		for _, w := range f.writes {
			if w.out == opOK {
				acked++
			}
		}
	}
	var fsyncs, syncAcks uint64
	for _, name := range sortedKeys(d.h.flows) {
		st, _ := d.h.flows[name].Shard()
		fsyncs += st.Fsyncs
		syncAcks += st.SyncAcks
	}
	d.h.run.Logf("durability: writes=%d acked=%d reads=%d crashes=%d; last incarnations: fsyncs=%d sync-acks=%d",
		writes, acked, reads, d.crashes, fsyncs, syncAcks)
}

// --- ttl-evict ---

// ttlFlow is one flow of ttl-evict and its history. Many clients write
// it, each write a new version of every key (set-all).
type ttlFlow struct {
	writes []durWrite // index = version-1
	reads  []durRead
}

type ttlEvict struct {
	h       *flowHarness
	flows   map[string]*ttlFlow
	names   []string
	cap     int
	maxLive int
}

func runTTLEvict(run *Run) error {
	k := run.Kernel
	knobs := k.Stream("knobs")
	voters := 3 + knobs.IntN(3)
	netCfg := netsim.Draw(k.Stream("net-config"))
	ttl := sim.Between(knobs, time.Second, 4*time.Second)
	capFlows := 8 + knobs.IntN(24)
	nflows := 2*capFlows + knobs.IntN(4*capFlows)
	perNode := 2 + knobs.IntN(4)
	calm := run.Duration * 80 / 100
	// Partitions, clock steps and drift, no crashes: with no restart and
	// no membership change the owner of every flow stays put, so any read
	// that sees an expired or evicted version again is the store's doing.
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	faults.Crash = 0
	// Clock steps, back as well as forward, of up to seconds: longer than
	// a TTL, so an owner stepped back would show what it had let expire
	// were its clock not clamped.
	faults.ClockStep += 2
	faults.StepMax = max(faults.StepMax, 2*time.Second)
	run.Knob("voters", voters)
	run.Knob("net", netCfg)
	run.Knob("ttl", ttl)
	run.Knob("flow_cap", capFlows)
	run.Knob("flows", nflows)
	run.Knob("clients_per_node", perNode)
	run.Knob("faults", faults)
	const maxTTL = 5000
	cfg := flow.Config{AntiEntropy: 2 * time.Second, DefaultTTLMs: ttl.Milliseconds(), MaxTTLMs: maxTTL,
		// The grace covers the longest TTL and the largest clock step.
		Shard: shard.Config{MaxFlows: capFlows, GraceMs: maxTTL + faults.StepMax.Milliseconds() + 1000, PurgeEvery: 500 * time.Millisecond}}
	cfg.Bugs = flowBugs(run)
	cfg.Shard.Bugs = shardBugs(run)
	c := newRaftCluster(run, names(voters), voters, netCfg, sim.DefaultDiskConfig)
	h := startFlowCluster(c, cfg)
	h.calm = calm
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	t := &ttlEvict{h: h, flows: map[string]*ttlFlow{}, cap: capFlows}
	for i := 0; i < nflows; i++ {
		name := ring.ImposterKey(8080, fmt.Sprintf("user-%d", i))
		t.names = append(t.names, name)
		t.flows[name] = &ttlFlow{}
	}
	for _, n := range h.nodes {
		n.Start()
	}
	chaos := StartChaos(run, h.nw, h.nodes, faults, calm)
	client := uint64(0)
	for _, n := range h.nodes {
		for i := 0; i < perNode; i++ {
			t.startClient(client, n, run.Duration-time.Second)
			client++
		}
	}
	h.k.At(0, sim.EvCheck, xxhash.Sum64String("cap"), t.checkCap)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	h.finish(chaos)
	t.check()
	h.checkBridge()
	t.report()
	return nil
}

// startClient runs a closed-loop client pinned to n: half its calls write
// a new version of a flow, half read one; a third of them go to a few hot
// flows, the rest anywhere, so the cold ones age out of the cap. When a
// read finds a flow absent, the client also watches it for five seconds
// (a read every 200ms), which is what sees an expiry undone by a clock
// step.
func (t *ttlEvict) startClient(client uint64, n *sim.Node, until time.Duration) {
	h := t.h
	r := h.k.Stream(fmt.Sprintf("workload/ttl/%d", client))
	hot := max(1, t.cap/3)
	watching := false
	var step func()
	step = func() {
		if h.k.Now() >= until {
			return
		}
		name := t.names[r.IntN(len(t.names))]
		if r.IntN(3) == 0 {
			name = t.names[r.IntN(hot)]
		}
		f := t.flows[name]
		next := func() { h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, client, step) }
		if r.IntN(2) == 0 {
			version := len(f.writes) + 1
			f.writes = append(f.writes, durWrite{call: h.k.Now()})
			h.callFlow(n, client, client, flow.Request{Flow: name, Op: flow.OpSetAll, Entries: setAll(version)}, func(_ flow.Response, err error) {
				f.writes[version-1].ret, f.writes[version-1].out = h.k.Now(), outcomeOf(err)
				next()
			})
			return
		}
		t.read(client, n, name, func(version int, ok bool) {
			if ok && version == 0 && !watching {
				watching = true
				t.watch(client+10_000, n, name, 25, until, func() { watching = false })
			}
			next()
		})
	}
	h.k.After(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, client, step)
}

// read records one get-all of a flow through n and hands on its version.
func (t *ttlEvict) read(client uint64, n *sim.Node, name string, then func(version int, ok bool)) {
	h := t.h
	f := t.flows[name]
	call := h.k.Now()
	h.callFlow(n, client, client, flow.Request{Flow: name, Op: flow.OpGetAll}, func(resp flow.Response, err error) {
		if err != nil {
			then(0, false)
			return
		}
		version, torn := readVersion(resp.All)
		if torn {
			h.run.Fail("whole-flow", "flow %s read through %s at %v is partly present: %q", name, n.Name(), call, resp.All)
			then(0, false)
			return
		}
		f.reads = append(f.reads, durRead{node: n.Name(), call: call, ret: h.k.Now(), version: version})
		then(version, true)
	})
}

// watch reads a flow every 200ms, left times.
func (t *ttlEvict) watch(client uint64, n *sim.Node, name string, left int, until time.Duration, done func()) {
	h := t.h
	h.k.After(200*time.Millisecond, sim.EvClient, client, func() {
		if left == 0 || h.k.Now() >= until {
			done()
			return
		}
		t.read(client, n, name, func(int, bool) { t.watch(client, n, name, left-1, until, done) })
	})
}

// checkCap samples every node's live flow count. The writer enforces the
// cap at its next turn, so a sample may land between a write and that
// turn: a few flows over is a sample's noise, more is a broken cap.
func (t *ttlEvict) checkCap() {
	h := t.h
	for _, n := range h.nodes {
		if s := h.flows[n.Name()]; n.Up() && s != nil {
			_, live := s.Shard()
			t.maxLive = max(t.maxLive, live)
			if live > t.cap+16 {
				h.run.Fail("flow-cap", "%s holds %d live flows; the cap is %d", n.Name(), live, t.cap)
			}
		}
	}
	if h.k.Now() < h.run.Duration {
		h.k.After(100*time.Millisecond, sim.EvCheck, xxhash.Sum64String("cap"), t.checkCap)
	}
}

// check: a read sees only versions that were written and not refused,
// and once a read has found a flow absent (expired, or evicted by its
// owner), no later read sees a version acknowledged before that read
// began: expiry and eviction are never undone.
func (t *ttlEvict) check() {
	for _, name := range t.names {
		f := t.flows[name]
		for _, rd := range f.reads {
			if rd.version == 0 {
				continue
			}
			if w := f.writes[rd.version-1]; w.out == opRefused || w.call > rd.ret {
				t.h.run.Fail("ttl", "flow %s: the read through %s at %v saw version %d, which was refused or not yet written", name, rd.node, rd.call, rd.version)
				return
			}
		}
		for _, gone := range f.reads {
			if gone.version != 0 {
				continue
			}
			for _, rd := range f.reads {
				if rd.version == 0 || rd.call <= gone.ret {
					continue
				}
				if w := f.writes[rd.version-1]; w.out == opOK && w.ret < gone.call {
					t.h.run.Fail("ttl", "flow %s was absent to the read through %s at %v, yet version %d, acknowledged at %v before it, is back in the read through %s at %v",
						name, gone.node, gone.call, rd.version, w.ret, rd.node, rd.call)
					return
				}
			}
		}
	}
}

func (t *ttlEvict) report() {
	var reads, absent, writes int
	for _, name := range t.names {
		f := t.flows[name]
		writes += len(f.writes)
		reads += len(f.reads)
		for _, rd := range f.reads {
			if rd.version == 0 {
				absent++
			}
		}
	}
	var evicted, purged uint64
	for _, name := range sortedKeys(t.h.flows) {
		st, _ := t.h.flows[name].Shard()
		evicted += st.Evicted
		purged += st.Purged
	}
	t.h.run.Logf("ttl-evict: writes=%d reads=%d absent=%d; last incarnations: evicted=%d purged=%d; most live flows on a node=%d (cap %d)",
		writes, reads, absent, evicted, purged, t.maxLive, t.cap)
}
