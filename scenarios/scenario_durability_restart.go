package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:       "durability-restart",
		BootFaults: true,
		Summary: "imposters in sync, async and none modes under steady writers; crashes of one node, of an owner with " +
			"its successors, and of the whole cluster, at random points relative to the fsyncs, a third of them orderly restarts outside power cuts; each mode held to its promise",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "ack-before-sync", Window: 30, MinCaught: 3},
			{Name: "ack-at-submit", Window: 30, MinCaught: 8},
			{Name: "no-readopt", Window: 30, MinCaught: 6},
			{Name: "retry-failed-sync", Window: 30, MinCaught: 5},
			{Name: "repair-to-disk", Window: 60, MinCaught: 6},
			// Its sync writers meet a disk stall longer than the
			// deadline in 11 of seeds 1..100.
			{Name: "untimed-waits", Window: 100, MinCaught: 6},
			// disk-answer, on the sync writers' waits cut with no stall:
			// 7 of seeds 1..30.
			{Name: "early-cut", Window: 30, MinCaught: 3},
			// push-taken, on a successor whose queue is full (small
			// bounds, a stalled disk): 9 of seeds 1..30.
			{Name: "refused-push", Window: 30, MinCaught: 4},
			// replica-disk, on a successor that crashed with a push it
			// took at a full queue still in memory: 6 of seeds 1..100.
			{Name: "forget-behind", Window: 100, MinCaught: 3},
			// replica-disk, on a successor shut down in order whose Close
			// exits before the last commit is written: 21 of seeds 1..30
			// (the crash window forgave it all before shutdowns had none).
			{Name: "close-unsettled", Window: 30, MinCaught: 12},
		},
		// Half the writers are quiet for seconds at a time (startWriter):
		// seeds 1..200 acknowledge 1,330 writes at the fewest (3,306
		// with steady writers only), and read 1,651 times.
		Floors:     []Floor{{"writes-acked", 800}, {"reads", 1000}, {"deaths", 4}},
		DiskStalls: true,
		Checkers:   plus(clusterCheckers, "durability", "memory-only", "bridge", "request-answered", "push-taken", "replica-disk", "replica-convergence", "anti-entropy-quiet", "anti-entropy-bound", "tuple-unique", "disk-answer"),
		Run:        runDurabilityRestart,
	})
}

