package linearizability

import (
	"bytes"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

const testFlow = "i8080:abc"

func fget(k string) FlowInput    { return FlowInput{Op: FlowGet, Key: k} }
func fset(k, v string) FlowInput { return FlowInput{Op: FlowSet, Key: k, Value: v} }
func fdel(k string) FlowInput    { return FlowInput{Op: FlowDelete, Key: k} }
func fincr(k string, d int64) FlowInput {
	return FlowInput{Op: FlowIncr, Key: k, Delta: d}
}
func fcas(k, expect, v string) FlowInput {
	return FlowInput{Op: FlowCas, Key: k, Expect: expect, Value: v}
}
func fcasAbsent(k, v string) FlowInput {
	return FlowInput{Op: FlowCas, Key: k, ExpectAbsent: true, Value: v}
}

var (
	fgetAll = FlowInput{Op: FlowGetAll}
	fclear  = FlowInput{Op: FlowClear}
	absent  = FlowOutput{}
	done    = FlowOutput{}
)

func found(v string) FlowOutput          { return FlowOutput{Found: true, Value: v} }
func all(m map[string]string) FlowOutput { return FlowOutput{All: EncodeFlowAll(m)} }
func casResult(ok bool) FlowOutput       { return FlowOutput{Succeeded: ok} }
func incrResult(n int64) FlowOutput      { return FlowOutput{Int: n} }

// flowRun records operations on testFlow: each call is answered (or not)
// before the next starts unless the test gives overlapping times.
type flowRun struct{ h *History }

func newFlowRun() flowRun { return flowRun{NewHistory(0)} }

func (r flowRun) ok(client int, in FlowInput, out FlowOutput, call, ret time.Duration) {
	r.h.Return(r.h.Call(client, testFlow, in, call), out, ret)
}

func (r flowRun) unknown(client int, in FlowInput, call, ret time.Duration) {
	r.h.GiveUp(r.h.Call(client, testFlow, in, call), "timeout", ret)
}

func (r flowRun) refused(client int, in FlowInput, call, ret time.Duration) {
	r.h.Refuse(r.h.Call(client, testFlow, in, call), "fenced", ret)
}

func (r flowRun) check(t *testing.T) FlowResult {
	t.Helper()
	return r.checkSplit(t, nil)
}

func (r flowRun) checkSplit(t *testing.T, cuts []time.Duration) FlowResult {
	t.Helper()
	res := CheckFlowsSplit(r.h, 5*time.Second, map[string][]time.Duration{testFlow: cuts})
	require.Len(t, res, 1)
	require.Equal(t, testFlow, res[0].Flow)
	return res[0]
}

func TestFlowSequentialHistoryIsLinearizable(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fget("a"), found("1"), 3, 4)
	r.ok(0, fcas("a", "1", "2"), casResult(true), 5, 6)
	r.ok(1, fincr("a", 3), incrResult(5), 7, 8)
	r.ok(0, fset("b", ""), done, 9, 10)
	r.ok(1, fgetAll, all(map[string]string{"a": "5", "b": ""}), 11, 12)
	r.ok(0, fdel("a"), done, 13, 14)
	r.ok(1, fget("a"), absent, 15, 16)
	r.ok(1, fget("b"), found(""), 17, 18)
	res := r.check(t)
	require.Equal(t, porcupine.Ok, res.Verdict)
	require.Equal(t, 9, res.Ops)
	require.Equal(t, 1, res.Segments)
	require.Empty(t, res.Describe)
}

func TestFlowStaleReadIsNotLinearizable(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("a", "2"), done, 3, 4)
	r.ok(1, fget("a"), found("1"), 5, 6)
	res := r.check(t)
	require.Equal(t, porcupine.Illegal, res.Verdict)
	require.Contains(t, res.Describe, `get("a") -> "1"`, "a failing verdict shows the flow's operations")
}

