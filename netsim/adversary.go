package netsim

import (
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

// The attacks an Adversary makes.
const (
	AttackRedirect = "redirect"  // a captured request, delivered to a node it was not addressed to
	AttackReplay   = "replay"    // a captured request, delivered again to its target
	AttackOldReply = "old-reply" // a captured reply, delivered again to its target
	AttackForge    = "forge"     // a reply made up for a request still awaiting one, in the clear
	AttackFlip     = "flip"      // a captured frame with one bit flipped, to its target
)

var attacks = []string{AttackRedirect, AttackReplay, AttackOldReply, AttackForge, AttackFlip}

// AdversaryConfig says how hard an Adversary works.
type AdversaryConfig struct {
	// Every is the mean gap between its injections; each gap is drawn
	// from [0, 2*Every].
	Every time.Duration
	// Keep bounds the frames it keeps from the wire; the oldest go first.
	Keep int
}

// Injection is one frame the adversary made and where it went.
type Injection struct {
	Attack string
	To     dial.NodeID
	At     time.Duration // when it was delivered
	Frame  []byte
}

// Adversary sits on every wire of a network, without the cluster's keys:
// it copies the envelopes the network delivers (whose headers it can read
// but not their bodies) and injects frames of its own — captured requests redirected
// to other nodes or replayed to their targets, old replies re-sent,
// replies made up in the clear for requests still awaiting one, and
// captured frames with a bit flipped. It copies only frames already
// delivered, so none of its frames is a genuine frame's first arrival:
// every one must be refused, and the network's record (Watch) of what was
// delivered and lost, which it never appears in, stays true. Its frames
// reach a node whatever the partitions (it has wires of its own) after the
// network's usual latency. Delivering reports the injection being handed to
// a node at this instant, so a harness can see whether the node took it.
type Adversary struct {
	nw    *Network
	rng   *rand.Rand
	cfg   AdversaryConfig
	until time.Duration

	seen       []captured // a ring of the last cfg.Keep frames delivered
	next       int
	delivering *Injection

	// Made counts the injections delivered, by attack.
	Made map[string]int
}

type captured struct {
	from, to dial.NodeID
	env      transport.Envelope
	frame    []byte
}

// StartAdversary starts an adversary on the network, injecting until the
// virtual time until.
func (nw *Network) StartAdversary(cfg AdversaryConfig, until time.Duration) *Adversary {
	if cfg.Every <= 0 || cfg.Keep <= 0 {
		panic("netsim: the adversary needs Every and Keep")
	}
	a := &Adversary{nw: nw, rng: nw.k.Stream("adversary"), cfg: cfg, until: until, Made: map[string]int{}}
	nw.Watch(func(s Sending) {
		if s.Fate != Delivered {
			return
		}
		env, ok := transport.HeaderOf(s.Frame)
		if !ok {
			return
		}
		c := captured{from: s.From, to: s.To, env: env, frame: append([]byte(nil), s.Frame...)}
		if len(a.seen) < a.cfg.Keep {
			a.seen = append(a.seen, c)
		} else {
			a.seen[a.next] = c
			a.next = (a.next + 1) % len(a.seen)
		}
	})
	a.arm()
	return a
}

// Delivering reports the injection being delivered right now, if any.
func (a *Adversary) Delivering() (Injection, bool) {
	if a.delivering == nil {
		return Injection{}, false
	}
	return *a.delivering, true
}

func (a *Adversary) arm() {
	gap := sim.Between(a.rng, 0, 2*a.cfg.Every)
	if a.nw.k.Now()+gap >= a.until {
		return
	}
	a.nw.k.After(gap, sim.EvFault, xxhash.Sum64String("adversary"), func() {
		a.inject()
		a.arm()
	})
}

// pick returns a captured frame that fits, trying a few at random.
func (a *Adversary) pick(fits func(captured) bool) (captured, bool) {
	if len(a.seen) == 0 {
		return captured{}, false
	}
	for range 8 {
		c := a.seen[a.rng.IntN(len(a.seen))]
		if fits(c) {
			return c, true
		}
	}
	return captured{}, false
}

func (a *Adversary) inject() {
	attack := attacks[a.rng.IntN(len(attacks))]
	var c captured
	var ok bool
	to := dial.NodeID(0)
	var frame []byte
	switch attack {
	case AttackRedirect:
		if c, ok = a.pick(func(c captured) bool { return !c.env.Reply }); ok {
			ids := a.nw.k.Nodes()
			to = ids[a.rng.IntN(len(ids))]
			if to == c.to || to == c.from {
				return
			}
			frame = c.frame
		}
	case AttackReplay:
		if c, ok = a.pick(func(c captured) bool { return !c.env.Reply }); ok {
			to, frame = c.to, c.frame
		}
	case AttackOldReply:
		if c, ok = a.pick(func(c captured) bool { return c.env.Reply }); ok {
			to, frame = c.to, c.frame
		}
	case AttackForge:
		// Answer a recent request as its target, in the clear, with the
		// body of some reply of the same family seen on the wire (whose
		// bytes it cannot read, so they are what they are) or a few
		// bytes of its own.
		if c, ok = a.pick(func(c captured) bool { return !c.env.Reply && c.env.Family > 0 }); ok {
			body := []byte{1, 8, 0}
			if r, found := a.pick(func(r captured) bool {
				return r.env.Reply && r.env.Family == c.env.Family && r.env.Class == c.env.Class
			}); found {
				body = r.frame[transport.HeaderSize:]
			}
			var nonce transport.Nonce
			for i := range nonce {
				nonce[i] = byte(a.rng.Uint32())
			}
			to = c.from
			frame = transport.Forge(c.env.Class, c.env.Family, c.to, c.from, c.env.Epoch, nonce, c.env.Nonce, body)
		}
	case AttackFlip:
		if c, ok = a.pick(func(captured) bool { return true }); ok {
			frame = append([]byte(nil), c.frame...)
			i := a.rng.IntN(len(frame))
			frame[i] ^= 1 << a.rng.IntN(8)
			to = c.to
		}
	}
	if frame == nil {
		return
	}
	dst := a.nw.k.Machine(to)
	if dst == nil {
		return
	}
	from := c.from
	if attack == AttackForge {
		from = c.to
	}
	inc := dst.Incarnation()
	delay := sim.Between(a.rng, a.nw.cfg.LatencyMin, a.nw.cfg.LatencyMax)
	a.nw.k.AtNode(a.nw.k.Now()+delay, sim.EvDeliver, to, sim.FrameDigest(from, to, frame), func() {
		if !dst.Up() || dst.Incarnation() != inc {
			return
		}
		inj := Injection{Attack: attack, To: to, At: a.nw.k.Now(), Frame: frame}
		a.Made[attack]++
		a.delivering = &inj
		dst.Receive(from, frame, inc)
		a.delivering = nil
	})
}
