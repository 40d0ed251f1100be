package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"github.com/fenceline/fenceline/dial"
)

// A connection between nodes (realnet's TCP) starts with a proof that it
// comes from a holder of the data key, made now: the listener sends a
// fresh random challenge, and the dialler answers with the data key's MAC
// over (its node id, the listener's node id, the challenge). A proof
// recorded off the wire answers another challenge, so replaying it opens
// nothing; one made for another node names that node. The proof carries
// its key id, so it checks under either data key during a rotation.

const (
	// ConnChallengeSize is the length of a listener's challenge.
	ConnChallengeSize = 16
	// ConnProofSize is the length of a dialler's proof:
	// key id:4 from:8 to:8 challenge:16 mac:32.
	ConnProofSize = 4 + 8 + 8 + ConnChallengeSize + sha256.Size
)

// The errors CheckConnProof answers.
var (
	ErrConnProof    = errors.New("transport: connection proof does not check")
	ErrConnReplayed = errors.New("transport: connection proof answers another challenge (a replay)")
)

// ConnProof is node from's proof, to node to, that it holds the data key,
// answering challenge.
func (k Keys) ConnProof(from, to dial.NodeID, challenge [ConnChallengeSize]byte) []byte {
	b := make([]byte, 0, ConnProofSize)
	b = binary.BigEndian.AppendUint32(b, KeyID(k.Data))
	b = binary.BigEndian.AppendUint64(b, uint64(from))
	b = binary.BigEndian.AppendUint64(b, uint64(to))
	b = append(b, challenge[:]...)
	return append(b, connMAC(k.Data, b)...)
}

func connMAC(data, signed []byte) []byte {
	m := hmac.New(sha256.New, derive(data, "connection proof v1"))
	m.Write(signed)
	return m.Sum(nil)
}

// CheckConnProof checks a proof received by node self, which sent
// challenge, and returns the node it proves: ErrConnProof for anything
// but a proof made with an accepted data key for self, ErrConnReplayed
// for a genuine proof that answers another challenge.
func (k Keys) CheckConnProof(proof []byte, self dial.NodeID, challenge [ConnChallengeSize]byte) (dial.NodeID, error) {
	if len(proof) != ConnProofSize || len(k.Data) != KeySize {
		return 0, ErrConnProof
	}
	signed, mac := proof[:ConnProofSize-sha256.Size], proof[ConnProofSize-sha256.Size:]
	var key []byte
	switch id := binary.BigEndian.Uint32(signed); {
	case id == KeyID(k.Data):
		key = k.Data
	case len(k.AcceptData) == KeySize && id == KeyID(k.AcceptData):
		key = k.AcceptData
	default:
		return 0, ErrConnProof
	}
	if !hmac.Equal(connMAC(key, signed), mac) {
		return 0, ErrConnProof
	}
	from, to := dial.NodeID(binary.BigEndian.Uint64(signed[4:])), dial.NodeID(binary.BigEndian.Uint64(signed[12:]))
	if to != self || from == 0 {
		return 0, ErrConnProof
	}
	if !hmac.Equal(signed[20:], challenge[:]) {
		return 0, ErrConnReplayed
	}
	return from, nil
}
