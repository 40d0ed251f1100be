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

// MayBeVoteResp is false for a raft frame (first byte 1) that is certainly
// not a vote answer, judged from its first field alone: raftpb marshals a
// Message's fields in order, so its type (field 1, a varint) leads. A
// frame laid out otherwise may be anything: true. For a simulator's vote
// watcher, which sees every raft frame sent and wants only the grants,
// so that it need not decode every append (entries and all) to find them.
func MayBeVoteResp(frame []byte) bool {
	const typeTag = 1<<3 | 0 // field 1, wire type varint
	if len(frame) < 3 || frame[0] != frameRaft || frame[1] != typeTag || frame[2] >= 0x80 {
		return true
	}
	return pb.MessageType(frame[2]) == pb.MsgVoteResp
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

// Raft's request and reply families, for the envelope (core/transport): a
// reply opens only while a request of its family to the same peer awaits
// one. A leader's entries, snapshots and heartbeats are one family, since
// a follower may answer a heartbeat from a stale leader with an append
// answer.
const (
	FamilyVote    = 1 // MsgVote → MsgVoteResp
	FamilyPreVote = 2 // MsgPreVote → MsgPreVoteResp
	FamilyLeader  = 3 // MsgApp, MsgSnap, MsgHeartbeat → MsgAppResp, MsgHeartbeatResp
	FamilyRead    = 4 // MsgReadIndex → MsgReadIndexResp
)

// FrameKind says, for the envelope, which family a raft frame belongs to
// (0: one-way, such as a forwarded proposal) and whether it is a reply. It
// reads only the message type, the first field of the encoding, so it
// costs nothing beside the seal.
func FrameKind(frame []byte) (family uint8, reply bool, ok bool) {
	if len(frame) < 3 || frame[0] != frameRaft || frame[1] != 0x08 || frame[2] >= 0x80 {
		return 0, false, false // not a raft frame, or not one this encoder wrote
	}
	switch pb.MessageType(frame[2]) {
	case pb.MsgVote:
		return FamilyVote, false, true
	case pb.MsgVoteResp:
		return FamilyVote, true, true
	case pb.MsgPreVote:
		return FamilyPreVote, false, true
	case pb.MsgPreVoteResp:
		return FamilyPreVote, true, true
	case pb.MsgApp, pb.MsgSnap, pb.MsgHeartbeat:
		return FamilyLeader, false, true
	case pb.MsgAppResp, pb.MsgHeartbeatResp:
		return FamilyLeader, true, true
	case pb.MsgReadIndex:
		return FamilyRead, false, true
	case pb.MsgReadIndexResp:
		return FamilyRead, true, true
	}
	return 0, false, true
}