type durability struct {
	h         *flowHarness
	flows     []*checker.VersionedFlow
	window    time.Duration // how long an async write may be in a copy's memory only
	crashes   int
	shutdowns int // orderly, by Shutdown
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
	commitDelay := sim.Between(knobs, 500*time.Microsecond, 4*time.Millisecond)
	perMode := 2 + knobs.IntN(4)
	calm := run.Duration * 70 / 100
	run.Knob("voters", voters)
	run.Knob("net", netCfg)
	// fsyncs fail often enough here that a shard sees one in most runs:
	// the fail-stop rule is this scenario's to judge.
	disk := drawDisk(run, sim.DefaultDiskConfig, 1e-3, calm)
	run.Knob("commit_delay", commitDelay)
	run.Knob("flows_per_mode", perMode)
	run.Knob("calm_at", calm)

	cfg := flow.Config{AntiEntropy: 2 * time.Second, Shard: shard.Config{CommitDelay: commitDelay}}
	cfg.Bugs = run.Bugs()
	cfg.Shard.Bugs = run.Bugs()
	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	c.lossless = true
	// A successor whose writer's queue is full takes a push in memory
	// and writes it when the queue has room (shard.PutReplica): the async
	// promise counts every push to a live successor as taken. The bounds
	// knob draws the queue small in half the runs, and a stalled disk
	// fills any queue, so a push meets a full one here (planted bug
	// refused-push).
	h := startFlowCluster(c, cfg)
	h.calm = calm
	h.replicaDisk = &checker.ReplicaDisk{Modes: map[string]shard.Mode{}}
	DrawClocks(run, h.nodes, 200*time.Millisecond, 100)

	syncEvery := 50 * time.Millisecond
	d := &durability{h: h,
		// An async write is on its owner's disk within one fsync interval
		// of being applied, plus the commit delay and two commits' latency — the
		// commit in flight when the interval ends, then the synced one —
		// and on a replica's within that and the push's flight (latency,
		// reordering). Clocks drift by at most 100ppm here; a millisecond
		// covers it.
		window: commitDelay + syncEvery + 2*disk.SyncLatencyMax + netCfg.LatencyMax + netCfg.ReorderMax + time.Millisecond}
	rg := ring.New(ids(h.nodes))
	for _, mode := range []shard.Mode{shard.Sync, shard.Async, shard.None} {
		for i := 0; i < perMode; i++ {
			name := ring.ImposterKey(8000+uint16(mode), fmt.Sprintf("user-%d", i))
			d.flows = append(d.flows, &checker.VersionedFlow{Name: name, Mode: mode, Placement: rg.Placement(ring.ClassFlow, name).Nodes()})
		}
	}
	for _, f := range d.flows {
		h.replicaDisk.Modes[f.Name] = f.Mode
	}
	c.onBoot = d.booted
	for _, n := range h.nodes {
		n.Start()
	}
	for i, f := range d.flows {
		d.startWriter(uint64(i), f, calm)
	}
	d.scheduleCrashes(calm)
	d.shutDownBehind(calm)
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
	crashes := newCrashRecord(h.raftCluster)
	checker.Durability(run, d.flows, crashes, d.window)
	judged := checker.MemoryOnly(run, d.flows, crashes)
	run.Logf("memory-only: %d reads of none flows after every copy was down at once", judged)
	h.checkBridge()
	h.checkAnswered()
	h.checkPushesTaken()
	if h.replicaDisk.Judged == 0 {
		run.Undecided("replica-disk", "no restarted node had taken a push long enough before it went down")
	} else {
		k.Logf("replica-disk: %d values judged at restarts", h.replicaDisk.Judged)
	}
	h.checkConvergence(h.nodes)
	h.checkAEQuiet()
	d.report()
	return nil
}

// startWriter runs a flow's one writer until calm: read the flow, then
// write the next version, again and again, through a random node. The
// read before each write is what notices a loss: after a crash the first
// answer a client gets is a read. Half the writers of none and async
// flows write in bursts of half a second to three, with one to twelve
// seconds of quiet between, as most flows are written: a crash episode
// then finds flows that nobody has written since their copies were last
// repaired, whose repaired copies (an adoption's, an anti-entropy
// answer's) are what a restart reads back; a steady writer's next write
// rewrites them at once. Sync flows' writers are steady: their promise
// is judged by writes close to a crash, and a quiet writer makes fewer.
func (d *durability) startWriter(client uint64, f *checker.VersionedFlow, until time.Duration) {
	h := d.h
	if h.run.ClientsOff {
		return
	}
	r := h.k.Stream("workload/durability/" + f.Name)
	bursty := r.IntN(2) == 0 && f.Mode != shard.Sync
	burstEnd := time.Duration(0)
	var step func()
	next := func() { h.k.After(sim.Between(r, 0, 10*time.Millisecond), sim.EvClient, client, step) }
	step = func() {
		now := h.k.Now()
		if now >= until {
			return
		}
		if bursty && now >= burstEnd {
			quiet := time.Duration(0)
			if burstEnd > 0 {
				quiet = sim.Between(r, time.Second, 12*time.Second)
			}
			burstEnd = now + quiet + sim.Between(r, 500*time.Millisecond, 3*time.Second)
			if quiet > 0 {
				h.k.After(quiet, sim.EvClient, client, step)
				return
			}
		}
		n := h.nodes[r.IntN(len(h.nodes))]
		if _, send := opOf(h.run, "d", client); !send {
			next()
			return
		}
		d.read(client, f, n, func() {
			version := len(f.Writes) + 1
			f.Writes = append(f.Writes, checker.VersionWrite{Call: h.k.Now()})
			req := flow.Request{Flow: f.Name, Op: flow.OpSetAll, Entries: setAll(version), Mode: f.Mode}
			h.callFlow(n, client, client, req, func(_ flow.Response, err error) {
				f.Writes[version-1].Return, f.Writes[version-1].Outcome = h.k.Now(), outcomeOf(err)
				next()
			})
		})
	}
	h.k.After(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, client, step)
}

