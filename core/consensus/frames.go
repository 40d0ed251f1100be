package consensus

import (
	pb "go.etcd.io/raft/v3/raftpb"
)

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
	t, ok := FrameType(frame)
	if !ok {
		return 0, false, false // not a raft frame, or not one this encoder wrote
	}
	switch t {
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

// FrameType reads a raft frame's message type, the first field of the
// encoding, without decoding the rest: for FrameKind, and for the
// simulator's faults, which rewrite only frames of one type.
func FrameType(frame []byte) (pb.MessageType, bool) {
	if len(frame) < 3 || frame[0] != frameRaft || frame[1] != 0x08 || frame[2] >= 0x80 {
		return 0, false
	}
	return pb.MessageType(frame[2]), true
}
