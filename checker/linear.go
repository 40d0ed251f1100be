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
	flowLinearizable(rep, "flow-linearizability", h, cuts, timeout)
}

// ScenarioLinearizable holds what clients of stateful imposters saw to a
// register with compare-and-set per scenario, flow by flow: each answer
// names the state its gate read, and a transition it asked for is a
// compare-and-set from that state whose outcome the client does not see
// (so it may or may not have moved the state). A 503 or a timeout is a
// transition that may have happened. Cuts as FlowLinearizable's.
func ScenarioLinearizable(rep Reporter, h *linearizability.History, cuts map[string][]time.Duration, timeout time.Duration) {
	flowLinearizable(rep, "scenario-linearizability", h, cuts, timeout)
}

// CycleLinearizable holds what clients of a shared response cycle saw
// to a counter that each request advances by one, cycle by cycle: each
// answer names its place; a 503 or a timeout is a step that may have
// happened. Cuts as FlowLinearizable's.
func CycleLinearizable(rep Reporter, h *linearizability.History, cuts map[string][]time.Duration, timeout time.Duration) {
	flowLinearizable(rep, "cycle-linearizability", h, cuts, timeout)
}

// CounterLinearizable holds what clients of an injected counter saw to
// one counter that each request advances by one: each answer names the
// count it reached; a 503 that may have written, or no answer, is a step
// that may have happened. Cuts as FlowLinearizable's.
func CounterLinearizable(rep Reporter, h *linearizability.History, cuts map[string][]time.Duration, timeout time.Duration) {
	flowLinearizable(rep, "counter-linearizability", h, cuts, timeout)
}

// Offender is a Reporter that wants to know which key a failure is about
// and when it first shows, to draw it (simrun -out).
type Offender interface {
	Offending(checker, key string, at time.Duration)
}

// flowLinearizable reports the first flow that is not linearizable (one
// is enough to fail the run) and every flow whose check ran out of time.
func flowLinearizable(rep Reporter, name string, h *linearizability.History, cuts map[string][]time.Duration, timeout time.Duration) {
	linearizability.CheckFlowsEach(h, timeout, cuts, func(res linearizability.FlowResult) bool {
		switch res.Verdict {
		case porcupine.Illegal:
			rep.Fail(name, "flow %s: %d operations are not linearizable:%s", res.Flow, res.Ops, res.Describe)
			if o, ok := rep.(Offender); ok {
				o.Offending(name, res.Flow, res.FailsAt)
			}
			return false
		case porcupine.Unknown:
			rep.Undecided(name, "flow %s: the check ran out of its %v (%d ops)", res.Flow, timeout, res.Ops)
		}
		return true
	})
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
