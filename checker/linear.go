package checker

import (
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fenceline/fenceline/linearizability"
)

// FlowLinearizable runs porcupine over every flow of a history, split at
// the accepted-loss points (FlowCuts), each search bounded by timeout of
// wall time. An illegal flow fails; a flow whose search ran out of time is
// undecided, never passed. Neither verdict reaches a trace hash: the
// timeout is wall-clock.
func FlowLinearizable(rep Reporter, h *linearizability.History, cuts map[string][]time.Duration, timeout time.Duration) {
	for _, res := range linearizability.CheckFlowsSplit(h, timeout, cuts) {
		switch res.Verdict {
		case porcupine.Illegal:
			rep.Fail("flow-linearizability", "flow %s: %d operations are not linearizable:%s", res.Flow, res.Ops, res.Describe)
		case porcupine.Unknown:
			rep.Undecided("flow-linearizability", "flow %s: the check ran out of its %v (%d ops)", res.Flow, timeout, res.Ops)
		}
	}
}

// KVLinearizable runs porcupine over every key of a KV history; verdicts
// as FlowLinearizable's.
func KVLinearizable(rep Reporter, h *linearizability.History, timeout time.Duration) {
	for _, res := range linearizability.CheckKV(h, timeout) {
		switch res.Verdict {
		case porcupine.Illegal:
			rep.Fail("kv-linearizability", "key %s: %d operations are not linearizable:%s", res.Key, res.Ops, res.Describe)
		case porcupine.Unknown:
			rep.Undecided("kv-linearizability", "key %s: the check ran out of its %v (%d ops)", res.Key, timeout, res.Ops)
		}
	}
}
