package proxyonce

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

const sec = time.Second

var key = KeyOf(4545, []byte(`["GET","/x",{}]`))

func TestKeyOf(t *testing.T) {
	require.Equal(t, "4545:", key[:5])
	require.Len(t, key, 5+16)
	require.Equal(t, key, KeyOf(4545, []byte(`["GET","/x",{}]`)), "a function of the signature")
	require.NotEqual(t, key, KeyOf(4546, []byte(`["GET","/x",{}]`)), "scoped to the port")
	require.NotEqual(t, key, KeyOf(4545, []byte(`["GET","/y",{}]`)))
	require.Equal(t, 4545, portOf(key))
	require.Equal(t, -1, portOf("nope"))
}

// Every transition, from each state.
func TestClaimTransitions(t *testing.T) {
	c := New(Config{Lapse: 60 * sec, MaxPending: 2}, 7, 0xabc)

	// Unclaimed -> Pending: the first claimant wins a token.
	g, err := c.Claim(key, 0)
	require.NoError(t, err)
	require.True(t, g.Won)
	won := g.Token
	require.Equal(t, Token{Owner: 7, Session: 0xabc, Seq: 1}, won)

	// Pending: others lose, and learn the winner's token.
	g, err = c.Claim(key, 10*sec)
	require.NoError(t, err)
	require.False(t, g.Won)
	require.Equal(t, won, g.Token)

	// Pending -> Recorded: only the current token may record.
	require.ErrorIs(t, c.CheckRecord(key, Token{Owner: 7, Session: 0xabc, Seq: 99}, 10*sec), ErrStale)
	require.NoError(t, c.CheckRecord(key, won, 10*sec))
	c.Recorded(key)
	require.Zero(t, c.Pending())
	require.ErrorIs(t, c.CheckRecord(key, won, 10*sec), ErrStale, "recorded: nothing pending")

	// Pending -> Unclaimed by release; a stale token cannot release.
	g, _ = c.Claim(key, 20*sec)
	require.True(t, g.Won)
	require.ErrorIs(t, c.Release(key, won), ErrStale, "an older grant cannot release")
	require.NoError(t, c.Release(key, g.Token))
	g2, _ := c.Claim(key, 20*sec)
	require.True(t, g2.Won, "released: claimable at once")
	require.NotEqual(t, g.Token, g2.Token, "under a new token")

	// Pending -> Unclaimed by lapse: the lapsed token can neither record
	// nor release, and the next claim wins a new one.
	require.ErrorIs(t, c.CheckRecord(key, g2.Token, 80*sec), ErrStale, "lapsed at 20s+60s")
	g3, _ := c.Claim(key, 80*sec)
	require.True(t, g3.Won)
	require.ErrorIs(t, c.CheckRecord(key, g2.Token, 81*sec), ErrStale)
	require.ErrorIs(t, c.Release(key, g2.Token), ErrStale)
	require.NoError(t, c.CheckRecord(key, g3.Token, 81*sec))

	// Sweep removes what lapsed.
	require.Equal(t, 0, c.Sweep(100*sec))
	require.Equal(t, 1, c.Sweep(140*sec))
	require.Zero(t, c.Pending())
}

// An owner that crashes forgets its claims; its restarted incarnation
// (a new session) never repeats a token, so nothing from before can
// record or release.
func TestRestartAndOwnershipLoss(t *testing.T) {
	before := New(Config{}, 7, 1)
	g, _ := before.Claim(key, 0)
	after := New(Config{}, 7, 2)
	g2, _ := after.Claim(key, 0)
	require.True(t, g2.Won, "a restarted owner has no Pending: claimable again")
	require.NotEqual(t, g.Token, g2.Token)
	require.ErrorIs(t, after.CheckRecord(key, g.Token, 0), ErrStale)
	require.ErrorIs(t, after.Release(key, g.Token), ErrStale)

	// A membership change: the keys this node no longer owns are dropped.
	other := KeyOf(4545, []byte("other"))
	_, _ = after.Claim(other, 0)
	require.Equal(t, 1, after.Forget(func(k string) bool { return k == other }))
	require.Equal(t, 1, after.Pending())
	_, held := after.Holder(key, 0)
	require.False(t, held)
	_, held = after.Holder(other, 0)
	require.True(t, held)
}

// The bound: MaxPending claims per port, then ErrBusy; another port is
// not affected, and a claim freed makes room.
func TestMaxPendingPerPort(t *testing.T) {
	c := New(Config{MaxPending: 2}, 1, 1)
	k := func(port int, s string) string { return KeyOf(port, []byte(s)) }
	for _, s := range []string{"a", "b"} {
		g, err := c.Claim(k(1, s), 0)
		require.NoError(t, err)
		require.True(t, g.Won)
	}
	_, err := c.Claim(k(1, "c"), 0)
	require.ErrorIs(t, err, ErrBusy)
	g, err := c.Claim(k(1, "a"), 0)
	require.NoError(t, err, "a loser of a held claim is not refused")
	require.False(t, g.Won)
	_, err = c.Claim(k(2, "c"), 0)
	require.NoError(t, err, "another port has its own bound")
	require.NoError(t, c.Release(k(1, "a"), g.Token))
	_, err = c.Claim(k(1, "c"), 0)
	require.NoError(t, err)
	_, err = c.Claim("no port", 0)
	require.ErrorIs(t, err, ErrBadKey)
}

// The invariant under any sequence of operations: at most one grant per
// key is current, only it records, and grants are never reused.
func TestOneGrantAtATime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := New(Config{Lapse: 10 * sec, MaxPending: 3}, 1, 1)
		keys := []string{KeyOf(1, []byte("a")), KeyOf(1, []byte("b")), KeyOf(2, []byte("a")), KeyOf(1, []byte("c")), KeyOf(1, []byte("d"))}
		seen := map[Token]bool{}
		var tokens []Token
		now := time.Duration(0)
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			now += time.Duration(rapid.IntRange(0, 4).Draw(t, "dt")) * sec
			k := rapid.SampledFrom(keys).Draw(t, "key")
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				g, err := c.Claim(k, now)
				if err == nil && g.Won {
					require.False(t, seen[g.Token], "a token is granted once")
					seen[g.Token] = true
					tokens = append(tokens, g.Token)
				}
			case 1, 2:
				if len(tokens) == 0 {
					continue
				}
				tok := rapid.SampledFrom(tokens).Draw(t, "token")
				holder, held := c.Holder(k, now)
				err := c.CheckRecord(k, tok, now)
				require.Equal(t, held && holder == tok, err == nil, "only the current grant records")
				if err == nil && rapid.Bool().Draw(t, "commit") {
					c.Recorded(k)
				}
			case 3:
				if len(tokens) > 0 {
					_ = c.Release(k, rapid.SampledFrom(tokens).Draw(t, "token"))
				}
			case 4:
				c.Sweep(now)
			}
			perPort := map[int]int{}
			for key := range c.pending {
				perPort[portOf(key)]++
			}
			for port, n := range perPort {
				require.LessOrEqual(t, n, 3, "port %d over its bound", port)
				require.Equal(t, n, c.perPort[port], "the per-port count is exact")
			}
			require.Len(t, c.perPort, len(perPort))
		}
	})
}
