package checker

import (
	"maps"
	"slices"

	"github.com/fenceline/fenceline/core/flow"
)

// ReplicaConvergence compares a successor's copy of a flow with the
// owner's, after quiescence, key by key both ways: every key the owner
// holds must carry the owner's tuple on the replica, and a key only the
// replica holds is a copy the owner's authority never reached. The copies
// are what the simulator read off each node's store.
func ReplicaConvergence(rep Reporter, f, owner string, own map[string]flow.Value, replica string, theirs map[string]flow.Value) {
	for _, k := range slices.Sorted(maps.Keys(own)) {
		if theirs[k].Tuple != own[k].Tuple {
			rep.Fail("replica-convergence", "%s's copy of %s key %s has tuple %v; the owner %s has %v",
				replica, f, k, theirs[k].Tuple, owner, own[k].Tuple)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(theirs)) {
		if _, ok := own[k]; !ok {
			rep.Fail("replica-convergence", "%s's copy of %s holds key %s (tuple %v), which the owner %s does not",
				replica, f, k, theirs[k].Tuple, owner)
		}
	}
}
