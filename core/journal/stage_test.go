package journal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
)

// TestStagedWritesAreDurableOnlyOnceTheirWriteCompletes: stages change
// memory at once and reach the file only through the Write a Take hands
// over, all of them in one append and one sync; a crash before that
// Write ran keeps what was durable before.
func TestStagedWritesAreDurableOnlyOnceTheirWriteCompletes(t *testing.T) {
	r := newRig(t, 7, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 1, 0), ents(1, 2, 1), true))
	durable := viewOf(t, j)

	require.NoError(t, j.Stage(nil, ents(3, 4, 1), false))
	require.NoError(t, j.Stage(hs(2, 2, 3), ents(5, 5, 2), true))
	require.Equal(t, uint64(5), j.LastIndex(), "memory answers with what was staged")
	require.True(t, j.Queued())
	staged := viewOf(t, j)

	w := j.Take()
	require.NotNil(t, w)
	require.True(t, w.Synced(), "a stage asked for a sync")
	require.False(t, j.Queued())
	require.Panics(t, func() { j.Take() }, "one write runs at a time")
	require.Panics(t, func() { _ = j.Compact(2, nil, nil) }, "compacting would replace the file under the running write")

	r.Crash() // before the write ran: as if the worker never got to it
	j = r.open(journal.Config{})
	require.Equal(t, durable, viewOf(t, j), "nothing staged survives a crash before its write")

	require.NoError(t, j.Stage(nil, ents(3, 4, 1), false))
	require.NoError(t, j.Stage(hs(2, 2, 3), ents(5, 5, 2), true))
	w = j.Take()
	size := j.FileSize()
	require.NoError(t, j.Done(w, w.Run()))
	require.Greater(t, j.FileSize(), size, "the file grew by the write")
	r.Crash()
	j = r.open(journal.Config{})
	require.Equal(t, staged, viewOf(t, j), "a synced write keeps every stage before its Take")
}

// TestTakeSyncsOnlyWhatNeedsIt: a stage that asks for a sync with nothing
// written since the last one needs no write at all; an unsynced write is
// synced by the next Take that asks.
func TestTakeSyncsOnlyWhatNeedsIt(t *testing.T) {
	r := newRig(t, 8, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Stage(nil, nil, true))
	require.Nil(t, j.Take(), "nothing written since the last sync (Open's)")

	require.NoError(t, j.Stage(nil, ents(1, 1, 1), false))
	w := j.Take()
	require.False(t, w.Synced())
	require.NoError(t, j.Done(w, w.Run()))

	require.NoError(t, j.Stage(nil, nil, true))
	w = j.Take()
	require.NotNil(t, w, "the unsynced append needs its sync")
	require.True(t, w.Synced())
	require.NoError(t, j.Done(w, w.Run()))
	r.Crash()
	j = r.open(journal.Config{})
	require.Equal(t, uint64(1), j.LastIndex())
}

// TestCompactWritesWhatIsQueued: a compaction rewrites the file from
// memory, so what was staged and not taken is in the new file, synced,
// and the next Take has nothing of it.
func TestCompactWritesWhatIsQueued(t *testing.T) {
	r := newRig(t, 9, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 1, 2), ents(1, 3, 1), true))
	require.NoError(t, j.Stage(hs(1, 1, 3), ents(4, 6, 1), true))
	want := viewOf(t, j)
	require.NoError(t, j.Compact(2, []byte("state at 2"), nil))
	require.False(t, j.Queued())
	require.Nil(t, j.Take())
	want.Snap, want.Ents = j.Snapshot(), want.Ents[2:]
	r.Crash()
	j = r.open(journal.Config{})
	require.Equal(t, want, viewOf(t, j))
}
