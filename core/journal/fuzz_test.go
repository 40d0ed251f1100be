package journal_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
)

// FuzzReplay opens arbitrary bytes after a valid file header as a journal.
// Open must never panic; it either fails with ErrCorrupt or succeeds having
// only cut the file (replay never rewrites what it keeps); a second open
// finds the same log and cuts nothing; and Open's allocations stay within
// a small multiple of the file, whatever lengths and counts the bytes
// declare (the default MaxRecordBytes of 64 MiB is far above any input;
// the 1 MiB of slack absorbs the fuzzing engine's own allocations).
func FuzzReplay(f *testing.F) {
	r := newRig(f, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(f, j.Save(hs(1, 2, 0), ents(1, 3, 1), true))
	require.NoError(f, j.Save(hs(2, 0, 2), ents(3, 4, 2), true))
	require.NoError(f, j.ApplySnapshot(journal.Snapshot{Meta: journal.SnapshotMeta{Index: 6, Term: 2}, Data: []byte("img")}))
	require.NoError(f, j.Save(hs(2, 0, 7), ents(7, 8, 2), true))
	file := r.Raw(jname)[8:]
	f.Add(file)
	f.Add(file[:len(file)-3])
	f.Add(append(bytes.Clone(file), recordHeader(1<<26, nil)...))
	f.Add(append(bytes.Clone(file), make([]byte, 40)...))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t, 1, 0)
		file := append([]byte("FLJRNL\x01\x00"), data...)
		r.Put(jname, file)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		j, err := journal.Open(r.Disk(), jname, journal.Config{})
		runtime.ReadMemStats(&after)
		require.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20+64*len(file)), "bytes allocated opening %d bytes", len(file))
		if err != nil {
			require.True(t, errors.Is(err, journal.ErrCorrupt), "%v", err)
			require.Equal(t, file, r.Raw(jname), "a corrupt file is left alone")
			return
		}
		kept := r.Raw(jname)
		require.Equal(t, file[:len(kept)], kept, "replay only cuts")
		want := viewOf(t, j)

		j, err = journal.Open(r.Disk(), jname, journal.Config{})
		require.NoError(t, err)
		require.Equal(t, want, viewOf(t, j))
		require.Equal(t, kept, r.Raw(jname), "nothing left to cut")
	})
}
