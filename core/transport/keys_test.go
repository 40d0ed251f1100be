package transport_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// sameNonce hands out one nonce forever: with it, two frames of the same
// plaintext seal to the same bytes exactly when their keys are the same.
type sameNonce struct{}

func (sameNonce) Uint64() uint64 { return 42 }

// body is a frame's ciphertext without its tag (which covers the header,
// and so differs between frames whatever their keys).
func body(f []byte) []byte { return f[transport.HeaderSize : len(f)-16] }

// Each frame's key is derived from the secret with its sender, the
// sender's boot epoch and its generation: no two senders, boots or
// generations share one, so a random nonce is drawn against at most
// RekeyEvery seals of one key.
func TestFrameKeysArePerSenderBootAndGeneration(t *testing.T) {
	fixed := func(c *transport.Config) { c.Rand = sameNonce{}; c.RekeyEvery = 2 }
	sealed := func(from dial.NodeID, epoch uint64, n int) [][]byte {
		p := newPeer(t, from, epoch, keys, fixed)
		var out [][]byte
		for range n {
			require.NoError(t, p.link.Send(9, req('d', 0, "same")))
			out = append(out, p.wire.last(t))
		}
		return out
	}
	a := sealed(1, 1, 3)
	require.Equal(t, body(a[0]), body(a[1]), "one generation, one key: the same nonce seals the same bytes")
	require.NotEqual(t, body(a[1]), body(a[2]), "the third frame is in generation 1: another key")
	require.NotEqual(t, body(a[0]), body(sealed(2, 1, 1)[0]), "another sender: another key")
	require.NotEqual(t, body(a[0]), body(sealed(1, 2, 1)[0]), "another boot: another key")
	for i, want := range []uint32{0, 0, 1} {
		h, ok := transport.HeaderOf(a[i])
		require.True(t, ok)
		require.Equal(t, want, h.Gen, "frame %d", i)
	}
}

// At RekeyEvery the sender moves to the next generation, and the
// receiver follows it, whatever the order the frames arrive in.
func TestRekeyEveryIsFollowed(t *testing.T) {
	a := newPeer(t, 1, 1, keys, func(c *transport.Config) { c.RekeyEvery = 3 })
	b := newPeer(t, 2, 1, keys, nil)
	meet(t, a, b) // a's first request and b's hello: generation 0 of each
	var frames [][]byte
	for i := range 10 {
		require.NoError(t, a.link.Send(2, req('d', 0, string(rune('a'+i)))))
		frames = append(frames, a.wire.last(t))
	}
	var gens []uint32
	for _, f := range frames {
		h, _ := transport.HeaderOf(f)
		gens = append(gens, h.Gen)
	}
	require.Equal(t, []uint32{0, 0, 1, 1, 1, 2, 2, 2, 3, 3}, gens, "the first frame of generation 0 was the greeting")
	for _, i := range []int{9, 0, 5, 2, 1, 8, 3, 7, 4, 6} {
		ok, cause := deliver(b, frames[i])
		require.True(t, ok, "frame %d: %s", i, cause)
	}
	// A frame that names another generation than it was sealed in does
	// not open.
	require.NoError(t, a.link.Send(2, req('d', 0, "k")))
	f := a.wire.last(t)
	f[12] ^= 1 // gen, big-endian, bytes 9..12
	ok, cause := deliver(b, f)
	require.False(t, ok)
	require.Equal(t, "forged", cause)
}

// The last generation: a sender that has sealed its share under
// generation 2^32-1 seals nothing more, and says why.
func TestLastGeneration(t *testing.T) {
	a := newPeer(t, 1, 1, keys, func(c *transport.Config) { c.RekeyEvery = 2 })
	b := newPeer(t, 2, 1, keys, nil)
	meet(t, a, b)
	transport.SetGeneration(a.link, transport.Data, ^uint32(0)-1)
	for range 2 {
		require.NoError(t, a.link.Send(2, req('d', 0, "last")))
		h, _ := transport.HeaderOf(a.wire.last(t))
		require.Equal(t, ^uint32(0), h.Gen)
	}
	require.ErrorIs(t, a.link.Send(2, req('d', 0, "one too many")), dial.ErrUnreachable)
	require.Equal(t, uint64(1), a.link.Stats().Dropped[transport.CauseExhausted])
	a.link.Greet(2)
	require.Empty(t, a.wire.sent, "no hello either")
	require.NoError(t, a.link.Send(2, req('c', 0, "control has its own generations")))
}

