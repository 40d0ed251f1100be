package routing

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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

// TestDecideTable is the routing table, written out. Every one of the 48
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
				for _, view := range []View{Unknown, Local, Remote} {
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
	require.Equal(t, 48, cases)
}

// TestDecideFailsClosed states the promises apart from the table: a
// forwarded request is never forwarded again, and a request that touches
// a flow is served here only when this node owns it or will fence every
// call at the owner.
func TestDecideFailsClosed(t *testing.T) {
	for _, fwd := range []bool{false, true} {
		for _, view := range []View{Unknown, Local, Remote} {
			for _, addr := range []string{"", "127.0.0.3:2525"} {
				in := Input{Active: true, Forwarded: fwd, HasFlow: true, Owner: Owner{View: view, Addr: addr}}
				d := Decide(in)
				if fwd {
					require.NotEqual(t, Forward, d.Action, "%+v forwarded twice", in)
				}
				if d.Action == Serve {
					require.Equal(t, Local, view, "%+v served by a non-owner", in)
				}
				if view == Unknown {
					require.Equal(t, Refuse, d.Action, "%+v: no owner must be a 503", in)
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
			got := NewRingDirectory(self, 7, voters).OwnerOf(flow)
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

	require.Equal(t, Unknown, NewRingDirectory(11, 0, voters).OwnerOf("f:x").View, "no committed membership")
	require.Equal(t, Unknown, NewRingDirectory(11, 5, nil).OwnerOf("f:x").View, "no voters")
}
