package consensus

import (
	"errors"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/dial"
)

// Frame kinds, as DecodeFrame names them.
const (
	FrameVote          = "vote"           // a candidate asks for a vote
	FrameVoteResp      = "vote-resp"      // a voter's answer
	FrameAppend        = "append"         // a leader's entries
	FrameAppendResp    = "append-resp"    // a follower's answer
	FrameHeartbeat     = "heartbeat"      // a leader's heartbeat
	FrameHeartbeatResp = "heartbeat-resp" // a follower's answer
	FrameSnapshot      = "snapshot"       // a leader's snapshot
	FrameOther         = "other"          // pre-votes, proposals, read-index, ...
)

// FrameInfo is what a raft frame says of itself: for the simulator's
// checkers, which read the network's record of what nodes said (a vote
// granted, a heartbeat) and never a node's account of itself. Only this
// package names etcd raft's types; this is how the rest see its frames.
type FrameInfo struct {
	Kind     string
	From, To dial.NodeID
	Term     uint64
	Reject   bool   // an answer that refuses (a vote not granted)
	Index    uint64 // an append answer's last index: what the follower holds
}

// FromLeader reports whether only a leader sends this kind of frame.
func (f FrameInfo) FromLeader() bool {
	return f.Kind == FrameAppend || f.Kind == FrameHeartbeat || f.Kind == FrameSnapshot
}

// ToLeader reports whether this kind of frame answers a leader's.
func (f FrameInfo) ToLeader() bool {
	return f.Kind == FrameAppendResp || f.Kind == FrameHeartbeatResp
}

// DecodeFrame decodes a raft frame (first byte 1) as the node does.
func DecodeFrame(frame []byte) (FrameInfo, error) {
	if len(frame) == 0 || frame[0] != frameRaft {
		return FrameInfo{}, errors.New("consensus: not a raft frame")
	}
	var m pb.Message
	if err := m.Unmarshal(frame[1:]); err != nil {
		return FrameInfo{}, err
	}
	info := FrameInfo{Kind: FrameOther, From: dial.NodeID(m.From), To: dial.NodeID(m.To), Term: m.Term, Reject: m.Reject, Index: m.Index}
	switch m.Type {
	case pb.MsgVote:
		info.Kind = FrameVote
	case pb.MsgVoteResp:
		info.Kind = FrameVoteResp
	case pb.MsgApp:
		info.Kind = FrameAppend
	case pb.MsgAppResp:
		info.Kind = FrameAppendResp
	case pb.MsgHeartbeat:
		info.Kind = FrameHeartbeat
	case pb.MsgHeartbeatResp:
		info.Kind = FrameHeartbeatResp
	case pb.MsgSnap:
		info.Kind = FrameSnapshot
	}
	return info, nil
}
