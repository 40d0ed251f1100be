package proxyonce

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// world is three services on a manual clock, frames queued and delivered
// by hand, and one KV that commits a recording when told.
type world struct {
	t        *testing.T
	clk      *clock.Manual
	nodes    map[dial.NodeID]*Service
	ids      []dial.NodeID
	queue    []delivery
	drop     func(from, to dial.NodeID) bool
	kv       map[string][]byte
	m        uint64
	isolated map[dial.NodeID]bool
	hold     []func() // recordings proposed, not yet committed
	sent     int
}

type delivery struct {
	from, to dial.NodeID
	b        []byte
}

type wnet struct {
	w    *world
	from dial.NodeID
}

func (n wnet) Send(to dial.NodeID, b []byte) error {
	n.w.sent++
	n.w.queue = append(n.w.queue, delivery{n.from, to, b})
	return nil
}

type wctl struct {
	w  *world
	id dial.NodeID
}

func (c wctl) Membership() (uint64, []dial.NodeID) { return c.w.m, c.w.ids }
func (c wctl) IsIsolated() bool                    { return c.w.isolated[c.id] }
func (c wctl) Recorded(k string) ([]byte, bool)    { v, ok := c.w.kv[k]; return v, ok }
func (c wctl) Confirm(done func(error)) {
	if c.w.isolated[c.id] {
		done(errors.New("isolated: no quorum confirms"))
		return
	}
	done(nil)
}
func (c wctl) Record(k string, v []byte, overwrite bool, done func(error)) {
	c.w.hold = append(c.w.hold, func() {
		if _, ok := c.w.kv[k]; ok && !overwrite { // put if absent
			done(ErrAlreadyRecorded)
			return
		}
		c.w.kv[k] = v
		done(nil)
	})
}

func newWorld(t *testing.T, cfg ServiceConfig) *world {
	w := &world{t: t, clk: clock.NewManual(time.Unix(1_700_000_000, 0)), nodes: map[dial.NodeID]*Service{},
		kv: map[string][]byte{}, m: 5, isolated: map[dial.NodeID]bool{}}
	for i, name := range []string{"a", "b", "c"} {
		id := dial.IDFromName(name)
		w.ids = append(w.ids, id)
		w.nodes[id] = NewService(cfg, Env{ID: id, Session: uint64(i + 1), Clock: w.clk, Net: wnet{w, id}, Ctl: wctl{w, id}})
	}
	return w
}

// deliver runs the network until it is quiet.
func (w *world) deliver() {
	for len(w.queue) > 0 {
		d := w.queue[0]
		w.queue = w.queue[1:]
		if w.drop != nil && w.drop(d.from, d.to) {
			continue
		}
		w.nodes[d.to].HandleFrame(d.from, d.b)
	}
}

// commit commits every recording proposed so far.
func (w *world) commit() {
	for len(w.hold) > 0 {
		f := w.hold[0]
		w.hold = w.hold[1:]
		f()
	}
	w.deliver()
}

func (w *world) owner(key string) dial.NodeID {
	o, ok := ring.New(w.ids).Owner(ring.ClassProxy, key)
	require.True(w.t, ok)
	return o
}

type got struct {
	a    Answer
	err  error
	done bool
}

func (w *world) acquire(at dial.NodeID, key string) *got {
	g := &got{}
	w.nodes[at].Acquire(key, func(a Answer, err error) {
		require.False(w.t, g.done, "answered twice")
		g.a, g.err, g.done = a, err, true
	})
	return g
}

