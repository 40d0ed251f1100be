package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/dial"
)

// Kind is the kind of an event. It is folded into the trace hash, so the
// numbers are part of the trace format: append only.
type Kind uint8

// Event kinds.
const (
	EvDeliver Kind = iota + 1 // a frame reaches a node
	EvTimer                   // a node's timer fires
	EvClient                  // a client submits an operation, or gets an answer
	EvDisk                    // a disk operation completes
	EvFault                   // the fault schedule acts (partition, crash, clock step, ...)
	EvCheck                   // a checker looks at the cluster
)

func (k Kind) String() string {
	switch k {
	case EvDeliver:
		return "deliver"
	case EvTimer:
		return "timer"
	case EvClient:
		return "client"
	case EvDisk:
		return "disk"
	case EvFault:
		return "fault"
	case EvCheck:
		return "check"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kernel owns virtual time and the event queue of one simulated run. It is
// not safe for concurrent use: one goroutine runs the whole cluster, which
// is what makes a run a function of its seed.
type Kernel struct {
	seed   uint64
	now    time.Duration // virtual time since the run began
	seq    uint64        // tie-breaker: events at one instant run in the order scheduled
	queue  eventQueue
	free   []*event   // run or dropped events, for schedule to reuse (at most maxFreeEvents)
	timers []simTimer // the rest of the chunk newTimer hands timers from (clock.go)
	trace  *xxhash.Digest
	// traceBuf holds folded events not yet written to trace (see fold).
	traceBuf []byte
	events   uint64 // events run (cancelled and stale ones are not counted)

	nodes map[dial.NodeID]*Machine
	ids   []dial.NodeID // sorted; the only order nodes are ever visited in

	// maxEvents bounds a run: a livelocked protocol (timers rescheduling
	// themselves at the same instant) must end in a clear error, not hang.
	maxEvents uint64
	// maxRate bounds the events of any one virtual second (the second
	// that ends at rateEnd, counted in rateEvents): a message storm (every answer sending two
	// frames, say, so the frames in flight grow until the network's
	// bound) ends in a clear error within a second of virtual time,
	// instead of running millions of events to the end of the run.
	maxRate    uint64
	rateEnd    time.Duration
	rateEvents uint64

	tracef  func(format string, args ...any) // nil unless a verbose trace is wanted
	onPanic func(n *Machine, v any)          // nil: a node's panic ends the run
	// onHalt hears of a node that stopped itself (core/halt); onCarriedOn
	// of one that saw an fsync or a write fail and did not.
	onHalt      func(n *Machine, reason error)
	onCarriedOn func(n *Machine)
	// onDiskMisuse hears of a node breaking the storage contract (Disk).
	onDiskMisuse func(n *Machine, checker, what string)
	rand         *randSwitch

	// cur is the node whose code is running, nil between node calls: its
	// local time (Machine.Local) is what Now reads while it runs.
	cur *Machine
}

// Epoch is the wall reading every node clock starts from (before its
// offset). A fixed date keeps traces identical across machines and years.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultMaxEvents is the event budget of a run unless SetMaxEvents changes it.
const DefaultMaxEvents = 50_000_000

// DefaultMaxEventRate is the events any one virtual second may run unless
// SetMaxEventRate changes it. The busiest second of a correct run of any
// scenario ran 22,289 events (ttl-evict seed 63; seeds 1..200 of every
// scenario, measured when this was set): the bound is nine times that.
// The storm it was set for (election-crash seed 2 with ack-before-append:
// a follower's damaged log rejected every append, and each duplicated
// frame started one more append-and-reject loop) ran 450,000 a second,
// 13 million events and three minutes of wall time before it.
const DefaultMaxEventRate = 200_000

// New returns a kernel for the run named by seed.
func New(seed uint64) *Kernel {
	k := &Kernel{
		seed:      seed,
		trace:     xxhash.New(),
		traceBuf:  make([]byte, 0, 64*foldSize),
		nodes:     make(map[dial.NodeID]*Machine),
		maxEvents: DefaultMaxEvents,
		maxRate:   DefaultMaxEventRate,
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	_, _ = k.trace.Write(b[:])
	return k
}

// Seed is the root seed of the run.
func (k *Kernel) Seed() uint64 { return k.seed }

// Stream returns the kernel's random stream named label (see Stream).
func (k *Kernel) Stream(label string) *rand.Rand { return Stream(k.seed, label) }

// Now is virtual time since the run began. Nodes never see it: they see
// their own clocks. While a node's code runs, Now is that node's local
// time (Machine.Local): later than the event that started the call by the
// fsyncs the node has waited for in it, so the frames it sends, the
// timers it sets and the answers it gives carry the instant the fsync let
// them happen at.
func (k *Kernel) Now() time.Duration {
	if k.cur != nil {
		return k.cur.Local()
	}
	return k.now
}

// EventAt is the true instant of the event being run: Now minus EventAt
// is how long the running node's fsyncs made the event wait.
func (k *Kernel) EventAt() time.Duration { return k.now }

// Trace is the digest of every event run so far.
func (k *Kernel) Trace() uint64 {
	k.flushTrace()
	return k.trace.Sum64()
}

// Events is the number of events run so far.
func (k *Kernel) Events() uint64 { return k.events }

// SetMaxEvents sets the event budget; Run fails with ErrEventBudget past it.
func (k *Kernel) SetMaxEvents(n uint64) { k.maxEvents = n }

// SetMaxEventRate sets the events any one virtual second may run; Run
// fails with ErrEventRate past it.
func (k *Kernel) SetMaxEventRate(n uint64) { k.maxRate = n }

// SetTrace makes the kernel write a human-readable line per event to w
// (nil turns it off). The lines are for people; the hash is for machines.
func (k *Kernel) SetTrace(w io.Writer) {
	if w == nil {
		k.tracef = nil
		return
	}
	k.tracef = func(format string, args ...any) {
		fmt.Fprintf(w, "%12s ", k.Now())
		fmt.Fprintf(w, format, args...)
		fmt.Fprintln(w)
	}
}

// OnNodePanic makes a panic in a node's code crash that node (its process
// dies; its machine, clock and disk live on) and report to f, instead of
// ending the run. Scenarios turn a node's panic into a checker failure
// this way, so a sweep names it and goes on.
func (k *Kernel) OnNodePanic(f func(n *Machine, v any)) { k.onPanic = f }

// OnHalt makes f hear of every node that stops itself (core/halt): the
// kernel has crashed it, as fail-stop asks; a scenario restarts it, as a
// supervisor would.
func (k *Kernel) OnHalt(f func(n *Machine, reason error)) { k.onHalt = f }

// OnCarriedOn makes f hear of every node that saw an fsync or a write
// fail and did not stop within the step that saw it: the fail-stop rule
// broken.
func (k *Kernel) OnCarriedOn(f func(n *Machine)) { k.onCarriedOn = f }

// OnDiskMisuse registers f to hear of a node that broke the storage
// contract no fault excuses (see Disk): checker names the verdict
// ("synced-cut", "damaged-boot").
func (k *Kernel) OnDiskMisuse(f func(n *Machine, checker, what string)) { k.onDiskMisuse = f }

// Logf writes a line to the verbose trace, if one is on. It does not touch
// the hash: what is logged must already be in the events.
func (k *Kernel) Logf(format string, args ...any) {
	if k.tracef != nil {
		k.tracef(format, args...)
	}
}

// Handle is a scheduled event that can be cancelled.
//
// The kernel reuses an event's memory once it has run or been dropped, so
// a Handle names its event by sequence number too: a Handle to an event
// that is gone sees another sequence number and leaves the new one alone.
type Handle struct {
	ev  *event
	seq uint64
}

// Cancel stops the event from running. It reports whether it was pending.
func (h Handle) Cancel() bool {
	if !h.Pending() {
		return false
	}
	h.ev.done = true
	return true
}

// Pending reports whether the event has neither run nor been cancelled.
func (h Handle) Pending() bool { return h.ev != nil && h.ev.seq == h.seq && !h.ev.done }

type event struct {
	at     time.Duration
	seq    uint64
	kind   Kind
	node   dial.NodeID // the node it concerns, for the trace; zero: none
	inc    uint64      // the incarnation of node it belongs to; 0: runs regardless
	m      *Machine    // the machine of node when inc is not 0
	digest uint64      // digest of the payload, folded into the trace
	fn     func()
	done   bool // ran or cancelled
}

// At schedules fn at virtual time at (not before now) as a cluster-wide
// event: faults, client arrivals, checks. digest names its payload.
func (k *Kernel) At(at time.Duration, kind Kind, digest uint64, fn func()) Handle {
	return k.schedule(at, kind, 0, 0, nil, digest, fn)
}

// After is At(Now()+d, ...): from a node's local time while it runs.
func (k *Kernel) After(d time.Duration, kind Kind, digest uint64, fn func()) Handle {
	return k.At(k.Now()+d, kind, digest, fn)
}

// AtNode schedules a cluster-wide event that concerns node (a frame on its
// way to it, say): the node is named in the trace, but the event runs even
// if the node crashed; fn decides what that means.
func (k *Kernel) AtNode(at time.Duration, kind Kind, node dial.NodeID, digest uint64, fn func()) Handle {
	return k.schedule(at, kind, node, 0, nil, digest, fn)
}

// atNode schedules fn for the current incarnation of node n: if n crashes
// (or is down) before the event's time, the event is dropped. This is how a
// crash cancels timers, pending disk completions and frames in flight to it.
func (k *Kernel) atNode(at time.Duration, kind Kind, n *Machine, digest uint64, fn func()) Handle {
	return k.schedule(at, kind, n.id, n.inc, n, digest, fn)
}

func (k *Kernel) schedule(at time.Duration, kind Kind, node dial.NodeID, inc uint64, m *Machine, digest uint64, fn func()) Handle {
	if fn == nil {
		panic("sim: schedule without a function")
	}
	if at < k.now {
		at = k.now
	}
	k.seq++
	var ev *event
	if n := len(k.free); n > 0 {
		ev, k.free = k.free[n-1], k.free[:n-1]
	} else {
		ev = new(event)
	}
	*ev = event{at: at, seq: k.seq, kind: kind, node: node, inc: inc, m: m, digest: digest, fn: fn}
	k.queue.push(ev)
	return Handle{ev, k.seq}
}

// recycle keeps a popped event's memory for the next schedule: one
// allocation fewer per event. Its done stays set, so no Handle to it is
// pending; its next use has a new sequence number.
func (k *Kernel) recycle(ev *event) {
	ev.fn, ev.m = nil, nil // let the closure go now
	ev.done = true
	if len(k.free) < maxFreeEvents {
		k.free = append(k.free, ev)
	}
}

// maxFreeEvents bounds the kernel's list of reusable events.
const maxFreeEvents = 1 << 12

// ErrEventBudget is returned by Run when the run exceeds its event budget.
var ErrEventBudget = fmt.Errorf("sim: event budget exhausted (a livelock, or raise SetMaxEvents)")

// ErrEventRate is returned by Run when one virtual second runs more
// events than SetMaxEventRate allows.
var ErrEventRate = errors.New("sim: event rate exceeded (a message storm or a busy loop, or raise SetMaxEventRate)")

// Step runs the next event. It reports false when the queue is empty.
func (k *Kernel) Step() bool {
	for len(k.queue) > 0 {
		ev := k.queue.pop()
		if ev.done {
			k.recycle(ev)
			continue
		}
		ev.done = true
		var n *Machine
		if ev.inc != 0 {
			n = ev.m
			if n == nil || !n.up || n.inc != ev.inc {
				// The node crashed after this was scheduled: a timer of a
				// dead process, a frame to a dead socket. It never happens.
				k.recycle(ev)
				continue
			}
		}
		if ev.at < k.now {
			panic(fmt.Sprintf("sim: time went backwards: event at %v, now %v", ev.at, k.now))
		}
		k.now = ev.at
		k.events++
		if k.now >= k.rateEnd { // a new second: one comparison per event, a division per second
			k.rateEnd, k.rateEvents = k.now.Truncate(time.Second)+time.Second, 0
		}
		k.rateEvents++
		k.fold(ev)
		if n != nil {
			k.call(n, ev.fn)
		} else {
			ev.fn()
		}
		k.recycle(ev)
		return true
	}
	return false
}

// foldSize is the bytes fold adds per event.
const foldSize = 1 + 8 + 8 + 8

// fold adds one event to the trace hash: kind, node, time, payload digest.
// The bytes gather in traceBuf and reach the digest in batches: a
// streaming hash of the same bytes in the same order is the same hash,
// whatever the batches, and one Write per event was a measurable part of
// a run.
func (k *Kernel) fold(ev *event) {
	if len(k.traceBuf)+foldSize > cap(k.traceBuf) {
		k.flushTrace()
	}
	n := len(k.traceBuf)
	b := k.traceBuf[n : n+foldSize]
	b[0] = byte(ev.kind)
	binary.LittleEndian.PutUint64(b[1:], uint64(ev.node))
	binary.LittleEndian.PutUint64(b[9:], uint64(ev.at))
	binary.LittleEndian.PutUint64(b[17:], ev.digest)
	k.traceBuf = k.traceBuf[:n+foldSize]
}

// flushTrace hands the folded bytes to the digest. Everything that
// writes to or reads the digest flushes first, so bytes keep their order.
func (k *Kernel) flushTrace() {
	if len(k.traceBuf) > 0 {
		_, _ = k.trace.Write(k.traceBuf)
		k.traceBuf = k.traceBuf[:0]
	}
}

// Mix folds extra bytes into the trace hash: a checker's verdict, a
// scenario's knobs. Use it for facts not already carried by an event.
func (k *Kernel) Mix(p []byte) {
	k.flushTrace()
	_, _ = k.trace.Write(p)
}

// RunUntil runs events until virtual time would pass t (events at exactly t
// run), or the queue is empty. Afterwards Now() is t unless the queue
// emptied earlier. It fails only when the event budget runs out.
func (k *Kernel) RunUntil(t time.Duration) error {
	for len(k.queue) > 0 {
		if k.events >= k.maxEvents {
			return ErrEventBudget
		}
		if k.rateEvents >= k.maxRate {
			return fmt.Errorf("%w: %d events in the virtual second from %v", ErrEventRate, k.rateEvents, k.rateEnd-time.Second)
		}
		next := k.queue[0].ev
		if next.done {
			k.recycle(k.queue.pop())
			continue
		}
		if next.at > t {
			break
		}
		k.Step()
	}
	if k.now < t {
		k.now = t
	}
	return nil
}

// Nodes returns the ids of all nodes, sorted.
func (k *Kernel) Nodes() []dial.NodeID { return append([]dial.NodeID(nil), k.ids...) }

// Machine returns the node with the given id, or nil.
func (k *Kernel) Machine(id dial.NodeID) *Machine { return k.nodes[id] }

func (k *Kernel) addNode(n *Machine) {
	if _, dup := k.nodes[n.id]; dup {
		panic(fmt.Sprintf("sim: two nodes with id %v", n.id))
	}
	k.nodes[n.id] = n
	k.ids = append(k.ids, n.id)
	sort.Slice(k.ids, func(i, j int) bool { return k.ids[i] < k.ids[j] })
}

// eventQueue is a min-heap on (at, seq), written out rather than
// through container/heap's interface: the kernel pushes and pops every
// event, and the interface calls were a measurable part of a run. Each
// slot carries its event's key, so sifting compares without following
// a pointer per comparison.
type eventQueue []queued

type queued struct {
	at  time.Duration
	seq uint64
	ev  *event
}

func (a queued) before(b queued) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *eventQueue) push(ev *event) {
	x := queued{ev.at, ev.seq, ev}
	h := append(*q, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = x
	*q = h
}

func (q *eventQueue) pop() *event {
	h := *q
	top := h[0].ev
	n := len(h) - 1
	last := h[n]
	h[n] = queued{}
	h = h[:n]
	if n > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if r := c + 1; r < n && h[r].before(h[c]) {
				c = r
			}
			if !h[c].before(last) {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = last
	}
	*q = h
	return top
}
