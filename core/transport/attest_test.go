package transport_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

var (
	t0        = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	joinN4    = []string{"n4", "127.0.0.4:7946", "127.0.0.4:2525"}
	someNonce = [transport.AttestNonceSize]byte{1, 2, 3}
)

func TestAttestation(t *testing.T) {
	att, err := keys.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(t, err)
	require.NoError(t, keys.CheckAttestation(transport.ActJoin, joinN4, att, t0))
	for _, c := range []struct {
		act    string
		fields []string
	}{
		{transport.ActJoin, []string{"n5", "127.0.0.4:7946", "127.0.0.4:2525"}},
		{transport.ActJoin, []string{"n4", "127.0.0.5:7946", "127.0.0.4:2525"}},
		{transport.ActJoin, []string{"n4", "127.0.0.4:7946", "127.0.0.5:2525"}},
		{transport.ActJoin, []string{"n", "4127.0.0.4:7946", "127.0.0.4:2525"}}, // the same bytes, split differently
		{transport.ActRemove, []string{"n4"}},                                   // another act
		{transport.ActRemove, joinN4},
	} {
		require.ErrorIs(t, keys.CheckAttestation(c.act, c.fields, att, t0), transport.ErrAttestation, "%v", c)
	}
	// Its time and nonce are under the MAC.
	later := att
	later.IssuedAt += 60_000
	require.ErrorIs(t, keys.CheckAttestation(transport.ActJoin, joinN4, later, t0), transport.ErrAttestation)
	other := att
	other.Nonce[0] ^= 1
	require.ErrorIs(t, keys.CheckAttestation(transport.ActJoin, joinN4, other, t0), transport.ErrAttestation)

	dataOnly := transport.Keys{Data: keys.Data}
	_, err = dataOnly.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.Error(t, err, "a node without the control key cannot attest")
	require.Error(t, dataOnly.CheckAttestation(transport.ActJoin, joinN4, att, t0))
	// Nor does it take one made with the key it lacks, an empty one (its
	// key id is an empty key's).
	empty := transport.AttestUnchecked(nil, transport.ActJoin, joinN4, transport.Attestation{IssuedAt: att.IssuedAt, Nonce: someNonce})
	require.Error(t, dataOnly.CheckAttestation(transport.ActJoin, joinN4, empty, t0), "an attestation made with no key")
	stranger := transport.Keys{Control: bytes.Repeat([]byte{7}, 32), Data: keys.Data}
	forged, err := stranger.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(t, err)
	require.ErrorIs(t, keys.CheckAttestation(transport.ActJoin, joinN4, forged, t0), transport.ErrAttestation)
	forged.KeyID = att.KeyID // naming our key does not help
	require.ErrorIs(t, keys.CheckAttestation(transport.ActJoin, joinN4, forged, t0), transport.ErrAttestation)
}

// An attestation is good from AttestSkew before it was made (the
// attester's clock ahead of ours) until AttestValidity+AttestSkew after;
// outside that, it has expired, at the limit exactly.
func TestAttestationExpires(t *testing.T) {
	att, err := keys.Attest(transport.ActRemove, []string{"n2"}, t0, someNonce)
	require.NoError(t, err)
	first, last := t0.Add(-transport.AttestSkew), t0.Add(transport.AttestValidity+transport.AttestSkew)
	for _, now := range []time.Time{first, t0, t0.Add(transport.AttestValidity), last} {
		require.NoError(t, keys.CheckAttestation(transport.ActRemove, []string{"n2"}, att, now), "%v", now.Sub(t0))
	}
	for _, now := range []time.Time{first.Add(-time.Millisecond), last.Add(time.Millisecond), t0.Add(24 * time.Hour), t0.Add(-24 * time.Hour)} {
		err := keys.CheckAttestation(transport.ActRemove, []string{"n2"}, att, now)
		require.ErrorIs(t, err, transport.ErrAttestationExpired, "%v", now.Sub(t0))
		require.ErrorIs(t, err, transport.ErrAttestation)
	}
}

// During a rotation an attestation made with either control key checks.
func TestAttestationUnderRotation(t *testing.T) {
	next := bytes.Repeat([]byte{5}, 32)
	byNext, err := transport.Keys{Control: next, Data: keys.Data}.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(t, err)
	byOld, err := keys.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(t, err)
	rotating := transport.Keys{Control: keys.Control, Data: keys.Data, AcceptControl: next}
	require.NoError(t, rotating.CheckAttestation(transport.ActJoin, joinN4, byNext, t0))
	require.NoError(t, rotating.CheckAttestation(transport.ActJoin, joinN4, byOld, t0))
	require.ErrorIs(t, keys.CheckAttestation(transport.ActJoin, joinN4, byNext, t0), transport.ErrAttestation)
}

