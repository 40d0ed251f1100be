package consensus

import (
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/dial"
)

// RemoveUnchecked proposes removing id without the proposer's check that
// a voter is left, as an earlier version of this package did: the entry
// every member must then apply without panicking, on every restart.
func (n *Node) RemoveUnchecked(id dial.NodeID, done func(error)) {
	n.proposeConfOnce(pb.ConfChange{Type: pb.ConfChangeRemoveNode, NodeID: uint64(id)}, Member{ID: id}, 0, false, done)
}
