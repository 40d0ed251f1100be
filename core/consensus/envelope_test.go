package consensus

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// Members without an HTTP address (the simulator's) keep the encodings
// they always had, byte for byte, so recorded traces stay valid; members
// with one round-trip through both the conf change context and the
// snapshot, and damage to either is an error.
func TestMemberHTTPAddressEncodings(t *testing.T) {
	id := propID{origin: 7, session: 8, seq: 9}
	plain := NewMember("n1", "10.0.0.1:25525")
	withHTTP := plain
	withHTTP.HTTP = "10.0.0.1:2525"

	ctx := appendContext(id, plain)
	require.Equal(t, plain.append(id.append(nil), false), ctx, "no HTTP address: the old context")
	for _, m := range []Member{plain, withHTTP} {
		_, rest, err := splitPropID(appendContext(id, m))
		require.NoError(t, err)
		got, err := readContextMember(rest)
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	_, rest, _ := splitPropID(appendContext(id, withHTTP))
	for cut := 1; cut < len(withHTTP.HTTP)+1; cut++ {
		_, err := readContextMember(rest[:len(rest)-cut])
		require.Error(t, err, "context cut by %d bytes", cut)
	}
	_, err := readContextMember(append(append([]byte(nil), rest...), 0))
	require.Error(t, err, "trailing bytes after the HTTP address")

	state := func(ms ...Member) snapshotState {
		s := snapshotState{mIdx: 3, prevMIdx: 1, prevVoters: []uint64{1}, members: map[dial.NodeID]Member{}, dedupe: newDedupe(), kv: []byte("kv")}
		for _, m := range ms {
			s.members[m.ID] = m
		}
		return s
	}
	other := NewMember("n2", "10.0.0.2:25525")
	b := state(plain, other).encode()
	require.Equal(t, byte(snapshotV2), b[0], "no member has an HTTP address: version 2")
	b = state(withHTTP, other).encode()
	require.Equal(t, byte(snapshotV3HTTP), b[0], "one member has one: version 3")
	got, err := decodeSnapshotState(b)
	require.NoError(t, err)
	require.Equal(t, withHTTP, got.members[withHTTP.ID])
	require.Equal(t, other, got.members[other.ID], "a member without one reads back empty")
	require.Equal(t, []byte("kv"), got.kv)
	b[0] = snapshotV2
	_, err = decodeSnapshotState(b)
	require.Error(t, err, "version 3 bytes read as version 2 do not parse")
	b[0] = snapshotV3HTTP + 1
	_, err = decodeSnapshotState(b)
	require.ErrorContains(t, err, "unknown version")
}
