package flow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FrameKind reads every kind the store sends from the head of the frame,
// and refuses what the store would not decode.
func TestFrameKind(t *testing.T) {
	for kind, want := range map[string]struct {
		family uint8
		reply  bool
	}{
		FrameOp: {FamilyOp, false}, FrameOpResp: {FamilyOp, true},
		FrameAE: {FamilyAE, false}, FrameAEResp: {FamilyAE, true},
		FrameAdopt: {FamilyAdopt, false}, FrameAdoptResp: {FamilyAdopt, true},
		FramePush: {0, false},
	} {
		// A frame as send builds it, with fields after the kind.
		f := frame(msg{Kind: kind, ID: 7, Flow: "i4545:x", Req: &Request{Flow: "i4545:x", Op: OpGet, Key: "k"}})
		family, reply, ok := FrameKind(f)
		require.True(t, ok, kind)
		require.Equal(t, want.family, family, kind)
		require.Equal(t, want.reply, reply, kind)
	}
	for name, f := range map[string][]byte{
		"empty":        nil,
		"raft":         {1, 8, 3},
		"unknown kind": {FramePrefix, frameVersion, 99, 0},
		"kind zero":    {FramePrefix, frameVersion, 0, 0},
		"old version":  {FramePrefix, 7, 1, 0},
		"json":         append([]byte{FramePrefix}, `{"k":"op"}`...),
		"truncated":    {FramePrefix, frameVersion},
	} {
		_, _, ok := FrameKind(f)
		require.False(t, ok, name)
	}
}