// Three nodes see a new signature at once: one wins, the others wait and
// are answered from the recording, with no second upstream call.
func TestOneWinnerTheRestReplay(t *testing.T) {
	w := newWorld(t, ServiceConfig{})
	var gs []*got
	for _, id := range w.ids {
		gs = append(gs, w.acquire(id, key))
	}
	w.deliver()
	var winner *got
	var at dial.NodeID
	for i, g := range gs {
		if g.done && g.a.Won {
			require.Nil(t, winner, "one winner")
			winner, at = g, w.ids[i]
		}
	}
	require.NotNil(t, winner)
	for _, g := range gs {
		if g != winner {
			require.False(t, g.done, "losers wait for the recording")
		}
	}
	var recErr error
	recorded := false
	w.nodes[at].Record(key, winner.a.Token, []byte("answer"), func(err error) { recErr, recorded = err, true })
	w.deliver()
	require.False(t, recorded, "Recorded only once the entry commits")
	w.commit()
	require.True(t, recorded)
	require.NoError(t, recErr)
	w.clk.Advance(100 * time.Millisecond) // the losers' next read of the KV
	for _, g := range gs {
		require.True(t, g.done)
		if g != winner {
			require.NoError(t, g.err)
			require.Equal(t, []byte("answer"), g.a.Recorded)
		}
	}
	require.Zero(t, w.nodes[w.owner(key)].Pending(), "the claim ended with the recording")
	// After Recorded: answered from the KV, no claim round trip.
	before := w.sent
	g := w.acquire(w.ids[0], key)
	require.True(t, g.done)
	require.Equal(t, []byte("answer"), g.a.Recorded)
	require.Equal(t, before, w.sent, "no frame sent")
}

// No owner can serialize the claim: refused, never a guess. Isolated
// owners, another m_idx, and an owner that cannot be reached.
func TestRefusals(t *testing.T) {
	w := newWorld(t, ServiceConfig{Deadline: time.Second})
	o := w.owner(key)
	var other dial.NodeID
	for _, id := range w.ids {
		if id != o {
			other = id
		}
	}
	w.isolated[o] = true
	g := w.acquire(other, key)
	w.deliver()
	require.ErrorIs(t, g.err, ErrUnavailable)
	require.ErrorIs(t, g.err, ErrRefused, "D-17: an isolated owner serves no claim")
	w.isolated[o] = false

	// A requester at another membership than the owner's.
	w.nodes[other].refresh()
	w.m = 6 // the owner will see 6 when it serves; the request says 5
	f := frame{kind: frameClaim, id: 99, m: 5, key: key}
	w.nodes[o].HandleFrame(other, f.encode())
	require.Len(t, w.queue, 1)
	resp, err := decodeFrame(w.queue[0].b)
	require.NoError(t, err)
	require.Equal(t, uint8(outRefused), resp.out)
	w.queue = nil

	// Frames lost: the call times out at the deadline.
	w.drop = func(from, to dial.NodeID) bool { return true }
	g = w.acquire(other, key)
	w.deliver()
	require.False(t, g.done)
	w.clk.Advance(time.Second)
	require.True(t, g.done)
	require.ErrorIs(t, g.err, ErrTimeout)
	w.drop = nil

	// No membership yet.
	w.m = 0
	g = w.acquire(other, key)
	require.ErrorIs(t, g.err, ErrNoOwner)
}

// The winner's token lapses, is released, or goes with the owner: then it
// can no longer record, and the signature is claimable again.
func TestStaleTokens(t *testing.T) {
	w := newWorld(t, ServiceConfig{Claims: Config{Lapse: 10 * time.Second}})
	a := w.ids[0]
	g := w.acquire(a, key)
	w.deliver()
	require.True(t, g.a.Won)
	first := g.a.Token

	w.clk.Advance(11 * time.Second)
	var recErr error
	w.nodes[a].Record(key, first, []byte("late"), func(err error) { recErr = err })
	w.deliver()
	require.ErrorIs(t, recErr, ErrStale, "a lapsed token cannot record")
	w.commit()
	_, ok := w.kv[KVKey(key)]
	require.False(t, ok)

	g = w.acquire(a, key)
	w.deliver()
	require.True(t, g.a.Won, "lapsed: claimable again")
	second := g.a.Token
	require.NotEqual(t, first, second)
	w.nodes[a].Release(key, second)
	w.deliver()
	g = w.acquire(a, key)
	w.deliver()
	require.True(t, g.a.Won, "released: claimable again")

	// The owner changes (a membership without it): its claims are
	// forgotten, and the new owner grants a new token.
	o := w.owner(key)
	w.m++
	var rest []dial.NodeID
	for _, id := range w.ids {
		if id != o {
			rest = append(rest, id)
		}
	}
	w.ids = rest
	g2 := w.acquire(rest[0], key)
	w.deliver()
	require.True(t, g2.a.Won, "a new owner: a new claim")
	require.NotEqual(t, g.a.Token.Owner, g2.a.Token.Owner)
	w.nodes[o].refresh()
	require.Zero(t, w.nodes[o].Pending(), "the old owner forgot its claims")
	w.nodes[rest[0]].Record(key, g.a.Token, []byte("old owner's token"), func(err error) { recErr = err })
	w.deliver()
	require.ErrorIs(t, recErr, ErrStale)
}

