package transport_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// A test frame says what it is in its first three bytes: class ('c' or
// 'd'), family, and 1 for a reply.
func classify(f []byte) (transport.Kind, bool) {
	if len(f) < 3 || (f[0] != 'c' && f[0] != 'd') || f[2] > 1 {
		return transport.Kind{}, false
	}
	c := transport.Data
	if f[0] == 'c' {
		c = transport.Control
	}
	return transport.Kind{Class: c, Family: f[1], Reply: f[2] == 1}, true
}

func req(class byte, family byte, body string) []byte {
	return append([]byte{class, family, 0}, body...)
}

func reply(class byte, family byte, body string) []byte {
	return append([]byte{class, family, 1}, body...)
}

// wire keeps what links sent, for the test to deliver, drop, replay or
// alter.
type wire struct{ sent []sent }

type sent struct {
	to    dial.NodeID
	frame []byte
}

func (w *wire) Send(to dial.NodeID, frame []byte) error {
	w.sent = append(w.sent, sent{to, frame})
	return nil
}

// last returns and forgets the last frame sent.
func (w *wire) last(t require.TestingT) []byte {
	require.NotEmpty(t, w.sent)
	f := w.sent[len(w.sent)-1].frame
	w.sent = w.sent[:len(w.sent)-1]
	return f
}

// inbox keeps what a link handed its node.
type inbox struct{ got [][]byte }

func (b *inbox) HandleFrame(_ dial.NodeID, f []byte) { b.got = append(b.got, f) }

type peer struct {
	clk  *clock.Manual
	link *transport.Link
	wire *wire
	box  *inbox
}

var keys = transport.Keys{Control: bytes.Repeat([]byte{1}, 32), Data: bytes.Repeat([]byte{2}, 32)}

func newPeer(t require.TestingT, id dial.NodeID, epoch uint64, k transport.Keys, mod func(*transport.Config)) *peer {
	p := &peer{wire: &wire{}, box: &inbox{}, clk: clock.NewManual(time.Unix(0, 0))}
	cfg := transport.Config{Self: id, Epoch: epoch, Keys: k, Rand: rand.New(rand.NewPCG(uint64(id), epoch)), Classify: classify,
		Clock: p.clk}
	if mod != nil {
		mod(&cfg)
	}
	l, err := transport.New(cfg, p.wire, p.box)
	require.NoError(t, err)
	p.link = l
	return p
}

// meet has a and b learn each other's epochs, as a first exchange does:
// a's first request names no epoch for b, so b drops it, learning a's
// epoch from its header, and says hello, which teaches a b's.
func meet(t require.TestingT, a, b *peer) {
	require.NoError(t, a.link.Send(b.link.Self(), req('d', 0, "hi")))
	ok, cause := deliver(b, a.wire.last(t))
	require.False(t, ok)
	require.Equal(t, "incarnation", cause)
	hello := b.wire.last(t)
	n := len(a.box.got)
	a.link.HandleFrame(0, hello)
	require.Len(t, a.box.got, n, "a hello reaches no node")
}

// opened reports whether delivering f to p handed the node something, and
// which cause counter moved if not.
func deliver(p *peer, f []byte) (bool, string) {
	before := p.link.Stats()
	n := len(p.box.got)
	p.link.HandleFrame(99, bytes.Clone(f))
	if len(p.box.got) > n {
		return true, ""
	}
	after := p.link.Stats()
	for i := range after.Dropped {
		if after.Dropped[i] != before.Dropped[i] {
			return false, transport.CauseNames[i]
		}
	}
	return false, "nothing counted"
}

func TestRequestAndReply(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	require.NoError(t, a.link.Send(2, req('c', 1, "vote for me")))
	f := a.wire.last(t)
	require.Len(t, f, transport.Overhead+len("vote for me")+3)
	require.NotContains(t, string(f), "vote for me", "the body is sealed")
	ok, _ := deliver(b, f)
	require.True(t, ok)
	require.Equal(t, req('c', 1, "vote for me"), b.box.got[0])

	require.NoError(t, b.link.Send(1, reply('c', 1, "granted")))
	r := b.wire.last(t)
	ok, _ = deliver(a, r)
	require.True(t, ok)
	require.Equal(t, reply('c', 1, "granted"), a.box.got[0])

	// The same reply again answers nothing: its request was answered.
	ok, cause := deliver(a, r)
	require.False(t, ok)
	require.Equal(t, "unsolicited", cause)
	// B owes A nothing more: a second reply has no request to name.
	require.ErrorIs(t, b.link.Send(1, reply('c', 1, "granted again")), transport.ErrUnbound)
	require.ErrorIs(t, b.link.Send(1, reply('c', 1, "x")), dial.ErrUnreachable)
	// A one-way frame (family 0) needs no reply and is owed none.
	require.NoError(t, a.link.Send(2, req('d', 0, "push")))
	ok, _ = deliver(b, a.wire.last(t))
	require.True(t, ok)
	require.ErrorIs(t, b.link.Send(1, reply('d', 1, "x")), transport.ErrUnbound)
}

