// Package netsim is the simulated network behind the dial seam: latency with
// jitter, loss, duplication, reordering, a bound on frames in flight per
// link, and partitions of any shape, one-way ones included. Every choice it
// makes comes from the run's "net" stream.
package netsim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

// Config is the network's behaviour for one run. Every field is printed
// with the run's knobs.
type Config struct {
	LatencyMin, LatencyMax time.Duration // one-way delay, uniform in [min, max]
	Loss                   float64       // chance a frame is dropped
	Dup                    float64       // chance a frame is delivered twice
	Reorder                float64       // chance a frame is held back by up to ReorderMax
	ReorderMax             time.Duration
	// MaxInFlight bounds frames in flight on one directed link. Send past
	// it returns dial.ErrUnreachable, as a real sender whose socket buffer
	// is full would: the bound is what keeps a chatty node from growing
	// the event queue without limit.
	MaxInFlight int
}

// DefaultConfig is a healthy LAN.
var DefaultConfig = Config{
	LatencyMin:  200 * time.Microsecond,
	LatencyMax:  2 * time.Millisecond,
	MaxInFlight: 4096,
}

// Draw picks a network for a run: mostly healthy, sometimes lossy and slow.
func Draw(r *rand.Rand) Config {
	c := DefaultConfig
	c.LatencyMin = sim.Between(r, 100*time.Microsecond, 2*time.Millisecond)
	c.LatencyMax = c.LatencyMin + sim.Between(r, 0, 20*time.Millisecond)
	if sim.Chance(r, 0.7) {
		c.Loss = float64(r.IntN(11)) / 100 // 0–10%
	}
	if sim.Chance(r, 0.5) {
		c.Dup = float64(r.IntN(6)) / 100 // 0–5%
	}
	if sim.Chance(r, 0.5) {
		c.Reorder = float64(r.IntN(21)) / 100 // 0–20%
		c.ReorderMax = sim.Between(r, time.Millisecond, 50*time.Millisecond)
	}
	return c
}

func (c Config) String() string {
	return fmt.Sprintf("latency=%v..%v loss=%.2f dup=%.2f reorder=%.2f reorder_max=%v max_in_flight=%d",
		c.LatencyMin, c.LatencyMax, c.Loss, c.Dup, c.Reorder, c.ReorderMax, c.MaxInFlight)
}

type link struct{ from, to dial.NodeID }

// linkChange is one entry of the partition record.
type linkChange struct {
	at      time.Duration
	l       link
	blocked bool
}

func (nw *Network) setBlocked(l link, blocked bool) {
	if nw.blocked[l] == blocked {
		return
	}
	if blocked {
		nw.blocked[l] = true
	} else {
		delete(nw.blocked, l)
	}
	now := nw.k.Now()
	// A block undone at the instant it was made never cut anything (a
	// partition shape built in two strokes): drop it from the record.
	for i := len(nw.cuts) - 1; i >= 0 && nw.cuts[i].at == now; i-- {
		if nw.cuts[i].l == l {
			nw.cuts = append(nw.cuts[:i], nw.cuts[i+1:]...)
			return
		}
	}
	nw.cuts = append(nw.cuts, linkChange{at: now, l: l, blocked: blocked})
}

// CutDuring reports whether the link from one node to another was blocked
// at any instant of [from, to], by the network's own record.
func (nw *Network) CutDuring(a, b dial.NodeID, from, to time.Duration) bool {
	l := link{a, b}
	blocked := false
	for _, c := range nw.cuts {
		if c.at > to {
			break
		}
		if c.l != l {
			continue
		}
		blocked = c.blocked
		if blocked && c.at >= from {
			return true
		}
	}
	return blocked
}

// Network is a simulated network for one kernel.
type Network struct {
	k        *sim.Kernel
	cfg      Config
	rng      *rand.Rand
	blocked  map[link]bool
	inFlight map[link]int
	shape    string // the partition in force, for traces
	drop     func(from, to dial.NodeID, frame []byte) bool
	rewrite  []func(from, to dial.NodeID, frame []byte) []byte
	lag      func(from, to dial.NodeID, frame []byte) time.Duration
	slow     map[dial.NodeID]time.Duration // extra one-way delay for every frame to or from a node
	watchers []func(Sending)
	// takenWatchers see a delivered copy after its node's handler ran.
	takenWatchers []func(Sending)
	// cuts is the record of every link's blocking and unblocking, in time
	// order: the partition schedule, for checkers.
	cuts []linkChange
	// downErrs is the error a send to each crashed node returns, made
	// once per node: an error is only read, and a crashed node is sent to
	// often (every call of every client that picked it).
	downErrs map[dial.NodeID]error
	// freeDeliveries are deliveries that have run, for reuse.
	freeDeliveries []*delivery

	// Counters.
	Sent, Delivered, Dropped, Duplicated, Refused uint64
}

