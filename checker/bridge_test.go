package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/linearizability"
)

func TestBridge(t *testing.T) {
	h := linearizability.NewHistory(0)
	ok := h.Call(1, "f", nil, time.Second)
	h.Return(ok, nil, time.Second+2*time.Second) // exactly the deadline
	shed := h.Call(2, "f", nil, 5*time.Second)
	h.Refuse(shed, "flow: backend unavailable: shed", 5*time.Second)
	gone := h.Call(3, "f", nil, 6*time.Second)
	h.GiveUp(gone, "client deadline (node crashed?)", 10*time.Second)

	// An answer held back by the node's fsyncs is late by that much only.
	held := h.Call(6, "f", nil, 7*time.Second)
	h.Refuse(held, "timeout", 7*time.Second+2*time.Second+4*time.Millisecond)
	heldShed := h.Call(7, "f", nil, 8*time.Second)
	h.Refuse(heldShed, "flow: backend unavailable: shed", 8*time.Second+3*time.Millisecond)
	waited := map[int]time.Duration{held: 4 * time.Millisecond, heldShed: 3 * time.Millisecond}

	var rec Record
	Bridge(&rec, h.Ops(), waited, 2*time.Second, 500, "client deadline", "shed")
	require.True(t, rec.OK(), "%v", rec.Failures)

	late := h.Call(4, "f", nil, 20*time.Second)
	h.Refuse(late, "timeout", 20*time.Second+2010*time.Millisecond) // past 2s + 500ppm
	slowShed := h.Call(5, "f", nil, 30*time.Second)
	h.Refuse(slowShed, "flow: backend unavailable: shed", 30*time.Second+time.Millisecond)
	waited[late] = 8 * time.Millisecond // not enough: 2.01s is 9ms past the limit
	Bridge(&rec, h.Ops(), waited, 2*time.Second, 500, "client deadline", "shed")
	require.Len(t, rec.Failures, 2)
	require.Contains(t, rec.Failures[0], "client 4's call on f took 2.01s, over the 2s deadline")
	require.Contains(t, rec.Failures[1], "client 5's shed call waited 1ms")
}
