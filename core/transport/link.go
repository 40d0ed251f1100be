package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/dial"
)

// Kind is what a plaintext frame is to the envelope: the key that seals
// it, and whether it is a request that expects a reply (Family > 0), the
// reply to a request of a family, or one-way (Family 0, not a reply).
type Kind struct {
	Class  Class
	Family uint8 // 1..7 pairs requests with their replies; 0: one-way
	Reply  bool
}

// Classify says what a plaintext frame is, or false for a frame no
// protocol of the node's knows. The node that owns the frame formats
// supplies it; the receiver runs it on what it opened, so a frame whose
// contents disagree with its header is dropped.
type Classify func(frame []byte) (Kind, bool)

// Source is where nonces come from: a seeded stream in the simulator, the
// OS's randomness in the real node. math/rand/v2's *Rand fits.
type Source interface{ Uint64() uint64 }

// Config configures a Link.
type Config struct {
	Self dial.NodeID
	// Epoch is the node's boot epoch, at least 1 and higher at every
	// start (core/node keeps it on disk). Requests name their target's
	// epoch, so frames made for a node's earlier incarnation are dropped
	// by the next one; and a receiver drops requests from an epoch older
	// than the newest it has seen from their sender.
	Epoch uint64
	// Clock paces hellos (Mono only).
	Clock    clock.Clock
	Keys     Keys
	Rand     Source
	Classify Classify
	Bugs     bugs.Set

	// MaxPeers bounds the nodes the link keeps state for (sequence
	// numbers, replay windows, outstanding requests), sending and
	// receiving each. At the bound, a frame to or from a node it has no
	// state for is dropped and counted (peer-limit): a cluster has tens
	// of members, and a stranger minting node ids must not grow memory.
	// Default 1024.
	MaxPeers int
	// Window is how many of a sender's most recent request numbers a
	// receiver remembers: a request numbered below the window is dropped
	// as too old, one inside it that was seen is a replay. A multiple of
	// 64; default 1024, about 130 bytes a sender.
	Window int
	// MaxOutstanding bounds, per peer and family, the requests sent that
	// await a reply and the requests received that are owed one. At the
	// bound the oldest is forgotten: its reply, if it ever comes, is
	// dropped as unsolicited (the protocols above retry). Default 512.
	MaxOutstanding int
	// HelloEvery is the least time between two hellos to one peer, which
	// bounds what replaying old frames at a node can make it send.
	// Default 20ms.
	HelloEvery time.Duration
	// RekeyEvery is how many frames of a class the node seals under one
	// generation's key before it moves to the next (keys.go). Default
	// DefaultRekeyEvery (2^24), at most MaxRekeyEvery (2^30).
	RekeyEvery uint64
}

// Causes a frame is dropped for, as Stats counts them.
const (
	CauseMalformed   = iota // not an envelope
	CauseNoKey              // sealed under a key this node does not hold (its class's, or the one its key id names)
	CauseMisaddress         // addressed to another node
	CauseForged             // the seal does not open: altered, or not made with the key
	CauseMismatch           // the contents are not of the class or family the header names
	CauseReplay             // a request number already seen
	CauseStale              // a request from an older epoch, or below the window
	CauseIncarnation        // a request made for another incarnation of this node
	CauseUnsolicited        // a reply to no outstanding request
	CausePeerLimit          // a node beyond MaxPeers
	CauseUnbound            // outbound: a reply with no request to answer
	CauseUnknown            // outbound: a frame Classify does not know
	CauseExhausted          // outbound: the sender used its last key generation (2^56 frames in one boot)
	numCauses
)

// CauseNames name the causes, for metrics and logs.
var CauseNames = [numCauses]string{"malformed", "no-key", "misaddressed", "forged", "mismatch",
	"replay", "stale", "incarnation", "unsolicited", "peer-limit", "unbound-reply", "unknown-frame", "key-exhausted"}

// Stats counts what the link did.
type Stats struct {
	Sealed, Opened uint64
	Hellos         uint64 // hellos sent
	Dropped        [numCauses]uint64
}