// New returns a network on k with the given behaviour.
func New(k *sim.Kernel, cfg Config) *Network {
	if cfg.LatencyMax < cfg.LatencyMin {
		panic(fmt.Sprintf("netsim: latency max %v < min %v", cfg.LatencyMax, cfg.LatencyMin))
	}
	if cfg.MaxInFlight <= 0 {
		panic("netsim: MaxInFlight must be positive")
	}
	return &Network{
		k:        k,
		cfg:      cfg,
		rng:      k.Stream("net"),
		blocked:  map[link]bool{},
		inFlight: map[link]int{},
		slow:     map[dial.NodeID]time.Duration{},
		shape:    "none",
	}
}

// Config is the network's behaviour.
func (nw *Network) Config() Config { return nw.cfg }

// Sender returns the dial.Sender of node from.
func (nw *Network) Sender(from dial.NodeID) dial.Sender { return sender{nw, from} }

type sender struct {
	nw   *Network
	from dial.NodeID
}

func (s sender) Send(to dial.NodeID, frame []byte) error { return s.nw.send(s.from, to, frame) }

func (nw *Network) send(from, to dial.NodeID, frame []byte) error {
	if err := dial.CheckFrame(frame); err != nil {
		return err
	}
	var meant []byte
	for _, rw := range nw.rewrite {
		if b := rw(from, to, frame); b != nil {
			if err := dial.CheckFrame(b); err != nil {
				return err
			}
			meant, frame = frame, b
			break
		}
	}
	if from == to {
		// A real node has no link to itself (realnet's transport knows
		// no address for its own id): code that sends itself a frame must
		// not work here only.
		return fmt.Errorf("%w: a node has no link to itself", dial.ErrUnreachable)
	}
	dst := nw.k.Machine(to)
	if dst == nil {
		return fmt.Errorf("%w: no node %v", dial.ErrUnreachable, to)
	}
	if !dst.Up() {
		// A crashed process refuses connections at once, as a real
		// peer's kernel answers with a reset; a partition, below, is
		// silent instead.
		nw.Refused++
		nw.watched(Sending{From: from, To: to, Frame: frame, Meant: meant, At: nw.k.Now(), Fate: Refused})
		err, ok := nw.downErrs[to]
		if !ok {
			if nw.downErrs == nil {
				nw.downErrs = map[dial.NodeID]error{}
			}
			err = fmt.Errorf("%w: %v is down", dial.ErrUnreachable, to)
			nw.downErrs[to] = err
		}
		return err
	}
	l := link{from, to}
	if nw.inFlight[l] >= nw.cfg.MaxInFlight {
		nw.Refused++
		nw.watched(Sending{From: from, To: to, Frame: frame, Meant: meant, At: nw.k.Now(), Fate: Refused})
		return fmt.Errorf("%w: %d frames in flight to %v", dial.ErrUnreachable, nw.inFlight[l], to)
	}
	nw.Sent++
	// A partition or loss is silent: a real sender cannot tell a frame
	// that was dropped on the wire from one that is still on its way.
	if nw.blocked[l] || sim.Chance(nw.rng, nw.cfg.Loss) || (nw.drop != nil && nw.drop(from, to, frame)) {
		nw.Dropped++
		sent := Sending{From: from, To: to, Frame: frame, Meant: meant, At: nw.k.Now(), Copies: 1, Fate: Sent}
		nw.watched(sent)
		sent.Copies, sent.Fate = 0, Lost
		nw.watched(sent)
		return nil
	}
	copies := 1
	if sim.Chance(nw.rng, nw.cfg.Dup) {
		copies = 2
		nw.Duplicated++
	}
	inc := dst.Incarnation() // a frame is for the process that is running now
	digest := sim.FrameDigest(from, to, frame)
	// Every copy's delay is drawn first (in the order they always were),
	// so the record a delivery reports is final before any is scheduled:
	// each delivery's closure then holds it by value, one allocation
	// per copy.
	var delays [2]time.Duration
	var arriveBy time.Duration
	for i := 0; i < copies; i++ {
		delay := sim.Between(nw.rng, nw.cfg.LatencyMin, nw.cfg.LatencyMax) + nw.slow[from] + nw.slow[to]
		if sim.Chance(nw.rng, nw.cfg.Reorder) {
			delay += sim.Between(nw.rng, 0, nw.cfg.ReorderMax)
		}
		delays[i] = delay
		arriveBy = max(arriveBy, nw.k.Now()+delay)
	}
	if nw.lag != nil && copies == 1 {
		if lag := nw.lag(from, to, frame); lag > 0 {
			copies, delays[1] = 2, delays[0]+lag
			arriveBy = nw.k.Now() + delays[1]
			nw.Duplicated++
		}
	}
	sent := Sending{From: from, To: to, Frame: frame, Meant: meant, At: nw.k.Now(), ArriveBy: arriveBy, Copies: copies, Fate: Sent}
	for i := 0; i < copies; i++ {
		nw.inFlight[l]++
		d := nw.newDelivery()
		d.sent, d.l, d.dst, d.inc = sent, l, dst, inc
		nw.k.AtNode(nw.k.Now()+delays[i], sim.EvDeliver, to, digest, d.fn)
	}
	nw.watched(sent)
	return nil
}

