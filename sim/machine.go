package sim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/dial"
)

// Network is what the kernel needs from a simulated network: a sender for
// each node. netsim provides one.
type Network interface {
	Sender(from dial.NodeID) dial.Sender
}

// Env is everything a node's code is handed when it boots: its identity,
// its clock, its peers, its disk and its random stream. It is the whole
// world as the node sees it.
type Env struct {
	ID          dial.NodeID
	Name        string
	Incarnation uint64 // 1 on first start, +2 per crash and restart
	Clock       clock.Clock
	Net         dial.Sender
	Disk        *Disk
	Rand        *rand.Rand
}

// Boot starts a node's code from what survives on its disk and returns the
// handler for frames addressed to it. It runs on every start and restart;
// whatever it keeps in memory is lost when the node crashes.
type Boot func(env *Env) dial.Handler

// Machine is one simulated machine: its clock and disk outlive crashes of the
// process that boot starts on it.
type Machine struct {
	k      *Kernel
	id     dial.NodeID
	name   string
	boot   Boot
	net    Network
	clock  *Clock
	disk   *Disk
	rand   *rand.Rand // the process's own draws
	crypto *rand.Rand // what crypto/rand.Reader yields while this node runs

	inc     uint64 // odd while up, even while down
	up      bool
	handler dial.Handler

	// busyUntil is when the node is done with the work it has been handed:
	// each fsync (simFile.Sync) moves it on by the disk's sync latency. An
	// event for the node that comes earlier runs at busyUntil instead (its
	// local time, see local), as a process blocked in fsync takes its next
	// frame, timer or client call only once the fsync returns. A step is
	// still atomic: a crash lands between steps (a power cut inside one is
	// Disk.CutPowerAfter's job), so what a step did stands even when the
	// crash comes before its fsyncs would have ended.
	busyUntil time.Duration
	// frozen is every Stall's span, for the checkers.
	frozen []span
	// stepCost is the CPU time each step of the node's code takes on its
	// one core (SetStepCost); 0, the default, makes code free.
	stepCost time.Duration

	Starts, Crashes, Halts, Shutdowns int
	steps                             uint64 // steps taken, for the invariant checks' cadence
	exiting                           bool   // in the Close of a Shutdown
	// downs is the node's crash record: when each crash happened and when
	// the node came back (zero while it is still down).
	downs []downSpan
}

// downSpan is one stop of the node's process: a crash, or an orderly
// shutdown (Shutdown), after which the disk held everything the node had
// written, since it synced before it exited.
type downSpan struct {
	from, to time.Duration
	orderly  bool
}

// AddMachine adds a machine named name to the run; it is not started. Its id is
// dial.IDFromName(name). Each node's streams are named after it, so adding a
// node does not change another node's draws.
func (k *Kernel) AddMachine(name string, boot Boot, net Network, disk DiskConfig) *Machine {
	n := &Machine{
		k:      k,
		id:     dial.IDFromName(name),
		name:   name,
		boot:   boot,
		net:    net,
		rand:   k.Stream("node/" + name),
		crypto: k.Stream("crypto/" + name),
	}
	n.clock = &Clock{n: n}
	n.disk = newDisk(n, disk, k.Stream("disk/"+name), k.Stream("disk-shape/"+name))
	k.addNode(n)
	return n
}

// ID is the node's id.
func (n *Machine) ID() dial.NodeID { return n.id }

// Name is the node's name.
func (n *Machine) Name() string { return n.name }

// Up reports whether the node's process is running.
func (n *Machine) Up() bool { return n.up }

// Clock is the node's machine clock (for faults: steps, drift).
func (n *Machine) Clock() *Clock { return n.clock }

// Disk is the node's disk (for checkers and faults).
func (n *Machine) Disk() *Disk { return n.disk }

// Incarnation counts starts and crashes: odd while up.
func (n *Machine) Incarnation() uint64 { return n.inc }

