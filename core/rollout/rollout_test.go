package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/dial"
)

// world is three services on one manual clock, with a network that
// queues frames until deliver and can cut a node off.
type world struct {
	t       *testing.T
	clk     *clock.Manual
	svcs    map[dial.NodeID]*Service
	applied map[dial.NodeID]uint64
	members []dial.NodeID
	queue   []frame
	cut     map[dial.NodeID]bool
	nudged  map[dial.NodeID][]uint64
}

type frame struct {
	from, to dial.NodeID
	b        []byte
}

type wnet struct {
	w    *world
	from dial.NodeID
}

func (n wnet) Send(to dial.NodeID, b []byte) error {
	if n.w.cut[n.from] || n.w.cut[to] {
		return dial.ErrUnreachable
	}
	n.w.queue = append(n.w.queue, frame{n.from, to, b})
	return nil
}

type wctl struct {
	w  *world
	id dial.NodeID
}

func (c wctl) Members() []dial.NodeID { return c.w.members }
func (c wctl) Applied() uint64        { return c.w.applied[c.id] }

func newWorld(t *testing.T, cfg Config) *world {
	w := &world{t: t, clk: clock.NewManual(time.Unix(1000, 0)), svcs: map[dial.NodeID]*Service{},
		applied: map[dial.NodeID]uint64{}, members: []dial.NodeID{1, 2, 3}, cut: map[dial.NodeID]bool{}, nudged: map[dial.NodeID][]uint64{}}
	for _, id := range w.members {
		id := id
		w.svcs[id] = New(cfg, Env{ID: id, Clock: w.clk, Net: wnet{w, id}, Ctl: wctl{w, id},
			Behind: func(rev uint64) { w.nudged[id] = append(w.nudged[id], rev) }})
	}
	return w
}

// deliver hands every queued frame over, until none is left.
func (w *world) deliver() {
	for len(w.queue) > 0 {
		f := w.queue[0]
		w.queue = w.queue[1:]
		if !w.cut[f.to] {
			w.svcs[f.to].HandleFrame(f.from, f.b)
		}
	}
}

// step advances the clock by d, delivering frames after every millisecond.
func (w *world) step(d time.Duration) {
	for i := time.Duration(0); i < d; i += time.Millisecond {
		w.clk.Advance(time.Millisecond)
		w.deliver()
	}
}

type got struct {
	res  Result
	err  error
	done bool
	at   time.Duration
}

func (w *world) await(at dial.NodeID, rev uint64) *got {
	g := &got{}
	start := w.clk.Mono()
	w.svcs[at].Await(rev, func(r Result, err error) {
		if g.done {
			w.t.Fatal("await answered twice")
		}
		g.res, g.err, g.done, g.at = r, err, true, w.clk.Mono()-start
	})
	w.deliver()
	return g
}

func TestAwaitAnswersOnceEveryMemberServes(t *testing.T) {
	w := newWorld(t, Config{})
	w.svcs[1].Served(5)
	for _, id := range w.members {
		w.applied[id] = 5
	}
	g := w.await(1, 5)
	w.step(20 * time.Millisecond)
	if g.done {
		t.Fatalf("answered before members 2 and 3 served revision 5: %+v", g.res)
	}
	// Member 2 was nudged: it had applied the revision it was asked for.
	if !slices.Contains(w.nudged[2], 5) {
		t.Fatalf("member 2 was not told to reconcile: %v", w.nudged)
	}
	w.svcs[2].Served(5)
	w.deliver()
	if g.done {
		t.Fatal("answered before member 3 served")
	}
	w.svcs[3].Served(7) // a later revision serves an earlier one too
	w.deliver()
	if !g.done || g.err != nil || len(g.res.Missing) != 0 || g.res.Rev != 5 {
		t.Fatalf("want every member confirmed, got %+v (done %v)", g, g.done)
	}
	// Served at once, the next await needs no wait at all.
	g2 := w.await(2, 4)
	if !g2.done || len(g2.res.Missing) != 0 || g2.at != 0 {
		t.Fatalf("every member already serves 4: want an answer at once, got %+v", g2)
	}
}

func TestAwaitNamesMembersThatDoNotConfirm(t *testing.T) {
	w := newWorld(t, Config{Wait: time.Second, SuspectWait: 150 * time.Millisecond, Resend: 50 * time.Millisecond})
	w.svcs[1].Served(3)
	w.svcs[2].Served(3)
	w.cut[3] = true
	g := w.await(1, 3)
	w.step(990 * time.Millisecond)
	if g.done {
		t.Fatalf("gave up on member 3 before its wait: %+v", g)
	}
	w.step(20 * time.Millisecond)
	if !g.done || !slices.Equal(g.res.Missing, []dial.NodeID{3}) {
		t.Fatalf("want member 3 named after 1s, got %+v", g)
	}
	// Member 3 missed a rollout: the next one waits for it only briefly.
	g = w.await(1, 3)
	w.step(200 * time.Millisecond)
	if !g.done || !slices.Equal(g.res.Missing, []dial.NodeID{3}) || g.at > 200*time.Millisecond {
		t.Fatalf("want a suspect named within 200ms, got %+v", g)
	}
	// A late ack, for an await that already ended, says it is up: it is
	// waited for in full again.
	w.svcs[1].suspect[2] = true
	w.svcs[1].HandleFrame(2, encode(frameAck, 999, 3))
	if w.svcs[1].suspect[2] {
		t.Fatal("a member that acked is still suspect")
	}
	// Back, it confirms, and is waited for in full again.
	w.cut[3] = false
	w.svcs[3].Served(3)
	g = w.await(1, 3)
	w.step(10 * time.Millisecond)
	if !g.done || len(g.res.Missing) != 0 {
		t.Fatalf("member 3 is back and serves 3: %+v", g)
	}
	if w.svcs[1].suspect[3] {
		t.Fatal("a member that confirmed is still suspect")
	}
}

