package linearizability

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func verdict(t *testing.T, h *History) porcupine.CheckResult {
	t.Helper()
	res := CheckKV(h, 5*time.Second)
	require.Len(t, res, 1)
	return res[0].Verdict
}

func TestKVSequentialHistoryIsLinearizable(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h.Return(a, KVOutput{Version: 5}, 2)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 3)
	h.Return(g, KVOutput{Found: true, Value: "a", Version: 5}, 4)
	c := h.Call(1, "k", KVInput{Op: KVCas, Expect: 5, Value: "b"}, 5)
	h.Return(c, KVOutput{Succeeded: true, Version: 9}, 6)
	require.Equal(t, porcupine.Ok, verdict(t, h))
}

func TestKVStaleReadIsNotLinearizable(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h.Return(a, KVOutput{Version: 5}, 2)
	b := h.Call(0, "k", KVInput{Op: KVPut, Value: "b"}, 3)
	h.Return(b, KVOutput{Version: 6}, 4)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 5)
	h.Return(g, KVOutput{Found: true, Value: "a", Version: 5}, 6)
	require.Equal(t, porcupine.Illegal, verdict(t, h))
}

// TestKVABAGuardIsCaught is the A → B → A hazard as a history: a client
// read a at version 5; the key went to b and back to a (version 7); a cas
// guarded on version 5 then succeeded. A value guard lets that through;
// the model refuses it.
func TestKVABAGuardIsCaught(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h.Return(a, KVOutput{Version: 5}, 2)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 3)
	h.Return(g, KVOutput{Found: true, Value: "a", Version: 5}, 4)
	b := h.Call(0, "k", KVInput{Op: KVPut, Value: "b"}, 5)
	h.Return(b, KVOutput{Version: 6}, 6)
	a2 := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 7)
	h.Return(a2, KVOutput{Version: 7}, 8)
	c := h.Call(1, "k", KVInput{Op: KVCas, Expect: 5, Value: "c"}, 9)
	h.Return(c, KVOutput{Succeeded: true, Version: 8}, 10)
	require.Equal(t, porcupine.Illegal, verdict(t, h))
}

func TestKVUnknownWriteMayOrMayNotHaveHappened(t *testing.T) {
	for _, seen := range []string{"a", "b"} {
		h := NewHistory(0)
		a := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
		h.Return(a, KVOutput{Version: 5}, 2)
		b := h.Call(0, "k", KVInput{Op: KVPut, Value: "b"}, 3)
		h.GiveUp(b, "timeout", 4)
		g := h.Call(1, "k", KVInput{Op: KVGet}, 10)
		v := uint64(5)
		if seen == "b" {
			v = 9
		}
		h.Return(g, KVOutput{Found: true, Value: seen, Version: v}, 11)
		require.Equal(t, porcupine.Ok, verdict(t, h), "seeing %s after an unknown put of b is fine", seen)
	}
}

func TestKVRefusedWriteNeverHappened(t *testing.T) {
	h := NewHistory(0)
	b := h.Call(0, "k", KVInput{Op: KVPut, Value: "b"}, 1)
	h.Refuse(b, "no leader", 2)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 3)
	h.Return(g, KVOutput{Found: true, Value: "b", Version: 3}, 4)
	require.Equal(t, porcupine.Illegal, verdict(t, h), "a refused put must not be seen")
}

func TestKVUnknownCasBothWays(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h.Return(a, KVOutput{Version: 5}, 2)
	c := h.Call(0, "k", KVInput{Op: KVCas, Expect: 5, Value: "c"}, 3)
	h.GiveUp(c, "timeout", 4)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 10)
	h.Return(g, KVOutput{Found: true, Value: "c", Version: 8}, 11)
	require.Equal(t, porcupine.Ok, verdict(t, h))
}

func TestKVCasOnVersionZeroMeansAbsent(t *testing.T) {
	h := NewHistory(0)
	c := h.Call(0, "k", KVInput{Op: KVCas, Expect: 0, Value: "a"}, 1)
	h.Return(c, KVOutput{Succeeded: true, Version: 3}, 2)
	d := h.Call(0, "k", KVInput{Op: KVCas, Expect: 0, Value: "b"}, 3)
	h.Return(d, KVOutput{Succeeded: false}, 4)
	require.Equal(t, porcupine.Ok, verdict(t, h), "create-if-absent succeeds once, then fails")

	h = NewHistory(0)
	c = h.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h.Return(c, KVOutput{Version: 3}, 2)
	d = h.Call(0, "k", KVInput{Op: KVCas, Expect: 0, Value: "b"}, 3)
	h.Return(d, KVOutput{Succeeded: true, Version: 4}, 4)
	require.Equal(t, porcupine.Illegal, verdict(t, h), "create-if-absent over a present key")
}

func TestKVDelete(t *testing.T) {
	h := NewHistory(0)
	a := h.Call(0, "k", KVInput{Op: KVPut, Value: ""}, 1) // the empty value is a value
	h.Return(a, KVOutput{Version: 5}, 2)
	g := h.Call(1, "k", KVInput{Op: KVGet}, 3)
	h.Return(g, KVOutput{Found: true, Value: "", Version: 5}, 4)
	d := h.Call(0, "k", KVInput{Op: KVDelete}, 5)
	h.Return(d, KVOutput{Found: true, Version: 6}, 6)
	g2 := h.Call(1, "k", KVInput{Op: KVGet}, 7)
	h.Return(g2, KVOutput{Found: false}, 8)
	d2 := h.Call(0, "k", KVInput{Op: KVDelete}, 9)
	h.Return(d2, KVOutput{Found: false}, 10) // nothing left to delete
	require.Equal(t, porcupine.Ok, verdict(t, h))

	// A read after the delete that still sees the value is not.
	stale := h.Call(1, "k", KVInput{Op: KVGet}, 11)
	h.Return(stale, KVOutput{Found: true, Value: "", Version: 5}, 12)
	require.Equal(t, porcupine.Illegal, verdict(t, h))

	// Nor is a delete that finds a key nobody wrote.
	h2 := NewHistory(0)
	bad := h2.Call(0, "k", KVInput{Op: KVDelete}, 1)
	h2.Return(bad, KVOutput{Found: true, Version: 3}, 2)
	require.Equal(t, porcupine.Illegal, verdict(t, h2))

	// A delete whose answer never came may or may not have happened.
	h3 := NewHistory(0)
	p := h3.Call(0, "k", KVInput{Op: KVPut, Value: "a"}, 1)
	h3.Return(p, KVOutput{Version: 5}, 2)
	h3.Call(0, "k", KVInput{Op: KVDelete}, 3)
	r := h3.Call(1, "k", KVInput{Op: KVGet}, 4)
	h3.Return(r, KVOutput{Found: false}, 5)
	r2 := h3.Call(1, "k", KVInput{Op: KVGet}, 6)
	h3.Return(r2, KVOutput{Found: false}, 7)
	require.Equal(t, porcupine.Ok, verdict(t, h3))
}
