package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// aeFixture is three voters that each hold every flow alike, at one
// incarnation, and a way to change one node's copy or start.
type aeFixture struct {
	m    MembershipChange
	held map[dial.NodeID]Held
}

func newAEFixture() *aeFixture {
	f := &aeFixture{m: MembershipChange{Index: 4, Voters: []dial.NodeID{1, 2, 3}}, held: map[dial.NodeID]Held{}}
	for _, id := range f.m.Voters {
		flows := map[string]map[string]flow.Value{}
		for i := range 12 {
			flows[fmt.Sprintf("f%d", i)] = map[string]flow.Value{"a": {Data: []byte("1"), Tuple: flow.Tuple{MIdx: 4, V: uint64(i + 1), Origin: 1}}}
		}
		f.held[id] = Held{Up: true, Incarnation: 1, Flows: flows}
	}
	return f
}

func (f *aeFixture) read(id dial.NodeID) Held {
	h := f.held[id]
	flows := map[string]map[string]flow.Value{}
	for k, v := range h.Flows {
		flows[k] = v
	}
	h.Flows = flows
	return h
}

func aeName(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }

// A pair of owner and replica is quiet exactly when neither changed what
// the two held of the owner's flows, and the copies matched: an answer
// between such a pair fails, and no other does.
func TestAEQuiet(t *testing.T) {
	f0 := "f0"
	p := Placement([]dial.NodeID{1, 2, 3}, classOf(f0), f0)
	owner, replica := p[0], p[1]
	answer := func(at time.Duration) []AEAnswer {
		return []AEAnswer{{From: owner, To: replica, M: 4, Flows: 1, At: at}}
	}
	judge := func(f *aeFixture, change func(*aeFixture), answers []AEAnswer, ms ...MembershipChange) (*Record, int) {
		q := NewAEQuiet(10*time.Second, f.m, f.read)
		if change != nil {
			change(f)
		}
		rec := &Record{}
		n := q.Judge(rec, 16*time.Second, f.read, append([]MembershipChange{f.m}, ms...), answers, time.Second, aeName)
		return rec, n
	}

	t.Run("an answer between a quiet pair fails", func(t *testing.T) {
		rec, n := judge(newAEFixture(), nil, answer(12*time.Second))
		require.Equal(t, 6, n, "every ordered pair of three voters holds flows and is quiet")
		require.Len(t, rec.Failures, 1)
		require.Contains(t, rec.Failures[0], "anti-entropy-quiet: "+aeName(owner)+" sent "+aeName(replica))
	})
	t.Run("quiet pairs with no answer pass", func(t *testing.T) {
		rec, _ := judge(newAEFixture(), nil, nil)
		require.True(t, rec.OK())
	})
	t.Run("an answer within the grace after the start is not judged", func(t *testing.T) {
		rec, _ := judge(newAEFixture(), nil, answer(10*time.Second+500*time.Millisecond))
		require.True(t, rec.OK())
	})
	t.Run("an answer at another membership is not judged", func(t *testing.T) {
		a := answer(12 * time.Second)
		a[0].M = 3
		rec, _ := judge(newAEFixture(), nil, a)
		require.True(t, rec.OK())
	})
	t.Run("copies that differed are repaired, not judged", func(t *testing.T) {
		f := newAEFixture()
		f.held[replica].Flows[f0] = map[string]flow.Value{}
		rec, n := judge(f, nil, answer(12*time.Second))
		require.True(t, rec.OK())
		require.Less(t, n, 6)
	})
	t.Run("a copy the replica lacks is not quiet", func(t *testing.T) {
		f := newAEFixture()
		delete(f.held[replica].Flows, f0)
		rec, _ := judge(f, nil, answer(12*time.Second))
		require.True(t, rec.OK())
	})
	t.Run("a tombstone differs from a live key", func(t *testing.T) {
		f := newAEFixture()
		v := f.held[replica].Flows[f0]["a"]
		v.Tomb = true
		f.held[replica].Flows[f0] = map[string]flow.Value{"a": v}
		rec, _ := judge(f, nil, answer(12*time.Second))
		require.True(t, rec.OK())
	})
	t.Run("a copy written in the window is not quiet", func(t *testing.T) {
		rec, _ := judge(newAEFixture(), func(f *aeFixture) {
			for _, id := range f.m.Voters {
				f.held[id].Flows[f0] = map[string]flow.Value{"a": {Tuple: flow.Tuple{MIdx: 4, V: 99, Origin: owner}}}
			}
		}, answer(12*time.Second))
		require.True(t, rec.OK())
	})
	t.Run("a restarted node is not quiet", func(t *testing.T) {
		rec, _ := judge(newAEFixture(), func(f *aeFixture) {
			h := f.held[replica]
			h.Incarnation++
			f.held[replica] = h
		}, answer(12*time.Second))
		require.True(t, rec.OK())
	})
	t.Run("a node down at an end is not quiet", func(t *testing.T) {
		rec, _ := judge(newAEFixture(), func(f *aeFixture) {
			f.held[owner] = Held{Incarnation: 1}
		}, answer(12*time.Second))
		require.True(t, rec.OK())
	})
	t.Run("a membership change in the window judges nothing", func(t *testing.T) {
		rec, n := judge(newAEFixture(), nil, answer(12*time.Second), MembershipChange{Index: 5, Voters: []dial.NodeID{1, 2}, At: 13 * time.Second})
		require.True(t, rec.OK())
		require.Zero(t, n)
	})
	t.Run("data alone is not compared: equal tuples name the same write", func(t *testing.T) {
		f := newAEFixture()
		v := f.held[replica].Flows[f0]["a"]
		v.Data = []byte("other")
		f.held[replica].Flows[f0] = map[string]flow.Value{"a": v}
		rec, _ := judge(f, nil, answer(12*time.Second))
		require.Len(t, rec.Failures, 1)
	})
}
