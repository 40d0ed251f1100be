package checker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/linearizability"
)

func flowOp(h *linearizability.History, client int, in linearizability.FlowInput, out linearizability.FlowOutput, call, ret time.Duration) {
	id := h.Call(client, "f", in, call)
	h.Return(id, out, ret)
}

func TestFlowLinearizable(t *testing.T) {
	set := linearizability.FlowInput{Op: linearizability.FlowSet, Key: "a", Value: "1"}
	get := linearizability.FlowInput{Op: linearizability.FlowGet, Key: "a"}

	h := linearizability.NewHistory(0)
	flowOp(h, 1, set, linearizability.FlowOutput{}, 0, time.Second)
	flowOp(h, 2, get, linearizability.FlowOutput{Found: true, Value: "1"}, 2*time.Second, 3*time.Second)
	var rec Record
	FlowLinearizable(&rec, h, nil, time.Minute)
	require.True(t, rec.OK(), "%v %v", rec.Failures, rec.Unsure)

	// A read after the write that misses it.
	flowOp(h, 2, get, linearizability.FlowOutput{}, 4*time.Second, 5*time.Second)
	FlowLinearizable(&rec, h, nil, time.Minute)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "flow-linearizability: flow f: 3 operations are not linearizable")

	// ... forgiven by a cut between them.
	rec = Record{}
	FlowLinearizable(&rec, h, map[string][]time.Duration{"f": {3500 * time.Millisecond}}, time.Minute)
	require.True(t, rec.OK(), "%v", rec.Failures)

	// A search that cannot finish in its time is undecided: writes whose
	// answers never came, any subset of which may have applied, then a
	// read no subset explains, so porcupine must try them all.
	big := linearizability.NewHistory(0)
	for i := 0; i < 25; i++ {
		big.Call(i, "f", linearizability.FlowInput{Op: linearizability.FlowSet, Key: fmt.Sprintf("k%02d", i), Value: "v"}, 0)
	}
	flowOp(big, 100, linearizability.FlowInput{Op: linearizability.FlowGetAll},
		linearizability.FlowOutput{All: linearizability.EncodeFlowAll(map[string]string{"zz": "never"})}, time.Second, 2*time.Second)
	rec = Record{}
	FlowLinearizable(&rec, big, nil, time.Nanosecond)
	require.Empty(t, rec.Failures)
	require.Len(t, rec.Unsure, 1)
	require.Contains(t, rec.Unsure[0], "flow-linearizability: flow f: the check ran out of its 1ns")
}

func TestKVLinearizable(t *testing.T) {
	h := linearizability.NewHistory(0)
	put := h.Call(1, "k", linearizability.KVInput{Op: linearizability.KVPut, Value: "a"}, 0)
	h.Return(put, linearizability.KVOutput{Version: 5}, time.Second)
	get := h.Call(2, "k", linearizability.KVInput{Op: linearizability.KVGet}, 2*time.Second)
	h.Return(get, linearizability.KVOutput{Found: true, Value: "a", Version: 5}, 3*time.Second)
	var rec Record
	KVLinearizable(&rec, h, time.Minute)
	require.True(t, rec.OK())

	stale := h.Call(2, "k", linearizability.KVInput{Op: linearizability.KVGet}, 4*time.Second)
	h.Return(stale, linearizability.KVOutput{Found: false}, 5*time.Second)
	KVLinearizable(&rec, h, time.Minute)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "kv-linearizability: key k")
}
