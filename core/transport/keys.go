package transport

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/dial"
)

// The keys, and how a frame's key is chosen.
//
// A cluster secret never seals a frame itself. Each frame is sealed under
// a key derived (HKDF-SHA256) from the secret of its class and from who
// sealed it and when: (class, sender id, sender's boot epoch, generation).
// A sender seals at most RekeyEvery frames (default 2^24) under one
// generation's key, then moves to the next; the generation travels in the
// header, so the receiver derives the same key (and keeps the few it uses
// in a bounded cache). GCM nonces stay 96 random bits, so a key that
// seals 2^24 frames has a chance of about 2^-49 of ever repeating one —
// far inside NIST SP 800-38D's bound for random nonces (2^32 seals per
// key, for a chance of 2^-32), where one key for the cluster's lifetime
// would reach that bound in a day at 50,000 frames a second. Two nodes,
// or two boots of one node, never share a key; and a node whose disk was
// wiped, so that it boots with an epoch it used before, only adds its
// random nonces to the same keys' counts. A sender that ran out of
// generations (2^32 of them: 2^56 frames in one boot) seals nothing more
// and counts it (CauseExhausted); restarting gives it a new epoch.
//
// Key ids and rotation. Every frame names, in its header, the key id of
// the secret it was sealed under: four bytes derived from the secret,
// which say nothing about it. A node seals with Keys.Control and
// Keys.Data and opens frames under those or under AcceptControl and
// AcceptData, whichever the frame's key id names; join and removal
// attestations and the TCP connection proof are checked the same way.
// A rotation of the data key (the control key's is the same, with the
// control flags) is three rolling restarts, each finished on every node
// before the next begins, so that at every moment every frame in flight
// is sealed under a key every node accepts:
//
//  1. every node: -data-key-file OLD -accept-data-key-file NEW
//     (seal with the old key; accept the new one);
//  2. every node: -data-key-file NEW -accept-data-key-file OLD
//     (seal with the new key; still accept the old one);
//  3. every node: -data-key-file NEW (the old key is refused from now on;
//     destroy it).
//
// A node that joins during a rotation is started with the flags of the
// phase the cluster is in. A key id that collides between a node's two
// keys of a class is refused at start (generate the new key again).

// KeySize is the length of a cluster secret, in bytes.
const KeySize = 32

// Keys are the two cluster secrets, and during a rotation a second one of
// each class that is accepted but never sealed with. A node that holds
// only Data can carry flow traffic but can neither seal nor open a raft
// frame, nor attest a join.
type Keys struct {
	Control, Data []byte
	// AcceptControl and AcceptData, if set, are opened under too (frames,
	// attestations, connection proofs that name their key id), never
	// sealed with: the next key before every node seals with it, or the
	// previous one until no node does.
	AcceptControl, AcceptData []byte
}

// Check reports a key of the wrong length, an accepted key without a key
// of its class, and two keys of a class whose key ids collide. A missing
// Control key is allowed (a data-only node); a missing Data key is not.
func (k Keys) Check() error {
	if k.Control != nil && len(k.Control) != KeySize {
		return fmt.Errorf("transport: control key is %d bytes, want %d", len(k.Control), KeySize)
	}
	if len(k.Data) != KeySize {
		return fmt.Errorf("transport: data key is %d bytes, want %d", len(k.Data), KeySize)
	}
	for _, c := range []struct {
		name         string
		main, accept []byte
	}{{"control", k.Control, k.AcceptControl}, {"data", k.Data, k.AcceptData}} {
		if c.accept == nil {
			continue
		}
		if len(c.accept) != KeySize {
			return fmt.Errorf("transport: accepted %s key is %d bytes, want %d", c.name, len(c.accept), KeySize)
		}
		if c.main == nil {
			return fmt.Errorf("transport: an accepted %s key needs a %s key to seal with", c.name, c.name)
		}
		if string(c.main) != string(c.accept) && KeyID(c.main) == KeyID(c.accept) {
			return fmt.Errorf("transport: the %s keys' ids collide (%08x): generate the new key again", c.name, KeyID(c.main))
		}
	}
	return nil
}

// KeyID names a secret on the wire: the first four bytes of a derivation
// from it, which say nothing of the secret itself.
func KeyID(secret []byte) uint32 {
	return binary.BigEndian.Uint32(derive(secret, "key id")[:4])
}

// derive turns a cluster secret into the key for one purpose, so the same
// secret never keys two algorithms.
func derive(secret []byte, purpose string) []byte {
	k, err := hkdf.Key(sha256.New, secret, []byte("fenceline transport v1"), purpose, KeySize)
	if err != nil {
		panic("transport: hkdf: " + err.Error()) // only for lengths over 255*32
	}
	return k
}

// secret is one cluster secret, ready to derive frame keys from.
type secret struct {
	id  uint32
	prk []byte // HKDF-Extract of the secret
	raw []byte
}