func TestAHeldAskIsAnsweredWhenTheShellCatchesUp(t *testing.T) {
	w := newWorld(t, Config{})
	w.svcs[1].Served(9)
	w.svcs[3].Served(9)
	g := w.await(1, 9)
	w.step(100 * time.Millisecond)
	if len(w.svcs[2].held) != 1 {
		t.Fatalf("member 2 holds %d asks; want the one await's, however often it was resent", len(w.svcs[2].held))
	}
	if len(w.nudged[2]) != 0 {
		t.Fatalf("member 2 has not applied revision 9; nudging its shell is useless: %v", w.nudged[2])
	}
	w.applied[2] = 9
	w.svcs[2].Applied(9) // its node tells it as it applies, before any resend
	if !slices.Equal(w.nudged[2], []uint64{9}) {
		t.Fatalf("member 2 applied 9 and was nudged %v; want once, at once", w.nudged[2])
	}
	w.svcs[2].Applied(9)
	w.step(60 * time.Millisecond) // a resend finds it applied: nudged again, the shell may have missed it
	if len(w.nudged[2]) > 2 {
		t.Fatalf("nudged %v: once per report, and per resend", w.nudged[2])
	}
	w.svcs[2].Served(9)
	w.deliver()
	if !g.done || len(g.res.Missing) != 0 {
		t.Fatalf("want confirmed as soon as member 2 serves: %+v", g)
	}
	if len(w.svcs[2].held) != 0 {
		t.Fatal("an answered ask is still held")
	}
}

func TestBounds(t *testing.T) {
	w := newWorld(t, Config{MaxAwaits: 2, MaxHeld: 1})
	w.await(1, 10)
	w.await(1, 11)
	g := w.await(1, 12)
	if !g.done || g.err == nil {
		t.Fatalf("a third await past MaxAwaits 2 must be refused at once: %+v", g)
	}
	w.await(3, 13) // member 2 holds one ask from 1 already; this one is dropped
	if len(w.svcs[2].held) != 1 || w.svcs[2].Dropped == 0 {
		t.Fatalf("member 2 holds %d asks (bound 1), dropped %d", len(w.svcs[2].held), w.svcs[2].Dropped)
	}
	// Held asks nobody renews are forgotten.
	w.svcs[1].Stop()
	w.svcs[3].Stop()
	w.step(3 * time.Second)
	if len(w.svcs[2].held) != 0 {
		t.Fatalf("held asks outlive their askers: %d", len(w.svcs[2].held))
	}
}

func TestStopAnswersEveryAwait(t *testing.T) {
	w := newWorld(t, Config{})
	g := w.await(1, 4)
	w.svcs[1].Stop()
	if !g.done || g.err != ErrStopped {
		t.Fatalf("want ErrStopped, got %+v", g)
	}
	g = w.await(1, 4)
	if !g.done || g.err != ErrStopped {
		t.Fatalf("a stopped service must refuse: %+v", g)
	}
}

// The planted bug: a member that applied a change acks it before its
// shell serves it.
func TestAnswerBeforeReconciledAcksAtTheAppliedRevision(t *testing.T) {
	b, err := bugs.Of("answer-before-reconciled")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, Config{Bugs: b})
	for _, id := range w.members {
		w.applied[id] = 6
	}
	g := w.await(1, 6)
	w.step(time.Millisecond)
	if !g.done || len(g.res.Missing) != 0 {
		t.Fatalf("with the bug every member acks what it applied: %+v", g)
	}
	// Without it, nobody serves 6 yet.
	w = newWorld(t, Config{})
	for _, id := range w.members {
		w.applied[id] = 6
	}
	g = w.await(1, 6)
	w.step(100 * time.Millisecond)
	if g.done {
		t.Fatalf("answered though no shell serves 6: %+v", g)
	}
}

func TestFrames(t *testing.T) {
	for _, b := range [][]byte{encode(frameAsk, 1, 2), encode(frameAck, 1<<40, 0)} {
		kind, id, rev, err := decode(b)
		if err != nil || string(encode(kind, id, rev)) != string(b) {
			t.Fatalf("%x does not round-trip: %v", b, err)
		}
		if fam, _, ok := FrameKind(b); !ok || fam != FamilyAsk {
			t.Fatalf("%x: family %d ok %v", b, fam, ok)
		}
	}
	for _, bad := range [][]byte{nil, {FramePrefix}, {FramePrefix, 3, 0, 0}, {FramePrefix, frameAsk, 0x80, 0, 0}, append(encode(frameAsk, 1, 1), 0)} {
		if _, _, _, err := decode(bad); err == nil {
			t.Fatalf("%x decoded", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(frameAsk, 3, 4))
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, id, rev, err := decode(b)
		if err == nil && string(encode(kind, id, rev)) != string(b) {
			t.Fatalf("%x decodes but re-encodes as %x", b, encode(kind, id, rev))
		}
	})
}
