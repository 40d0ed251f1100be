package realnet

import (
	"bufio"
	"bytes"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// MaxWireFrame is the largest frame TCP carries: a node's largest frame
// in its envelope. A declared length over it closes the connection before
// anything is allocated.
const MaxWireFrame = dial.MaxFrame + transport.Overhead

// How a connection between nodes starts. The dialler says hello; the
// listener answers with a fresh random challenge; the dialler proves,
// with the data key (transport.Keys.ConnProof), that it is node N
// connecting to this node in answer to that challenge; then frames flow,
// one way. Each message is length-prefixed like a frame, and the listener
// closes the connection at the first byte that is not what it expects. A
// proof recorded off the wire answers another challenge: replayed, it is
// refused at once and counted (Replayed). A stranger gets nothing back
// but a challenge, and only after a hello.
//
// Strangers get bounded work, and cannot keep peers out:
//
//   - A connection that has not proved itself yet is pending. At most
//     MaxPending are, and at most MaxPendingPerSource from one source
//     address (IPv6: one /64); past either bound the oldest pending
//     connection (of the source, or of all) is closed to make room. A peer
//     proves itself within a round trip of connecting, so those closed are
//     the strangers that sit on their connections: keeping a peer out
//     takes more than MaxPending new connections, from several sources,
//     within that round trip, again on every retry of the peer's.
//   - A pending connection has AuthTimeout to prove itself.
//   - Only proved connections hold one of the MaxInbound peer slots; one
//     that proves itself while they are all held is closed (a key
//     holder's business: only those can prove).
//   - One source holds at most MaxPerSource connections, pending and
//     proved; past it a new one is closed at accept (or, if the source
//     has a pending one, that is closed instead).
var (
	connHello     = []byte("fenceln2") // the dialler's first message
	connChallenge = []byte("FNC2")     // before the listener's challenge
)

// TCPConfig configures a TCP transport. Zero fields take the defaults.
type TCPConfig struct {
	Self   dial.NodeID
	Listen string // the peer address to listen on, such as 127.0.0.1:7946
	// Keys prove each outbound connection to its listener and check each
	// inbound one's proof (the data key: see above); the node's Link
	// checks every frame after that.
	Keys transport.Keys

	// QueueLen bounds each peer's outbound queue, in frames: Send on a
	// full queue drops the frame and returns dial.ErrUnreachable. 1024.
	QueueLen int
	// MaxInbound bounds the inbound connections that proved themselves:
	// the peers' slots. 64.
	MaxInbound int
	// MaxPending bounds the inbound connections that have not proved
	// themselves yet; past it the oldest is closed. 16.
	MaxPending int
	// MaxPendingPerSource bounds those from one source address (an IPv6
	// /64); past it the source's oldest is closed. 4.
	MaxPendingPerSource int
	// MaxPerSource bounds all inbound connections from one source
	// address; past it a new one is closed at accept. 32.
	MaxPerSource int
	// AuthTimeout is how long a connection has, from accept, to prove
	// itself: a hello, a challenge and a proof, one round trip and three
	// small messages. A stranger that says nothing is closed then. The
	// dialler waits as long for the challenge. 1s.
	AuthTimeout time.Duration
	// IdleTimeout closes an inbound connection that has carried nothing
	// for that long (peers exchange heartbeats far more often). 60s.
	IdleTimeout time.Duration
	// DialFrom, if set, is the local IP outbound connections are dialled
	// from: a node on 127.0.0.2 dials from 127.0.0.2, so that whatever
	// sits between nodes (a test's proxies, a firewall) can tell them
	// apart by source address.
	DialFrom string
	// DialTimeout and WriteTimeout bound a dial and one write. 1s, 5s.
	DialTimeout, WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait after a failed dial or a
	// broken connection, doubling from min to max while failures last:
	// a misconfigured peer costs a dial every BackoffMax, not a hot loop.
	// Frames sent to a peer in backoff are dropped at once. 100ms, 5s.
	BackoffMin, BackoffMax time.Duration
}

func (c *TCPConfig) defaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defInt(&c.QueueLen, 1024)
	defInt(&c.MaxInbound, 64)
	defInt(&c.MaxPending, 16)
	defInt(&c.MaxPendingPerSource, 4)
	defInt(&c.MaxPerSource, 32)
	def(&c.AuthTimeout, time.Second)
	def(&c.IdleTimeout, 60*time.Second)
	def(&c.DialTimeout, time.Second)
	def(&c.WriteTimeout, 5*time.Second)
	def(&c.BackoffMin, 100*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
}

// TCPStats counts what a TCP transport did.
type TCPStats struct {
	FramesIn         uint64 `json:"frames_in"`
	FramesOut        uint64 `json:"frames_out"`
	Accepted         uint64 `json:"accepted"`
	Proved           uint64 `json:"proved"`             // inbound connections that proved themselves
	RefusedOverCap   uint64 `json:"refused_over_cap"`   // proved connections closed: MaxInbound were open
	RefusedPerSource uint64 `json:"refused_per_source"` // closed at accept: their source held MaxPerSource
	EvictedPending   uint64 `json:"evicted_pending"`    // pending connections closed to make room for newer ones
	AuthFailed       uint64 `json:"auth_failed"`        // a hello or proof that was not one, or not for us
	Replayed         uint64 `json:"replayed"`           // a genuine proof answering another challenge: recorded and replayed
	AuthTimedOut     uint64 `json:"auth_timed_out"`     // no proof within AuthTimeout
	Oversize         uint64 `json:"oversize"`           // a declared length over MaxWireFrame (or zero)
	BrokenIn         uint64 `json:"broken_in"`          // inbound connections that failed after proving themselves
	Dials            uint64 `json:"dials"`
	DialFailures     uint64 `json:"dial_failures"`
	HandshakeFailed  uint64 `json:"handshake_failed"` // outbound connections whose listener sent no challenge in time
	BrokenOut        uint64 `json:"broken_out"`       // outbound connections that failed mid-write
	QueueFull        uint64 `json:"queue_full"`       // frames dropped at Send
	InBackoff        uint64 `json:"in_backoff"`       // frames dropped at Send
	UnknownPeer      uint64 `json:"unknown_peer"`     // frames to a node with no address
	Misaddressed     uint64 `json:"misaddressed"`     // frames not addressed to us, or not from the node the connection proved, dropped
	DeliverRefused   uint64 `json:"deliver_refused"`  // frames the node's mailbox had no room for
	InboundOpen      int64  `json:"inbound_open"`     // gauge: pending and proved
	InboundPending   int64  `json:"inbound_pending"`  // gauge
	PeersOut         int64  `json:"peers_out"`        // gauge
}

// TCP is the transport between real nodes: length-prefixed frames over
// one outbound connection per peer (dialled when there is something to
// send) and whatever inbound connections peers open. Everything a peer
// does wrong — refuses, resets, stalls, sends garbage or too much — is
// dial.ErrUnreachable to the sender and a closed connection to the
// receiver, never a retry loop: a failed peer waits out its backoff.
type TCP struct {
	cfg     TCPConfig
	ln      net.Listener
	deliver func(from dial.NodeID, frame []byte) error

	mu      sync.Mutex
	peers   map[dial.NodeID]*peerOut
	addrs   map[dial.NodeID]string
	inbound map[*inConn]struct{}
	pending []*inConn // in the order they were accepted
	sources map[string]*sourceCount
	proved  int
	closed  bool
	wg      sync.WaitGroup

	st struct {
		framesIn, framesOut, accepted, proved, refusedOverCap, refusedPerSource, evictedPending, authFailed, replayed,
		authTimedOut, oversize, brokenIn, dials, dialFailures, handshakeFailed, brokenOut, queueFull, inBackoff, unknownPeer,
		misaddressed, deliverRefused atomic.Uint64
		inboundOpen, inboundPending, peersOut atomic.Int64
	}
}

// inConn is one inbound connection. Its state changes under TCP.mu.
type inConn struct {
	c      net.Conn
	source string
	state  int
	peer   dial.NodeID // once proved
}

const (
	connPending = iota
	connProved
	connGone
)

// sourceCount is one source address's inbound connections.
type sourceCount struct{ pending, proved int }

// ListenTCP listens on cfg.Listen and hands every frame that arrives to
// deliver (from any goroutine; deliver must not block — post it to the
// node's loop with TryPost — and its error counts the frame as refused).
func ListenTCP(cfg TCPConfig, deliver func(from dial.NodeID, frame []byte) error) (*TCP, error) {
	cfg.defaults()
	if err := cfg.Keys.Check(); err != nil {
		return nil, err
	}
	if cfg.Self == 0 {
		return nil, errors.New("realnet: TCPConfig needs Self")
	}
	if cfg.MaxInbound < 1 || cfg.MaxPending < 1 || cfg.MaxPendingPerSource < 1 || cfg.MaxPerSource < 1 {
		return nil, fmt.Errorf("realnet: bad TCP bounds (MaxInbound %d, MaxPending %d, MaxPendingPerSource %d, MaxPerSource %d)",
			cfg.MaxInbound, cfg.MaxPending, cfg.MaxPendingPerSource, cfg.MaxPerSource)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("realnet: listen for peers on %s: %w", cfg.Listen, err)
	}
	t := &TCP{cfg: cfg, ln: ln, deliver: deliver,
		peers: map[dial.NodeID]*peerOut{}, addrs: map[dial.NodeID]string{}, inbound: map[*inConn]struct{}{},
		sources: map[string]*sourceCount{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCP) Addr() net.Addr { return t.ln.Addr() }

// SetPeers sets where each peer listens, from the committed membership.
// A peer whose address changed is dialled afresh; one no longer listed
// is forgotten.
func (t *TCP) SetPeers(addrs map[dial.NodeID]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, p := range t.peers {
		if addrs[id] != p.addr {
			p.stop()
			delete(t.peers, id)
		}
	}
	t.addrs = map[dial.NodeID]string{}
	for id, a := range addrs {
		t.addrs[id] = a
	}
}

// Send queues frame for to and returns at once.
func (t *TCP) Send(to dial.NodeID, frame []byte) error {
	if len(frame) > MaxWireFrame {
		return fmt.Errorf("%w: %d bytes > %d", dial.ErrFrameTooLarge, len(frame), MaxWireFrame)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fmt.Errorf("%w: transport closed", dial.ErrUnreachable)
	}
	p := t.peers[to]
	if p == nil {
		addr, ok := t.addrs[to]
		if !ok {
			t.mu.Unlock()
			t.st.unknownPeer.Add(1)
			return fmt.Errorf("%w: no address for %v", dial.ErrUnreachable, to)
		}
		p = &peerOut{t: t, id: to, addr: addr, queue: make(chan []byte, t.cfg.QueueLen), done: make(chan struct{})}
		t.peers[to] = p
		t.st.peersOut.Add(1)
		t.wg.Add(1)
		go p.run()
	}
	t.mu.Unlock()
	if until := p.backoffUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		t.st.inBackoff.Add(1)
		return fmt.Errorf("%w: %v failed recently; backing off", dial.ErrUnreachable, to)
	}
	select {
	case p.queue <- frame:
		return nil
	default:
		t.st.queueFull.Add(1)
		return fmt.Errorf("%w: %d frames queued for %v", dial.ErrUnreachable, t.cfg.QueueLen, to)
	}
}

// Close stops listening, closes every connection and waits for the
// transport's goroutines. Queued frames are dropped.
func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	err := t.ln.Close()
	for _, p := range t.peers {
		p.stop()
	}
	for ic := range t.inbound {
		_ = ic.c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	s := &t.st
	return TCPStats{FramesIn: s.framesIn.Load(), FramesOut: s.framesOut.Load(), Accepted: s.accepted.Load(), Proved: s.proved.Load(),
		RefusedOverCap: s.refusedOverCap.Load(), RefusedPerSource: s.refusedPerSource.Load(), EvictedPending: s.evictedPending.Load(),
		AuthFailed: s.authFailed.Load(), Replayed: s.replayed.Load(), AuthTimedOut: s.authTimedOut.Load(),
		Oversize: s.oversize.Load(), BrokenIn: s.brokenIn.Load(), Dials: s.dials.Load(), DialFailures: s.dialFailures.Load(),
		HandshakeFailed: s.handshakeFailed.Load(), BrokenOut: s.brokenOut.Load(), QueueFull: s.queueFull.Load(), InBackoff: s.inBackoff.Load(),
		UnknownPeer: s.unknownPeer.Load(), Misaddressed: s.misaddressed.Load(), DeliverRefused: s.deliverRefused.Load(),
		InboundOpen: s.inboundOpen.Load(), InboundPending: s.inboundPending.Load(), PeersOut: s.peersOut.Load()}
}

// sourceOf is the source a connection's bounds count it under: its IP
// address, or for IPv6 its /64 (one host's usual share).
func sourceOf(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

func (t *TCP) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors: do not spin
			continue
		}
		t.admit(c)
	}
}

