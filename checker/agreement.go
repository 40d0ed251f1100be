package checker

import (
	"fmt"
	"slices"
)

// ReplicaAgreement holds every replica to one history, from samples of
// what each node applied: every node that applied log index i reached the
// same state digest there, and every node at membership index m has the
// same voters. A sample is taken by the simulator at an instant of its
// choosing; the first node seen at an index sets what the others must
// match.
type ReplicaAgreement struct {
	digestAt map[uint64]uint64
	digestBy map[uint64]string
	votersAt map[uint64][]string
}

// NewReplicaAgreement returns a checker that has seen nothing.
func NewReplicaAgreement() *ReplicaAgreement {
	return &ReplicaAgreement{digestAt: map[uint64]uint64{}, digestBy: map[uint64]string{}, votersAt: map[uint64][]string{}}
}

// Applied records that node had applied through index with state digest
// digest. Index 0 (nothing applied) is not judged.
func (a *ReplicaAgreement) Applied(rep Reporter, node string, index, digest uint64) {
	if index == 0 {
		return
	}
	prev, ok := a.digestAt[index]
	if !ok {
		a.digestAt[index], a.digestBy[index] = digest, node
		return
	}
	if prev != digest {
		rep.Fail("replica-agreement", "%s and %s applied index %d to different states (%016x vs %016x)",
			a.digestBy[index], node, index, prev, digest)
	}
}

// Voters records that node had membership index in force with these
// voters (sorted names). Index 0 (no membership yet) is not judged. It
// keeps a copy of voters: the caller may reuse the slice.
//
// The lists are compared name by name and formatted only for a failure:
// the simulator checks every node ten times a virtual second.
func (a *ReplicaAgreement) Voters(rep Reporter, node string, index uint64, voters []string) {
	if index == 0 {
		return
	}
	prev, ok := a.votersAt[index]
	if !ok {
		a.votersAt[index] = slices.Clone(voters)
		return
	}
	if slices.Equal(prev, voters) {
		return
	}
	// Judged as before, on the printed lists.
	if got, want := fmt.Sprint(voters), fmt.Sprint(prev); got != want {
		rep.Fail("replica-agreement", "%s has voters %s at membership index %d; another node had %s",
			node, got, index, want)
	}
}