// Start boots the node's process. Starting a running node is a bug.
func (n *Machine) Start() {
	if n.up {
		panic(fmt.Sprintf("sim: start of running node %s", n.name))
	}
	n.inc++
	n.up = true
	n.Starts++
	if k := len(n.downs); k > 0 && n.downs[k-1].to == 0 {
		n.downs[k-1].to = max(n.k.now, n.downs[k-1].from)
	}
	env := &Env{
		ID:          n.id,
		Name:        n.name,
		Incarnation: n.inc,
		Clock:       n.clock,
		Net:         n.net.Sender(n.id),
		Disk:        n.disk,
		Rand:        n.rand,
	}
	n.k.Logf("%s start (incarnation %d)", n.name, n.inc)
	n.disk.bootBegin(n.Starts > 1)
	n.k.call(n, func() { n.handler = n.boot(env) })
	n.disk.bootEnd()
}

// Crash kills the node's process: its memory is gone, its timers and disk
// completions never fire, frames in flight to it are dropped, and its disk
// loses what was not synced. Crashing a node that is down does nothing.
func (n *Machine) Crash() {
	if !n.up {
		return
	}
	n.inc++
	n.up = false
	n.Crashes++
	// The crash lands after the step the node is busy in: that step's
	// frames and answers, stamped up to its local time, happened.
	n.downs = append(n.downs, downSpan{from: n.Local()})
	n.handler = nil
	n.disk.crash()
	n.k.Logf("%s crash", n.name)
}

// Shutdown stops the node in order, as an operator's restart does: the
// node's Close runs (if its handler has one), on its loop, with whatever
// disk work it waits for; then the process exits. A Close that halts or
// panics is that, a crash. The disk then keeps only what was synced, as
// after a crash: a Close that did not sync what it promised loses it,
// and the checkers, which forgive no loss at an orderly stop
// (LostUnsyncedDuring), see it.
func (n *Machine) Shutdown() {
	if !n.up {
		return
	}
	// The stop begins here: from now the node takes nothing new, and
	// its Close may keep its loop busy for long (a stalled disk), so the
	// record's span starts at the call, not where the Close ends.
	from := n.Local()
	if c, ok := n.handler.(interface{ Close() error }); ok {
		// The process exits when Close returns, whatever it returns: a
		// disk that failed the Close stops the node all the same, so the
		// step is not held to fail-stop (nor checked: nothing follows it).
		n.exiting = true
		n.k.call(n, func() { _ = c.Close() })
		n.exiting = false
		if !n.up {
			return // it halted or crashed in its Close
		}
	}
	n.Crash()
	n.downs[len(n.downs)-1].orderly = true
	n.downs[len(n.downs)-1].from = from
	n.Shutdowns++
	n.k.Logf("%s was shut down in order", n.name)
}

// Stop is one stop of the node's process, from its crash or orderly
// shutdown to the restart that followed (to now, while it is still down).
// Orderly: a Shutdown whose Close returned without the node halting, so
// the node's disk held everything it had written and synced.
type Stop struct {
	From, To time.Duration
	Orderly  bool
}

// Stops returns the node's crash record, one Stop per time it went down.
func (n *Machine) Stops() []Stop {
	out := make([]Stop, len(n.downs))
	for i, d := range n.downs {
		end := d.to
		if end == 0 {
			end = n.k.now
		}
		out[i] = Stop{From: d.from, To: end, Orderly: d.orderly}
	}
	return out
}

// FrozenDuring reports whether the node's process was stalled (Stall) at
// any instant of [from, to], by the simulator's record.
func (n *Machine) FrozenDuring(from, to time.Duration) bool { return overlaps(n.frozen, from, to) }

// FrozenSpans returns every span in which the node's process was
// stalled (Stall), in the order they began.
func (n *Machine) FrozenSpans() (from, to []time.Duration) { return spansOf(n.frozen) }

// CrashedDuring reports whether the node crashed, or was down, at any
// instant of [from, to], and the first such instant: the simulator's own
// record, for checkers that forgive what a crash may take.
func (n *Machine) CrashedDuring(from, to time.Duration) (bool, time.Duration) {
	return n.downDuring(from, to, true)
}

