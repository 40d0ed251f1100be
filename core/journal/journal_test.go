package journal_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/sim/simtest"
)

func TestOpenCreatesAnEmptyJournal(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.Equal(t, uint64(1), j.FirstIndex())
	require.Equal(t, uint64(0), j.LastIndex())
	require.Equal(t, journal.HardState{}, j.HardState())
	term, err := j.Term(0)
	require.NoError(t, err)
	require.Zero(t, term, "index 0 answers like an empty snapshot")

	// The name was synced with the header: a crash keeps an empty journal.
	r.Crash()
	require.Equal(t, []string{jname}, r.Names())
	require.Equal(t, "FLJRNL\x01\x00", string(r.Raw(jname)))
}

func TestSaveAndReopen(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 7, 0), ents(1, 3, 1), true))
	require.NoError(t, j.Save(hs(1, 7, 2), ents(4, 5, 1), true))
	want := viewOf(t, j)
	require.Equal(t, ents(1, 5, 1), want.Ents)
	require.Equal(t, *hs(1, 7, 2), want.HS)

	r.Crash()
	require.Equal(t, want, viewOf(t, r.open(journal.Config{})))
}

func TestUnsyncedSaveIsLostOnCrashAndSyncedOneKept(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 2, 1), true))
	require.NoError(t, j.Save(nil, ents(3, 4, 1), false))
	require.Equal(t, uint64(4), j.LastIndex(), "unsynced entries are readable at once")
	r.Crash()
	require.Equal(t, uint64(2), r.open(journal.Config{}).LastIndex())

	// A Save with nothing new but sync set makes earlier writes durable:
	// that is how a driver syncs a batch of unsynced Saves at once.
	j = r.open(journal.Config{})
	require.NoError(t, j.Save(nil, ents(3, 4, 1), false))
	require.NoError(t, j.Save(nil, nil, true))
	r.Crash()
	require.Equal(t, uint64(4), r.open(journal.Config{}).LastIndex())
}

// A process restart without a machine crash finds unsynced records still
// in the file. The journal serves them at once, so raft may act on them;
// Open therefore syncs them, or a machine crash later could take back what
// raft already relied on. (Found by the crash property: a later
// Save(nil, nil, true) did not cover bytes an earlier process wrote.)
func TestOpenSyncsWhatItReplays(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 3, 1), false))
	require.NoError(t, j.Close())
	j = r.open(journal.Config{})
	require.Equal(t, uint64(3), j.LastIndex(), "the process restart kept the unsynced records")
	r.Crash()
	require.Equal(t, uint64(3), r.open(journal.Config{}).LastIndex(), "and Open made them durable")
}

// Raft's Ready hands out entries that overwrite a conflicting suffix; the
// journal records the truncation, so replay drops the old suffix too.
func TestConflictingSuffixIsTruncated(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 5), ents(1, 10, 1), true))
	require.NoError(t, j.Save(hs(2, 0, 5), ents(6, 7, 2), true))
	want := append(ents(1, 5, 1), ents(6, 7, 2)...)
	require.Equal(t, want, viewOf(t, j).Ents)

	r.Crash()
	j = r.open(journal.Config{})
	require.Equal(t, want, viewOf(t, j).Ents)
	require.Equal(t, uint64(7), j.LastIndex())
	term, err := j.Term(6)
	require.NoError(t, err)
	require.Equal(t, uint64(2), term)
	_, err = j.Term(8)
	require.ErrorIs(t, err, journal.ErrUnavailable)
}

