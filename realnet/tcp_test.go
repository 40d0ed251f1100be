package realnet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

var tcpKeys = transport.Keys{Control: bytes.Repeat([]byte{3}, 32), Data: bytes.Repeat([]byte{4}, 32)}

// sealer makes genuine envelopes from node from, as its Link would.
func sealer(t *testing.T, from dial.NodeID) func(to dial.NodeID, body string) []byte {
	var out [][]byte
	w := senderFunc(func(_ dial.NodeID, f []byte) error { out = append(out, f); return nil })
	l, err := transport.New(transport.Config{Self: from, Epoch: 1, Keys: tcpKeys, Rand: rand.New(rand.NewPCG(uint64(from), 1)),
		Classify: func([]byte) (transport.Kind, bool) { return transport.Kind{Class: transport.Data}, true },
		Clock:    clock.NewManual(time.Unix(0, 0))}, w, dial.HandlerFunc(func(dial.NodeID, []byte) {}))
	require.NoError(t, err)
	return func(to dial.NodeID, body string) []byte {
		require.NoError(t, l.Send(to, []byte(body)))
		f := out[len(out)-1]
		out = out[:0]
		return f
	}
}

type senderFunc func(dial.NodeID, []byte) error

func (f senderFunc) Send(to dial.NodeID, b []byte) error { return f(to, b) }

// received collects what a transport delivered.
type received struct {
	mu     sync.Mutex
	frames [][]byte
}