// TestFlowKeysOfAFlowAreOneState pins that the flow, not the key, is the
// unit: a stale read of one key is caught even with other keys between.
func TestFlowKeysOfAFlowAreOneState(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("b", "1"), done, 3, 4)
	r.ok(0, fset("a", "2"), done, 5, 6)
	r.ok(1, fget("b"), found("1"), 7, 8)
	r.ok(1, fget("a"), found("1"), 9, 10)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict)
}

func TestFlowUnknownSetMayOrMayNotBeVisible(t *testing.T) {
	for _, seen := range []string{"1", "2"} {
		r := newFlowRun()
		r.ok(0, fset("a", "1"), done, 1, 2)
		r.unknown(0, fset("a", "2"), 3, 4)
		r.ok(1, fget("a"), found(seen), 10, 11)
		r.ok(1, fgetAll, all(map[string]string{"a": seen}), 12, 13)
		require.Equal(t, porcupine.Ok, r.check(t).Verdict, "seeing %s after an unknown set of 2 is fine", seen)
	}

	// But it happened once or not at all: not back and forth.
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.unknown(0, fset("a", "2"), 3, 4)
	r.ok(1, fget("a"), found("2"), 10, 11)
	r.ok(1, fget("a"), found("1"), 12, 13)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict)
}

func TestFlowRefusedSetIsNeverSeen(t *testing.T) {
	r := newFlowRun()
	r.refused(0, fset("a", "b"), 1, 2)
	r.ok(1, fget("a"), found("b"), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "a refused set must not be seen")

	r = newFlowRun()
	r.refused(0, fset("a", "b"), 1, 2)
	r.ok(1, fget("a"), absent, 3, 4)
	res := r.check(t)
	require.Equal(t, porcupine.Ok, res.Verdict)
	require.Equal(t, 1, res.Ops, "the refused set is left out")
}

func TestFlowUnansweredReadsAreLeftOut(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.unknown(1, fget("a"), 3, 4)
	r.unknown(1, fgetAll, 5, 6)
	res := r.check(t)
	require.Equal(t, porcupine.Ok, res.Verdict)
	require.Equal(t, 1, res.Ops)
}

func TestFlowCasExpectAbsent(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fcasAbsent("a", "1"), casResult(true), 1, 2)
	r.ok(1, fcasAbsent("a", "2"), casResult(false), 3, 4)
	r.ok(1, fget("a"), found("1"), 5, 6)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict, "create-if-absent succeeds once, then fails")

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fcasAbsent("a", "2"), casResult(true), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "create-if-absent over a present key")

	// An empty value is present, not absent.
	r = newFlowRun()
	r.ok(0, fset("a", ""), done, 1, 2)
	r.ok(1, fcasAbsent("a", "2"), casResult(true), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "an empty value is present")

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fdel("a"), done, 3, 4)
	r.ok(1, fcasAbsent("a", "2"), casResult(true), 5, 6)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict, "a deleted key is absent again")
}

func TestFlowCasExpectValue(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fcas("a", "1", "2"), casResult(true), 3, 4)
	r.ok(0, fcas("a", "1", "3"), casResult(false), 5, 6)
	r.ok(1, fget("a"), found("2"), 7, 8)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict)

	r = newFlowRun()
	r.ok(1, fcas("a", "", "2"), casResult(true), 1, 2)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, `expecting "" does not match an absent key`)

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fcas("a", "1", "2"), casResult(false), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "a guard that held must succeed")
}

func TestFlowUnknownCasBothWays(t *testing.T) {
	for _, seen := range []string{"1", "2"} {
		r := newFlowRun()
		r.ok(0, fset("a", "1"), done, 1, 2)
		r.unknown(0, fcas("a", "1", "2"), 3, 4)
		r.ok(1, fget("a"), found(seen), 10, 11)
		require.Equal(t, porcupine.Ok, r.check(t).Verdict, "seen %s", seen)
	}

	r := newFlowRun()
	r.ok(0, fset("a", "0"), done, 1, 2)
	r.unknown(0, fcas("a", "1", "2"), 3, 4)
	r.ok(1, fget("a"), found("2"), 10, 11)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "an unknown cas whose guard failed cannot apply")
}

