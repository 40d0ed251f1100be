package flow

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// prevCtl is a control plane with a membership that knows the one
// before it.
type prevCtl struct{ ms Membership }

func (c *prevCtl) Membership() Membership      { return c.ms }
func (c *prevCtl) IsIsolated() bool            { return false }
func (c *prevCtl) ContactSince() time.Duration { return 0 }
func (c *prevCtl) Confirm(done func(error))    { done(nil) }

// movedTo finds a flow owned by from under before and by to under after.
func movedTo(t *testing.T, before, after []dial.NodeID, from, to dial.NodeID) string {
	t.Helper()
	rb, ra := ring.New(before), ring.New(after)
	for i := 0; i < 1000; i++ {
		f := ring.ImposterKey(8080, string(rune('a'+i%26))+string(rune('a'+i/26)))
		if o, _ := rb.Owner(ring.ClassFlow, f); o != from {
			continue
		}
		if o, _ := ra.Owner(ring.ClassFlow, f); o == to {
			return f
		}
	}
	t.Fatal("no flow found")
	return ""
}

// adoptAfterRemoval asks a's store, under ms, for flow f, never answers
// its adoption, and reports whether it serves the flow after waiting.
func adoptAfterRemoval(t *testing.T, ms Membership, f string, b bugs.Set, wait time.Duration) (served bool, askedOnly []dial.NodeID) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	net := &sent{}
	s, err := New(Config{AdoptWait: time.Second, Bugs: b}, Env{ID: idA, Epoch: 1, Clock: clk, Net: net, Ctl: &prevCtl{ms: ms}, Rand: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	_, err, done := do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("1")})
	require.True(t, done)
	require.ErrorIs(t, err, ErrNotAdopted, "the first call starts the adoption")
	seen := map[dial.NodeID]bool{}
	for _, fr := range net.frames {
		if fr.m.Kind == FrameAdopt && !seen[fr.to] {
			seen[fr.to] = true
			askedOnly = append(askedOnly, fr.to)
		}
	}
	clk.Advance(wait)
	_, err, done = do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("2")})
	require.True(t, done)
	return err == nil, askedOnly
}

// A voter left alone by the removal of the only other (two voters, then
// one) asks the removed node for the flows it owned, and the removed node
// never answers: stopped, or dropped by the transport as a stranger. Past
// AdoptWait the survivor adopts without it (what the removed node held
// and pushed to no one is the loss a removal accepts); before the fix it
// answered not-adopted for every such flow, and every new one, for ever.
func TestALoneVoterAdoptsWithoutTheRemovedNode(t *testing.T) {
	ms := Membership{Index: 7, Voters: []dial.NodeID{idA}, PrevIndex: 5, PrevVoters: []dial.NodeID{idA, idB}}
	f := movedTo(t, ms.PrevVoters, ms.Voters, idB, idA)

	served, asked := adoptAfterRemoval(t, ms, f, bugs.Set{}, 999*time.Millisecond)
	require.False(t, served, "not before AdoptWait: the removed node may still serve it until its isolation window ends")
	require.Equal(t, []dial.NodeID{idB}, asked, "the removed previous owner is still asked (it may answer, and fence itself)")
	served, _ = adoptAfterRemoval(t, ms, f, bugs.Set{}, time.Second)
	require.True(t, served, "past AdoptWait, with no voter left to ask, the lone voter adopts what it has")

	served, _ = adoptAfterRemoval(t, ms, f, bugs.Set{WaitForRemoved: true}, time.Minute)
	require.False(t, served, "the planted bug: it waits for the removed node for ever")
}

// A voter that is down is waited for, as before: its copy may hold what
// the survivors lack, and it comes back.
func TestAnAdoptionStillWaitsForAVoterThatIsDown(t *testing.T) {
	ms := Membership{Index: 7, Voters: []dial.NodeID{idA, idC}, PrevIndex: 5, PrevVoters: []dial.NodeID{idA, idB, idC}}
	f := movedTo(t, ms.PrevVoters, ms.Voters, idB, idA)
	served, asked := adoptAfterRemoval(t, ms, f, bugs.Set{}, 5*time.Second)
	require.ElementsMatch(t, []dial.NodeID{idB, idC}, asked)
	require.False(t, served, "a voter among the sources: past AdoptWait, one copy is still needed")
}