// A reply answers a request of its own family only.
func TestReplyOfAnotherFamilyIsUnsolicited(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	require.NoError(t, a.link.Send(2, req('d', 1, "op")))
	require.NoError(t, a.link.Send(2, req('d', 2, "adopt")))
	deliver(b, a.wire.sent[0].frame)
	deliver(b, a.wire.sent[1].frame)
	require.NoError(t, b.link.Send(1, reply('d', 2, "adopt-resp")))
	ok, _ := deliver(a, b.wire.last(t))
	require.True(t, ok)
	require.NoError(t, b.link.Send(1, reply('d', 1, "op-resp")))
	ok, _ = deliver(a, b.wire.last(t))
	require.True(t, ok)
}

func TestRequestIsAddressed(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, keys, nil)
	c := newPeer(t, 3, 1, keys, nil)
	meet(t, a, b)
	meet(t, a, c)
	require.NoError(t, a.link.Send(2, req('c', 1, "append")))
	f := a.wire.last(t)
	ok, cause := deliver(c, f)
	require.False(t, ok, "captured on its way to n2, it does not open at n3")
	require.Equal(t, "misaddressed", cause)
	ok, _ = deliver(b, f)
	require.True(t, ok)

	// Rewriting the address breaks the seal.
	moved := bytes.Clone(f)
	moved[28] = 3 // to = n3 (big-endian, bytes 21..28)
	ok, cause = deliver(c, moved)
	require.False(t, ok)
	require.Equal(t, "forged", cause)

	// The planted bug skips the check.
	buggy := newPeer(t, 3, 1, keys, func(c *transport.Config) { c.Bugs = bugs.Set{NoAddressing: true} })
	ok, _ = deliver(buggy, f)
	require.True(t, ok, "no-addressing opens a frame meant for another node")
}

func TestReplayedRequestIsDropped(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	var frames [][]byte
	for i := range 5 {
		require.NoError(t, a.link.Send(2, req('d', 0, string(rune('a'+i)))))
		frames = append(frames, a.wire.last(t))
	}
	// Out of order is fine; twice is not.
	for _, i := range []int{1, 0, 3, 2, 4} {
		ok, _ := deliver(b, frames[i])
		require.True(t, ok, "frame %d", i)
	}
	for i := range frames {
		ok, cause := deliver(b, frames[i])
		require.False(t, ok)
		require.Equal(t, "replay", cause)
	}
	// A restarted sender (a higher epoch) numbers afresh; its old frames
	// stay dead.
	a2 := newPeer(t, 1, 2, keys, nil)
	b.clk.Advance(time.Second) // past the last hello to n1
	meet(t, a2, b)
	require.NoError(t, a2.link.Send(2, req('d', 0, "after restart")))
	ok, _ := deliver(b, a2.wire.last(t))
	require.True(t, ok)
	ok, cause := deliver(b, frames[4])
	require.False(t, ok)
	require.Equal(t, "stale", cause)
}

// Requests older than the window are dropped as stale; inside it, each
// opens once.
func TestReplayWindowBound(t *testing.T) {
	a := newPeer(t, 1, 1, keys, nil)
	b := newPeer(t, 2, 1, keys, func(c *transport.Config) { c.Window = 64 })
	meet(t, a, b)
	var frames [][]byte
	for i := range 70 {
		require.NoError(t, a.link.Send(2, req('d', 0, string(rune(i)))))
		frames = append(frames, a.wire.last(t))
	}
	ok, _ := deliver(b, frames[69])
	require.True(t, ok)
	ok, cause := deliver(b, frames[5]) // 64 behind the newest
	require.False(t, ok)
	require.Equal(t, "stale", cause)
	ok, _ = deliver(b, frames[6]) // 63 behind
	require.True(t, ok)
}