// admit takes an accepted connection as pending, making room for it, or
// closes it.
func (t *TCP) admit(c net.Conn) {
	src := sourceOf(c.RemoteAddr())
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = c.Close()
		return
	}
	var n sourceCount
	if s := t.sources[src]; s != nil {
		n = *s
	}
	switch {
	case n.pending > 0 && (n.pending >= t.cfg.MaxPendingPerSource || n.pending+n.proved >= t.cfg.MaxPerSource):
		t.evictLocked(t.oldestPendingLocked(src))
	case n.pending+n.proved >= t.cfg.MaxPerSource:
		t.mu.Unlock()
		t.st.refusedPerSource.Add(1)
		_ = c.Close()
		return
	}
	if len(t.pending) >= t.cfg.MaxPending {
		t.evictLocked(t.pending[0])
	}
	// Looked up after the evictions, which drop a source left with no
	// connection.
	s := t.sources[src]
	if s == nil {
		s = &sourceCount{}
		t.sources[src] = s
	}
	ic := &inConn{c: c, source: src, state: connPending}
	t.pending = append(t.pending, ic)
	s.pending++
	t.inbound[ic] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	t.st.accepted.Add(1)
	t.st.inboundOpen.Add(1)
	t.st.inboundPending.Add(1)
	go t.read(ic)
}

