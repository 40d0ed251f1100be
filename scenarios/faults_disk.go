package scenarios

import (
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/halt"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/sim"
)

// Disk faults every scenario with a disk draws: tears that keep a prefix
// or a random subset of the unsynced blocks, fsyncs that fail (and drop
// what they were to make durable), and writes that fail. A node that sees
// a storage error stops (core/halt); a supervisor restarts it a moment
// later; one that carries on after a failed fsync fails the fail-stop
// checker.

// drawDisk draws base's fault rates from the run's "knobs/disk" stream
// (its own, so other knobs keep their draws) and reports them as a knob.
// syncFailMax bounds the fsync failure rate: scenarios that fsync often
// keep it small, so halts stay a fault among others rather than the run.
// I/O errors stop at calm, where every fault stops.
func drawDisk(run *Run, base sim.DiskConfig, syncFailMax float64, calm time.Duration) sim.DiskConfig {
	r := run.Kernel.Stream("knobs/disk")
	d := base
	d.TornWriteProb = float64(r.IntN(5)) / 4
	if r.IntN(2) == 0 {
		d.SyncFailProb = syncFailMax * float64(1+r.IntN(4)) / 4
		d.WriteFailProb = d.SyncFailProb / 4
	}
	d.FaultsUntil = calm
	// How long an fsync keeps a node busy: a fast NVMe disk, the
	// default, or a slow volume (a spinning disk, a throttled cloud
	// disk), where a loop blocked in fsyncs runs its timers late.
	switch r.IntN(3) {
	case 0:
		d.SyncLatencyMin, d.SyncLatencyMax = 50*time.Microsecond, time.Millisecond
	case 2:
		d.SyncLatencyMin, d.SyncLatencyMax = 2*time.Millisecond, 25*time.Millisecond
	}
	run.Knob("disk", diskKnob(d))
	return d
}

func diskKnob(d sim.DiskConfig) string {
	return fmt.Sprintf("torn=%.2f sync_fail=%.4f write_fail=%.4f until=%v fsync=%v..%v", d.TornWriteProb, d.SyncFailProb, d.WriteFailProb, d.FaultsUntil, d.SyncLatencyMin, d.SyncLatencyMax)
}

// aimIOErrors arms, at moments drawn before until, I/O errors a few
// writes or fsyncs ahead on each node (sim.Disk.FailAfter): one to four
// per node, 1 to 48 operations ahead, so that they land on whatever the
// node writes then, a boot's or a compaction's writes as often as the
// steady stream of a shard's commits, and in a third of runs one node's
// first boot. Rates alone (drawDisk) almost only
// ever hit the steady stream. Drawn from their own stream, in runs that
// draw I/O errors at all. Each is a fault of the schedule (Run.Inject),
// so a shrink can leave it out.
func aimIOErrors(run *Run, nodes []*sim.Machine, until time.Duration) {
	k := run.Kernel
	r := k.Stream("knobs/io-aimed")
	aimed := 0
	for _, n := range nodes {
		for range 1 + r.IntN(4) {
			n, at, ops := n, sim.Between(r, 0, until), 1+r.IntN(48)
			aimed++
			k.At(at, sim.EvFault, xxhash.Sum64String("io-aimed "+n.Name()), func() {
				run.Inject(run.Fault(), fmt.Sprintf("I/O error at %s's %d-th next write or fsync", n.Name(), ops), func() {
					n.Disk().FailAfter(ops)
				})
			})
		}
	}
	// A node's first boot writes what it never writes again: its
	// journal's files, a founder's bootstrap snapshot, its boot counter.
	// The aims above come after every node has booted, so in a third of
	// the runs one node's disk fails one of its first six writes or
	// fsyncs, armed before the run starts. Its own stream: the draws
	// above are the same with or without it.
	rb := k.Stream("knobs/io-boot")
	if rb.IntN(3) == 0 {
		n, ops := nodes[rb.IntN(len(nodes))], 1+rb.IntN(6)
		aimed++
		run.Inject(run.Fault(), fmt.Sprintf("I/O error at %s's %d-th write or fsync from its first boot", n.Name(), ops), func() {
			n.Disk().FailAfter(ops)
		})
	}
	run.Knob("io_aimed", aimed)
}

