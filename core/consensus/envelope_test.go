package consensus

import (
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/core/kv"
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

	ctx := appendContext(id, plain, 0)
	require.Equal(t, plain.append(id.append(nil), false), ctx, "no HTTP address, no index: the old context")
	for _, m := range []Member{plain, withHTTP} {
		for _, at := range []uint64{0, 1, 1 << 40} {
			_, rest, err := splitPropID(appendContext(id, m, at))
			require.NoError(t, err)
			got, gotAt, err := readContext(rest)
			require.NoError(t, err)
			require.Equal(t, m, got)
			require.Equal(t, at, gotAt)
		}
	}
	// Cut within its last field, a context is an error. (Cut by exactly
	// the index's eight bytes it is the context without one: the index is
	// optional, and entries reach the log whole, checksummed.)
	for _, at := range []uint64{0, 7} {
		_, rest, _ := splitPropID(appendContext(id, withHTTP, at))
		last := len(withHTTP.HTTP)
		if at != 0 {
			last = 7
		}
		for cut := 1; cut <= last; cut++ {
			_, _, err := readContext(rest[:len(rest)-cut])
			require.Error(t, err, "context (index %d) cut by %d bytes", at, cut)
		}
		_, _, err := readContext(append(append([]byte(nil), rest...), 0))
		require.Error(t, err, "a byte after the context's end (index %d)", at)
	}
	// An index is written only when it is not 0: eight zero bytes in its
	// place are no context this driver writes.
	_, rest, _ := splitPropID(appendContext(id, plain, 0))
	_, _, err := readContext(append(appendString(rest, ""), make([]byte, 8)...))
	require.Error(t, err, "an index of 0 written out")

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

// A snapshot a peer sends is read whole before raft takes it: every
// proper prefix of one, and one with bytes after its end, is refused,
// whichever part the cut falls in (the membership before, the members,
// the session table, the KV state), as is an unknown version or no
// snapshot at all; the whole one reads back as it was written.
func TestCheckSnapshotRefusesEveryCutAndTail(t *testing.T) {
	kvs, err := kv.New(kv.Config{})
	require.NoError(t, err)
	require.NoError(t, kvs.ApplyCommand(2, kv.Command{AtMs: 1000, Op: kv.Put("k", []byte("v"))}).Err)
	d := newDedupe()
	for i := range uint64(3) {
		require.True(t, d.firstTime(propID{origin: dial.NodeID(i + 1), session: 7 + i, seq: 1}, 10+i))
	}
	for _, http := range []string{"", "127.0.0.1:2525"} {
		m := NewMember("n1", "10.0.0.1:25525")
		m.HTTP = http
		st := snapshotState{mIdx: 9, prevMIdx: 4, prevVoters: []uint64{1, 2, 3},
			members: map[dial.NodeID]Member{m.ID: m, NewMember("n2", "10.0.0.2:25525").ID: NewMember("n2", "10.0.0.2:25525")},
			dedupe:  d, kv: kvs.Snapshot()}
		b := st.encode()
		require.NoError(t, checkSnapshot(&pb.Snapshot{Data: b}), "the whole snapshot reads")
		got, err := decodeSnapshotState(b)
		require.NoError(t, err)
		require.Equal(t, st.prevVoters, got.prevVoters)
		require.Equal(t, st.members, got.members)
		require.Len(t, got.dedupe.sessions, 3)
		for cut := range len(b) {
			require.Error(t, checkSnapshot(&pb.Snapshot{Data: b[:cut]}), "http %q: cut to %d of %d bytes", http, cut, len(b))
		}
		require.Error(t, checkSnapshot(&pb.Snapshot{Data: append(append([]byte(nil), b...), 0)}), "a byte after its end")
		require.Error(t, checkSnapshot(&pb.Snapshot{Data: append([]byte{snapshotV3HTTP + 1}, b[1:]...)}), "an unknown version")
	}
	require.Error(t, checkSnapshot(nil), "no snapshot")
}
