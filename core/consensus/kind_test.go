package consensus

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// FrameKind reads the type off the head of every message as send encodes
// it, whatever else the message holds, and pairs each answer with the
// request it answers.
func TestFrameKind(t *testing.T) {
	want := map[pb.MessageType]struct {
		family uint8
		reply  bool
	}{
		pb.MsgVote: {FamilyVote, false}, pb.MsgVoteResp: {FamilyVote, true},
		pb.MsgPreVote: {FamilyPreVote, false}, pb.MsgPreVoteResp: {FamilyPreVote, true},
		pb.MsgApp: {FamilyLeader, false}, pb.MsgSnap: {FamilyLeader, false}, pb.MsgHeartbeat: {FamilyLeader, false},
		pb.MsgAppResp: {FamilyLeader, true}, pb.MsgHeartbeatResp: {FamilyLeader, true},
		pb.MsgReadIndex: {FamilyRead, false}, pb.MsgReadIndexResp: {FamilyRead, true},
	}
	for typ := range pb.MessageType_name {
		m := pb.Message{Type: pb.MessageType(typ), From: 1 << 60, To: 3, Term: 1 << 40, Index: 99,
			Entries: []pb.Entry{{Index: 100, Term: 7, Data: []byte("x")}}, Context: []byte("ctx")}
		data, err := m.Marshal()
		require.NoError(t, err)
		family, reply, ok := FrameKind(append([]byte{frameRaft}, data...))
		require.True(t, ok, "%v", m.Type)
		require.Equal(t, want[m.Type].family, family, "%v", m.Type)
		require.Equal(t, want[m.Type].reply, reply, "%v", m.Type)
	}
	for name, f := range map[string][]byte{
		"empty": nil, "flow": {2, '{'}, "no type": {frameRaft, 0x10, 1}, "long varint": {frameRaft, 0x08, 0x80, 1},
	} {
		_, _, ok := FrameKind(f)
		require.False(t, ok, name)
	}
}