// The keys: a frame sealed under one never opens under the other, a node
// without the control key can neither send nor open raft traffic, and a
// frame whose contents are not of its header's class is dropped.
func TestKeysSeparateClasses(t *testing.T) {
	dataOnly := transport.Keys{Data: keys.Data}
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, dataOnly, nil)
	require.ErrorIs(t, b.link.Send(1, req('c', 1, "vote")), dial.ErrUnreachable)
	require.NoError(t, a.link.Send(2, req('c', 1, "append")))
	ok, cause := deliver(b, a.wire.last(t))
	require.False(t, ok)
	require.Equal(t, "no-key", cause)

	// Relabel a data frame as control: the header is sealed, so it fails.
	require.NoError(t, a.link.Send(2, req('d', 0, "push")))
	f := a.wire.last(t)
	f[2] = byte(transport.Control)
	c := newPeer(t, 2, 1, keys, nil)
	ok, cause = deliver(c, f)
	require.False(t, ok)
	require.Equal(t, "no-key", cause, "the data key's id names no control key")
	binary.BigEndian.PutUint32(f[5:], transport.KeyID(keys.Control))
	ok, cause = deliver(c, f)
	require.False(t, ok)
	require.Equal(t, "forged", cause)

	// A data-key holder whose classifier lies seals a raft frame as data:
	// it opens, but its contents say control, so it is dropped.
	liar := newPeer(t, 3, 1, dataOnly, func(cfg *transport.Config) {
		cfg.Classify = func([]byte) (transport.Kind, bool) { return transport.Kind{Class: transport.Data}, true }
	})
	require.NoError(t, liar.link.Send(2, req('c', 0, "append: rewrite history")))
	ok, cause = deliver(c, liar.wire.last(t))
	require.False(t, ok)
	require.Equal(t, "mismatch", cause)

	// Another cluster's keys open nothing: its frames name a key id this
	// node does not hold, and naming ours does not help.
	other := newPeer(t, 1, 1, transport.Keys{Control: bytes.Repeat([]byte{9}, 32), Data: bytes.Repeat([]byte{8}, 32)}, nil)
	require.NoError(t, other.link.Send(2, req('d', 0, "hello")))
	f = other.wire.last(t)
	ok, cause = deliver(c, f)
	require.False(t, ok)
	require.Equal(t, "no-key", cause)
	h, ok := transport.HeaderOf(f)
	require.True(t, ok)
	require.Equal(t, transport.KeyID(bytes.Repeat([]byte{8}, 32)), h.KeyID)
	binary.BigEndian.PutUint32(f[5:], transport.KeyID(keys.Data))
	ok, cause = deliver(c, f)
	require.False(t, ok)
	require.Equal(t, "forged", cause)
}

// Any single flipped bit, anywhere in the frame, is dropped.
func TestEveryBitFlipIsDropped(t *testing.T) {
	a := newPeer(t, 1, 1, keys, nil)
	require.NoError(t, a.link.Send(2, req('c', 1, "entries 5..9")))
	f := a.wire.last(t)
	for i := range f {
		for bit := range 8 {
			b := newPeer(t, 2, 1, keys, nil)
			bad := bytes.Clone(f)
			bad[i] ^= 1 << bit
			ok, cause := deliver(b, bad)
			require.False(t, ok, "byte %d bit %d", i, bit)
			require.NotEqual(t, "nothing counted", cause)
		}
	}
}

// The planted bug bare-replies: a reply anyone on the path made up is
// accepted, which the sealed reply never is.
func TestBareRepliesAcceptAForgery(t *testing.T) {
	forge := func(victim *peer) []byte {
		// The adversary saw the victim's request go out: its header says
		// who and which nonce. It answers in the clear.
		require.NoError(t, victim.link.Send(2, req('c', 1, "vote for me")))
		h, ok := transport.HeaderOf(victim.wire.last(t))
		require.True(t, ok)
		return transport.Forge(transport.Control, 1, h.To, h.From, h.Epoch, transport.Nonce{}, h.Nonce, reply('c', 1, "granted, term 99"))
	}
	sound := newPeer(t, 1, 1, keys, nil)
	ok, cause := deliver(sound, forge(sound))
	require.False(t, ok)
	require.Equal(t, "forged", cause)

	buggy := newPeer(t, 1, 1, keys, func(c *transport.Config) { c.Bugs = bugs.Set{BareReplies: true} })
	ok, _ = deliver(buggy, forge(buggy))
	require.True(t, ok, "bare-replies accepts a forged reply")
}

