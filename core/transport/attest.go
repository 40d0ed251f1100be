package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Joining and removing are decided by an attestation made with the
// control key, never by what a node says about itself: a node asks a
// member to add it with the control key's MAC over exactly what it asks
// to become (its name and its peer and HTTP addresses), and an operator
// asks for a removal with the MAC over the name removed; the member checks
// the MAC before it proposes anything. A node without the control key can
// become neither learner nor voter: it can make no attestation, and it
// could not open a raft frame if it were added.
//
// An attestation is good once, for a while: it carries the time it was
// made (the attester's clock) and a random nonce, both under the MAC. A
// checker refuses one made more than AttestValidity ago or more than
// AttestSkew in its future (clocks disagree, both ways, by up to
// AttestSkew), and, with an AttestGuard, one whose nonce it has seen: a
// captured join or removal cannot be replayed to the node that took it,
// now or later (to another node, see the acts' versions below). This
// package reads no clock: callers pass the times in.

// The acts an attestation may vouch for; the MAC covers the act, so one
// made for a join never passes for a removal.
//
// A nonce is remembered by the node that admitted it, which is no
// defence on another node: so each act also names the version of what
// it changes (the membership index, the directory's epoch), and a node
// takes it only while it holds that version. Replayed anywhere once the
// membership or the directory has changed, it does nothing.
const (
	// ActJoin: a node's name, peer address, HTTP address, and the
	// membership index it is added to (decimal).
	ActJoin = "join"
	// ActRemove: the name removed, and the membership index it is
	// removed from (decimal).
	ActRemove = "remove"
	// ActResize: the number of groups, and the epoch of the directory
	// it changes (decimal).
	ActResize = "resize"
	// ActAddGroup adds a group to a running fleet, founded by the node
	// named. Fields: its name, peer address, HTTP address, the group's
	// number and its founding membership index (decimal).
	ActAddGroup = "add-group"
)

const (
	// AttestValidity is how long after it was made an attestation is
	// good, and AttestSkew how far the attester's and the checker's
	// clocks may disagree, either way.
	AttestValidity = 5 * time.Minute
	AttestSkew     = time.Minute
	// AttestNonceSize is the length of an attestation's nonce.
	AttestNonceSize = 16
	// MaxAttestationText bounds an attestation's text form; longer text
	// is refused before it is parsed.
	MaxAttestationText = 128
)

// Attestation is the control key's word that an act may be done.
type Attestation struct {
	KeyID    uint32 // the control key it was made with
	IssuedAt int64  // Unix milliseconds, by the attester's clock
	Nonce    [AttestNonceSize]byte
	MAC      [sha256.Size]byte
}

// The errors a check answers, each wrapping ErrAttestation.
var (
	ErrAttestation        = errors.New("transport: attestation does not check (is the control key the cluster's?)")
	ErrAttestationExpired = fmt.Errorf("%w: made too long ago or in the future (the clocks of the attester and this node disagree by more than %v?)", ErrAttestation, AttestSkew)
	ErrAttestationUsed    = fmt.Errorf("%w: already used (a replay)", ErrAttestation)
	// ErrAttestGuardFull is the answer while the guard remembers as many
	// attestations as it may: try again later. It does not wrap
	// ErrAttestation: the attestation may be good.
	ErrAttestGuardFull = errors.New("transport: too many recent attestations to remember another; try again later")
)

// Attest returns the control key's attestation that act may be done with
// fields, made at issuedAt with nonce (the caller draws it from a good
// source of randomness). It fails without the control key.
func (k Keys) Attest(act string, fields []string, issuedAt time.Time, nonce [AttestNonceSize]byte) (Attestation, error) {
	if len(k.Control) != KeySize {
		return Attestation{}, errors.New("transport: an attestation needs the control key")
	}
	a := Attestation{KeyID: KeyID(k.Control), IssuedAt: issuedAt.UnixMilli(), Nonce: nonce}
	copy(a.MAC[:], attestMAC(k.Control, act, fields, a))
	return a, nil
}

func attestMAC(control []byte, act string, fields []string, a Attestation) []byte {
	m := hmac.New(sha256.New, derive(control, "attestation v2"))
	for _, s := range append([]string{act}, fields...) {
		// Length-prefixed, so ("ab","c") and ("a","bc") differ.
		m.Write(binary.BigEndian.AppendUint32(nil, uint32(len(s))))
		m.Write([]byte(s))
	}
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(a.IssuedAt)))
	m.Write(a.Nonce[:])
	return m.Sum(nil)
}

