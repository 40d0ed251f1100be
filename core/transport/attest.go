package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Joining is decided by an attestation made with the control key, never
// by what a node says about itself: a node asks a member to add it, with
// the control key's MAC over exactly what it asks to become (its name and
// its peer and HTTP addresses), and the member checks the MAC before it
// proposes anything. A node without the control key can become neither
// learner nor voter: it can make no attestation, and it could not open a
// raft frame if it were added.

// AttestationSize is the length of an attestation.
const AttestationSize = sha256.Size

// ErrAttestation is the answer to a join whose attestation does not check.
var ErrAttestation = errors.New("transport: join attestation does not check (is the control key the cluster's?)")

// Attest returns the control key's attestation that the node called name,
// reachable at peer and http, may join. It fails without the control key.
func (k Keys) Attest(name, peer, http string) ([]byte, error) {
	if len(k.Control) != KeySize {
		return nil, errors.New("transport: attesting a join needs the control key")
	}
	m := hmac.New(sha256.New, derive(k.Control, "join attestation"))
	for _, s := range []string{name, peer, http} {
		// Length-prefixed, so ("ab","c") and ("a","bc") differ.
		m.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
		m.Write([]byte(s))
	}
	return m.Sum(nil), nil
}

// CheckAttestation reports whether att is the control key's attestation
// for name at peer and http.
func (k Keys) CheckAttestation(name, peer, http string, att []byte) error {
	want, err := k.Attest(name, peer, http)
	if err != nil {
		return err
	}
	if !hmac.Equal(want, att) {
		return ErrAttestation
	}
	return nil
}