func TestReadsAndTheirErrors(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(2, 0, 6), append(ents(1, 4, 1), ents(5, 8, 2)...), true))
	require.NoError(t, j.Compact(3, []byte("image@3"), []byte("conf")))

	require.Equal(t, uint64(4), j.FirstIndex())
	require.Equal(t, uint64(8), j.LastIndex())
	for i, want := range map[uint64]uint64{3: 1, 4: 1, 5: 2, 8: 2} {
		got, err := j.Term(i)
		require.NoError(t, err)
		require.Equal(t, want, got, "term of %d", i)
	}
	_, err := j.Term(2)
	require.ErrorIs(t, err, journal.ErrCompacted)
	_, err = j.Term(9)
	require.ErrorIs(t, err, journal.ErrUnavailable)

	_, err = j.Entries(3, 5, math.MaxUint64)
	require.ErrorIs(t, err, journal.ErrCompacted, "the snapshot's index is not an entry")
	_, err = j.Entries(4, 10, math.MaxUint64)
	require.ErrorIs(t, err, journal.ErrUnavailable)
	got, err := j.Entries(5, 5, math.MaxUint64)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Panics(t, func() { _, _ = j.Entries(6, 5, 0) })

	all, err := j.Entries(4, 9, math.MaxUint64)
	require.NoError(t, err)
	require.Equal(t, append(ents(4, 4, 1), ents(5, 8, 2)...), all)

	// maxBytes: at least one entry, then as many as fit.
	one, err := j.Entries(4, 9, 0)
	require.NoError(t, err)
	require.Len(t, one, 1)
	two, err := j.Entries(4, 9, all[0].Size()+all[1].Size())
	require.NoError(t, err)
	require.Len(t, two, 2)
	two, err = j.Entries(4, 9, all[0].Size()+all[1].Size()+all[2].Size()-1)
	require.NoError(t, err)
	require.Len(t, two, 2)

	// The returned slice is the caller's: a later overwrite of the suffix
	// does not reach into it.
	require.NoError(t, j.Save(hs(3, 0, 6), ents(7, 7, 3), true))
	require.Equal(t, uint64(2), all[3].Term)
	require.Equal(t, ents(8, 8, 2)[0], all[4])

	snap := j.Snapshot()
	require.Equal(t, journal.SnapshotMeta{Index: 3, Term: 1, ConfState: []byte("conf")}, snap.Meta)
	require.Equal(t, "image@3", string(snap.Data))
}

func TestSaveCopiesTheCallersBuffers(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	batch := ents(1, 2, 1)
	require.NoError(t, j.Save(hs(1, 0, 0), batch, true))
	batch[0].Data[0] = 'X'
	got, err := j.Entries(1, 2, math.MaxUint64)
	require.NoError(t, err)
	require.Equal(t, ents(1, 1, 1), got)
}

// Raft's storage contract, broken by a buggy driver: each one panics
// before anything reaches the file.
func TestSaveRejectsContractViolations(t *testing.T) {
	cases := map[string]func(j *journal.Journal){
		"gap":                       func(j *journal.Journal) { _ = j.Save(nil, ents(7, 7, 2), false) },
		"not contiguous":            func(j *journal.Journal) { _ = j.Save(nil, append(ents(6, 6, 2), ents(8, 8, 2)...), false) },
		"term goes down":            func(j *journal.Journal) { _ = j.Save(nil, ents(6, 6, 1), false) },
		"overwrite committed":       func(j *journal.Journal) { _ = j.Save(nil, ents(3, 3, 3), false) },
		"overwrite compacted":       func(j *journal.Journal) { _ = j.Save(nil, ents(1, 1, 3), false) },
		"second vote in a term":     func(j *journal.Journal) { _ = j.Save(hs(2, 8, 3), nil, false) },
		"hard state term goes down": func(j *journal.Journal) { _ = j.Save(hs(1, 7, 3), nil, false) },
		"commit goes down":          func(j *journal.Journal) { _ = j.Save(hs(2, 7, 2), nil, false) },
		"commit past the last":      func(j *journal.Journal) { _ = j.Save(hs(2, 7, 6), nil, false) },
		"commit past the batch":     func(j *journal.Journal) { _ = j.Save(hs(2, 7, 8), ents(6, 6, 2), false) },
		"compact past commit":       func(j *journal.Journal) { _ = j.Compact(4, nil, nil) },
		"snapshot below commit": func(j *journal.Journal) {
			_ = j.ApplySnapshot(journal.Snapshot{Meta: journal.SnapshotMeta{Index: 2, Term: 1}})
		},
	}
	for name, violate := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 1, 0)
			j := r.open(journal.Config{})
			require.NoError(t, j.Save(hs(2, 7, 3), append(ents(1, 2, 1), ents(3, 5, 2)...), true))
			require.NoError(t, j.Compact(1, nil, nil))
			before, size := viewOf(t, j), j.FileSize()
			require.Panics(t, func() { violate(j) })
			require.Equal(t, before, viewOf(t, j))
			require.Equal(t, size, j.FileSize(), "nothing was written")
		})
	}
}