// CheckAttestation reports whether a is the control key's attestation
// (or, during a rotation, the accepted control key's) that act may be
// done with fields, and is good at now. It does not remember a: an
// AttestGuard refuses a second use.
func (k Keys) CheckAttestation(act string, fields []string, a Attestation, now time.Time) error {
	if len(k.Control) != KeySize {
		return errors.New("transport: checking an attestation needs the control key")
	}
	var key []byte
	switch a.KeyID {
	case KeyID(k.Control):
		key = k.Control
	case KeyID(k.AcceptControl):
		if len(k.AcceptControl) == KeySize {
			key = k.AcceptControl
		}
	}
	if key == nil || !hmac.Equal(attestMAC(key, act, fields, a), a.MAC[:]) {
		return ErrAttestation
	}
	issued := time.UnixMilli(a.IssuedAt)
	if now.Before(issued.Add(-AttestSkew)) || now.After(issued.Add(AttestValidity+AttestSkew)) {
		return ErrAttestationExpired
	}
	return nil
}

// String is the attestation's text form, as it travels in a join's body
// or a removal's header: "v2.<key id>.<issued ms>.<nonce>.<mac>", the
// binary parts in hex.
func (a Attestation) String() string {
	return fmt.Sprintf("v2.%08x.%d.%s.%s", a.KeyID, a.IssuedAt, hex.EncodeToString(a.Nonce[:]), hex.EncodeToString(a.MAC[:]))
}

// ParseAttestation reads an attestation's text form.
func ParseAttestation(s string) (Attestation, error) {
	var a Attestation
	bad := fmt.Errorf("%w: not an attestation (want v2.<key id>.<issued ms>.<nonce>.<mac>)", ErrAttestation)
	if len(s) > MaxAttestationText {
		return a, bad
	}
	parts := strings.Split(s, ".")
	if len(parts) != 5 || parts[0] != "v2" || len(parts[1]) != 8 {
		return a, bad
	}
	kid, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return a, bad
	}
	a.KeyID = uint32(kid)
	if a.IssuedAt, err = strconv.ParseInt(parts[2], 10, 64); err != nil {
		return a, bad
	}
	// The lengths first: hex.Decode writes as many bytes as it reads,
	// and a longer part would run past the array (a panic any caller
	// could cause, on the node's loop).
	if len(parts[3]) != 2*AttestNonceSize || len(parts[4]) != 2*sha256.Size {
		return a, bad
	}
	if _, err := hex.Decode(a.Nonce[:], []byte(parts[3])); err != nil {
		return a, bad
	}
	if _, err := hex.Decode(a.MAC[:], []byte(parts[4])); err != nil {
		return a, bad
	}
	return a, nil
}

// AttestGuard remembers the nonces of the attestations it admitted until
// they could no longer pass CheckAttestation's clock test anyway, so each
// is good once. It holds at most its bound: past it (only holders of the
// control key can make attestations that get this far), Admit refuses
// with ErrAttestGuardFull until some expire. Not safe for concurrent use.
type AttestGuard struct {
	max  int
	seen map[[AttestNonceSize]byte]struct{}
	// order is the admitted nonces with when each may be forgotten, in
	// admission order.
	order []seenNonce
}

type seenNonce struct {
	nonce  [AttestNonceSize]byte
	forget int64 // Unix ms
}

// NewAttestGuard returns a guard that remembers at most max attestations.
func NewAttestGuard(max int) *AttestGuard {
	if max < 1 {
		max = 1
	}
	return &AttestGuard{max: max, seen: map[[AttestNonceSize]byte]struct{}{}}
}

// Admit records a (which must have passed CheckAttestation at now), or
// refuses it: ErrAttestationUsed for a nonce seen before, or
// ErrAttestGuardFull.
func (g *AttestGuard) Admit(a Attestation, now time.Time) error {
	g.forget(now)
	if _, ok := g.seen[a.Nonce]; ok {
		return ErrAttestationUsed
	}
	if len(g.order) >= g.max {
		return ErrAttestGuardFull
	}
	g.seen[a.Nonce] = struct{}{}
	// Kept for as long as its clock test could pass; never less than
	// until now plus that long, in case this node's clock steps back.
	forget := max(a.IssuedAt, now.UnixMilli()) + (AttestValidity + 2*AttestSkew).Milliseconds()
	g.order = append(g.order, seenNonce{a.Nonce, forget})
	return nil
}

// Len is how many attestations the guard remembers.
func (g *AttestGuard) Len() int { return len(g.order) }

// forget drops the nonces that can no longer pass the clock test.
func (g *AttestGuard) forget(now time.Time) {
	ms := now.UnixMilli()
	kept := g.order[:0]
	for _, s := range g.order {
		if s.forget <= ms {
			delete(g.seen, s.nonce)
			continue
		}
		kept = append(kept, s)
	}
	clear(g.order[len(kept):])
	g.order = kept
}