// A stranger minting node ids gets state for at most MaxPeers of them:
// past the bound the link learns nothing of a new sender, says no hello
// to it, and hands the node nothing from it.
func TestPeerLimit(t *testing.T) {
	b := newPeer(t, 2, 1, keys, func(c *transport.Config) { c.MaxPeers = 3 })
	for id := range dial.NodeID(4) {
		a := newPeer(t, 10+id, 1, keys, nil)
		require.NoError(t, a.link.Send(2, req('d', 0, "hi")))
		ok, cause := deliver(b, a.wire.last(t))
		require.False(t, ok)
		require.Equal(t, "incarnation", cause)
		if id == 3 {
			require.Empty(t, b.wire.sent, "no hello past the bound")
			continue
		}
		a.link.HandleFrame(0, b.wire.last(t)) // the hello
		require.NoError(t, a.link.Send(2, req('d', 0, "hi again")))
		ok, _ = deliver(b, a.wire.last(t))
		require.True(t, ok, "sender %d", id)
	}
	for to := range dial.NodeID(4) {
		err := b.link.Send(20+to, req('d', 0, "hi"))
		if to < 3 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, dial.ErrUnreachable)
		}
	}
}

// A restarted node drops requests made for its earlier incarnation
// (which its fresh replay window has never seen), says hello once per
// HelloEvery whatever the adversary replays, and takes the sender's next
// request once the sender has heard the hello.
func TestRequestsForAnEarlierIncarnationAreDropped(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	var old [][]byte
	for i := range 3 {
		require.NoError(t, a.link.Send(2, req('c', 3, string(rune('a'+i)))))
		old = append(old, a.wire.last(t))
	}
	ok, _ := deliver(b, old[0])
	require.True(t, ok)

	b2 := newPeer(t, 2, 2, keys, nil)
	clk := b2.clk
	for _, f := range old {
		ok, cause := deliver(b2, f)
		require.False(t, ok)
		require.Equal(t, "incarnation", cause)
	}
	require.Len(t, b2.wire.sent, 1, "one hello for three drops within HelloEvery")
	clk.Advance(20 * time.Millisecond)
	ok, _ = deliver(b2, old[1])
	require.False(t, ok)
	require.Len(t, b2.wire.sent, 2, "another hello once HelloEvery has passed")

	a.link.HandleFrame(0, b2.wire.last(t))
	require.NoError(t, a.link.Send(2, req('c', 3, "after the hello")))
	ok, _ = deliver(b2, a.wire.last(t))
	require.True(t, ok)
	// The old frames stay dead, and the old incarnation's hello changes
	// nothing.
	ok, _ = deliver(b2, old[2])
	require.False(t, ok)
}

// At MaxOutstanding, the oldest request awaiting a reply is forgotten:
// its reply is dropped; the others still open.
func TestOutstandingBound(t *testing.T) {
	a := newPeer(t, 1, 1, keys, func(c *transport.Config) { c.MaxOutstanding = 2 })
	b := newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	for i := range 3 {
		require.NoError(t, a.link.Send(2, req('d', 1, string(rune('a'+i)))))
	}
	for _, s := range a.wire.sent {
		ok, _ := deliver(b, s.frame)
		require.True(t, ok)
	}
	// b answers the newest first (c, b, a); a forgot a.
	var replies [][]byte
	for range 3 {
		require.NoError(t, b.link.Send(1, reply('d', 1, "r")))
		replies = append(replies, b.wire.last(t))
	}
	for i, want := range []bool{true, true, false} {
		ok, _ := deliver(a, replies[i])
		require.Equal(t, want, ok, "reply %d", i)
	}
}

// The replay window against a model that remembers every number: both
// agree on what opens, for any order of numbers near the front.
func TestPropWindowMatchesAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := newPeer(t, 1, 1, keys, nil)
		b := newPeer(t, 2, 1, keys, func(c *transport.Config) { c.Window = 128 })
		meet(t, a, b)
		n := rapid.IntRange(1, 400).Draw(t, "frames")
		var frames [][]byte
		for i := range n {
			require.NoError(t, a.link.Send(2, req('d', 0, string(rune(i)))))
			frames = append(frames, a.wire.last(t))
		}
		seen := map[int]bool{}
		newest := -1
		for range rapid.IntRange(1, 600).Draw(t, "deliveries") {
			i := rapid.IntRange(0, n-1).Draw(t, "which")
			want := !seen[i] && (newest < 0 || i > newest-128)
			ok, _ := deliver(b, frames[i])
			require.Equal(t, want, ok, "frame %d (newest %d)", i, newest)
			if ok {
				seen[i] = true
				newest = max(newest, i)
			}
		}
	})
}