// A rotation: a node seals with its key and opens frames under either of
// its two, by the key id they name; a node that knows only the old key
// drops frames sealed under the new one (so phase 1 must finish on every
// node before any node seals with the new key).
func TestKeyRotation(t *testing.T) {
	newKeys := transport.Keys{Control: bytes.Repeat([]byte{5}, 32), Data: bytes.Repeat([]byte{6}, 32)}
	phase1 := transport.Keys{Control: keys.Control, Data: keys.Data, AcceptControl: newKeys.Control, AcceptData: newKeys.Data}
	phase2 := transport.Keys{Control: newKeys.Control, Data: newKeys.Data, AcceptControl: keys.Control, AcceptData: keys.Data}
	old, one, two, done := newPeer(t, 1, 1, keys, nil), newPeer(t, 2, 1, phase1, nil), newPeer(t, 3, 1, phase2, nil), newPeer(t, 4, 1, newKeys, nil)
	exchange := func(from, to *peer, class byte) (bool, string) {
		require.NoError(t, from.link.Send(to.link.Self(), req(class, 0, "x")))
		f := from.wire.last(t)
		ok, cause := deliver(to, f)
		if cause == "incarnation" { // a first meeting: the hello, then again
			from.link.HandleFrame(0, to.wire.last(t))
			require.NoError(t, from.link.Send(to.link.Self(), req(class, 0, "x")))
			ok, cause = deliver(to, from.wire.last(t))
		}
		return ok, cause
	}
	for _, class := range []byte{'c', 'd'} {
		for _, c := range []struct {
			from, to *peer
			opens    bool
		}{
			{old, one, true}, {one, old, true}, // phase 1 beside a node not yet restarted
			{one, two, true}, {two, one, true}, // phase 2 beside phase 1
			{two, done, true}, {done, two, true}, // phase 3 beside phase 2
			{two, old, false}, {one, done, false}, {old, done, false}, // a phase skipped
		} {
			ok, cause := exchange(c.from, c.to, class)
			require.Equal(t, c.opens, ok, "%c n%d -> n%d: %s", class, c.from.link.Self(), c.to.link.Self(), cause)
			if !c.opens {
				require.Equal(t, "no-key", cause)
			}
		}
	}
	env, plain, ok := transport.NewObserver(phase1).Open(func() []byte {
		require.NoError(t, two.link.Send(1, req('d', 0, "seen")))
		return two.wire.last(t)
	}())
	require.True(t, ok, "an observer accepts the accepted key too")
	require.Equal(t, req('d', 0, "seen"), plain)
	require.Equal(t, transport.KeyID(newKeys.Data), env.KeyID)
}

// The receiver keeps at most 4*MaxPeers frame keys; past that it derives
// again, and still opens every frame.
func TestFrameKeyCacheBound(t *testing.T) {
	b := newPeer(t, 2, 1, keys, func(c *transport.Config) { c.MaxPeers = 1 })
	a := newPeer(t, 1, 1, keys, func(c *transport.Config) { c.RekeyEvery = 1 })
	meet(t, a, b)
	for i := range 20 {
		require.NoError(t, a.link.Send(2, req('d', 0, "k")))
		ok, cause := deliver(b, a.wire.last(t))
		require.True(t, ok, "frame %d: %s", i, cause)
	}
}

func TestKeysAreChecked(t *testing.T) {
	require.NoError(t, keys.Check())
	require.NoError(t, transport.Keys{Data: keys.Data, AcceptData: keys.Data}.Check(), "the same key twice is one key")
	require.Error(t, transport.Keys{Data: keys.Data, AcceptData: []byte("short")}.Check())
	require.Error(t, transport.Keys{Data: keys.Data, AcceptControl: keys.Control}.Check())
	require.Error(t, transport.Keys{Control: []byte("short"), Data: keys.Data}.Check())
	require.NotEqual(t, transport.KeyID(keys.Control), transport.KeyID(keys.Data))
}

// A classifier that names no class the envelope knows gets its frame
// dropped as unknown, never sealed under some key.
func TestUnknownClassIsRefused(t *testing.T) {
	a := newPeer(t, 1, 1, keys, func(c *transport.Config) {
		c.Classify = func([]byte) (transport.Kind, bool) { return transport.Kind{Class: 3}, true }
	})
	require.ErrorIs(t, a.link.Send(2, []byte("x")), dial.ErrUnreachable)
	require.Equal(t, uint64(1), a.link.Stats().Dropped[transport.CauseUnknown])
	require.Empty(t, a.wire.sent)
}