// A loser whose winner never records waits at most Wait, then gets 503;
// calls in flight are bounded.
func TestWaitsAndCallsAreBounded(t *testing.T) {
	w := newWorld(t, ServiceConfig{Wait: 3 * time.Second, MaxCalls: 2})
	a, b := w.ids[0], w.ids[1]
	win := w.acquire(a, key)
	w.deliver()
	require.True(t, win.a.Won)
	lose := w.acquire(b, key)
	w.deliver()
	require.False(t, lose.done)
	w.clk.Advance(3 * time.Second)
	require.True(t, lose.done)
	require.ErrorIs(t, lose.err, ErrWaited)
	require.True(t, errors.Is(lose.err, ErrUnavailable))

	// Losers waiting on one signature are bounded too.
	w2 := newWorld(t, ServiceConfig{MaxWaiters: 1})
	a2, b2 := w2.ids[0], w2.ids[1]
	require.True(t, func() bool { g := w2.acquire(a2, key); w2.deliver(); return g.a.Won }())
	first := w2.acquire(b2, key)
	second := w2.acquire(b2, key)
	w2.deliver()
	require.False(t, first.done, "the first loser waits")
	require.ErrorIs(t, second.err, ErrBusyCalls, "the second is past MaxWaiters")

	w.drop = func(from, to dial.NodeID) bool { return true }
	k2 := KeyOf(1, []byte("x"))
	if w.owner(k2) == b {
		k2 = KeyOf(1, []byte("y"))
	}
	w.acquire(b, k2)
	w.acquire(b, k2)
	third := w.acquire(b, k2)
	require.ErrorIs(t, third.err, ErrBusyCalls, "past MaxCalls: refused at once")
}

// A claim won keeps its call slot until it is recorded, released or
// lapses: at a bound of one call, the winner's recording is never refused
// for want of a slot, new claims are refused meanwhile, and a winner that
// never comes back frees the slot when its claim lapses.
func TestAWonClaimKeepsItsSlot(t *testing.T) {
	w := newWorld(t, ServiceConfig{MaxCalls: 1, Claims: Config{Lapse: 5 * time.Second}})
	a := w.ids[0]
	svc := w.nodes[a]
	win := w.acquire(a, key)
	w.deliver()
	require.True(t, win.a.Won)
	other := KeyOf(1, []byte("other"))
	busy := w.acquire(a, other)
	require.ErrorIs(t, busy.err, ErrBusyCalls, "the won claim holds the one slot")
	require.NoError(t, svc.CheckInvariants())

	var rerr error
	recorded := false
	svc.Record(key, win.a.Token, []byte("answer"), func(err error) { rerr, recorded = err, true })
	w.deliver()
	w.commit()
	require.True(t, recorded)
	require.NoError(t, rerr, "the recording takes the held slot")
	next := w.acquire(a, other)
	w.deliver()
	require.True(t, next.a.Won, "the slot is free once recorded")

	// Released: free at once. Never recorded nor released: free at the lapse.
	svc.Release(other, next.a.Token)
	third := w.acquire(a, KeyOf(1, []byte("third")))
	w.deliver()
	require.True(t, third.a.Won)
	require.ErrorIs(t, w.acquire(a, KeyOf(1, []byte("fourth"))).err, ErrBusyCalls)
	w.clk.Advance(5 * time.Second)
	fourth := w.acquire(a, KeyOf(1, []byte("fourth")))
	w.deliver()
	require.True(t, fourth.a.Won, "the lapsed claim's slot came back")
	require.NoError(t, svc.CheckInvariants())
	svc.Stop()
}