func TestAttestationText(t *testing.T) {
	att, err := keys.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(t, err)
	s := att.String()
	require.LessOrEqual(t, len(s), transport.MaxAttestationText)
	back, err := transport.ParseAttestation(s)
	require.NoError(t, err)
	require.Equal(t, att, back)
	for _, bad := range []string{"", "v2", s[:len(s)-1], s + "0", strings.Replace(s, "v2.", "v1.", 1),
		strings.Replace(s, ".", "..", 1), "v2.zzzzzzzz.1.00.00", s + strings.Repeat(".", 200),
		// the old form: a bare hex MAC
		"8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
		// a nonce or a MAC a byte too long, within the text's bound
		// (decoded before their lengths were checked, these ran past
		// the arrays: a panic)
		"v2.00000000.0." + strings.Repeat("a", 2*transport.AttestNonceSize) + "." + strings.Repeat("b", 2*32+2),
		"v2.00000000.0." + strings.Repeat("a", 2*transport.AttestNonceSize+2) + "." + strings.Repeat("b", 2*32)} {
		_, err := transport.ParseAttestation(bad)
		require.ErrorIs(t, err, transport.ErrAttestation, "%q", bad)
	}
}

// The guard admits an attestation once, remembers it for as long as it
// could pass the clock test, and holds at most its bound: past it, it
// refuses (fail closed) until some expire.
func TestAttestGuard(t *testing.T) {
	g := transport.NewAttestGuard(3)
	mk := func(i byte, at time.Time) transport.Attestation {
		a, err := keys.Attest(transport.ActRemove, []string{"n2"}, at, [transport.AttestNonceSize]byte{i})
		require.NoError(t, err)
		return a
	}
	a := mk(1, t0)
	require.NoError(t, g.Admit(a, t0))
	require.ErrorIs(t, g.Admit(a, t0.Add(time.Second)), transport.ErrAttestationUsed)
	require.ErrorIs(t, g.Admit(a, t0.Add(transport.AttestValidity+transport.AttestSkew)), transport.ErrAttestationUsed,
		"remembered while it could still pass")
	require.NoError(t, g.Admit(mk(2, t0), t0))
	require.NoError(t, g.Admit(mk(3, t0.Add(time.Minute)), t0.Add(time.Minute)))
	require.Equal(t, 3, g.Len())
	err := g.Admit(mk(4, t0.Add(time.Minute)), t0.Add(time.Minute))
	require.ErrorIs(t, err, transport.ErrAttestGuardFull)
	require.False(t, errors.Is(err, transport.ErrAttestation), "a full guard says nothing against the attestation")
	// Once the first two can no longer pass the clock test, they are
	// forgotten and there is room again.
	after := t0.Add(transport.AttestValidity + 2*transport.AttestSkew)
	require.NoError(t, g.Admit(mk(4, after), after))
	require.Equal(t, 2, g.Len())
	require.ErrorIs(t, keys.CheckAttestation(transport.ActRemove, []string{"n2"}, a, after), transport.ErrAttestationExpired,
		"what the guard forgot, the clock test refuses")
}

// A connection proof answers one challenge, for one listener.
func TestConnProof(t *testing.T) {
	ch := [transport.ConnChallengeSize]byte{9, 9, 9}
	p := keys.ConnProof(1, 2, ch)
	require.Len(t, p, transport.ConnProofSize)
	from, err := keys.CheckConnProof(p, 2, ch)
	require.NoError(t, err)
	require.Equal(t, dial.NodeID(1), from)

	_, err = keys.CheckConnProof(p, 2, [transport.ConnChallengeSize]byte{8})
	require.ErrorIs(t, err, transport.ErrConnReplayed, "a recorded proof answers another challenge")
	_, err = keys.CheckConnProof(p, 3, ch)
	require.ErrorIs(t, err, transport.ErrConnProof, "made for another node")
	_, err = keys.CheckConnProof(p[:len(p)-1], 2, ch)
	require.ErrorIs(t, err, transport.ErrConnProof)
	for i := range p {
		bad := bytes.Clone(p)
		bad[i] ^= 0x10
		_, err := keys.CheckConnProof(bad, 2, ch)
		require.Error(t, err, "byte %d", i)
		require.NotErrorIs(t, err, transport.ErrConnReplayed, "byte %d: an altered proof is no proof", i)
	}
	other := transport.Keys{Data: bytes.Repeat([]byte{8}, 32)}
	_, err = keys.CheckConnProof(other.ConnProof(1, 2, ch), 2, ch)
	require.ErrorIs(t, err, transport.ErrConnProof, "another cluster")
	rotating := transport.Keys{Data: keys.Data, AcceptData: other.Data}
	from, err = rotating.CheckConnProof(other.ConnProof(1, 2, ch), 2, ch)
	require.NoError(t, err, "the accepted data key, during a rotation")
	require.Equal(t, dial.NodeID(1), from)
}

// Whatever text a caller sends, ParseAttestation answers without a panic,
// and what it reads is what String writes back.
func FuzzParseAttestation(f *testing.F) {
	att, err := keys.Attest(transport.ActJoin, joinN4, t0, someNonce)
	require.NoError(f, err)
	f.Add(att.String())
	f.Add("v2.00000000.0." + strings.Repeat("a", 2*transport.AttestNonceSize) + "." + strings.Repeat("b", 66))
	f.Fuzz(func(t *testing.T, s string) {
		a, err := transport.ParseAttestation(s)
		if err != nil {
			require.ErrorIs(t, err, transport.ErrAttestation)
			return
		}
		back, err := transport.ParseAttestation(a.String())
		require.NoError(t, err)
		require.Equal(t, a, back)
	})
}
