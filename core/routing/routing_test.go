package routing

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// any3 is a table cell: 0 false, 1 true, 2 either.
type any3 uint8

const (
	no any3 = iota
	yes
	either
)

func (a any3) has(b bool) bool { return a == either || (a == yes) == b }

// TestDecideTable is the routing table, written out. Every one of the 64
// combinations of the five facts must match exactly one row, so a row
// that overlaps another, or a case nobody wrote down, fails the test.
func TestDecideTable(t *testing.T) {
	const anyView = View(255)
	rows := []struct {
		active, forwarded, hasFlow any3
		view                       View
		addrKnown                  any3
		want                       Decision
	}{
		// Routing off: served here; the flow store routes each call.
		{no, either, either, anyView, either, Decision{Action: Serve}},
		// No flow id: nothing to route by.
		{yes, either, no, anyView, either, Decision{Action: Serve}},
		// This node owns the flow: served here, forwarded or not.
		{yes, either, yes, Local, either, Decision{Action: Serve}},
		// No owner: refused, never served here.
		{yes, either, yes, Unknown, either, Decision{Action: Refuse, Reason: ReasonNoOwner}},
		// Another group's flow: refused, even forwarded (never fenced here).
		{yes, either, yes, Elsewhere, either, Decision{Action: Refuse, Reason: ReasonElsewhere}},
		// A forwarded request for a flow owned elsewhere: fenced, one hop.
		{yes, yes, yes, Remote, either, Decision{Action: ServeFenced}},
		// Owner elsewhere, reachable: forwarded.
		{yes, no, yes, Remote, yes, Decision{Action: Forward}},
		// Owner elsewhere, address unknown: refused.
		{yes, no, yes, Remote, no, Decision{Action: Refuse, Reason: ReasonNoAddress}},
	}
	bools := []bool{false, true}
	cases := 0
	for _, active := range bools {
		for _, fwd := range bools {
			for _, hasFlow := range bools {
				for _, view := range []View{Unknown, Local, Remote, Elsewhere} {
					for _, addr := range bools {
						cases++
						in := Input{Active: active, Forwarded: fwd, HasFlow: hasFlow, Owner: Owner{View: view}}
						if addr {
							in.Owner.Addr = "127.0.0.2:2525"
						}
						name := fmt.Sprintf("active=%v forwarded=%v flow=%v owner=%v addr=%v", active, fwd, hasFlow, view, addr)
						var matched []Decision
						for _, r := range rows {
							if r.active.has(active) && r.forwarded.has(fwd) && r.hasFlow.has(hasFlow) &&
								(r.view == anyView || r.view == view) && r.addrKnown.has(addr) {
								matched = append(matched, r.want)
							}
						}
						require.Len(t, matched, 1, "%s: rows matching", name)
						require.Equal(t, matched[0], Decide(in), name)
					}
				}
			}
		}
	}
	require.Equal(t, 64, cases)
}

// TestDecideFailsClosed states the promises apart from the table: a
// forwarded request is never forwarded again, and a request that touches
// a flow is served here only when this node owns it or will fence every
// call at the owner.
func TestDecideFailsClosed(t *testing.T) {
	for _, fwd := range []bool{false, true} {
		for _, view := range []View{Unknown, Local, Remote, Elsewhere} {
			for _, addr := range []string{"", "127.0.0.3:2525"} {
				in := Input{Active: true, Forwarded: fwd, HasFlow: true, Owner: Owner{View: view, Addr: addr}}
				d := Decide(in)
				if fwd {
					require.NotEqual(t, Forward, d.Action, "%+v forwarded twice", in)
				}
				if d.Action == Serve {
					require.Equal(t, Local, view, "%+v served by a non-owner", in)
				}
				if view == Unknown || view == Elsewhere {
					require.Equal(t, Refuse, d.Action, "%+v: no owner here must be a 503", in)
				}
			}
		}
	}
}