func (r *received) deliver(_ dial.NodeID, f []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	return nil
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

func listen(t *testing.T, self dial.NodeID, addr string, mod func(*TCPConfig)) (*TCP, *received) {
	cfg := TCPConfig{Self: self, Listen: addr, Keys: tcpKeys}
	if mod != nil {
		mod(&cfg)
	}
	r := &received{}
	tr, err := ListenTCP(cfg, r.deliver)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	return tr, r
}

func rawFrame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func TestTCPCarriesFramesBetweenNodes(t *testing.T) {
	a, _ := listen(t, 1, "127.0.0.1:0", nil)
	b, rb := listen(t, 2, "127.0.0.2:0", nil)
	a.SetPeers(map[dial.NodeID]string{2: b.Addr().String()})
	seal := sealer(t, 1)
	var sent [][]byte
	for i := range 200 {
		f := seal(2, string(rune('a'+i%26)))
		sent = append(sent, f)
		require.NoError(t, a.Send(2, f))
	}
	require.Eventually(t, func() bool { return rb.count() == 200 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, sent, rb.frames, "in order, byte for byte")
	require.Equal(t, uint64(200), a.Stats().FramesOut)
	require.ErrorIs(t, a.Send(9, sent[0]), dial.ErrUnreachable, "no address for n9")
	require.ErrorIs(t, a.Send(2, make([]byte, MaxWireFrame+1)), dial.ErrFrameTooLarge)
}

// dialAs opens a connection to addr from the local IP from (127.0.0.x),
// without saying anything.
func dialAs(t *testing.T, addr, from string) net.Conn {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// proveAs is the dialler's handshake, by hand: hello, the challenge, and
// node self's proof for node to under keys. It returns what the
// connection sent, so a test can replay it.
func proveAs(t *testing.T, c net.Conn, keys transport.Keys, self, to dial.NodeID) []byte {
	sent := rawFrame(connHello)
	_, err := c.Write(sent)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var got [4 + transport.ConnChallengeSize]byte
	_, err = io.ReadFull(c, got[:])
	require.NoError(t, err, "the challenge")
	_ = c.SetReadDeadline(time.Time{})
	require.Equal(t, connChallenge, got[:4])
	proof := rawFrame(keys.ConnProof(self, to, [transport.ConnChallengeSize]byte(got[4:])))
	_, err = c.Write(proof)
	require.NoError(t, err)
	return append(sent, proof...)
}

// closedWithin reports whether the server closed c within d, whatever it
// sent before.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil || !isTimeout(err) // io.Copy's nil is EOF
}

// A stranger gets bounded work: garbage, a proof under other keys, a
// proof for another node, an envelope instead of a hello, a proof of
// the wrong size, an oversize length and silence all end in a closed
// connection, and nothing reaches the node.
func TestTCPStrangersAreClosed(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) { c.AuthTimeout = 300 * time.Millisecond })
	seal := sealer(t, 1)
	other := transport.Keys{Data: bytes.Repeat([]byte{9}, 32)}
	for name, c := range map[string]struct {
		proof  func(challenge [transport.ConnChallengeSize]byte) []byte // after the hello, if set
		first  []byte                                                   // instead of the hello, if set
		counts func(TCPStats) uint64
	}{
		"garbage":          {first: rawFrame([]byte("GET / HTTP/1.1\r\n\r\n")), counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"an envelope":      {first: rawFrame(seal(2, "vote")), counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"a wrong hello":    {first: rawFrame([]byte("fenceln1")), counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"oversize length":  {first: binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF), counts: func(s TCPStats) uint64 { return s.Oversize }},
		"zero length":      {first: binary.BigEndian.AppendUint32(nil, 0), counts: func(s TCPStats) uint64 { return s.Oversize }},
		"half a hello":     {first: rawFrame(connHello)[:6], counts: func(s TCPStats) uint64 { return s.AuthTimedOut }},
		"another cluster":  {proof: func(ch [16]byte) []byte { return other.ConnProof(1, 2, ch) }, counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"for another node": {proof: func(ch [16]byte) []byte { return tcpKeys.ConnProof(1, 3, ch) }, counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"a short proof": {proof: func(ch [16]byte) []byte { return tcpKeys.ConnProof(1, 2, ch)[1:] },
			counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"an altered proof": {proof: func(ch [16]byte) []byte { p := tcpKeys.ConnProof(1, 2, ch); p[30] ^= 1; return p },
			counts: func(s TCPStats) uint64 { return s.AuthFailed }},
		"silence": {first: []byte{}, counts: func(s TCPStats) uint64 { return s.AuthTimedOut }},
	} {
		before := c.counts(b.Stats())
		conn := dialAs(t, b.Addr().String(), "127.0.0.9")
		if c.proof == nil {
			_, err := conn.Write(c.first)
			require.NoError(t, err, name)
		} else {
			_, err := conn.Write(rawFrame(connHello))
			require.NoError(t, err, name)
			var got [20]byte
			_, err = io.ReadFull(conn, got[:])
			require.NoError(t, err, name)
			_, err = conn.Write(rawFrame(c.proof([16]byte(got[4:]))))
			require.NoError(t, err, name)
		}
		start := time.Now()
		require.True(t, closedWithin(conn, 2*time.Second), "%s: the connection is closed", name)
		require.Less(t, time.Since(start), time.Second, name)
		require.Eventually(t, func() bool { return c.counts(b.Stats()) == before+1 }, time.Second, 5*time.Millisecond, "%s is counted", name)
	}
	require.Zero(t, rb.count(), "nothing reached the node")
	require.Zero(t, b.Stats().Proved)
	require.Eventually(t, func() bool { st := b.Stats(); return st.InboundOpen == 0 && st.InboundPending == 0 }, time.Second, 5*time.Millisecond)
}

// A connection that proved itself still carries only frames addressed
// to this node from the node it proved: others are dropped, not
// delivered.
func TestTCPFramesMustMatchTheProof(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", nil)
	c := dialAs(t, b.Addr().String(), "127.0.0.1")
	proveAs(t, c, tcpKeys, 1, 2)
	_, err := c.Write(append(append(rawFrame(sealer(t, 3)(2, "from n3")), rawFrame(sealer(t, 1)(4, "to n4"))...),
		rawFrame(sealer(t, 1)(2, "good"))...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
	require.Equal(t, uint64(2), b.Stats().Misaddressed)
	_, plain, ok := transport.NewObserver(tcpKeys).Open(rb.frames[0])
	require.True(t, ok)
	require.Equal(t, "good", string(plain))
}

// Only proved connections hold the MaxInbound peers' slots: over it, a
// connection that proves itself is closed; a slot frees when one closes.
func TestTCPInboundCap(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) { c.MaxInbound = 3 })
	var held []net.Conn
	for i := range 3 {
		c := dialAs(t, b.Addr().String(), fmt.Sprintf("127.0.0.%d", 10+i))
		proveAs(t, c, tcpKeys, dial.NodeID(10+i), 2)
		held = append(held, c)
	}
	require.Eventually(t, func() bool { return b.Stats().Proved == 3 }, time.Second, 5*time.Millisecond)
	extra := dialAs(t, b.Addr().String(), "127.0.0.13")
	proveAs(t, extra, tcpKeys, 13, 2)
	require.True(t, closedWithin(extra, time.Second), "the fourth is closed once it proved itself")
	require.Equal(t, uint64(1), b.Stats().RefusedOverCap)

	_ = held[0].Close()
	require.Eventually(t, func() bool { return b.Stats().InboundOpen == 2 }, time.Second, 5*time.Millisecond)
	c := dialAs(t, b.Addr().String(), "127.0.0.13")
	proveAs(t, c, tcpKeys, 1, 2)
	_, err := c.Write(rawFrame(sealer(t, 1)(2, "hello")))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
}

// Silent strangers holding every connection they can get — more than
// MaxInbound of them, from several addresses, sitting out AuthTimeout —
// do not keep a peer out: they hold only the pending budget, and a peer
// that connects takes the oldest stranger's place and proves itself at
// once. (Before there was a pending budget, 64 silent strangers held
// every inbound slot for 2s at a time, and the peer was refused.)
func TestTCPStrangersCannotStarvePeers(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) { c.AuthTimeout = 20 * time.Second })
	var strangers []net.Conn
	for i := range 80 {
		strangers = append(strangers, dialAs(t, b.Addr().String(), fmt.Sprintf("127.0.1.%d", 1+i%20)))
	}
	require.Eventually(t, func() bool { return b.Stats().Accepted == 80 }, 2*time.Second, 5*time.Millisecond)
	st := b.Stats()
	require.Equal(t, int64(16), st.InboundPending, "the pending budget, no more")
	require.Equal(t, uint64(64), st.EvictedPending)

	a, _ := listen(t, 1, "127.0.0.1:0", func(c *TCPConfig) { c.DialFrom = "127.0.0.1" })
	a.SetPeers(map[dial.NodeID]string{2: b.Addr().String()})
	seal := sealer(t, 1)
	for i := range 50 {
		require.NoError(t, a.Send(2, seal(2, fmt.Sprint(i))))
	}
	require.Eventually(t, func() bool { return rb.count() == 50 }, 2*time.Second, 5*time.Millisecond, "the peer got through")
	st = b.Stats()
	require.Equal(t, uint64(1), st.Proved)
	require.Equal(t, int64(15), st.InboundPending, "one stranger made room")
	require.Zero(t, a.Stats().HandshakeFailed)
	// The strangers that were closed were the oldest.
	require.True(t, closedWithin(strangers[0], time.Second))
	require.False(t, closedWithin(strangers[79], 100*time.Millisecond))
}

// One source holds at most MaxPendingPerSource pending connections (its
// oldest is closed for a new one) and MaxPerSource in all (past it, a new
// connection is closed at accept); other sources are not affected.
func TestTCPPerSourceBounds(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) {
		c.MaxPendingPerSource, c.MaxPerSource, c.AuthTimeout = 2, 3, 20*time.Second
	})
	addr := b.Addr().String()
	s1, s2, s3 := dialAs(t, addr, "127.0.0.5"), dialAs(t, addr, "127.0.0.5"), dialAs(t, addr, "127.0.0.5")
	require.Eventually(t, func() bool { return b.Stats().Accepted == 3 }, time.Second, 5*time.Millisecond)
	require.True(t, closedWithin(s1, time.Second), "the source's oldest pending connection made room")
	require.False(t, closedWithin(s2, 50*time.Millisecond))
	require.False(t, closedWithin(s3, 50*time.Millisecond))
	require.Equal(t, uint64(1), b.Stats().EvictedPending)
	require.Equal(t, int64(2), b.Stats().InboundPending)

	// Prove both: 127.0.0.5 holds two proved connections; a third
	// connection is pending, a fourth replaces it (three in all).
	proveAs(t, s2, tcpKeys, 5, 2)
	proveAs(t, s3, tcpKeys, 6, 2)
	require.Eventually(t, func() bool { return b.Stats().Proved == 2 }, time.Second, 5*time.Millisecond)
	s4 := dialAs(t, addr, "127.0.0.5")
	require.Eventually(t, func() bool { return b.Stats().InboundPending == 1 }, time.Second, 5*time.Millisecond)
	s5 := dialAs(t, addr, "127.0.0.5")
	require.True(t, closedWithin(s4, time.Second), "at MaxPerSource, the source's pending one makes room")
	proveAs(t, s5, tcpKeys, 7, 2)
	require.Eventually(t, func() bool { return b.Stats().Proved == 3 }, time.Second, 5*time.Millisecond)
	// Now 127.0.0.5 holds three proved connections: the next is closed at
	// accept, before a byte.
	s6 := dialAs(t, addr, "127.0.0.5")
	require.True(t, closedWithin(s6, time.Second))
	require.Equal(t, uint64(1), b.Stats().RefusedPerSource)

	// Another address is not affected.
	o := dialAs(t, addr, "127.0.0.6")
	proveAs(t, o, tcpKeys, 8, 2)
	_, err := o.Write(rawFrame(sealer(t, 8)(2, "from elsewhere")))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
	require.Equal(t, uint64(2), b.Stats().EvictedPending)
}

// The bounds at their least: one pending connection in all, one per
// source. Each new connection takes the pending one's place, a peer
// still gets through, and when everything has closed no count is left
// behind.
func TestTCPBoundsAtOne(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) {
		c.MaxPending, c.MaxPendingPerSource, c.MaxPerSource, c.AuthTimeout = 1, 1, 1, 20*time.Second
	})
	addr := b.Addr().String()
	var cs []net.Conn
	for i := range 5 {
		cs = append(cs, dialAs(t, addr, "127.0.0.5"))
		require.Eventually(t, func() bool { return b.Stats().Accepted == uint64(i+1) }, time.Second, 5*time.Millisecond)
	}
	for _, c := range cs[:4] {
		require.True(t, closedWithin(c, time.Second))
	}
	require.Equal(t, uint64(4), b.Stats().EvictedPending)
	other := dialAs(t, addr, "127.0.0.6")
	require.True(t, closedWithin(cs[4], time.Second), "another source's connection takes the one pending place")
	proveAs(t, other, tcpKeys, 6, 2)
	_, err := other.Write(rawFrame(sealer(t, 6)(2, "through")))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
	again := dialAs(t, addr, "127.0.0.6")
	require.True(t, closedWithin(again, time.Second), "127.0.0.6 holds its one connection")
	require.Equal(t, uint64(1), b.Stats().RefusedPerSource)
	_ = other.Close()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.sources) == 0 && len(b.pending) == 0 && b.proved == 0 && len(b.inbound) == 0
	}, time.Second, 5*time.Millisecond, "nothing left behind")
	st := b.Stats()
	require.Zero(t, st.InboundOpen)
	require.Zero(t, st.InboundPending)
}