// ErrUnbound is Send's answer for a reply with no request to answer; it
// wraps dial.ErrUnreachable, since to the caller it is a lost frame.
var ErrUnbound = fmt.Errorf("transport: reply answers no request: %w", dial.ErrUnreachable)

// Link seals what a node sends and opens what it receives: a dial.Sender
// for the node, a dial.Handler for the network. It runs on the node's
// loop, like the node.
type Link struct {
	cfg           Config
	out           dial.Sender
	in            dial.Handler
	control, data *ring             // the secrets; control nil without the control key
	sealers       [Data + 1]*sealer // by class; nil without the class's key
	openers       *openers          // the frame keys frames opened under

	seq     map[dial.NodeID]uint64 // the last request number sent to each target
	known   map[dial.NodeID]uint64 // each peer's newest boot epoch seen
	helloAt map[dial.NodeID]time.Duration
	windows map[dial.NodeID]*window // each sender's recent request numbers
	asked   map[peerFamily]*asked   // requests sent, awaiting replies
	owed    map[peerFamily]*owed    // requests received, owed replies
	stats   Stats
}

type peerFamily struct {
	peer   dial.NodeID
	family uint8
}

// New returns a link that sends through out and hands what it opens to in.
func New(cfg Config, out dial.Sender, in dial.Handler) (*Link, error) {
	if err := cfg.Keys.Check(); err != nil {
		return nil, err
	}
	if cfg.Self == 0 || cfg.Epoch == 0 || cfg.Rand == nil || cfg.Classify == nil || cfg.Clock == nil {
		return nil, errors.New("transport: Config needs Self, Epoch, Rand, Classify and Clock")
	}
	if cfg.HelloEvery == 0 {
		cfg.HelloEvery = 20 * time.Millisecond
	}
	if cfg.MaxPeers == 0 {
		cfg.MaxPeers = 1024
	}
	if cfg.Window == 0 {
		cfg.Window = 1024
	}
	if cfg.MaxOutstanding == 0 {
		cfg.MaxOutstanding = 512
	}
	if cfg.RekeyEvery == 0 {
		cfg.RekeyEvery = DefaultRekeyEvery
	}
	if cfg.MaxPeers < 1 || cfg.Window < 64 || cfg.Window%64 != 0 || cfg.MaxOutstanding < 1 || cfg.RekeyEvery > MaxRekeyEvery {
		return nil, fmt.Errorf("transport: bad bounds (MaxPeers %d, Window %d, MaxOutstanding %d, RekeyEvery %d)",
			cfg.MaxPeers, cfg.Window, cfg.MaxOutstanding, cfg.RekeyEvery)
	}
	l := &Link{cfg: cfg, out: out, in: in,
		control: newRing(cfg.Keys.Control, cfg.Keys.AcceptControl), data: newRing(cfg.Keys.Data, cfg.Keys.AcceptData),
		// Two classes' current keys per peer, and room for the next
		// generation's or epoch's beside them.
		openers: newOpeners(4 * cfg.MaxPeers),
		seq:     map[dial.NodeID]uint64{}, known: map[dial.NodeID]uint64{}, helloAt: map[dial.NodeID]time.Duration{},
		windows: map[dial.NodeID]*window{},
		asked:   map[peerFamily]*asked{}, owed: map[peerFamily]*owed{}}
	for _, c := range []Class{Control, Data} {
		if r := l.ring(c); r != nil {
			l.sealers[c] = &sealer{sec: r.seal, class: c, every: cfg.RekeyEvery}
		}
	}
	return l, nil
}

// Self is the node's id.
func (l *Link) Self() dial.NodeID { return l.cfg.Self }

// Stats returns the link's counters.
func (l *Link) Stats() Stats { return l.stats }

func (l *Link) ring(c Class) *ring {
	if c == Control {
		return l.control
	}
	return l.data
}

// seal seals frame (nil for a hello) behind header h, filling in the
// key id and generation, under the key of h's class.
func (l *Link) seal(h *header, s *sealer, frame []byte) ([]byte, error) {
	aead, gen, err := s.next(l.cfg.Self, l.cfg.Epoch)
	if err != nil {
		return nil, err
	}
	h.kid, h.gen = s.sec.id, gen
	hdr := h.append(make([]byte, 0, HeaderSize+len(frame)+aead.Overhead()))
	return aead.Seal(hdr, h.nonce[:], frame, hdr), nil
}