func (t *TCP) oldestPendingLocked(src string) *inConn {
	for _, ic := range t.pending {
		if ic.source == src {
			return ic
		}
	}
	return nil // cannot happen: the source counts a pending connection
}

// evictLocked closes a pending connection to make room; its reader
// finds it gone.
func (t *TCP) evictLocked(ic *inConn) {
	if ic == nil || ic.state != connPending {
		return
	}
	t.leaveLocked(ic)
	t.st.evictedPending.Add(1)
	_ = ic.c.Close()
}

// leaveLocked takes a connection out of the counts it is in.
func (t *TCP) leaveLocked(ic *inConn) {
	s := t.sources[ic.source]
	switch ic.state {
	case connPending:
		t.pending = slices.DeleteFunc(t.pending, func(p *inConn) bool { return p == ic })
		s.pending--
		t.st.inboundPending.Add(-1)
	case connProved:
		s.proved--
		t.proved--
	default:
		return
	}
	if s.pending+s.proved == 0 {
		delete(t.sources, ic.source)
	}
	ic.state = connGone
}

// prove moves a pending connection to the peers' slots, or says why not.
func (t *TCP) prove(ic *inConn, peer dial.NodeID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ic.state != connPending {
		return false // evicted meanwhile
	}
	if t.proved >= t.cfg.MaxInbound {
		t.st.refusedOverCap.Add(1)
		t.leaveLocked(ic)
		return false
	}
	t.pending = slices.DeleteFunc(t.pending, func(p *inConn) bool { return p == ic })
	t.st.inboundPending.Add(-1)
	s := t.sources[ic.source]
	s.pending--
	s.proved++
	t.proved++
	ic.state, ic.peer = connProved, peer
	return true
}