// startReader reads a flow through every node in turn from one time to
// another, retrying through refusals (an owner re-adopting after a crash).
func (d *durability) startReader(client uint64, f *checker.VersionedFlow, from, until time.Duration) {
	h := d.h
	if h.run.ClientsOff {
		return
	}
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
func (d *durability) read(client uint64, f *checker.VersionedFlow, n *sim.Machine, then func()) {
	h := d.h
	call := h.k.Now()
	h.callFlow(n, client, client, flow.Request{Flow: f.Name, Op: flow.OpGetAll, Mode: f.Mode}, func(resp flow.Response, err error) {
		if err == nil {
			version, torn := checker.SetAllVersion(resp.All, flowKeysAll)
			if torn {
				h.run.Fail("durability", "flow %s (%s) read through %s at %v is torn: %q", f.Name, f.Mode, n.Name(), call, resp.All)
			} else {
				f.Reads = append(f.Reads, checker.VersionRead{Node: n.Name(), Call: call, Return: h.k.Now(), Version: version})
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
//
// Outside a power cut, one victim in three is shut down in order (an
// operator's restart: its Close writes and fsyncs everything it holds),
// drawn from a stream of its own so the schedule stays the crashes' own:
// replica-disk holds such a node to every push it took, not only those a
// window old.
func (d *durability) scheduleCrashes(calm time.Duration) {
	h := d.h
	r := h.k.Stream("faults")
	orderly := h.k.Stream("faults/orderly")
	var episode func()
	episode = func() {
		now := h.k.Now()
		if now >= calm-3*time.Second {
			return
		}
		ord := h.run.Fault()
		var victims []*sim.Machine
		kind := ""
		switch r.IntN(3) {
		case 0:
			kind = "one node"
			victims = []*sim.Machine{h.nodes[r.IntN(len(h.nodes))]}
		case 1:
			f := d.flows[r.IntN(len(d.flows))]
			kind = "the placement of " + f.Name
			for _, id := range f.Placement {
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
		at, back := make([]time.Duration, len(victims)), make([]time.Duration, len(victims))
		shut := make([]bool, len(victims))
		for i := range victims {
			at[i] = now + sim.Between(r, 0, spread)
			back[i] = restart + sim.Between(r, 0, 300*time.Millisecond)
			last = max(last, back[i])
			if shut[i] = spread > 0 && orderly.IntN(3) == 0; shut[i] {
				kind += ", " + victims[i].Name() + " shut down in order"
			}
		}
		h.run.Inject(ord, fmt.Sprintf("crash episode: %s, back by %v", kind, last), func() {
			for i, n := range victims {
				h.k.At(at[i], sim.EvFault, xxhash.Sum64String("crash "+n.Name()), func() {
					switch {
					case !n.Up():
					case shut[i]:
						d.shutdowns++
						n.Shutdown()
					default:
						d.crashes++
						n.Crash()
					}
				})
				h.k.At(back[i], sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
					if !n.Up() {
						n.Start()
					}
				})
			}
		})
		h.k.At(last+sim.Between(r, 2*time.Second, 4*time.Second), sim.EvFault, xxhash.Sum64String("episode"), episode)
	}
	h.k.At(sim.Between(r, 2*time.Second, 4*time.Second), sim.EvFault, xxhash.Sum64String("episode"), episode)
}

// shutDownBehind: in half the runs (knob shutdown_behind), the first
// three times a node takes a push at a full writer queue (its shard's
// Behind count grows as it takes the frame: the flow waits in memory for
// room), the operator shuts it down in order at that instant, and it is
// back 300ms–2s later. Its Close must write every flow behind, however
// many turns that takes: replica-disk holds a node shut down in order to
// every push it took. The crash episodes stop a node with a flow behind
// in a few runs in a hundred; this aims at it. Its own streams.
func (d *durability) shutDownBehind(calm time.Duration) {
	h := d.h
	if !h.run.HalfTheRuns("shutdown_behind") {
		return
	}
	r := h.k.Stream("faults/shutdown-behind")
	// The shard's Behind count of each node's incarnation, as last seen.
	type seen struct{ inc, behind uint64 }
	last := map[dial.NodeID]seen{}
	aims := 0
	h.nw.WatchTaken(func(s netsim.Sending) {
		n := h.byID[s.To]
		fs := h.flows[n.Name()]
		if aims == 3 || h.k.Now() >= calm-3*time.Second || fs == nil || !n.Up() {
			return
		}
		if kind, ok := flow.PeekKind(h.plain(s.Frame)); !ok || kind != flow.FramePush {
			return
		}
		st, _ := fs.Shard()
		inc := n.Incarnation()
		was := last[s.To]
		last[s.To] = seen{inc, st.Behind}
		if st.Behind == 0 || (was.inc == inc && st.Behind == was.behind) {
			return
		}
		aims++
		down := sim.Between(r, 300*time.Millisecond, 2*time.Second)
		h.run.Inject(h.run.AimedFault(), fmt.Sprintf("orderly restart of %s with a flow behind its full writer queue (down %v)", n.Name(), down.Round(time.Millisecond)), func() {
			h.k.At(h.k.Now(), sim.EvFault, xxhash.Sum64String("shutdown-behind "+n.Name()), func() {
				if !n.Up() || n.Incarnation() != inc {
					return
				}
				d.shutdowns++
				n.Shutdown()
				h.k.At(h.k.Now()+down, sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
					if !n.Up() {
						n.Start()
					}
				})
			})
		})
	})
}

func (d *durability) report() {
	var writes, acked, reads int
	for _, f := range d.flows {
		writes += len(f.Writes)
		reads += len(f.Reads)
		for _, w := range f.Writes {
			if w.Outcome == checker.WriteOK {
				acked++
			}
		}
	}
	var fsyncs, syncAcks uint64
	for _, name := range slices.Sorted(maps.Keys(d.h.flows)) {
		st, _ := d.h.flows[name].Shard()
		fsyncs += st.Fsyncs
		syncAcks += st.SyncAcks
	}
	d.h.run.Logf("durability: writes=%d acked=%d reads=%d crashes=%d shutdowns=%d; last incarnations: fsyncs=%d sync-acks=%d",
		writes, acked, reads, d.crashes, d.shutdowns, fsyncs, syncAcks)
	d.h.run.Did("writes-acked", acked)
	d.h.run.Did("reads", reads)
	d.h.run.Did("crashes", d.crashes)
	d.h.run.Did("shutdowns", d.shutdowns)
	// The floor counts deaths: a node that halted on a failed fsync died
	// as surely as one the schedule crashed, and the durability checker
	// judges every down span alike. A seed whose disk halts its nodes
	// often leaves the crash episodes fewer live victims (seed 260).
	halts := 0
	for _, n := range d.h.nodes {
		halts += n.Halts
	}
	d.h.run.Did("deaths", d.crashes+halts)
}

// booted judges a node that comes back (replica-disk): what its disk gave
// back, read before it takes a frame, against the pushes it took before
// it went down.
func (d *durability) booted(m *sim.Machine, _ *sim.Env, nd *node.Node) {
	if len(m.Stops()) == 0 {
		return // its first boot
	}
	d.h.replicaDisk.Restarted(d.h.run, m.ID(), d.window, newCrashRecord(d.h.raftCluster), nd.Flow.Copy)
}
