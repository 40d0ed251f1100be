package consensus

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// MayBeVoteResp is true for every vote answer raft marshals, and false
// for every other kind of message, entries or not.
func TestMayBeVoteResp(t *testing.T) {
	for typ := range pb.MessageType_name {
		m := pb.Message{Type: pb.MessageType(typ), To: 2, From: 1, Term: 7, Index: 3,
			Entries: []pb.Entry{{Term: 7, Index: 4, Data: []byte("x")}}}
		data, err := m.Marshal()
		require.NoError(t, err)
		frame := append([]byte{frameRaft}, data...)
		require.Equal(t, m.Type == pb.MsgVoteResp, MayBeVoteResp(frame), m.Type.String())
	}
	require.True(t, MayBeVoteResp([]byte{frameRaft}), "too short to say: true")
	require.True(t, MayBeVoteResp([]byte{frameRaft, 0x10, 1, 0x08, byte(pb.MsgVoteResp)}), "type not first: true")
}

// PeekLeaderFrame reads the commit index of every append and heartbeat
// raft marshals, past entries, a snapshot and a context, and the index
// of the first membership change among the entries; it reads no other
// kind.
func TestPeekLeaderFrame(t *testing.T) {
	for typ := range pb.MessageType_name {
		for _, conf := range []bool{false, true} {
			ents := []pb.Entry{{Term: 7, Index: 4, Data: make([]byte, 300)}, {Term: 7, Index: 5}, {Term: 7, Index: 6}}
			want := uint64(0)
			if conf {
				ents[1].Type, ents[2].Type, want = pb.EntryConfChange, pb.EntryConfChangeV2, 5
			}
			m := pb.Message{Type: pb.MessageType(typ), To: 2, From: 1, Term: 7, Index: 3, Commit: 1<<40 + 5, Entries: ents,
				Snapshot: &pb.Snapshot{Data: []byte("s"), Metadata: pb.SnapshotMetadata{Index: 2, Term: 1}},
				Context:  []byte("ctx")}
			data, err := m.Marshal()
			require.NoError(t, err)
			peek, ok := PeekLeaderFrame(append([]byte{frameRaft}, data...))
			leader := m.Type == pb.MsgApp || m.Type == pb.MsgHeartbeat
			require.Equal(t, leader, ok, m.Type.String())
			if leader {
				require.Equal(t, LeaderPeek{Commit: m.Commit, ConfAt: want}, peek, m.Type.String())
			}
		}
	}
	m := pb.Message{Type: pb.MsgApp, Commit: 9, Entries: []pb.Entry{{Index: 4, Data: []byte("x")}}}
	data, err := m.Marshal()
	require.NoError(t, err)
	frame := append([]byte{frameRaft}, data...)
	_, ok := PeekLeaderFrame(frame[:len(frame)-3])
	require.False(t, ok, "cut short")
	_, ok = PeekLeaderFrame(append([]byte{2}, data...))
	require.False(t, ok, "not a raft frame")
}