// What a peer sent on a connection, recorded off the wire by a relay and
// replayed on a new connection, is refused at once: the proof in it
// answers the relay's connection's challenge, not the new one's. Nothing
// in it reaches the node again. (Before the handshake, a replayed first
// frame was accepted and held a slot for the idle timeout, 60s.)
func TestTCPReplayedFirstFrameIsRefused(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", nil)
	relay, captured := startRelay(t, "127.0.0.8:0", b.Addr().String())
	a, _ := listen(t, 1, "127.0.0.1:0", nil)
	a.SetPeers(map[dial.NodeID]string{2: relay})
	seal := sealer(t, 1)
	for i := range 3 {
		require.NoError(t, a.Send(2, seal(2, fmt.Sprint(i))))
	}
	require.Eventually(t, func() bool { return rb.count() == 3 }, 2*time.Second, 5*time.Millisecond)
	stream := captured()
	require.NotEmpty(t, stream)

	c := dialAs(t, b.Addr().String(), "127.0.0.8")
	_, err := c.Write(stream)
	require.NoError(t, err)
	start := time.Now()
	require.True(t, closedWithin(c, 2*time.Second), "the replay is closed")
	require.Less(t, time.Since(start), 500*time.Millisecond, "at once, not at a timeout")
	require.Eventually(t, func() bool { return b.Stats().Replayed == 1 }, time.Second, 5*time.Millisecond)
	require.Equal(t, 3, rb.count(), "nothing delivered again")
	require.Equal(t, uint64(1), b.Stats().Proved, "only the genuine connection proved itself")
}