// delivery is one copy of a frame on its way: the event that delivers it.
// Deliveries are reused once they have run (the kernel keeps no event's
// function past its run), so a copy on the wire costs no allocation.
type delivery struct {
	nw   *Network
	fn   func() // d.run, bound once
	sent Sending
	l    link
	dst  *sim.Machine
	inc  uint64
}

// maxFreeDeliveries bounds the network's list of reusable deliveries.
const maxFreeDeliveries = 1 << 12

func (nw *Network) newDelivery() *delivery {
	if n := len(nw.freeDeliveries); n > 0 {
		d := nw.freeDeliveries[n-1]
		nw.freeDeliveries = nw.freeDeliveries[:n-1]
		return d
	}
	d := &delivery{nw: nw}
	d.fn = d.run
	return d
}

func (d *delivery) run() {
	nw, sent, l, dst, inc := d.nw, d.sent, d.l, d.dst, d.inc
	d.sent, d.dst = Sending{}, nil // let the frame go
	if len(nw.freeDeliveries) < maxFreeDeliveries {
		nw.freeDeliveries = append(nw.freeDeliveries, d)
	}
	nw.inFlight[l]--
	// A partition that formed while the frame was in flight
	// drops it too: the wire between them is cut.
	fate := sent
	fate.Fate = Lost
	if nw.blocked[l] {
		nw.Dropped++
		nw.watched(fate)
		return
	}
	// The fate is known before the node runs: a watcher sees the
	// delivery before whatever the node does with the frame.
	if !dst.Up() || dst.Incarnation() != inc {
		nw.Dropped++
		nw.watched(fate)
		return
	}
	fate.Fate = Delivered
	nw.watched(fate)
	if dst.Receive(fate.From, fate.Frame, inc) {
		nw.Delivered++
		for _, w := range nw.takenWatchers {
			w(fate)
		}
	} else {
		nw.Dropped++
	}
}

// Fate is what became of a frame, or of one copy of it.
type Fate uint8

// Fates, in the order a watcher sees them: Sent once per frame Send
// accepted, then Delivered or Lost once per copy (a duplicated frame has
// two), or Lost at once when the network dropped it on the wire; or
// Refused, alone, for a frame Send returned an error for (its target
// down, or too many frames in flight to it): the sender tried, and knows
// it failed.
const (
	Sent Fate = iota + 1
	Delivered
	Lost
	Refused
)

// Sending is the network's record of one frame Send accepted: who sent it
// to whom, when, and the latest virtual time any copy of it can arrive
// (zero when the network dropped it on the spot: a partition, loss or a
// DropIf); then, for each copy, whether it was delivered or lost.
type Sending struct {
	From, To dial.NodeID
	Frame    []byte // the bytes on the wire; read, never keep or change
	// Meant is what the sender handed the network when a rewrite
	// (RewriteIf) put other bytes on the wire; nil when the wire carries
	// the sender's own. A watcher that records what a node did (it
	// answered) reads Meant; one that records what a node can have taken
	// reads Frame.
	Meant    []byte
	At       time.Duration
	ArriveBy time.Duration
	Copies   int // how many copies will be Delivered or Lost (Sent only)
	Fate     Fate
}