func TestAVoteMayBeCastOnceInATerm(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(3, 0, 0), nil, true))
	require.NoError(t, j.Save(hs(3, 9, 0), nil, true), "from no vote to a vote")
	require.NoError(t, j.Save(hs(4, 0, 0), nil, true), "a new term clears it")
	r.Crash()
	require.Equal(t, *hs(4, 0, 0), r.open(journal.Config{}).HardState())
}

func TestApplySnapshotReplacesTheLog(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 3), ents(1, 10, 1), true))

	snap := journal.Snapshot{Meta: journal.SnapshotMeta{Index: 7, Term: 2, ConfState: []byte("c")}, Data: []byte("img")}
	require.NoError(t, j.ApplySnapshot(snap))
	// The entries after the snapshot went too: they came from an older
	// leader and need not agree with the log the snapshot summarises.
	require.Equal(t, uint64(8), j.FirstIndex())
	require.Equal(t, uint64(7), j.LastIndex())
	require.Equal(t, uint64(7), j.HardState().Commit, "commit rises to the snapshot")
	require.NoError(t, j.Save(hs(2, 0, 8), ents(8, 9, 2), false))
	want := viewOf(t, j)

	// ApplySnapshot synced; the Save did not.
	r.Crash()
	j = r.open(journal.Config{})
	got := viewOf(t, j)
	require.Equal(t, snap, got.Snap)
	require.Empty(t, got.Ents)
	require.Equal(t, journal.HardState{Term: 1, Commit: 7}, got.HS)

	require.NoError(t, j.Save(hs(2, 0, 8), ents(8, 9, 2), true))
	r.Crash()
	require.Equal(t, want, viewOf(t, r.open(journal.Config{})))

	err := j.ApplySnapshot(journal.Snapshot{Meta: journal.SnapshotMeta{Index: 7, Term: 2}})
	require.ErrorIs(t, err, journal.ErrSnapshotOutOfDate)
}

func TestCompactKeepsLaterEntriesAndHardState(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(2, 5, 8), append(ents(1, 6, 1), ents(7, 10, 2)...), true))
	before := j.FileSize()
	require.NoError(t, j.Compact(6, []byte("image"), nil))
	require.Less(t, j.FileSize(), before)
	require.NoError(t, j.Save(nil, ents(11, 12, 2), true))
	want := viewOf(t, j)
	require.Equal(t, append(ents(7, 10, 2), ents(11, 12, 2)...), want.Ents)

	r.Crash()
	require.Equal(t, want, viewOf(t, r.open(journal.Config{})))
	require.Equal(t, []string{jname}, r.Names())

	require.ErrorIs(t, j.Compact(6, nil, nil), journal.ErrCompacted)
	require.ErrorIs(t, j.Compact(13, nil, nil), journal.ErrUnavailable)
}