func (l *Link) drop(cause int) { l.stats.Dropped[cause]++ }

func (l *Link) nonce() Nonce {
	var n Nonce
	a, b := l.cfg.Rand.Uint64(), l.cfg.Rand.Uint64()
	for i := range 8 {
		n[i] = byte(a >> (8 * i))
	}
	for i := range 4 {
		n[8+i] = byte(b >> (8 * i))
	}
	return n
}

// Send seals frame for to and passes it on. A frame Classify does not
// know, one of a class whose key this node lacks, and a reply to no
// request are dropped with an error wrapping dial.ErrUnreachable.
func (l *Link) Send(to dial.NodeID, frame []byte) error {
	if err := dial.CheckFrame(frame); err != nil {
		return err
	}
	k, ok := l.cfg.Classify(frame)
	if !ok || (k.Class != Control && k.Class != Data) || k.Family >= maxFamilies || (k.Reply && k.Family == 0) {
		l.drop(CauseUnknown)
		return fmt.Errorf("transport: unknown frame: %w", dial.ErrUnreachable)
	}
	s := l.sealers[k.Class]
	if s == nil {
		l.drop(CauseNoKey)
		return fmt.Errorf("transport: no %v key: %w", k.Class, dial.ErrUnreachable)
	}
	if s.exhausted() {
		l.drop(CauseExhausted)
		return fmt.Errorf("%w: %w", errExhausted, dial.ErrUnreachable)
	}
	h := header{class: k.Class, family: k.Family, from: l.cfg.Self, to: to, nonce: l.nonce(),
		epoch: l.cfg.Epoch, toEpoch: l.known[to]}
	pf := peerFamily{to, k.Family}
	if k.Reply {
		o := l.owed[pf]
		ref, ok := o.pop()
		if !ok {
			l.drop(CauseUnbound)
			return ErrUnbound
		}
		h.flags, h.ref = flagReply, ref
	} else {
		if _, known := l.seq[to]; !known && len(l.seq) >= l.cfg.MaxPeers {
			l.drop(CausePeerLimit)
			return fmt.Errorf("transport: over %d peers: %w", l.cfg.MaxPeers, dial.ErrUnreachable)
		}
		if k.Family > 0 && l.asked[pf] == nil && len(l.asked) >= l.cfg.MaxPeers*maxFamilies {
			l.drop(CausePeerLimit)
			return fmt.Errorf("transport: over %d peers: %w", l.cfg.MaxPeers, dial.ErrUnreachable)
		}
		l.seq[to]++
		h.seq = l.seq[to]
		if k.Family > 0 {
			a := l.asked[pf]
			if a == nil {
				a = newAsked(l.cfg.MaxOutstanding)
				l.asked[pf] = a
			}
			a.add(h.nonce)
		}
	}
	var sealed []byte
	var err error
	if k.Reply && l.cfg.Bugs.BareReplies {
		// The planted bug: replies travel in the clear, unauthenticated,
		// the way the reference design's once did.
		h.flags |= flagBare
		sealed = append(h.append(make([]byte, 0, HeaderSize+len(frame))), frame...)
	} else if sealed, err = l.seal(&h, s, frame); err != nil {
		return fmt.Errorf("%w: %w", err, dial.ErrUnreachable) // cannot happen: exhausted() said no
	}
	l.stats.Sealed++
	return l.out.Send(to, sealed)
}