// startRelay forwards connections at addr to target, and records what the
// first connection sent toward target.
func startRelay(t *testing.T, addr, target string) (string, func() []byte) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	var rec bytes.Buffer
	first := true
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
			var w io.Writer = out
			if first {
				first = false
				w = io.MultiWriter(out, lockedWriter{&mu, &rec})
			}
			go func() { _, _ = io.Copy(w, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return ln.Addr().String(), func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Clone(rec.Bytes())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Send never blocks: a peer that stops reading fills the queue, and
// Send drops frames with ErrUnreachable.
func TestTCPSendNeverBlocks(t *testing.T) {
	stall, err := net.Listen("tcp", "127.0.0.3:0")
	require.NoError(t, err)
	defer stall.Close()
	go func() {
		for {
			c, err := stall.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accepted, never read
		}
	}()
	a, _ := listen(t, 1, "127.0.0.1:0", func(c *TCPConfig) { c.QueueLen = 8; c.WriteTimeout = 30 * time.Second })
	a.SetPeers(map[dial.NodeID]string{3: stall.Addr().String()})
	big := make([]byte, 1<<20)
	var refused int
	for range 200 {
		start := time.Now()
		if err := a.Send(3, big); err != nil {
			require.ErrorIs(t, err, dial.ErrUnreachable)
			refused++
		}
		require.Less(t, time.Since(start), 100*time.Millisecond, "Send returned at once")
	}
	require.Positive(t, refused)
	require.Positive(t, a.Stats().QueueFull)
}

// A peer that refuses connections is dialled with backoff, not in a hot
// loop, and frames sent meanwhile are dropped at once.
func TestTCPBackoff(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.4:0")
	require.NoError(t, err)
	addr := dead.Addr().String()
	require.NoError(t, dead.Close()) // nothing listens there now
	a, _ := listen(t, 1, "127.0.0.1:0", func(c *TCPConfig) { c.BackoffMin = 50 * time.Millisecond; c.BackoffMax = 200 * time.Millisecond })
	a.SetPeers(map[dial.NodeID]string{4: addr})
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		_ = a.Send(4, []byte("x"))
		time.Sleep(time.Millisecond)
	}
	st := a.Stats()
	// 50+100+200+200+... ms: about 6 dials in a second, never hundreds.
	require.LessOrEqual(t, st.Dials, uint64(10), "dials in 1s")
	require.GreaterOrEqual(t, st.Dials, uint64(3))
	require.Positive(t, st.InBackoff)
}

// A connection that breaks mid-frame delivers nothing of that frame, and
// the next connection starts clean.
func TestTCPBrokenMidFrame(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", nil)
	seal := sealer(t, 1)
	c := dialAs(t, b.Addr().String(), "127.0.0.1")
	proveAs(t, c, tcpKeys, 1, 2)
	good := rawFrame(seal(2, "first"))
	half := rawFrame(seal(2, "second"))
	_, err := c.Write(append(append([]byte(nil), good...), half[:len(half)/2]...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
	_ = c.Close()
	require.Eventually(t, func() bool { return b.Stats().BrokenIn == 1 }, time.Second, 5*time.Millisecond)
	c2 := dialAs(t, b.Addr().String(), "127.0.0.1")
	proveAs(t, c2, tcpKeys, 1, 2)
	_, err = c2.Write(rawFrame(seal(2, "third")))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 2 }, time.Second, 5*time.Millisecond)
	_, plain, ok := transport.NewObserver(tcpKeys).Open(rb.frames[1])
	require.True(t, ok)
	require.Equal(t, "third", string(plain))
}

func TestReadFrameChecksLengthBeforeAllocating(t *testing.T) {
	var before, after runtimeMem
	before.read()
	_, err := readFrame(bufioOf(binary.BigEndian.AppendUint32(nil, MaxWireFrame+1)))
	after.read()
	require.ErrorIs(t, err, errOversize)
	require.Less(t, after.alloc-before.alloc, uint64(1<<20))
	_, err = readFrame(bufioOf(append(binary.BigEndian.AppendUint32(nil, 10), "short"...)))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = readFrame(bufioOf(nil))
	require.True(t, errors.Is(err, io.EOF))
}

type runtimeMem struct{ alloc uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.alloc = s.TotalAlloc
}

func bufioOf(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