// aimDiskStalls stalls disks (sim.Disk.Stall), in half the runs of a
// scenario that opts in (Scenario.DiskStalls): one to three stalls, each
// of one node's disk at a moment drawn before until, for 0.3 to 3
// seconds, cut short at until — a cloud volume re-attaching, a controller resetting, a
// device busy with its own garbage collection. Meanwhile the node runs,
// its writes land in the page cache, and nothing it hands the disk
// completes: its sync writes, its clock floors, its raft journal all
// wait. A stall longer than the flow Deadline is what the shard's
// MaxWait is for: an owner that held a sync request for as long as the
// disk took would leave it unanswered past its caller's deadline
// (request-answered; planted bug untimed-waits). Drawn from its own
// stream; each stall is a fault of the schedule (Run.Inject).
func aimDiskStalls(run *Run, nodes []*sim.Machine, until time.Duration) {
	if !run.diskStalls {
		return
	}
	k := run.Kernel
	r := k.Stream("knobs/disk-stalls")
	stalls := 0
	if r.IntN(2) == 0 {
		stalls = 1 + r.IntN(3)
	}
	run.Knob("disk_stalls", stalls)
	for range stalls {
		n, at, d := nodes[r.IntN(len(nodes))], sim.Between(r, 0, until), sim.Between(r, 300*time.Millisecond, 3*time.Second)
		d = min(d, until-at) // like every fault, over by calm
		k.At(at, sim.EvFault, xxhash.Sum64String("disk-stall "+n.Name()), func() {
			run.Inject(run.Fault(), fmt.Sprintf("%s's disk stalls for %v", n.Name(), d), func() {
				n.Disk().Stall(d)
			})
		})
	}
}

// supervise restarts every node that halts, after a short pause drawn
// from the "supervisor" stream, as systemd would, unless an operator has
// retired it meanwhile (Run.Retire); and fails the run when a node halted
// for no fault of its disk (halt-cause), or saw an fsync or a write fail
// and carried on (fail-stop).
func supervise(run *Run) {
	k := run.Kernel
	r := k.Stream("supervisor")
	k.OnHalt(func(n *sim.Machine, reason error) {
		run.Did("halts", 1)
		// A node stops itself only for its disk: a failed write or
		// fsync, a full disk, a damaged read at boot (haltOnIO). A halt
		// for anything else is a defence that failed where it should
		// have refused (a peer's snapshot written before it was read).
		if !errors.Is(reason, sim.ErrIO) && !errors.Is(reason, sim.ErrNoSpace) && !(errors.Is(reason, recfile.ErrCorrupt) && n.Disk().BootReadDamaged()) {
			run.Fail("halt-cause", "%s halted for no fault of its disk: %v", n.Name(), reason)
		}
		k.After(sim.Between(r, 100*time.Millisecond, time.Second), sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
			if !n.Up() && !run.retired[n.ID()] {
				n.Start()
			}
		})
	})
	k.OnCarriedOn(func(n *sim.Machine) {
		run.Fail("fail-stop", "%s saw an fsync or a write fail and carried on: the disk may not hold what it wrote", n.Name())
	})
	k.OnDiskMisuse(func(_ *sim.Machine, checker, what string) {
		run.Fail(checker, "%s", what)
	})
}

// haltOnIO stops a booting node whose disk failed it, or whose boot read
// a record header the disk damaged (sim.Disk.FaultBoots) and refused it,
// as it must: the boot is retried by the supervisor, like any halt, and
// reads the disk whole. Other boot errors are returned.
func haltOnIO(err error, disk *sim.Disk) error {
	if errors.Is(err, sim.ErrIO) || disk.BootReadDamaged() && errors.Is(err, recfile.ErrCorrupt) {
		halt.Stop(err)
	}
	return err
}