func TestFlowIncr(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fincr("n", 5), incrResult(5), 1, 2)
	r.ok(0, fincr("n", -7), incrResult(-2), 3, 4)
	r.ok(1, fget("n"), found("-2"), 5, 6)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict, "absent counts as 0; the value is stored in decimal")

	r = newFlowRun()
	r.ok(0, fincr("n", 5), incrResult(6), 1, 2)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "incr on absent answers delta")

	r = newFlowRun()
	r.ok(0, fset("n", "41"), done, 1, 2)
	r.unknown(0, fincr("n", 1), 3, 4)
	r.ok(1, fincr("n", 0), incrResult(42), 5, 6)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict, "an unknown incr may have applied")

	r = newFlowRun()
	r.ok(0, fset("n", "41"), done, 1, 2)
	r.unknown(0, fincr("n", 1), 3, 4)
	r.ok(1, fincr("n", 0), incrResult(43), 5, 6)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "an unknown incr applies once at most")
}

func TestFlowIncrOnNonIntegerChangesNothing(t *testing.T) {
	notInt := FlowOutput{NotInteger: true}
	r := newFlowRun()
	r.ok(0, fset("n", "x"), done, 1, 2)
	r.ok(0, fincr("n", 1), notInt, 3, 4)
	r.ok(1, fget("n"), found("x"), 5, 6)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict)

	r = newFlowRun()
	r.ok(0, fset("n", "x"), done, 1, 2)
	r.ok(0, fincr("n", 1), notInt, 3, 4)
	r.ok(1, fget("n"), found("1"), 5, 6)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "a failed incr must not change the value")

	r = newFlowRun()
	r.ok(0, fset("n", "x"), done, 1, 2)
	r.ok(0, fincr("n", 1), incrResult(1), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "incr over a non-integer cannot succeed")

	r = newFlowRun()
	r.ok(0, fset("n", "7"), done, 1, 2)
	r.ok(0, fincr("n", 1), notInt, 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "an integer is not NotInteger")

	r = newFlowRun()
	r.ok(0, fset("n", "x"), done, 1, 2)
	r.unknown(0, fincr("n", 1), 3, 4)
	r.ok(1, fget("n"), found("1"), 5, 6)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "even unanswered, it cannot apply")
}

func TestFlowGetAllAndClear(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("b", "2"), done, 3, 4)
	r.ok(1, fgetAll, all(map[string]string{"a": "1", "b": "2"}), 5, 6)
	r.ok(0, fclear, done, 7, 8)
	r.ok(1, fgetAll, all(nil), 9, 10)
	r.ok(1, fget("a"), absent, 11, 12)
	r.ok(0, fset("c", "3"), done, 13, 14)
	r.ok(1, fgetAll, all(map[string]string{"c": "3"}), 15, 16)
	require.Equal(t, porcupine.Ok, r.check(t).Verdict)

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("b", "2"), done, 3, 4)
	r.ok(1, fgetAll, all(map[string]string{"a": "1"}), 5, 6)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "get-all missing an acked key")

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fgetAll, all(map[string]string{"a": "1", "z": "9"}), 3, 4)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "get-all with a key nobody wrote")

	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fclear, done, 3, 4)
	r.ok(1, fget("a"), found("1"), 5, 6)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "a key survived a clear")

	for _, seen := range []map[string]string{nil, {"a": "1"}} {
		r = newFlowRun()
		r.ok(0, fset("a", "1"), done, 1, 2)
		r.unknown(0, fclear, 3, 4)
		r.ok(1, fgetAll, all(seen), 5, 6)
		require.Equal(t, porcupine.Ok, r.check(t).Verdict, "an unknown clear, seen as %v", seen)
	}
}

