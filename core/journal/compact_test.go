package journal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/sim/simtest"
)

// The seed's test for compaction: crash at each of its steps and reopen
// from the disk, not from the journal's memory, since a mix of old and new
// files is exactly what memory would hide.
func TestCrashAtEachStepOfCompaction(t *testing.T) {
	const index = 6
	// build leaves a synced journal: entries 1..10, commit 8, a vote.
	build := func(r *rig, fs recfile.FS) (*journal.Journal, view) {
		j, err := journal.Open(fs, jname, journal.Config{})
		require.NoError(t, err)
		require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 4, 1), true))
		require.NoError(t, j.Save(hs(2, 3, 8), ents(5, 10, 2), true))
		return j, viewOf(t, j)
	}

	// A run without a crash names the steps and gives the two states a
	// reopen may find.
	r := newRig(t, 1, 1)
	fs := &faultFS{r: r, budget: -1}
	j, old := build(r, fs)
	fs.ops = nil
	require.NoError(t, j.Compact(index, []byte("image@6"), []byte("conf")))
	compacted := viewOf(t, j)
	require.Equal(t, []string{
		"create " + jname + ".compact",
		"write " + jname + ".compact",
		"sync " + jname + ".compact",
		"rename " + jname + ".compact",
		"syncdir",
	}, fs.ops)
	require.Equal(t, old.Ents[index:], compacted.Ents)
	require.Equal(t, old.HS, compacted.HS)

	for step, want := range map[string]view{
		"create":  old,
		"write":   old, // the sibling's name was never synced
		"sync":    old,
		"rename":  old, // undone: the directory was not synced
		"syncdir": compacted,
	} {
		t.Run("crash after "+step, func(t *testing.T) {
			// Every tear the disk can draw, and none.
			for seed := range uint64(8) {
				r := newRig(t, seed, float64(seed%2))
				fs := &faultFS{r: r, budget: -1}
				j, _ := build(r, fs)
				fs.ops = nil
				for i, op := range []string{"create", "write", "sync", "rename", "syncdir"} {
					if op == step {
						fs.budget = i + 1
					}
				}
				err := j.Compact(index, []byte("image@6"), []byte("conf"))
				if step != "syncdir" {
					require.Error(t, err, "the process died mid-compaction")
				}
				require.True(t, fs.dead)

				got := viewOf(t, r.open(journal.Config{}))
				require.Equal(t, want, got)
				require.Equal(t, []string{jname}, r.Names(), "no sibling left behind")
				// Whichever it is, raft sees the same log after the
				// compaction point and the same hard state.
				require.Equal(t, old.HS, got.HS)
				require.Equal(t, old.Ents[index:], got.Ents[len(got.Ents)-len(old.Ents[index:]):])
			}
		})
	}
}

// Unsynced records before a compaction are in the compacted file, synced:
// compaction writes the journal's memory, not its durable prefix.
func TestCompactionMakesEarlierUnsyncedWritesDurable(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 4), ents(1, 5, 1), true))
	require.NoError(t, j.Save(hs(1, 0, 5), ents(6, 7, 1), false))
	require.NoError(t, j.Compact(3, nil, nil))
	want := viewOf(t, j)
	r.Crash()
	require.Equal(t, want, viewOf(t, r.open(journal.Config{})))
}

// A compaction that fails before its rename leaves the journal appending to
// the old file as if nothing happened.
func TestFailedCompactionLeavesTheOldFile(t *testing.T) {
	r := newRig(t, 1, 0)
	fs := &simtest.FailFS{FS: r.Disk()}
	j, err := journal.Open(fs, jname, journal.Config{})
	require.NoError(t, err)
	require.NoError(t, j.Save(hs(1, 0, 4), ents(1, 5, 1), true))
	fs.Failing = true
	require.ErrorIs(t, j.Compact(3, nil, nil), simtest.ErrDisk)
	fs.Failing = false
	require.Equal(t, uint64(1), j.FirstIndex())
	require.Equal(t, []string{jname}, r.Names(), "the abandoned sibling is removed")
	require.NoError(t, j.Save(nil, ents(6, 6, 1), true), "the failure was not sticky")
	r.Crash()
	require.Equal(t, ents(1, 6, 1), viewOf(t, r.open(journal.Config{})).Ents)
}
