package checker

import (
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/fenceline/fenceline/linearizability"
)

// Bridge holds the flow store's bounded bridge to its promises over a
// client history: no call outlives the deadline, and a call refused for
// want of a permit is refused at the instant it is made.
//
// The deadline runs on the node's clock, so true time may exceed it by
// the clock's drift: driftPPM is the bound the run's clocks kept to. A
// call whose Note starts with givenUp is one the client stopped waiting
// for (its node crashed under it): it is the client's to time out, and
// not judged. A refusal whose Note contains shed is a shed call.
//
// The node answers on its one loop, which an fsync blocks: late[op ID] is
// how long the answer waited for the node's fsyncs (the simulator's
// record of the node's backlog at that instant, not the node's word), and
// extends that call's limit.
func Bridge(rep Reporter, ops []linearizability.Op, late map[int]time.Duration, deadline time.Duration, driftPPM int64, givenUp, shed string) {
	BridgeSeq(rep, slices.Values(ops), late, deadline, driftPPM, givenUp, shed)
}

// BridgeSeq is Bridge over a sequence of operations (History.All), so a
// long history is judged without being copied.
func BridgeSeq(rep Reporter, ops iter.Seq[linearizability.Op], late map[int]time.Duration, deadline time.Duration, driftPPM int64, givenUp, shed string) {
	limit := deadline + time.Duration(int64(deadline)*driftPPM/1_000_000)
	for op := range ops {
		if op.Return == 0 || strings.HasPrefix(op.Note, givenUp) {
			continue
		}
		if took := op.Return - op.Call; took > limit+late[op.ID] {
			rep.Fail("bridge", "client %d's call on %s took %v, over the %v deadline", op.Client, op.Key, took, deadline)
		}
		if strings.Contains(op.Note, shed) && op.Return > op.Call+late[op.ID] {
			rep.Fail("bridge", "client %d's shed call waited %v for its refusal", op.Client, op.Return-op.Call)
		}
	}
}