func newSecret(raw []byte) *secret {
	prk, err := hkdf.Extract(sha256.New, raw, []byte("fenceline frame keys v2"))
	if err != nil {
		panic("transport: hkdf: " + err.Error())
	}
	return &secret{id: KeyID(raw), prk: prk, raw: raw}
}

// ring is a class's secrets: the one it seals with, and the one it also
// accepts (nil outside a rotation).
type ring struct{ seal, accept *secret }

func newRing(main, accept []byte) *ring {
	if len(main) != KeySize {
		return nil
	}
	r := &ring{seal: newSecret(main)}
	if len(accept) == KeySize && string(accept) != string(main) {
		r.accept = newSecret(accept)
	}
	return r
}

// find returns the secret whose key id is id, or nil.
func (r *ring) find(id uint32) *secret {
	switch {
	case r == nil:
		return nil
	case r.seal.id == id:
		return r.seal
	case r.accept != nil && r.accept.id == id:
		return r.accept
	}
	return nil
}

// frameKey derives the AEAD that sender from, in boot epoch, seals
// frames of class c with in generation gen.
func (s *secret) frameKey(c Class, from dial.NodeID, epoch uint64, gen uint32) cipher.AEAD {
	info := make([]byte, 0, 32)
	info = append(info, "fenceline frame "...)
	info = append(info, byte(c))
	info = binary.BigEndian.AppendUint64(info, uint64(from))
	info = binary.BigEndian.AppendUint64(info, epoch)
	info = binary.BigEndian.AppendUint32(info, gen)
	k, err := hkdf.Expand(sha256.New, s.prk, string(info), KeySize)
	if err != nil {
		panic("transport: hkdf: " + err.Error())
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		panic("transport: aes: " + err.Error()) // the key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("transport: gcm: " + err.Error())
	}
	return aead
}

// DefaultRekeyEvery is how many frames a sender seals under one
// generation's key by default.
const DefaultRekeyEvery = 1 << 24

// MaxRekeyEvery is the most a Config may ask for: 2^30 seals with random
// 96-bit nonces repeat one with a chance of about 2^-37.
const MaxRekeyEvery = 1 << 30

// errExhausted is a sender past its last generation.
var errExhausted = errors.New("transport: out of key generations for this boot (restart the node)")

// sealer is one class's sending key: the generation in use and how many
// frames it sealed.
type sealer struct {
	sec   *secret
	class Class
	every uint64
	gen   uint32
	n     uint64 // frames sealed under gen
	aead  cipher.AEAD
}

// exhausted reports whether the next frame has no key left to seal it.
func (s *sealer) exhausted() bool {
	return s.aead != nil && s.n >= s.every && s.gen == ^uint32(0)
}

// next returns the key for the next frame and its generation, moving to
// the next generation when this one sealed its share.
func (s *sealer) next(from dial.NodeID, epoch uint64) (cipher.AEAD, uint32, error) {
	if s.aead != nil && s.n >= s.every {
		if s.gen == ^uint32(0) {
			return nil, 0, errExhausted
		}
		s.gen++
		s.aead = nil
	}
	if s.aead == nil {
		s.aead, s.n = s.sec.frameKey(s.class, from, epoch, s.gen), 0
	}
	s.n++
	return s.aead, s.gen, nil
}

// keyRef names one derived frame key.
type keyRef struct {
	class Class
	kid   uint32
	from  dial.NodeID
	epoch uint64
	gen   uint32
}

// openers caches the frame keys frames were opened under: only keys a
// frame opened with are kept (a forged header costs a derivation, never
// a place), at most max of them, the oldest forgotten first.
type openers struct {
	m     map[keyRef]cipher.AEAD
	order []keyRef // a ring: next is where the next key goes
	next  int
	max   int
}

func newOpeners(max int) *openers {
	return &openers{m: map[keyRef]cipher.AEAD{}, max: max}
}

// open opens a sealed frame whose header (already parsed into h) names
// its key, with the secrets of rings; or says why it does not open. (A
// hello's plaintext is empty, and may be nil.)
func (o *openers) open(control, data *ring, h *header, frame []byte) (plain []byte, cause int, ok bool) {
	r := data
	if h.class == Control {
		r = control
	}
	sec := r.find(h.kid)
	if sec == nil {
		return nil, CauseNoKey, false
	}
	ref := keyRef{h.class, h.kid, h.from, h.epoch, h.gen}
	aead, cached := o.m[ref]
	if !cached {
		aead = sec.frameKey(h.class, h.from, h.epoch, h.gen)
	}
	plain, err := aead.Open(nil, h.nonce[:], frame[HeaderSize:], frame[:HeaderSize])
	if err != nil {
		return nil, CauseForged, false
	}
	if !cached {
		o.add(ref, aead)
	}
	return plain, 0, true
}

func (o *openers) add(ref keyRef, aead cipher.AEAD) {
	if len(o.order) < o.max {
		o.order = append(o.order, ref)
	} else {
		delete(o.m, o.order[o.next])
		o.order[o.next] = ref
		o.next = (o.next + 1) % len(o.order)
	}
	o.m[ref] = aead
}
