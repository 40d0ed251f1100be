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