// Whatever bytes arrive, nothing reaches the node without the keys, and
// nothing panics.
func FuzzHandleFrame(f *testing.F) {
	a := newPeer(f, 1, 1, keys, nil)
	require.NoError(f, a.link.Send(2, req('c', 1, "seed")))
	f.Add(a.wire.sent[0].frame)
	f.Add([]byte{0xF7, 1, 1, 3, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := newPeer(t, 2, 1, keys, func(c *transport.Config) { c.Bugs = bugs.Set{} })
		if bytes.Equal(data, a.wire.sent[0].frame) {
			return // the one genuine frame
		}
		ok, _ := deliver(b, data)
		require.False(t, ok)
	})
}

func TestConfigIsChecked(t *testing.T) {
	for name, cfg := range map[string]transport.Config{
		"short data key":    {Self: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Keys: transport.Keys{Data: []byte("short")}},
		"short control key": {Self: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Keys: transport.Keys{Control: []byte("x"), Data: keys.Data}},
		"no self":           {Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Keys: keys},
		"no source":         {Self: 1, Classify: classify, Keys: keys},
		"odd window":        {Self: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Keys: keys, Window: 100},
		"rekey past 2^30": {Self: 1, Epoch: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Keys: keys, Clock: clock.NewManual(time.Unix(0, 0)),
			RekeyEvery: transport.MaxRekeyEvery + 1},
		"accepted key without its class": {Self: 1, Epoch: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Clock: clock.NewManual(time.Unix(0, 0)),
			Keys: transport.Keys{Data: keys.Data, AcceptControl: keys.Control}},
		"short accepted key": {Self: 1, Epoch: 1, Rand: rand.New(rand.NewPCG(1, 1)), Classify: classify, Clock: clock.NewManual(time.Unix(0, 0)),
			Keys: transport.Keys{Data: keys.Data, AcceptData: []byte("short")}},
	} {
		_, err := transport.New(cfg, &wire{}, &inbox{})
		require.Error(t, err, name)
	}
}

// An observer with the keys reads every frame, statelessly; without them
// it reads only headers.
func TestObserver(t *testing.T) {
	a := newPeer(t, 1, 1, keys, nil)
	require.NoError(t, a.link.Send(2, req('c', 3, "append")))
	f := a.wire.last(t)
	env, plain, ok := transport.NewObserver(keys).Open(f)
	require.True(t, ok)
	require.Equal(t, req('c', 3, "append"), plain)
	require.Equal(t, transport.Envelope{Class: transport.Control, Family: 3, KeyID: transport.KeyID(keys.Control), From: 1, To: 2,
		Nonce: env.Nonce, Epoch: 1, Seq: 1}, env)
	require.Equal(t, uint64(0), env.ToEpoch, "a has not heard from n2")
	for range 2 { // stateless: the same frame opens again
		_, _, ok = transport.NewObserver(keys).Open(f)
		require.True(t, ok)
	}
	_, _, ok = transport.NewObserver(transport.Keys{Data: keys.Data}).Open(f)
	require.False(t, ok, "a control frame without the control key")
	h, ok := transport.HeaderOf(f)
	require.True(t, ok)
	require.Equal(t, env, h)
	_, ok = transport.HeaderOf([]byte("short"))
	require.False(t, ok)
}

// A greeting teaches the greeted node's epoch both ways: the greeter's
// first request after it opens.
func TestGreet(t *testing.T) {
	a, b := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 7, keys, nil)
	a.link.Greet(2)
	hello := a.wire.last(t)
	ok, _ := deliver(b, hello)
	require.False(t, ok, "a hello reaches no node")
	a.link.HandleFrame(0, b.wire.last(t)) // b's answer
	require.NoError(t, a.link.Send(2, req('d', 1, "first")))
	ok, _ = deliver(b, a.wire.last(t))
	require.True(t, ok, "the first request opens")
	// b knew a's epoch from the hello: its hello named it, so a does not
	// answer again (no ping-pong).
	b.clk.Advance(time.Second)
	require.NoError(t, b.link.Send(1, req('d', 0, "x")))
	ok, _ = deliver(a, b.wire.last(t))
	require.True(t, ok)
	require.Empty(t, a.wire.sent)
}
