package journal

import (
	"fmt"
	"io"

	"github.com/fenceline/fenceline/core/recfile"
)

// Compact drops the entries up to index, replacing them with a snapshot of
// the state machine at index (snapData, and the membership confState, both
// opaque). index must be committed: compacting an entry that may still be
// replaced would keep a snapshot of a log that never was, so index past the
// commit index panics. index at or before the current snapshot returns
// ErrCompacted, past the last entry ErrUnavailable.
//
// Everything staged and not yet taken is written by it: memory holds it,
// and the new file is written from memory and synced. No write may be
// running.
//
// It is the journal's only rewrite, and it never overwrites: it writes the
// snapshot, the entries after index and the hard state to a sibling file,
// syncs it, renames it over the journal and syncs the directory, then
// appends to the new file from then on. A crash before the directory sync
// leaves the old file (the rename is undone); after it, the new one. Either
// holds everything that was durable before, and the same entries after
// index and the same hard state. The directory sync must finish before
// Compact returns: a later synced append to the new file would otherwise
// be lost with the rename.
//
// An error before the rename leaves the journal as it was, still appending
// to the old file (Open removes the abandoned sibling); an error after it
// is sticky.
func (j *Journal) Compact(index uint64, snapData, confState []byte) error {
	if err := j.usable(); err != nil {
		return err
	}
	if j.running != nil {
		// The write would append, to the file this replaces, records the
		// new file already holds.
		panic("journal: Compact while a write is running")
	}
	switch {
	case index <= j.st.snap.Meta.Index:
		return fmt.Errorf("%w: compact to %d, snapshot at %d", ErrCompacted, index, j.st.snap.Meta.Index)
	case index > j.st.lastIndex():
		return fmt.Errorf("%w: compact to %d, last index %d", ErrUnavailable, index, j.st.lastIndex())
	case index > j.st.hs.Commit:
		panic(fmt.Sprintf("journal: Compact(%d): past the commit index %d", index, j.st.hs.Commit))
	}

	next := state{
		hs: j.st.hs,
		snap: Snapshot{
			Meta: SnapshotMeta{Index: index, Term: j.st.term(index), ConfState: cloneBytes(confState)},
			Data: cloneBytes(snapData),
		},
		// A fresh array, so the compacted prefix can be collected.
		ents: append([]Entry(nil), j.st.ents[index-j.st.firstIndex()+1:]...),
	}
	for i := range next.ents {
		next.logBytes += next.ents[i].Size()
	}

	if n := snapshotBodyLen(&next.snap); n > j.cfg.MaxRecordBytes {
		return fmt.Errorf("%w: snapshot record of %d bytes, max %d", ErrTooLarge, n, j.cfg.MaxRecordBytes)
	}
	runs, err := splitEntries(next.ents, j.cfg.MaxRecordBytes)
	if err != nil {
		return err // cannot happen: these entries were written under the same bound
	}
	// The sibling replays exactly like any journal: the snapshot empties
	// the log and sets commit to index, the entries follow it, and the
	// hard state (commit >= index) comes last.
	buf := format.AppendHeader(nil)
	buf = appendSnapshotRecord(buf, &next.snap)
	for _, run := range runs {
		buf = appendEntriesRecord(buf, run)
	}
	buf = appendHardStateRecord(buf, next.hs)

	f, size, err := recfile.Replace(j.fs, j.name, j.name+compactSuffix, func(w io.Writer) error {
		_, err := w.Write(buf)
		return err
	})
	if f == nil {
		return fmt.Errorf("journal: compact: %w", err) // the old file stands
	}
	// The name points at the new file; memory must follow it.
	old := j.f
	// What was staged and not taken is in the new file, synced.
	j.f, j.size, j.dirty, j.st = f, size, false, next
	j.queued, j.queuedSync = nil, false
	_ = old.Close() // everything in it is in the new file, synced
	j.mustHoldInvariants(true)
	if err != nil {
		return j.fail(fmt.Errorf("compact: %w", err))
	}
	return nil
}