// LostUnsyncedDuring is CrashedDuring for crashes only: an orderly
// shutdown synced everything first, so a write it acknowledged cannot be
// lost to it. It is what a loss may be forgiven by; CrashedDuring, what
// memory (a handover received, a claim held) may be lost to.
func (n *Machine) LostUnsyncedDuring(from, to time.Duration) (bool, time.Duration) {
	return n.downDuring(from, to, false)
}

// UpSince is the instant the node last came up at or before at, by the
// simulator's record: 0 if it was never down before at. What a node knew
// before it came up, its memory, went with the crash.
func (n *Machine) UpSince(at time.Duration) time.Duration {
	var since time.Duration
	for _, d := range n.downs {
		if d.to != 0 && d.to <= at {
			since = d.to
		}
	}
	return since
}

// downDuring finds the first instant of [from, to] the node was down,
// counting orderly shutdowns only if orderly is set.
func (n *Machine) downDuring(from, to time.Duration, orderly bool) (bool, time.Duration) {
	for _, d := range n.downs {
		end := d.to
		if end == 0 {
			end = n.k.now
		}
		if (orderly || !d.orderly) && d.from <= to && end >= from {
			return true, max(d.from, from)
		}
	}
	return false, 0
}

// Local is the node's own time: the true instant its code is at, which
// runs ahead of the kernel's while the node is busy in fsyncs, and so the
// instant at which an event that came for it now would run. A watcher that
// sees a frame delivered learns from it when the node takes the frame.
func (n *Machine) Local() time.Duration { return max(n.busyUntil, n.k.now) }

// Stall freezes the node's process for d, as a long GC pause, a virtual
// machine's stolen time or SIGSTOP would: whatever comes for it meanwhile
// is taken once the stall ends, in order, and its timers fire late, so a
// count of its ticks measures less time than has passed. A stall of a
// node that is down does nothing.
func (n *Machine) Stall(d time.Duration) {
	if n.up && d > 0 {
		n.frozen = append(n.frozen, span{n.Local(), n.Local() + d})
		n.busyUntil = n.Local() + d
		n.k.Logf("%s stalled until %v", n.name, n.busyUntil)
	}
}

// SetStepCost gives the node one core on which each step of its code (a
// frame handled, a timer fired, a client call taken) takes d: the node
// is busy for d after each, and what comes for it meanwhile waits its
// turn, as on a saturated core. It survives crashes (it is the machine's
// CPU, not the process's). The default, 0, makes code free, which is what
// every scenario runs with: the model is for measuring how a fleet's
// throughput scales with its cores (scenarios.MeasureFleet), not for
// judging correctness, and a cost would change every trace.
func (n *Machine) SetStepCost(d time.Duration) { n.stepCost = max(d, 0) }

// Steps is how many steps the node's code has taken, over every
// incarnation: with SetStepCost, how busy its core has been.
func (n *Machine) Steps() uint64 { return n.steps }

// Receive hands a frame to the node if the incarnation it was sent to is
// still running. Networks call it when a frame arrives.
func (n *Machine) Receive(from dial.NodeID, frame []byte, inc uint64) bool {
	if !n.up || n.inc != inc || n.handler == nil {
		return false
	}
	n.k.receive(n, from, frame)
	return true
}

// Exec runs f as the node (on its loop, with its random streams), if the node
// is up. Client operations enter a node through it.
func (n *Machine) Exec(f func()) bool {
	if !n.up {
		return false
	}
	n.k.call(n, f)
	return true
}

// FrameDigest names a frame in the trace: sender, receiver and bytes.
func FrameDigest(from, to dial.NodeID, frame []byte) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], uint64(from))
	binary.LittleEndian.PutUint64(b[8:], uint64(to))
	d := xxhash.New()
	_, _ = d.Write(b[:])
	_, _ = d.Write(frame)
	return d.Sum64()
}