// A recording that finds another in place changes nothing and says so:
// the answer to serve is the one in the KV.
func TestRecordingLosesToAnother(t *testing.T) {
	w := newWorld(t, ServiceConfig{})
	a := w.ids[0]
	g := w.acquire(a, key)
	w.deliver()
	require.True(t, g.a.Won)
	w.kv[KVKey(key)] = []byte("first")
	var recErr error
	w.nodes[a].Record(key, g.a.Token, []byte("second"), func(err error) { recErr = err })
	w.deliver()
	w.commit()
	require.ErrorIs(t, recErr, ErrAlreadyRecorded)
	require.Equal(t, []byte("first"), w.kv[KVKey(key)])
}

// A recording that finds its own answer in place (a duplicate of its
// frame committed first) has not lost: it is done. The planted bug
// own-record-refused tells the caller it lost.
func TestRecordingThatFindsItsOwnAnswerIsDone(t *testing.T) {
	for _, bug := range []bool{false, true} {
		w := newWorld(t, ServiceConfig{Bugs: bugs.Set{OwnRecordRefused: bug}})
		a := w.ids[0]
		g := w.acquire(a, key)
		w.deliver()
		require.True(t, g.a.Won)
		w.kv[KVKey(key)] = []byte("mine") // the duplicate's commit
		var recErr error = errors.New("not answered")
		w.nodes[a].Record(key, g.a.Token, []byte("mine"), func(err error) { recErr = err })
		w.deliver()
		w.commit()
		w.deliver()
		if bug {
			require.ErrorIs(t, recErr, ErrAlreadyRecorded)
			continue
		}
		require.NoError(t, recErr, "its own answer is the one recorded")
		require.NoError(t, w.nodes[a].CheckInvariants())
	}
}

func TestFrames(t *testing.T) {
	f := frame{kind: frameRecord, id: 7, m: 9, out: outWon, key: key, token: Token{Owner: 3, Session: 4, Seq: 5}, value: []byte("v")}
	got, err := decodeFrame(f.encode())
	require.NoError(t, err)
	require.Equal(t, f, got)
	b := f.encode()
	for i := range b {
		_, err := decodeFrame(b[:i])
		require.Error(t, err, "cut at %d", i)
	}
	_, err = decodeFrame(append(b, 0))
	require.Error(t, err, "trailing byte")
	bad := append([]byte(nil), b...)
	bad[1] = 9
	_, err = decodeFrame(bad)
	require.Error(t, err, "unknown kind")
	// A second encoding of the same frame: id 7 as a two-byte varint.
	long := append(append([]byte(nil), b[:3]...), 0x87, 0x00)
	_, err = decodeFrame(append(long, b[4:]...))
	require.ErrorIs(t, err, errFrame, "non-minimal varint")
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(frame{kind: frameClaim, key: key}.encode())
	f.Add(frame{kind: frameRecordResp, value: []byte("x"), token: Token{1, 2, 3}}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			return
		}
		require.Equal(t, b, fr.encode(), "what decodes re-encodes to the same bytes")
		again, err := decodeFrame(fr.encode())
		require.NoError(t, err)
		require.Equal(t, fr, again, "what decodes re-encodes to itself")
	})
}

// BenchmarkAcquireRecorded is replay after Recorded: an answer read from
// the node's own KV, no frame sent, no claim.
func BenchmarkAcquireRecorded(b *testing.B) {
	w := newWorld(&testing.T{}, ServiceConfig{})
	w.kv[KVKey(key)] = []byte("answer")
	svc := w.nodes[w.ids[0]]
	b.ReportAllocs()
	for b.Loop() {
		svc.Acquire(key, func(a Answer, err error) {
			if err != nil || a.Recorded == nil {
				b.Fatal("not answered from the recording")
			}
		})
	}
	if w.sent != 0 {
		b.Fatalf("%d frames sent", w.sent)
	}
}
