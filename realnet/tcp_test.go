package realnet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
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

// closedSoon reports whether the server closed c within d.
func closedSoon(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
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

// A stranger gets bounded work: garbage, a frame sealed under other keys,
// a genuine frame for another node, a forged bare reply, an oversize
// length and silence all end in a closed connection, and nothing reaches
// the node.
func TestTCPStrangersAreClosed(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) { c.AuthTimeout = 300 * time.Millisecond })
	seal := sealer(t, 1)
	var first []byte
	otherCluster := func() []byte {
		l, err := transport.New(transport.Config{Self: 1, Epoch: 1, Keys: transport.Keys{Data: bytes.Repeat([]byte{9}, 32)},
			Rand: rand.New(rand.NewPCG(1, 1)), Clock: clock.NewManual(time.Unix(0, 0)),
			Classify: func([]byte) (transport.Kind, bool) { return transport.Kind{Class: transport.Data}, true }},
			senderFunc(func(_ dial.NodeID, f []byte) error { first = f; return nil }), dial.HandlerFunc(func(dial.NodeID, []byte) {}))
		require.NoError(t, err)
		require.NoError(t, l.Send(2, []byte("vote")))
		return first
	}
	for name, first := range map[string][]byte{
		"garbage":          rawFrame([]byte("GET / HTTP/1.1\r\n\r\n")),
		"another cluster":  rawFrame(otherCluster()),
		"for another node": rawFrame(seal(3, "vote")),
		"bare reply":       rawFrame(transport.Forge(transport.Data, 1, 1, 2, 1, transport.Nonce{}, transport.Nonce{}, []byte("ok"))),
		"oversize length":  binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF),
		"zero length":      binary.BigEndian.AppendUint32(nil, 0),
		"half a frame":     rawFrame(seal(2, "vote"))[:20],
	} {
		c, err := net.Dial("tcp", b.Addr().String())
		require.NoError(t, err, name)
		_, err = c.Write(first)
		require.NoError(t, err, name)
		require.True(t, closedSoon(c, 2*time.Second), "%s: the connection is closed", name)
		_ = c.Close()
	}
	silent, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	start := time.Now()
	require.True(t, closedSoon(silent, 3*time.Second), "a silent stranger is closed")
	require.Less(t, time.Since(start), 2*time.Second)
	require.Zero(t, rb.count(), "nothing reached the node")
	st := b.Stats()
	require.Equal(t, uint64(4), st.AuthFailed, "garbage, another cluster's, another node's, bare")
	require.Equal(t, uint64(2), st.Oversize, "oversize and zero")
	require.Equal(t, uint64(2), st.AuthTimedOut, "half a frame and silence")
	require.Eventually(t, func() bool { return b.Stats().InboundOpen == 0 }, time.Second, 5*time.Millisecond)
}

// Over MaxInbound, a connection is closed at accept; a slot frees when
// one closes.
func TestTCPInboundCap(t *testing.T) {
	b, rb := listen(t, 2, "127.0.0.2:0", func(c *TCPConfig) { c.MaxInbound = 3; c.AuthTimeout = 5 * time.Second })
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", b.Addr().String())
		require.NoError(t, err)
		held = append(held, c)
	}
	require.Eventually(t, func() bool { return b.Stats().InboundOpen == 3 }, time.Second, 5*time.Millisecond)
	extra, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	require.True(t, closedSoon(extra, time.Second), "the fourth is closed at once")
	require.Equal(t, uint64(1), b.Stats().RefusedOverCap)

	_ = held[0].Close()
	require.Eventually(t, func() bool { return b.Stats().InboundOpen == 2 }, time.Second, 5*time.Millisecond)
	c, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	_, err = c.Write(rawFrame(sealer(t, 1)(2, "hello")))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
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
	c, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	good := rawFrame(seal(2, "first"))
	half := rawFrame(seal(2, "second"))
	_, err = c.Write(append(append([]byte(nil), good...), half[:len(half)/2]...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rb.count() == 1 }, time.Second, 5*time.Millisecond)
	_ = c.Close()
	require.Eventually(t, func() bool { return b.Stats().BrokenIn == 1 }, time.Second, 5*time.Millisecond)
	c2, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
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