var errHandshake = errors.New("realnet: not a fenceline node's handshake")

// handshake is the listener's side: hello, challenge, proof. It returns
// the node the connection proved.
func (t *TCP) handshake(c net.Conn, r *bufio.Reader) (dial.NodeID, error) {
	hello, err := readSized(r, len(connHello))
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(hello, connHello) {
		return 0, errHandshake
	}
	var ch [transport.ConnChallengeSize]byte
	_, _ = cryptorand.Read(ch[:]) // never fails (crypto/rand panics instead)
	if _, err := c.Write(append(append([]byte(nil), connChallenge...), ch[:]...)); err != nil {
		return 0, err
	}
	proof, err := readSized(r, transport.ConnProofSize)
	if err != nil {
		return 0, err
	}
	return t.cfg.Keys.CheckConnProof(proof, t.cfg.Self, ch)
}

// read serves one inbound connection until it fails or closes.
func (t *TCP) read(ic *inConn) {
	c := ic.c
	defer func() {
		_ = c.Close()
		t.mu.Lock()
		t.leaveLocked(ic)
		delete(t.inbound, ic)
		t.mu.Unlock()
		t.st.inboundOpen.Add(-1)
		t.wg.Done()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetDeadline(time.Now().Add(t.cfg.AuthTimeout))
	peer, err := t.handshake(c, r)
	if err != nil {
		switch {
		case errors.Is(err, errOversize):
			t.st.oversize.Add(1)
		case isTimeout(err):
			t.st.authTimedOut.Add(1)
		case errors.Is(err, transport.ErrConnReplayed):
			t.st.replayed.Add(1)
		case errors.Is(err, net.ErrClosed):
			// evicted, or the transport closed
		default:
			t.st.authFailed.Add(1)
		}
		return
	}
	if !t.prove(ic, peer) {
		return
	}
	t.st.proved.Add(1)
	_ = c.SetDeadline(time.Time{})
	for {
		_ = c.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		frame, err := readFrame(r)
		if err != nil {
			switch {
			case errors.Is(err, errOversize):
				t.st.oversize.Add(1)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				t.st.brokenIn.Add(1)
			}
			return
		}
		env, ok := transport.HeaderOf(frame)
		if !ok || env.To != t.cfg.Self || env.From != peer {
			// Not for us, or not from the node the connection proved:
			// dropped here, before it costs the node an open.
			t.st.misaddressed.Add(1)
			continue
		}
		t.st.framesIn.Add(1)
		if err := t.deliver(env.From, frame); err != nil {
			t.st.deliverRefused.Add(1)
		}
	}
}

// readSized reads one length-prefixed handshake message that must be
// want bytes long.
func readSized(r *bufio.Reader, want int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	switch n := binary.BigEndian.Uint32(hdr[:]); {
	case n == 0 || n > MaxWireFrame:
		return nil, fmt.Errorf("%w: %d", errOversize, n)
	case n != uint32(want):
		return nil, fmt.Errorf("%w: a message of %d bytes", errHandshake, n)
	}
	b := make([]byte, want)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

var errOversize = errors.New("realnet: declared frame length over the limit")

// readFrame reads one length-prefixed frame. The length is checked
// before anything is allocated.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxWireFrame {
		return nil, fmt.Errorf("%w: %d", errOversize, n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // mid-frame: never a clean end
		}
		return nil, err
	}
	return frame, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// peerOut is one peer's outbound queue and the goroutine that drains it
// into one connection, dialled when needed and dropped on any error.
type peerOut struct {
	t            *TCP
	id           dial.NodeID
	addr         string
	queue        chan []byte
	done         chan struct{}
	once         sync.Once
	backoffUntil atomic.Int64 // unix nanoseconds; 0: not backing off
	conn         net.Conn     // the writer goroutine's alone
}

func (p *peerOut) stop() {
	p.once.Do(func() {
		close(p.done)
		p.t.st.peersOut.Add(-1)
	})
}

func (p *peerOut) run() {
	defer p.t.wg.Done()
	defer func() {
		if p.conn != nil {
			_ = p.conn.Close()
		}
	}()
	backoff := time.Duration(0)
	var w *bufio.Writer
	fail := func(broken bool) {
		if p.conn != nil {
			_ = p.conn.Close()
			p.conn = nil
		}
		if broken {
			p.t.st.brokenOut.Add(1)
		}
		backoff = min(max(2*backoff, p.t.cfg.BackoffMin), p.t.cfg.BackoffMax)
		p.backoffUntil.Store(time.Now().Add(backoff).UnixNano())
		// What was queued went to a peer that failed: drop it, as a
		// lossy network would; the protocols above retry.
		for len(p.queue) > 0 {
			<-p.queue
		}
		select {
		case <-time.After(backoff):
		case <-p.done:
		}
	}
	for {
		var frame []byte
		select {
		case frame = <-p.queue:
		case <-p.done:
			return
		}
		if p.conn == nil {
			p.t.st.dials.Add(1)
			c, err := p.t.dialer().Dial("tcp", p.addr)
			if err != nil {
				p.t.st.dialFailures.Add(1)
				fail(false)
				continue
			}
			p.conn, w = c, bufio.NewWriterSize(c, 64<<10)
			// The proof goes out with the first frames, in one write.
			if err := p.greet(w); err != nil {
				p.t.st.handshakeFailed.Add(1)
				fail(false)
				continue
			}
		}
		_ = p.conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		err := writeFrame(w, frame)
		// Write what else is queued before flushing: one syscall for a
		// burst.
		n := uint64(1)
		for err == nil && len(p.queue) > 0 {
			err = writeFrame(w, <-p.queue)
			n++
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			fail(true)
			continue
		}
		p.t.st.framesOut.Add(n)
		backoff = 0
		p.backoffUntil.Store(0)
	}
}

// greet is the dialler's side of the handshake: hello, the listener's
// challenge, and the proof, left in w for the first write.
func (p *peerOut) greet(w *bufio.Writer) error {
	c := p.conn
	_ = c.SetDeadline(time.Now().Add(p.t.cfg.AuthTimeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	if err := writeFrame(w, connHello); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var got [4 + transport.ConnChallengeSize]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return err
	}
	if !bytes.Equal(got[:4], connChallenge) {
		return errHandshake
	}
	return writeFrame(w, p.t.cfg.Keys.ConnProof(p.t.cfg.Self, p.id, [transport.ConnChallengeSize]byte(got[4:])))
}

func (t *TCP) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: t.cfg.DialTimeout}
	if t.cfg.DialFrom != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(t.cfg.DialFrom)}
	}
	return d
}

func writeFrame(w *bufio.Writer, frame []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(frame)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(frame)
	return err
}