func TestFlowConcurrentOpsEitherOrder(t *testing.T) {
	for _, out := range []FlowOutput{absent, found("1")} {
		r := newFlowRun()
		r.ok(0, fset("a", "1"), done, 1, 10)
		r.ok(1, fget("a"), out, 2, 3)
		require.Equal(t, porcupine.Ok, r.check(t).Verdict, "a get during a set sees %+v", out)
	}

	for _, last := range []string{"1", "2"} {
		r := newFlowRun()
		r.ok(0, fset("a", "1"), done, 1, 10)
		r.ok(1, fset("a", "2"), done, 2, 9)
		r.ok(2, fget("a"), found(last), 11, 12)
		r.ok(2, fget("a"), found(last), 13, 14)
		require.Equal(t, porcupine.Ok, r.check(t).Verdict, "concurrent sets, %s last", last)
	}

	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 10)
	r.ok(1, fset("a", "2"), done, 2, 9)
	r.ok(2, fget("a"), found("2"), 11, 12)
	r.ok(2, fget("a"), found("1"), 13, 14)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "after both, the order is fixed")

	// Two concurrent create-if-absent calls: exactly one wins.
	r = newFlowRun()
	r.ok(0, fcasAbsent("a", "x"), casResult(true), 1, 10)
	r.ok(1, fcasAbsent("a", "y"), casResult(true), 2, 9)
	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "two winners")
}

func TestFlowFlowsAreCheckedApart(t *testing.T) {
	h := NewHistory(0)
	do := func(flow string, in FlowInput, out FlowOutput, at time.Duration) {
		h.Return(h.Call(0, flow, in, at), out, at+1)
	}
	do("i8080:b", fset("k", "1"), done, 1)
	do("i8080:a", fget("k"), absent, 3)
	do("i8080:b", fget("k"), found("1"), 5)
	do("i8080:b", fget("k"), absent, 7) // lost
	h.Return(h.Call(0, "i8080:a", KVInput{Op: KVPut, Value: "kv"}, 9), KVOutput{Version: 1}, 10)
	res := CheckFlows(h, 5*time.Second)
	require.Len(t, res, 2)
	require.Equal(t, "i8080:a", res[0].Flow, "flows come in sorted order")
	require.Equal(t, porcupine.Ok, res[0].Verdict, "one flow's key is not another's")
	require.Equal(t, 1, res[0].Ops, "KV operations are not flow operations")
	require.Equal(t, "i8080:b", res[1].Flow)
	require.Equal(t, porcupine.Illegal, res[1].Verdict)
}

func TestFlowModelChecksAlone(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: fset("a", "1"), Output: done, Call: 1, Return: 2},
		{ClientId: 1, Input: fget("a"), Output: found("1"), Call: 3, Return: 4},
	}
	require.True(t, porcupine.CheckOperations(FlowModel.ToModel(), ops))
	ops[1].Output = absent
	require.False(t, porcupine.CheckOperations(FlowModel.ToModel(), ops), "FlowModel starts from an empty flow")
}

func TestEncodeFlowAll(t *testing.T) {
	require.Equal(t, "", EncodeFlowAll(nil))
	require.Equal(t, "1:a1:12:bb0:", EncodeFlowAll(map[string]string{"bb": "", "a": "1"}), "sorted keys, length-prefixed")
	require.NotEqual(t, EncodeFlowAll(map[string]string{"a:1": ""}), EncodeFlowAll(map[string]string{"a": "1"}))
	require.NotEqual(t, EncodeFlowAll(map[string]string{"a": "1:b0:"}), EncodeFlowAll(map[string]string{"a": "1", "b": ""}))

	m := map[string]string{"": "empty key", "é": "1:2", "x": "", "10": "-"}
	got, err := decodeFlow(EncodeFlowAll(m), false)
	require.NoError(t, err)
	require.Len(t, got, len(m))
	for k, v := range m {
		require.Equal(t, flowValue{Present: true, Value: v}, got[k], "key %q", k)
	}
}

func TestCheckFlowsPanicsOnAHandMadeAll(t *testing.T) {
	for _, bad := range []string{"garbage", "1:a", "1:b1:21:a1:1", "01:a1:1", "1:a-"} {
		r := newFlowRun()
		r.ok(0, fgetAll, FlowOutput{All: bad}, 1, 2)
		require.Panics(t, func() { CheckFlows(r.h, time.Second) }, "All %q", bad)
	}
	r := newFlowRun()
	r.ok(0, FlowInput{Key: "a"}, done, 1, 2)
	require.Panics(t, func() { CheckFlows(r.h, time.Second) }, "an op that is no FlowOp")
}

