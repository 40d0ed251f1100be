package transport

import (
	"github.com/fenceline/fenceline/dial"
)

// Envelope is what a frame's header says, as Peek reads it.
type Envelope struct {
	Class      Class
	Reply      bool
	Bare       bool // a reply in the clear (the planted bug bare-replies)
	Hello      bool
	Family     uint8
	KeyID, Gen uint32 // the key id of the secret it was sealed under; the sender's key generation
	From, To   dial.NodeID
	Nonce, Ref Nonce
	// Epoch is the sender's boot epoch, ToEpoch the target's as the
	// sender knew it; Seq numbers a request.
	Epoch, ToEpoch, Seq uint64
}

// Observer opens frames without a link's state: no address, replay or
// reply check, nothing remembered. It is for observers that hold the keys
// and must read what crossed the wire, such as the simulator's record of
// frames; a node opens frames only through its Link. It keeps the frame
// keys it derived, at most ObserverKeys of them, and so, unlike a cipher,
// is not safe for concurrent use.
type Observer struct {
	control, data *ring
	openers       *openers
}

// ObserverKeys bounds the frame keys an Observer keeps.
const ObserverKeys = 4096

// NewObserver returns an observer with the keys.
func NewObserver(k Keys) *Observer {
	return &Observer{control: newRing(k.Control, k.AcceptControl), data: newRing(k.Data, k.AcceptData), openers: newOpeners(ObserverKeys)}
}

// Open reads a frame's header and opens its body; ok is false when the
// frame is not an envelope or its seal does not open. A bare reply's body
// is returned as it is.
func (o *Observer) Open(frame []byte) (env Envelope, plain []byte, ok bool) {
	env, ok = HeaderOf(frame)
	if !ok {
		return env, nil, false
	}
	if env.Bare {
		return env, frame[HeaderSize:], true
	}
	h, _ := parseHeader(frame)
	plain, _, ok = o.openers.open(o.control, o.data, &h, frame)
	return env, plain, ok
}

// HeaderOf reads a frame's header without opening it: what anyone on the
// wire can see. ok is false for a frame that is not an envelope.
func HeaderOf(frame []byte) (Envelope, bool) {
	h, err := parseHeader(frame)
	if err != nil {
		return Envelope{}, false
	}
	return Envelope{Class: h.class, Reply: h.reply(), Bare: h.flags&flagBare != 0, Hello: h.hello(), Family: h.family,
		KeyID: h.kid, Gen: h.gen, From: h.from, To: h.to, Nonce: h.nonce, Ref: h.ref, Epoch: h.epoch, ToEpoch: h.toEpoch, Seq: h.seq}, true
}

// Forge builds a frame as an adversary without the keys would: a bare
// reply (flags reply|bare) from one node to another naming ref, with body
// in the clear. Only a link with the planted bug bare-replies opens it.
func Forge(class Class, family uint8, from, to dial.NodeID, toEpoch uint64, nonce, ref Nonce, body []byte) []byte {
	h := header{class: class, flags: flagReply | flagBare, family: family, from: from, to: to, toEpoch: toEpoch, nonce: nonce, ref: ref}
	return append(h.append(make([]byte, 0, HeaderSize+len(body))), body...)
}