func TestSaveSplitsBatchesToFitMaxRecordBytes(t *testing.T) {
	cfg := journal.Config{MaxRecordBytes: 256}
	r := newRig(t, 1, 0)
	j := r.open(cfg)
	batch := make([]journal.Entry, 20)
	for i := range batch {
		batch[i] = journal.Entry{Index: uint64(i + 1), Term: 1, Data: bytes.Repeat([]byte{byte(i)}, 50)}
	}
	require.NoError(t, j.Save(hs(1, 0, 0), batch, true))
	require.Greater(t, len(recordEnds(t, r.Raw(jname), 8)), 4, "20 entries of 50 bytes need several 256-byte records")
	r.Crash()
	require.Equal(t, batch, viewOf(t, r.open(cfg)).Ents)

	j = r.open(cfg)
	huge := journal.Entry{Index: 21, Term: 1, Data: make([]byte, 300)}
	require.ErrorIs(t, j.Save(nil, []journal.Entry{huge}, true), journal.ErrTooLarge)
	require.Equal(t, uint64(20), j.LastIndex())
	require.NoError(t, j.Save(nil, ents(21, 21, 1), true), "ErrTooLarge is not sticky")
	big := journal.Snapshot{Meta: journal.SnapshotMeta{Index: 30, Term: 1}, Data: make([]byte, 300)}
	require.ErrorIs(t, j.ApplySnapshot(big), journal.ErrTooLarge)
}

func TestMaxLogBytesAsksForCompaction(t *testing.T) {
	one := ents(1, 1, 1)[0].Size()
	cfg := journal.Config{MaxLogBytes: int64(10 * one)}
	r := newRig(t, 1, 0)
	j := r.open(cfg)
	require.NoError(t, j.Save(hs(1, 0, 8), ents(1, 9, 1), true))
	require.ErrorIs(t, j.Save(nil, ents(10, 11, 1), true), journal.ErrLogFull)
	require.Equal(t, uint64(9), j.LastIndex(), "nothing was written")
	require.NoError(t, j.Compact(8, nil, nil))
	require.NoError(t, j.Save(nil, ents(10, 11, 1), true))
	var want uint64
	for _, e := range ents(9, 11, 1) {
		want += e.Size()
	}
	require.Equal(t, want, j.LogBytes())
}

func TestAStorageErrorIsSticky(t *testing.T) {
	r := newRig(t, 1, 0)
	fs := &simtest.FailFS{FS: r.Disk()}
	j, err := journal.Open(fs, jname, journal.Config{})
	require.NoError(t, err)
	require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 2, 1), true))

	fs.Failing = true
	require.ErrorIs(t, j.Save(nil, ents(3, 3, 1), true), simtest.ErrDisk)
	fs.Failing = false
	// The write may have left a partial record; appending after it would
	// put corruption before the tail, so the journal refuses.
	err = j.Save(nil, ents(3, 3, 1), true)
	require.ErrorIs(t, err, journal.ErrFailed)
	require.ErrorIs(t, err, simtest.ErrDisk)
	require.ErrorIs(t, j.Compact(1, nil, nil), journal.ErrFailed)
	require.Equal(t, uint64(3), j.LastIndex(), "reads answer from memory, which the failed write was staged into")
	require.NoError(t, j.Close())

	j, err = journal.Open(fs, jname, journal.Config{})
	require.NoError(t, err, "reopening is the recovery")
	require.NoError(t, j.Save(nil, ents(3, 3, 1), true))
}

func TestConfigIsValidated(t *testing.T) {
	r := newRig(t, 1, 0)
	for _, cfg := range []journal.Config{
		{MaxRecordBytes: -1},
		{MaxRecordBytes: journal.MinRecordBytes - 1},
		{MaxRecordBytes: journal.MaxMaxRecordBytes + 1},
		{MaxLogBytes: -1},
	} {
		_, err := journal.Open(r.Disk(), jname, cfg)
		require.ErrorIs(t, err, journal.ErrConfig, "%+v", cfg)
	}
	_, err := journal.Open(r.Disk(), jname, journal.Config{MaxRecordBytes: journal.MinRecordBytes})
	require.NoError(t, err)
}

func TestClosedJournalRefusesWrites(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Close())
	require.Error(t, j.Save(hs(1, 0, 0), nil, true))
	require.Error(t, j.Close())
}