// aimBootFaults faults the record files' readers, in half the runs of a
// scenario that opts in (Scenario.BootFaults, knob boot_faults):
//
//   - every restart before calm reads one record header of the raft
//     journal damaged with chance 1/4 (half the time with one of the two
//     reads after it failing too), or fails one of its first reads with
//     chance 1/4 (sim.Disk.FaultBoots). Crashes never damage a
//     header with whole records after it, so without this no run asked a
//     reader to refuse damage rather than cut it. The flow shard's log is
//     left out: a node moves a damaged one aside and starts empty
//     (node.openShardLog), a loss of that copy the flow checkers would
//     have to be told of;
//   - one to three power cuts aimed at the first write, within 2 s, that
//     leaves a file's unsynced bytes across a block boundary, each crash
//     leaving a hole under a record (sim.Disk.CutAtStraddle), the node
//     back 300 ms to 2 s later. A node syncs every few hundred bytes, so
//     a tear drawn at any crash almost never spans two blocks: 2 of 206
//     tears by blocks left a hole before (seeds 1..30 of journal-crash,
//     durability-restart and kernel-selftest).
//
// A cut lands only on a node that is up while every other is, as the
// journal-crash cuts keep a quorum. Drawn from their own streams.
func aimBootFaults(run *Run, nodes []*sim.Machine, journal string, until time.Duration) {
	if !run.bootFaults || !run.HalfTheRuns("boot_faults") {
		return
	}
	for _, n := range nodes {
		n.Disk().FaultBoots(0.25, 0.25, journal)
	}
	k := run.Kernel
	r := k.Stream("faults/boot-faults")
	for range 1 + r.IntN(3) {
		n, at, pause := nodes[r.IntN(len(nodes))], sim.Between(r, 0, until), sim.Between(r, 300*time.Millisecond, 2*time.Second)
		k.At(at, sim.EvFault, xxhash.Sum64String("straddle "+n.Name()), func() {
			if !n.Up() || downOrArmed(nodes) > 0 {
				return
			}
			run.Inject(run.Fault(), fmt.Sprintf("power cut %s at its first write across a block boundary within 2s (back %v after)", n.Name(), pause), func() {
				n.Disk().CutAtStraddle()
				restartAfterCut(k, n, pause, until)
				// A node whose files stay small (a journal compacted
				// every few entries) may never straddle: the aim lapses,
				// and stops counting as a node about to go down.
				inc := n.Incarnation()
				k.After(2*time.Second, sim.EvFault, xxhash.Sum64String("straddle lapses "+n.Name()), func() {
					if n.Incarnation() == inc {
						n.Disk().CancelStraddle()
					}
				})
			})
		})
	}
}

// downOrArmed counts the nodes that are down or carry an armed power cut:
// a scenario that keeps a quorum up counts a cut about to land as down.
func downOrArmed(nodes []*sim.Machine) int {
	n := 0
	for _, node := range nodes {
		if !node.Up() || node.Disk().PowerCutArmed() {
			n++
		}
	}
	return n
}

// restartAfterCut restarts n pause after an armed power cut has taken it
// down, looking every 50ms until calm: the cut lands at the node's next
// few disk operations, whenever those come. The caller draws the pause
// before the cut is injected (Run.Inject), so that a skipped cut draws it
// too.
func restartAfterCut(k *sim.Kernel, n *sim.Machine, pause, calm time.Duration) {
	inc := n.Incarnation()
	var watch func()
	watch = func() {
		if n.Incarnation() != inc {
			if !n.Up() {
				k.After(pause, sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
					if !n.Up() {
						n.Start()
					}
				})
			}
			return
		}
		if k.Now() < calm {
			k.After(50*time.Millisecond, sim.EvFault, xxhash.Sum64String("watch "+n.Name()), watch)
		}
	}
	k.After(50*time.Millisecond, sim.EvFault, xxhash.Sum64String("watch "+n.Name()), watch)
}
