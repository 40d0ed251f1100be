// Package transport is the envelope every peer frame travels in, the same
// in the simulator and on TCP: sealed with AES-256-GCM under a key derived
// from one of two cluster secrets (per sender, boot and generation: see
// keys.go), addressed, and checked against replay.
//
//   - Two keys. The control key seals raft traffic and only control members
//     hold it; the data key seals flow traffic (operations, replication,
//     adoption, anti-entropy). A frame sealed under one never opens under
//     the other, and a frame's contents must be of the class its header
//     names, so a holder of the data key cannot smuggle a raft message.
//   - A request is addressed to the target's node id, which the seal
//     covers: one captured on its way to one member does not open at
//     another.
//   - A reply is addressed to the nonce of the request it answers, and
//     opens only while that request is outstanding at its receiver, once:
//     a replayed reply, or one made for a request never sent, is useless.
//   - A request replayed to the same target is dropped: each sender
//     numbers its requests per target within its boot epoch, and each
//     receiver keeps a sliding window of the numbers it has seen.
//   - A request is addressed to one incarnation of its target: it names
//     the target's boot epoch, and a restarted node drops requests made
//     for its earlier self (which its fresh replay window would not
//     recognise). A node learns a peer's epoch from every frame the peer
//     seals; until it has, or after the peer restarts, its requests are
//     dropped and answered with a hello that carries the receiver's epoch
//     (at most one per peer per HelloEvery), and the protocols above
//     retry.
//
// Nothing here draws randomness except from the Source it is handed (the
// simulator hands a seeded stream, the real node the OS's), keeps state
// without a bound, reads a clock other than the one it is handed (or the
// times passed in), or blocks. Link is the envelope as a layer between a
// node and its dial.Sender; Attest is the control key's word that a node
// may join or be removed (attest.go); ConnProof is the data key's word
// that a connection comes from a node, now (conn.go).
package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/dial"
)

// Class says which key seals a frame.
type Class uint8

const (
	Control Class = 1 // raft: only control members hold the control key
	Data    Class = 2 // flow traffic
)

func (c Class) String() string {
	switch c {
	case Control:
		return "control"
	case Data:
		return "data"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// The frame on the wire. Every header byte is authenticated (it is the
// seal's additional data); the body is encrypted.
//
//	magic:1 version:1 class:1 flags:1 family:1 key:4 gen:4
//	from:8 to:8 nonce:12 epoch:8 to_epoch:8 seq:8 ref:12
//	sealed body (plaintext + 16-byte tag)
//
// key is the key id of the cluster secret the frame was sealed under and
// gen the sender's key generation: with from and epoch they name the
// frame's key (keys.go). Every frame carries its sender's boot epoch and,
// as to_epoch, the target's as the sender knows it (0: not yet). A
// request (flags 0) also carries a per-target sequence number and no ref.
// A reply (flagReply) carries the nonce of the request it answers as ref
// and no seq: its one-time ref is its replay protection. A hello
// (flagHello) has an empty body: it only tells its target the sender's
// epoch.
const (
	magic       = 0xF7
	version     = 2
	HeaderSize  = 5 + 4 + 4 + 8 + 8 + 12 + 8 + 8 + 8 + 12
	Overhead    = HeaderSize + 16 // what the envelope adds to a frame
	NonceSize   = 12
	flagReply   = 1 << 0
	flagBare    = 1 << 1 // planted bug bare-replies: a reply in the clear
	flagHello   = 1 << 2
	maxFamilies = 8
)

// Nonce names one sealed frame; a reply names its request by it.
type Nonce [NonceSize]byte

// header is a frame's header, decoded.
type header struct {
	class   Class
	flags   uint8
	family  uint8
	kid     uint32
	gen     uint32
	from    dial.NodeID
	to      dial.NodeID
	nonce   Nonce
	epoch   uint64
	toEpoch uint64
	seq     uint64
	ref     Nonce
}

func (h *header) reply() bool { return h.flags&flagReply != 0 }
func (h *header) hello() bool { return h.flags&flagHello != 0 }

func (h *header) append(b []byte) []byte {
	b = append(b, magic, version, byte(h.class), h.flags, h.family)
	b = binary.BigEndian.AppendUint32(b, h.kid)
	b = binary.BigEndian.AppendUint32(b, h.gen)
	b = binary.BigEndian.AppendUint64(b, uint64(h.from))
	b = binary.BigEndian.AppendUint64(b, uint64(h.to))
	b = append(b, h.nonce[:]...)
	b = binary.BigEndian.AppendUint64(b, h.epoch)
	b = binary.BigEndian.AppendUint64(b, h.toEpoch)
	b = binary.BigEndian.AppendUint64(b, h.seq)
	return append(b, h.ref[:]...)
}

// errMalformed is a frame that is not an envelope at all.
var errMalformed = errors.New("malformed")

func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < HeaderSize || b[0] != magic || b[1] != version {
		return h, errMalformed
	}
	h.class, h.flags, h.family = Class(b[2]), b[3], b[4]
	if (h.class != Control && h.class != Data) || h.flags&^(flagReply|flagBare|flagHello) != 0 || h.family >= maxFamilies ||
		(h.flags&flagHello != 0 && h.flags != flagHello) {
		return h, errMalformed
	}
	h.kid = binary.BigEndian.Uint32(b[5:])
	h.gen = binary.BigEndian.Uint32(b[9:])
	h.from = dial.NodeID(binary.BigEndian.Uint64(b[13:]))
	h.to = dial.NodeID(binary.BigEndian.Uint64(b[21:]))
	copy(h.nonce[:], b[29:41])
	h.epoch = binary.BigEndian.Uint64(b[41:])
	h.toEpoch = binary.BigEndian.Uint64(b[49:])
	h.seq = binary.BigEndian.Uint64(b[57:])
	copy(h.ref[:], b[65:77])
	return h, nil
}