func TestRingDirectory(t *testing.T) {
	voters := []Member{{ID: 11, HTTP: "127.0.0.1:2525"}, {ID: 22, HTTP: "127.0.0.2:2525"}, {ID: 33}}
	ids := []dial.NodeID{11, 22, 33}
	r := ring.New(ids)
	seen := map[View]int{}
	for i := range 300 {
		flow := fmt.Sprintf("i4545:flow-%d", i)
		want, _ := r.Owner(ring.ClassFlow, flow)
		for _, self := range ids {
			got := NewRingDirectory(self, OneGroup, 7, voters).OwnerOf(flow)
			require.Equal(t, want, got.Node, flow)
			require.Equal(t, uint64(7), got.MIdx)
			if want == self {
				require.Equal(t, Local, got.View)
			} else {
				require.Equal(t, Remote, got.View)
			}
			seen[got.View]++
			for _, m := range voters {
				if m.ID == want {
					require.Equal(t, m.HTTP, got.Addr)
				}
			}
		}
	}
	require.Equal(t, 300, seen[Local], "each flow is local on exactly one node")
	require.Equal(t, 600, seen[Remote])

	require.Equal(t, Unknown, NewRingDirectory(11, OneGroup, 0, voters).OwnerOf("f:x").View, "no committed membership")
	require.Equal(t, Unknown, NewRingDirectory(11, OneGroup, 5, nil).OwnerOf("f:x").View, "no voters")
}

// TestDirectoryConsultsThePartitionTable: in a fleet of G groups, a
// group's directory names owners for exactly the flows whose partition it
// holds (partition.GroupOf) and answers Elsewhere for the rest, whatever
// its membership; across the fleet's groups every flow is some group's,
// and one group's only. With one group, every flow is the group's.
func TestDirectoryConsultsThePartitionTable(t *testing.T) {
	voters := []Member{{ID: 11, HTTP: "127.0.0.1:2525"}, {ID: 22, HTTP: "127.0.0.2:2525"}}
	for _, groups := range []int{1, 2, 4, 64} {
		held := map[string]int{}
		for g := range groups {
			dir := NewRingDirectory(11, Fleet{Groups: groups, Group: g}, 7, voters)
			for i := range 400 {
				flow := fmt.Sprintf("i4545:flow-%d", i)
				o := dir.OwnerOf(flow)
				if partition.GroupOf(flow, groups) != g {
					require.Equal(t, Elsewhere, o.View, "%s in group %d of %d", flow, g, groups)
					require.Equal(t, Decision{Action: Refuse, Reason: ReasonElsewhere}, Decide(Input{Active: true, Forwarded: true, HasFlow: true, Owner: o}))
					continue
				}
				require.Contains(t, []View{Local, Remote}, o.View, "%s in group %d of %d", flow, g, groups)
				held[flow]++
			}
		}
		require.Len(t, held, 400, "%d groups: every flow is some group's", groups)
		for flow, n := range held {
			require.Equal(t, 1, n, "%d groups: %s held by %d groups", groups, flow, n)
		}
	}
	// Held elsewhere is said before anything about the membership: a
	// group with no committed membership yet still refuses another
	// group's flow as another group's.
	other := "i4545:flow-0"
	g := partition.GroupOf(other, 2)
	require.Equal(t, Elsewhere, NewRingDirectory(11, Fleet{Groups: 2, Group: 1 - g}, 0, nil).OwnerOf(other).View)
	require.Equal(t, Unknown, NewRingDirectory(11, Fleet{Groups: 2, Group: g}, 0, nil).OwnerOf(other).View)
}

func TestFleetCheck(t *testing.T) {
	require.NoError(t, OneGroup.Check())
	require.NoError(t, Fleet{Groups: 4096, Group: 4095}.Check())
	require.ErrorIs(t, Fleet{Groups: 3, Group: 0}.Check(), partition.ErrIncompatible)
	require.ErrorIs(t, Fleet{}.Check(), partition.ErrIncompatible, "the zero Fleet is no fleet: OneGroup is explicit")
	require.ErrorContains(t, Fleet{Groups: 2, Group: 2}.Check(), "group 2 is not one of the fleet's 2")
	require.ErrorContains(t, Fleet{Groups: 2, Group: -1}.Check(), "group -1")
	require.Panics(t, func() { NewRingDirectory(11, Fleet{Groups: 6}, 1, nil) })
}
