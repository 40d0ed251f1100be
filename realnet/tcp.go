package realnet

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
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

// TCPConfig configures a TCP transport. Zero fields take the defaults.
type TCPConfig struct {
	Self   dial.NodeID
	Listen string // the peer address to listen on, such as 127.0.0.1:7946
	// Keys authenticate each inbound connection's first frame (it must
	// open under the control or the data key and be addressed to Self);
	// the node's Link checks every frame after that.
	Keys transport.Keys

	// QueueLen bounds each peer's outbound queue, in frames: Send on a
	// full queue drops the frame and returns dial.ErrUnreachable. 1024.
	QueueLen int
	// MaxInbound bounds concurrent inbound connections; one over it is
	// closed at accept. 64.
	MaxInbound int
	// AuthTimeout is how long a connection has, from accept, to deliver
	// a first frame that authenticates; a stranger that says nothing is
	// closed then. 2s.
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
	if c.QueueLen == 0 {
		c.QueueLen = 1024
	}
	if c.MaxInbound == 0 {
		c.MaxInbound = 64
	}
	def(&c.AuthTimeout, 2*time.Second)
	def(&c.IdleTimeout, 60*time.Second)
	def(&c.DialTimeout, time.Second)
	def(&c.WriteTimeout, 5*time.Second)
	def(&c.BackoffMin, 100*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
}

// TCPStats counts what a TCP transport did.
type TCPStats struct {
	FramesIn       uint64 `json:"frames_in"`
	FramesOut      uint64 `json:"frames_out"`
	Accepted       uint64 `json:"accepted"`
	RefusedOverCap uint64 `json:"refused_over_cap"` // inbound connections closed at accept: over MaxInbound
	AuthFailed     uint64 `json:"auth_failed"`      // first frame did not open, or was not addressed to us
	AuthTimedOut   uint64 `json:"auth_timed_out"`   // no first frame within AuthTimeout
	Oversize       uint64 `json:"oversize"`         // a declared length over MaxWireFrame
	BrokenIn       uint64 `json:"broken_in"`        // inbound connections that failed after authenticating
	Dials          uint64 `json:"dials"`
	DialFailures   uint64 `json:"dial_failures"`
	BrokenOut      uint64 `json:"broken_out"`      // outbound connections that failed mid-write
	QueueFull      uint64 `json:"queue_full"`      // frames dropped at Send
	InBackoff      uint64 `json:"in_backoff"`      // frames dropped at Send
	UnknownPeer    uint64 `json:"unknown_peer"`    // frames to a node with no address
	Misaddressed   uint64 `json:"misaddressed"`    // later frames not addressed to us, dropped
	DeliverRefused uint64 `json:"deliver_refused"` // frames the node's mailbox had no room for
	InboundOpen    int64  `json:"inbound_open"`    // gauges
	PeersOut       int64  `json:"peers_out"`       // gauges
}

// TCP is the transport between real nodes: length-prefixed frames over
// one outbound connection per peer (dialled when there is something to
// send) and whatever inbound connections peers open. Everything a peer
// does wrong — refuses, resets, stalls, sends garbage or too much — is
// dial.ErrUnreachable to the sender and a closed connection to the
// receiver, never a retry loop: a failed peer waits out its backoff.
type TCP struct {
	cfg      TCPConfig
	ln       net.Listener
	observer *transport.Observer
	deliver  func(from dial.NodeID, frame []byte) error

	mu      sync.Mutex
	peers   map[dial.NodeID]*peerOut
	addrs   map[dial.NodeID]string
	inbound map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	slots   chan struct{} // MaxInbound tokens

	st struct {
		framesIn, framesOut, accepted, refusedOverCap, authFailed, authTimedOut, oversize,
		brokenIn, dials, dialFailures, brokenOut, queueFull, inBackoff, unknownPeer,
		misaddressed, deliverRefused atomic.Uint64
		inboundOpen, peersOut atomic.Int64
	}
}

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
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("realnet: listen for peers on %s: %w", cfg.Listen, err)
	}
	t := &TCP{cfg: cfg, ln: ln, observer: transport.NewObserver(cfg.Keys), deliver: deliver,
		peers: map[dial.NodeID]*peerOut{}, addrs: map[dial.NodeID]string{}, inbound: map[net.Conn]struct{}{},
		slots: make(chan struct{}, cfg.MaxInbound)}
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
	for c := range t.inbound {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	s := &t.st
	return TCPStats{FramesIn: s.framesIn.Load(), FramesOut: s.framesOut.Load(), Accepted: s.accepted.Load(),
		RefusedOverCap: s.refusedOverCap.Load(), AuthFailed: s.authFailed.Load(), AuthTimedOut: s.authTimedOut.Load(),
		Oversize: s.oversize.Load(), BrokenIn: s.brokenIn.Load(), Dials: s.dials.Load(), DialFailures: s.dialFailures.Load(),
		BrokenOut: s.brokenOut.Load(), QueueFull: s.queueFull.Load(), InBackoff: s.inBackoff.Load(),
		UnknownPeer: s.unknownPeer.Load(), Misaddressed: s.misaddressed.Load(), DeliverRefused: s.deliverRefused.Load(),
		InboundOpen: s.inboundOpen.Load(), PeersOut: s.peersOut.Load()}
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
		select {
		case t.slots <- struct{}{}:
		default:
			t.st.refusedOverCap.Add(1)
			_ = c.Close()
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			_ = c.Close()
			<-t.slots
			return
		}
		t.inbound[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		t.st.accepted.Add(1)
		t.st.inboundOpen.Add(1)
		go t.read(c)
	}
}

// read serves one inbound connection until it fails or closes.
func (t *TCP) read(c net.Conn) {
	defer func() {
		_ = c.Close()
		t.mu.Lock()
		delete(t.inbound, c)
		t.mu.Unlock()
		t.st.inboundOpen.Add(-1)
		<-t.slots
		t.wg.Done()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(t.cfg.AuthTimeout))
	first := true
	for {
		frame, err := readFrame(r)
		if err != nil {
			switch {
			case errors.Is(err, errOversize):
				t.st.oversize.Add(1)
			case first && isTimeout(err):
				t.st.authTimedOut.Add(1)
			case first:
				t.st.authFailed.Add(1)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				t.st.brokenIn.Add(1)
			}
			return
		}
		env, ok := transport.HeaderOf(frame)
		if first {
			if _, _, opened := t.observer.Open(frame); !ok || !opened || env.Bare || env.To != t.cfg.Self {
				t.st.authFailed.Add(1)
				return
			}
			first = false
		} else if !ok || env.To != t.cfg.Self {
			// Not for us: dropped here, before it costs the node a seal.
			t.st.misaddressed.Add(1)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		t.st.framesIn.Add(1)
		if err := t.deliver(env.From, frame); err != nil {
			t.st.deliverRefused.Add(1)
		}
	}
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