// Watch registers f to see every frame Send accepts: as it is sent, and as
// each copy is delivered or lost; and every frame it refuses. It is the simulator's own record of what
// may still reach a node and of what did, which a checker trusts where it
// would not trust a node's word: a request the network can no longer
// deliver can no longer take effect.
func (nw *Network) Watch(f func(Sending)) { nw.watchers = append(nw.watchers, f) }

// WatchTaken registers f to see each delivered copy again once its node
// has run its handler on it, within the same step: a checker that reads
// what the node made of a frame reads it before anything else can change
// it.
func (nw *Network) WatchTaken(f func(Sending)) { nw.takenWatchers = append(nw.takenWatchers, f) }

func (nw *Network) watched(s Sending) {
	for _, w := range nw.watchers {
		w(s)
	}
}

// DropIf installs a filter that drops, silently, every frame it returns
// true for: a scenario's targeted loss (say, only replication pushes). It
// runs after the partition and loss checks; nil removes it.
func (nw *Network) DropIf(f func(from, to dial.NodeID, frame []byte) bool) { nw.drop = f }

// RewriteIf adds a function that may replace a frame as it is sent:
// what a sender whose memory or code garbled the bytes before they left
// would put on the wire. It returns a new frame (never the one it was
// given, changed: a sent frame may be shared) or nil to leave it be.
// Functions run in the order added, and the first new frame is the one
// sent. The network's record (Watch) holds what went on the wire, and
// what the sender meant.
func (nw *Network) RewriteIf(f func(from, to dial.NodeID, frame []byte) []byte) {
	nw.rewrite = append(nw.rewrite, f)
}

// LagIf installs a function that may give a frame a second copy,
// delivered lag after the first: a duplicate that arrives late, as a
// frame sent again after a reconnect does, long after its answer came.
// It returns 0 to leave the frame be; it is not asked of a frame the
// network duplicates already, nor of one it drops. nil removes it.
func (nw *Network) LagIf(f func(from, to dial.NodeID, frame []byte) time.Duration) { nw.lag = f }

// Slow adds d to the delay of every frame to or from node id: a node
// behind a congested link, or one too busy to read its socket.
func (nw *Network) Slow(id dial.NodeID, d time.Duration) { nw.slow[id] = d }

// InFlight is the number of frames in flight from one node to another.
func (nw *Network) InFlight(from, to dial.NodeID) int { return nw.inFlight[link{from, to}] }

// Block cuts the link from one node to another (one way).
func (nw *Network) Block(from, to dial.NodeID) { nw.setBlocked(link{from, to}, true) }

// Reachable reports whether frames from one node to another can arrive.
func (nw *Network) Reachable(from, to dial.NodeID) bool { return !nw.blocked[link{from, to}] }

// Heal restores every link.
func (nw *Network) Heal() {
	ls := make([]link, 0, len(nw.blocked))
	for l := range nw.blocked {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].from != ls[j].from {
			return ls[i].from < ls[j].from
		}
		return ls[i].to < ls[j].to
	})
	for _, l := range ls {
		nw.setBlocked(l, false)
	}
	nw.shape = "none"
	nw.k.Logf("net heal")
}

// Shape describes the partition in force.
func (nw *Network) Shape() string { return nw.shape }

// Split cuts every link between different groups, both ways. Nodes in no
// group are cut off from everyone.
func (nw *Network) Split(ids []dial.NodeID, groups ...[]dial.NodeID) {
	group := map[dial.NodeID]int{}
	for i, g := range groups {
		for _, id := range g {
			group[id] = i + 1
		}
	}
	for _, a := range ids {
		for _, b := range ids {
			if a != b && (group[a] == 0 || group[a] != group[b]) {
				nw.Block(a, b)
			}
		}
	}
}

// OneWay cuts every link from a node in from to a node in to; replies still
// flow the other way.
func (nw *Network) OneWay(from, to []dial.NodeID) {
	for _, a := range from {
		for _, b := range to {
			if a != b {
				nw.Block(a, b)
			}
		}
	}
}

// Ring lets each node reach only its neighbours in the given order.
func (nw *Network) Ring(order []dial.NodeID) {
	n := len(order)
	pos := map[dial.NodeID]int{}
	for i, id := range order {
		pos[id] = i
	}
	for _, a := range order {
		for _, b := range order {
			d := (pos[a] - pos[b] + n) % n
			if a != b && d != 1 && d != n-1 {
				nw.Block(a, b)
			}
		}
	}
}