// HandleFrame opens a frame from the network and hands the plaintext to
// the node, or drops it and counts why. The sender is the one the sealed
// header names, not the one the network claims. Nothing the frame says
// changes the link's state until it has opened and its contents match its
// header.
func (l *Link) HandleFrame(_ dial.NodeID, frame []byte) {
	h, err := parseHeader(frame)
	if err != nil {
		l.drop(CauseMalformed)
		return
	}
	if l.ring(h.class) == nil {
		l.drop(CauseNoKey)
		return
	}
	if h.to != l.cfg.Self && !l.cfg.Bugs.NoAddressing {
		l.drop(CauseMisaddress)
		return
	}
	var plain []byte
	bare := h.flags&flagBare != 0
	switch {
	case bare && h.reply() && l.cfg.Bugs.BareReplies:
		plain = frame[HeaderSize:]
	case bare:
		l.drop(CauseForged)
		return
	default:
		var cause int
		var opened bool
		if plain, cause, opened = l.openers.open(l.control, l.data, &h, frame); !opened {
			l.drop(cause)
			return
		}
	}
	// The sender's epoch, as it sealed it: what its next requests from
	// us must name. Old frames carry older epochs and change nothing.
	if e, known := l.known[h.from]; !bare && (known || len(l.known) < l.cfg.MaxPeers) && h.epoch > e {
		l.known[h.from] = h.epoch
	}
	if h.hello() {
		l.stats.Opened++
		if h.toEpoch != l.cfg.Epoch {
			// A greeting from a peer that does not know who we are now:
			// answer it, so its first request is not dropped.
			l.hello(h.from, h.class)
		}
		return
	}
	k, ok := l.cfg.Classify(plain)
	if !ok || k.Class != h.class || k.Family != h.family || k.Reply != h.reply() {
		l.drop(CauseMismatch)
		return
	}
	pf := peerFamily{h.from, h.family}
	if !h.reply() && h.toEpoch != l.cfg.Epoch {
		// Made for an earlier incarnation of this node, or before the
		// sender heard of this one: tell it who we are now.
		l.drop(CauseIncarnation)
		l.hello(h.from, h.class)
		return
	}
	switch {
	case h.reply() && bare:
		// The planted bug trusts a bare reply as it stands.
	case h.reply():
		if !l.asked[pf].take(h.ref) {
			l.drop(CauseUnsolicited)
			return
		}
	default:
		w := l.windows[h.from]
		if w == nil {
			if len(l.windows) >= l.cfg.MaxPeers {
				l.drop(CausePeerLimit)
				return
			}
			w = newWindow(l.cfg.Window)
			l.windows[h.from] = w
		}
		if cause, ok := w.admit(h.epoch, h.seq); !ok {
			l.drop(cause)
			return
		}
		if h.family > 0 {
			o := l.owed[pf]
			if o == nil {
				if len(l.owed) >= l.cfg.MaxPeers*maxFamilies {
					l.drop(CausePeerLimit)
					return
				}
				o = newOwed(l.cfg.MaxOutstanding)
				l.owed[pf] = o
			}
			o.push(h.nonce)
		}
	}
	l.stats.Opened++
	l.in.HandleFrame(h.from, plain)
}

// Greet tells a peer this node's epoch, and, if the hello names the
// wrong epoch for the peer (this node does not know it yet, or the peer
// has restarted since), the peer answers with its own: afterwards the
// first request either way is not dropped for naming the wrong
// incarnation. A node greets its peers when it learns where they are (the
// real node does on every membership change, and when it starts); without
// it, the first request to each peer costs a round trip. At most one
// hello per peer per HelloEvery.
func (l *Link) Greet(to dial.NodeID) { l.hello(to, Data) }

// hello tells a peer this node's epoch, at most once per HelloEvery.
func (l *Link) hello(to dial.NodeID, class Class) {
	now := l.cfg.Clock.Mono()
	if at, ok := l.helloAt[to]; ok && now-at < l.cfg.HelloEvery {
		return
	}
	if _, ok := l.helloAt[to]; !ok && len(l.helloAt) >= l.cfg.MaxPeers {
		return
	}
	s := l.sealers[class]
	if s == nil || s.exhausted() {
		return
	}
	h := header{class: class, flags: flagHello, from: l.cfg.Self, to: to, nonce: l.nonce(), epoch: l.cfg.Epoch, toEpoch: l.known[to]}
	sealed, err := l.seal(&h, s, nil)
	if err != nil {
		return
	}
	if err := l.out.Send(to, sealed); err != nil {
		return // not even queued (no address yet, say): it does not count against the pace
	}
	// Sent, it may still be lost like any frame; the next drop or
	// greeting says it again.
	l.helloAt[to] = now
	l.stats.Hellos++
}
