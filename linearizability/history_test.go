package linearizability

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHistoryOutcomes(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(1, "k", "put x", 10)
	b := h.Call(2, "k", "put y", 11)
	c := h.Call(3, "k", "get", 12)
	h.Return(a, "ok", 20)
	h.Refuse(b, "fenced", 21)
	h.GiveUp(c, "timeout", 30)
	ok, refused, unknown := h.Count()
	require.Equal(t, [3]int{1, 1, 1}, [3]int{ok, refused, unknown})
	require.Equal(t, Unknown, h.Op(c).Outcome, "a timeout is unknown, not failure")
	require.Equal(t, "timeout", h.Op(c).Note)
	require.Panics(t, func() { h.Return(a, "again", 40) }, "an op is answered once")
	require.Len(t, h.Ops(), 3)
}

func TestHistoryLimit(t *testing.T) {
	h := NewHistory(2)
	h.Call(1, "k", nil, 1)
	h.Call(1, "k", nil, 2)
	require.Panics(t, func() { h.Call(1, "k", nil, 3) })
	require.Equal(t, 2, h.Len())
}
