package dial

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckFrameAtTheLimit(t *testing.T) {
	require.NoError(t, CheckFrame(make([]byte, MaxFrame)))
	err := CheckFrame(make([]byte, MaxFrame+1))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	require.False(t, errors.Is(err, ErrUnreachable), "an oversized frame is the sender's bug, not the peer's")
}

func TestHandlerFunc(t *testing.T) {
	var got NodeID
	HandlerFunc(func(from NodeID, _ []byte) { got = from }).HandleFrame(7, nil)
	require.Equal(t, NodeID(7), got)
	require.Equal(t, "n0000000000000007", NodeID(7).String())
}

func TestIDFromNameIsStableAndNonZero(t *testing.T) {
	// Pinned: changing this moves every flow in every existing cluster.
	require.Equal(t, NodeID(0xef46db3751d8e999), IDFromName(""))
	require.Equal(t, IDFromName("node-a"), IDFromName("node-a"))
	require.NotEqual(t, IDFromName("node-a"), IDFromName("node-b"))
}