// TestFlowSplitForgivesLossAtACut is the handoff exception: an acked write
// the new owner never got. Without the cut it is a violation; with a cut at
// the handoff it is forgiven, and the segments are counted.
func TestFlowSplitForgivesLossAtACut(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("b", "1"), done, 3, 4)
	r.ok(1, fget("a"), found("1"), 5, 6)
	// handoff at 50; the new owner has b but lost a
	r.ok(1, fget("a"), absent, 60, 61)
	r.ok(1, fgetAll, all(map[string]string{"b": "1"}), 62, 63)
	r.ok(0, fset("a", "2"), done, 64, 65)
	r.ok(1, fget("a"), found("2"), 66, 67)

	require.Equal(t, porcupine.Illegal, r.check(t).Verdict, "losing an acked write is a violation")
	res := r.checkSplit(t, []time.Duration{50})
	require.Equal(t, porcupine.Ok, res.Verdict, "unless a cut forgives it")
	require.Equal(t, 2, res.Segments)
	require.Equal(t, 0, res.Straddling)
	require.Equal(t, 7, res.Ops)
}

func TestFlowSplitStillCatchesViolationsOnEitherSide(t *testing.T) {
	// Before the cut: a stale read.
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(0, fset("a", "2"), done, 3, 4)
	r.ok(1, fget("a"), found("1"), 5, 6)
	r.ok(1, fget("a"), absent, 60, 61)
	res := r.checkSplit(t, []time.Duration{50})
	require.Equal(t, porcupine.Illegal, res.Verdict)
	require.Contains(t, res.Describe, "segment 1 of 2")

	// After the cut: the first read pins a, and a stale read follows a set.
	r = newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fget("a"), found("old"), 60, 61)
	r.ok(0, fset("a", "2"), done, 62, 63)
	r.ok(1, fget("a"), found("old"), 64, 65)
	res = r.checkSplit(t, []time.Duration{50})
	require.Equal(t, porcupine.Illegal, res.Verdict)
	require.Contains(t, res.Describe, "segment 2 of 2")

	// After the cut, with no write at all: a key cannot change by itself.
	r = newFlowRun()
	r.ok(1, fget("a"), found("x"), 60, 61)
	r.ok(1, fget("a"), found("y"), 62, 63)
	require.Equal(t, porcupine.Illegal, r.checkSplit(t, []time.Duration{50}).Verdict, "the first read pins the key")

	// A get-all after the cut pins every key, the absent ones too.
	r = newFlowRun()
	r.ok(1, fgetAll, all(map[string]string{"a": "1"}), 60, 61)
	r.ok(1, fget("a"), found("1"), 62, 63)
	r.ok(1, fget("b"), absent, 64, 65)
	require.Equal(t, porcupine.Ok, r.checkSplit(t, []time.Duration{50}).Verdict)
	r.ok(1, fget("b"), found("1"), 66, 67)
	require.Equal(t, porcupine.Illegal, r.checkSplit(t, []time.Duration{50}).Verdict, "b was pinned absent")

	// A pinned read then a get-all that disagrees.
	r = newFlowRun()
	r.ok(1, fget("a"), found("1"), 60, 61)
	r.ok(1, fgetAll, all(map[string]string{"b": "1"}), 62, 63)
	require.Equal(t, porcupine.Illegal, r.checkSplit(t, []time.Duration{50}).Verdict)

	// Writes after the cut are known whatever came before.
	r = newFlowRun()
	r.ok(0, fincr("n", 1), incrResult(8), 60, 61) // pins n = 8
	r.ok(0, fincr("n", 1), incrResult(10), 62, 63)
	require.Equal(t, porcupine.Illegal, r.checkSplit(t, []time.Duration{50}).Verdict)
}

