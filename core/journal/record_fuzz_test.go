package journal

import (
	"runtime"
	"testing"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeRecord feeds arbitrary record bodies to the decoder: it must
// never panic, never allocate more than a small multiple of the body (a
// declared count or length is never believed past the bytes present), and
// whatever it accepts must encode back to a body that decodes the same.
// The planted bug's partial decoder gets the same input, cut at every
// length the fuzzer picks.
func FuzzDecodeRecord(f *testing.F) {
	// allocSlack absorbs what the fuzzing engine's own goroutines allocate
	// between the two readings. A decoder that believed a declared count
	// or length would allocate megabytes from a few bytes, far past it.
	const allocSlack = 1 << 20

	for _, r := range []record{
		{kind: kindEntries, entries: []Entry{{Index: 1, Term: 1, Type: 2, Data: []byte("a")}, {Index: 2, Term: 3}}},
		{kind: kindHardState, hs: HardState{Term: 1 << 40, Vote: 7, Commit: 300}},
		{kind: kindTruncate, from: 12},
		{kind: kindSnapshot, snap: Snapshot{Meta: SnapshotMeta{Index: 9, Term: 2, ConfState: []byte("c")}, Data: []byte("image")}},
	} {
		f.Add(appendRecordOf(&r)[recfile.RecordHeaderSize:], uint16(3))
	}
	f.Add([]byte{byte(kindEntries), 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint16(0)) // a count of 4G in 7 bytes
	f.Add([]byte{byte(kindSnapshot), 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, uint16(0))

	f.Fuzz(func(t *testing.T, body []byte, cut uint16) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rec, err := decodeRecord(body)
		runtime.ReadMemStats(&after)
		require.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, uint64(allocSlack+64*len(body)), "bytes allocated decoding %d bytes", len(body))

		if err == nil {
			again, err := decodeRecord(appendRecordOf(&rec)[recfile.RecordHeaderSize:])
			require.NoError(t, err)
			require.Equal(t, rec, again)
		}

		if len(body) > 0 && body[0] == byte(kindEntries) {
			real := min(int(cut), len(body)-1)
			d := &decoder{b: body[1:]}
			ents := decodeTornEntries(d, real)
			for i := 1; i < len(ents); i++ {
				require.Equal(t, ents[i-1].Index+1, ents[i].Index, "partial decoding keeps contiguous indexes")
			}
		}
	})
}