// Partition shapes that RandomPartition draws.
const (
	ShapeIsolate  = "isolate"    // one node cut off both ways
	ShapeSplit    = "split"      // majority | minority
	ShapeOneWay   = "one-way"    // one node cannot send to the rest (it still hears them)
	ShapeOneWayIn = "one-way-in" // one node cannot hear the rest (it can still send)
	ShapeRing     = "ring"       // each node reaches only its two neighbours
	ShapeBridge   = "bridge"     // two halves that reach each other only through one node
)

// Shapes lists the partition shapes RandomPartition draws from.
var Shapes = []string{ShapeIsolate, ShapeSplit, ShapeOneWay, ShapeOneWayIn, ShapeRing, ShapeBridge}

// RandomPartition heals, then applies a partition of a random shape over
// ids, and returns its description.
func (nw *Network) RandomPartition(r *rand.Rand, ids []dial.NodeID) string {
	p := nw.DrawPartition(r, ids, Shapes)
	p.Apply()
	return p.Desc
}

// Partition is a drawn partition, not yet in place: its description and
// how to put it in place. Drawing and applying are apart so that a
// scenario can draw a partition and then leave it out (a skipped fault)
// having drawn the same random numbers.
type Partition struct {
	Desc  string
	apply func()
}

// Apply heals the network, then puts the partition in place.
func (p Partition) Apply() { p.apply() }

// DrawPartition draws a partition over ids, of one of shapes (a shape
// that needs three nodes falls back to isolate with fewer). It draws the
// same random numbers whatever shapes allows, so a run that narrows its
// shapes keeps the rest of its draws.
func (nw *Network) DrawPartition(r *rand.Rand, ids []dial.NodeID, shapes []string) Partition {
	ids = append([]dial.NodeID(nil), ids...)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	shape := shapes[r.IntN(len(shapes))]
	if len(ids) < 3 && (shape == ShapeRing || shape == ShapeBridge) {
		shape = ShapeIsolate
	}
	var desc string
	var cut func()
	switch shape {
	case ShapeIsolate:
		cut = func() { nw.Split(ids, ids[1:]) }
		desc = fmt.Sprintf("%s %s", shape, nw.name(ids[0]))
	case ShapeSplit:
		minority := max(1, (len(ids)-1)/2)
		cut = func() { nw.Split(ids, ids[:minority], ids[minority:]) }
		desc = fmt.Sprintf("%s %s | %s", shape, nw.names(ids[minority:]), nw.names(ids[:minority]))
	case ShapeOneWay:
		cut = func() { nw.OneWay(ids[:1], ids[1:]) }
		desc = fmt.Sprintf("%s %s -/-> rest", shape, nw.name(ids[0]))
	case ShapeOneWayIn:
		cut = func() { nw.OneWay(ids[1:], ids[:1]) }
		desc = fmt.Sprintf("%s rest -/-> %s", shape, nw.name(ids[0]))
	case ShapeRing:
		cut = func() { nw.Ring(ids) }
		desc = fmt.Sprintf("%s %s", shape, nw.names(ids))
	case ShapeBridge:
		half := (len(ids) - 1) / 2
		left, right := ids[1:1+half], ids[1+half:]
		cut = func() {
			nw.Split(ids, append([]dial.NodeID{ids[0]}, left...), append([]dial.NodeID{ids[0]}, right...))
			// Split put the bridge in both groups; group membership is
			// last-wins, so unblock the bridge's links explicitly.
			for _, b := range ids[1:] {
				nw.setBlocked(link{ids[0], b}, false)
				nw.setBlocked(link{b, ids[0]}, false)
			}
		}
		desc = fmt.Sprintf("%s %s <-%s-> %s", shape, nw.names(left), nw.name(ids[0]), nw.names(right))
	default:
		panic(fmt.Sprintf("netsim: unknown partition shape %q", shape))
	}
	return Partition{Desc: desc, apply: func() {
		nw.Heal()
		cut()
		nw.shape = desc
		nw.k.Logf("net partition %s", desc)
	}}
}

func (nw *Network) name(id dial.NodeID) string {
	if n := nw.k.Machine(id); n != nil {
		return n.Name()
	}
	return id.String()
}

func (nw *Network) names(ids []dial.NodeID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = nw.name(id)
	}
	return "{" + strings.Join(s, " ") + "}"
}
