//fenceline:nomutate the simulator's watchers read raft frames with these (votes granted, a leader's contacts); no node calls them, so a mutant here could only blind a judge, never weaken a defence

package consensus

import (
	"encoding/binary"
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

// LeaderPeek is what PeekLeaderFrame reads of a leader's append or
// heartbeat: the commit index it carries, which its sender knew committed
// as it sent it, and the log index of the first membership change among
// its entries (0: none).
type LeaderPeek struct {
	Commit, ConfAt uint64
}

// PeekLeaderFrame reads a leader's append or heartbeat (first byte 1)
// without decoding its entries: raftpb marshals a message's fields, and
// an entry's, in order, each behind a tag, so the walk reads the fields
// it wants and skips the rest. ok is false for a frame of another kind,
// or one that does not parse.
func PeekLeaderFrame(frame []byte) (peek LeaderPeek, ok bool) {
	if len(frame) == 0 || frame[0] != frameRaft {
		return peek, false
	}
	typ := pb.MessageType(-1)
	ok = walkFields(frame[1:], func(field uint64, v uint64, b []byte) bool {
		switch {
		case field == 1 && b == nil:
			typ = pb.MessageType(v)
		case field == 8 && b == nil:
			peek.Commit = v
		case field == 7 && b != nil && peek.ConfAt == 0:
			var et pb.EntryType
			var idx uint64
			if !walkFields(b, func(f, v uint64, fb []byte) bool {
				switch {
				case f == 1 && fb == nil:
					et = pb.EntryType(v)
				case f == 3 && fb == nil:
					idx = v
				}
				return true
			}) {
				return false
			}
			if et == pb.EntryConfChange || et == pb.EntryConfChangeV2 {
				peek.ConfAt = idx
			}
		}
		return true
	})
	return peek, ok && (typ == pb.MsgApp || typ == pb.MsgHeartbeat)
}

// walkFields calls f with each field of a marshalled protobuf message:
// its number, and its value (a varint) or its bytes (length-delimited;
// nil for a varint). Fixed-width fields are skipped. It reports false
// if b does not parse, or f returned false.
func walkFields(b []byte, f func(field, v uint64, bytes []byte) bool) bool {
	for len(b) > 0 {
		tag, n := binary.Uvarint(b)
		if n <= 0 {
			return false
		}
		b = b[n:]
		switch tag & 7 {
		case 0: // varint
			v, n := binary.Uvarint(b)
			if n <= 0 || !f(tag>>3, v, nil) {
				return false
			}
			b = b[n:]
		case 1: // fixed 64 bits
			if len(b) < 8 {
				return false
			}
			b = b[8:]
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) || !f(tag>>3, 0, b[n:n+int(l):n+int(l)]) {
				return false
			}
			b = b[n+int(l):]
		case 5: // fixed 32 bits
			if len(b) < 4 {
				return false
			}
			b = b[4:]
		default:
			return false
		}
	}
	return true
}

// DecodeFrame decodes a raft frame (first byte 1) as the node does.
func DecodeFrame(frame []byte) (FrameInfo, error) {
	m, err := unmarshalFrame(frame)
	if err != nil {
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

// ConfEntry is a membership change an append carries: its place in the
// log, and the voter it takes out (a removal, or a voter made a learner;
// 0 for a change that takes no voter out).
type ConfEntry struct {
	Index, Term uint64
	Out         dial.NodeID
}

// AppendConfChanges decodes an append frame's membership changes, for a
// watcher that holds leaders to handOffBefore's rule: it returns the
// sender, the term it sent in, and the changes among the entries (none
// for a frame that is not an append).
func AppendConfChanges(frame []byte) (from dial.NodeID, term uint64, changes []ConfEntry, err error) {
	m, err := unmarshalFrame(frame)
	if err != nil {
		return 0, 0, nil, err
	}
	if m.Type != pb.MsgApp {
		return dial.NodeID(m.From), m.Term, nil, nil
	}
	for _, e := range m.Entries {
		var ccs []pb.ConfChangeSingle
		switch e.Type {
		case pb.EntryConfChange:
			var cc pb.ConfChange
			if err := cc.Unmarshal(e.Data); err != nil {
				return 0, 0, nil, err
			}
			ccs = cc.AsV2().Changes
		case pb.EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := cc.Unmarshal(e.Data); err != nil {
				return 0, 0, nil, err
			}
			ccs = cc.Changes
		default:
			continue
		}
		ce := ConfEntry{Index: e.Index, Term: e.Term}
		for _, c := range ccs {
			if c.Type == pb.ConfChangeRemoveNode || c.Type == pb.ConfChangeAddLearnerNode {
				ce.Out = dial.NodeID(c.NodeID)
			}
		}
		changes = append(changes, ce)
	}
	return dial.NodeID(m.From), m.Term, changes, nil
}

// unmarshalFrame reads a raft frame (first byte 1) as the node does.
func unmarshalFrame(frame []byte) (pb.Message, error) {
	var m pb.Message
	if len(frame) == 0 || frame[0] != frameRaft {
		return m, errors.New("consensus: not a raft frame")
	}
	err := m.Unmarshal(frame[1:])
	return m, err
}