// TestFlowSplitStraddlingOps pins how an op across a cut is weakened: an
// answered write may have applied on either side, so a read before the cut
// may see it; an answered read is left out; both are counted.
func TestFlowSplitStraddlingOps(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 40, 60)
	r.ok(1, fget("a"), found("1"), 45, 48)
	r.ok(2, fget("a"), found("whatever"), 49, 51)
	r.ok(1, fget("a"), found("1"), 70, 71)
	res := r.checkSplit(t, []time.Duration{50})
	require.Equal(t, porcupine.Ok, res.Verdict)
	require.Equal(t, 2, res.Straddling)
	require.Equal(t, 3, res.Ops, "the straddling read is left out")

	// An unanswered write is spread over every segment after its call.
	r = newFlowRun()
	r.unknown(0, fset("a", "9"), 1, 2)
	r.ok(1, fget("a"), absent, 60, 61)
	r.ok(1, fget("a"), found("9"), 62, 63)
	res = r.checkSplit(t, []time.Duration{50})
	require.Equal(t, porcupine.Ok, res.Verdict)
	require.Equal(t, 0, res.Straddling, "an unanswered write claims nothing a cut could forgive")
}

func TestFlowSplitCutsAreSortedAndDeduped(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.ok(1, fget("a"), absent, 30, 31)
	r.ok(0, fset("a", "2"), done, 32, 33)
	r.ok(1, fget("a"), found("1"), 60, 61)
	cuts := []time.Duration{50, 20, 50}
	res := r.checkSplit(t, cuts)
	require.Equal(t, porcupine.Ok, res.Verdict, "two handoffs, each forgiven")
	require.Equal(t, 3, res.Segments)
	require.Equal(t, []time.Duration{50, 20, 50}, cuts, "the caller's cuts are left alone")

	res = r.checkSplit(t, []time.Duration{20})
	require.Equal(t, porcupine.Illegal, res.Verdict, "one cut forgives one handoff")
}

func TestFlowSetAll(t *testing.T) {
	h := NewHistory(0)
	set := h.Call(0, "f", FlowInput{Op: FlowSet, Key: "z", Value: "keep"}, 1)
	h.Return(set, FlowOutput{}, 2)
	all := h.Call(0, "f", FlowInput{Op: FlowSetAll, Entries: EncodeFlowAll(map[string]string{"a": "1", "b": ""})}, 3)
	h.Return(all, FlowOutput{Succeeded: true}, 4)
	g := h.Call(1, "f", FlowInput{Op: FlowGetAll}, 5)
	h.Return(g, FlowOutput{All: EncodeFlowAll(map[string]string{"a": "1", "b": "", "z": "keep"})}, 6)
	res := CheckFlows(h, 5*time.Second)
	require.Equal(t, porcupine.Ok, res[0].Verdict, "set-all sets its keys and leaves the others")

	// A get-all that sees half of a set-all is not linearizable.
	torn := h.Call(1, "f", FlowInput{Op: FlowGetAll}, 7)
	h.Return(torn, FlowOutput{All: EncodeFlowAll(map[string]string{"a": "1", "z": "keep"})}, 8)
	res = CheckFlows(h, 5*time.Second)
	require.Equal(t, porcupine.Illegal, res[0].Verdict)
}

// The visualization draws one flow's history, unknown and refused
// operations included as the checker sees them, and says its verdict.
func TestVisualizeFlow(t *testing.T) {
	r := newFlowRun()
	r.ok(0, fset("a", "1"), done, 1, 2)
	r.unknown(1, fset("a", "3"), 2, 3)
	r.refused(1, fset("a", "9"), 3, 4)
	r.ok(0, fset("a", "2"), done, 5, 6)
	r.ok(1, fget("a"), found("1"), 7, 8)
	var html bytes.Buffer
	res, err := VisualizeFlow(r.h, testFlow, time.Second, &html)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, res)
	require.Contains(t, html.String(), "<html")
	require.Contains(t, html.String(), `set(\"a\", \"2\")`, "the operations are drawn")

	var ok bytes.Buffer
	res, err = VisualizeFlow(newFlowRun().h, testFlow, time.Second, &ok)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res, "an empty history")
}
