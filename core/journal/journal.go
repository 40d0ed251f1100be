package journal

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/fenceline/fenceline/core/recfile"
)

// Journal is an open raft log file and its content in memory. Reads are
// served from memory; writes append records and change memory only once
// the append succeeded.
type Journal struct {
	fs   recfile.FS
	name string
	cfg  Config
	f    recfile.File
	// size is the file's length: where the next record goes.
	size int64
	// dirty: bytes were appended since the last Sync.
	dirty bool
	st    state
	// err is the first storage error of a write; once set, every write
	// fails (see the package doc, Errors).
	err error
}

var errClosed = errors.New("journal: closed")

// HardState is the last hard state saved (zero if none).
func (j *Journal) HardState() HardState { return j.st.hs }

// Snapshot is the snapshot the log starts after (zero Meta.Index if none).
// Its byte slices are shared with the journal: read them, never write.
func (j *Journal) Snapshot() Snapshot { return j.st.snap }

// FirstIndex is the first index held as an entry: the snapshot's index + 1.
func (j *Journal) FirstIndex() uint64 { return j.st.firstIndex() }

// LastIndex is the last index held: the last entry's, or the snapshot's if
// there is no entry after it.
func (j *Journal) LastIndex() uint64 { return j.st.lastIndex() }

// LogBytes is the size of the entries held in memory (summed Entry.Size),
// what Config.MaxLogBytes bounds. The driver compacts on it.
func (j *Journal) LogBytes() uint64 { return j.st.logBytes }

// FileSize is the length of the journal file, synced or not.
func (j *Journal) FileSize() int64 { return j.size }

// Term returns the term of the entry at i. The snapshot's index answers with
// the snapshot's term, as raft expects of the entry just before FirstIndex.
func (j *Journal) Term(i uint64) (uint64, error) {
	switch {
	case i < j.st.snap.Meta.Index:
		return 0, fmt.Errorf("%w: term of %d, snapshot at %d", ErrCompacted, i, j.st.snap.Meta.Index)
	case i > j.st.lastIndex():
		return 0, fmt.Errorf("%w: term of %d, last index %d", ErrUnavailable, i, j.st.lastIndex())
	}
	return j.st.term(i), nil
}

// Entries returns the entries in [lo, hi), stopping before the entry that
// would take their summed Size past maxBytes, but always returning at least
// one entry when lo < hi (raft's convention, so a single large entry can
// still be sent). The slice is the caller's; the entries' Data is shared.
// lo > hi is a programmer error.
func (j *Journal) Entries(lo, hi, maxBytes uint64) ([]Entry, error) {
	if lo > hi {
		panic(fmt.Sprintf("journal: Entries(%d, %d): lo > hi", lo, hi))
	}
	switch {
	case lo <= j.st.snap.Meta.Index:
		return nil, fmt.Errorf("%w: entries from %d, snapshot at %d", ErrCompacted, lo, j.st.snap.Meta.Index)
	case hi > j.st.lastIndex()+1:
		return nil, fmt.Errorf("%w: entries up to %d, last index %d", ErrUnavailable, hi-1, j.st.lastIndex())
	case lo == hi:
		return nil, nil
	}
	ents := j.st.ents[lo-j.st.firstIndex() : hi-j.st.firstIndex()]
	n, size := 1, ents[0].Size()
	for ; n < len(ents); n++ {
		size += ents[n].Size()
		if size > maxBytes {
			break
		}
	}
	// A copy: a later truncate and append reuses the backing array.
	return slices.Clone(ents[:n]), nil
}

// Save appends a hard state (nil: unchanged) and entries, and syncs if sync
// is set (raft's MustSync). It returns once the records are written, and,
// with sync, durable; only then may the driver send what depends on them.
//
// Entries that start at or before LastIndex replace the conflicting suffix
// from entries[0].Index on, as raft's Ready hands them out: Save records a
// truncate first. The records go out as truncate, entries, hard state, so
// that any prefix a crash keeps is a log raft can restart from.
//
// Passing a gap, a rewrite of committed or compacted entries, decreasing
// terms, or a hard state that breaks its invariants panics. ErrTooLarge and
// ErrLogFull leave the journal unchanged; any other error is sticky.
func (j *Journal) Save(hs *HardState, entries []Entry, sync bool) error {
	if err := j.usable(); err != nil {
		return err
	}
	if hs != nil && *hs == j.st.hs {
		hs = nil
	}
	if hs == nil && len(entries) == 0 {
		if sync {
			return j.sync()
		}
		return nil
	}
	truncFrom, dropped := j.checkSave(hs, entries)

	var added uint64
	for i := range entries {
		added += entries[i].Size()
	}
	if after := j.st.logBytes - dropped + added; after > uint64(j.cfg.MaxLogBytes) {
		return fmt.Errorf("%w: %d bytes after this save, max %d", ErrLogFull, after, j.cfg.MaxLogBytes)
	}
	runs, err := splitEntries(entries, j.cfg.MaxRecordBytes)
	if err != nil {
		return err
	}

	// One buffer, one Write: the records of a Save reach the file in one
	// call, and a crash keeps a prefix of them like of any write.
	estimate := 64 + len(runs)*(recfile.RecordHeaderSize+batchPrefixMax)
	for i := range entries {
		estimate += entryLen(&entries[i])
	}
	buf := make([]byte, 0, estimate)
	if truncFrom != 0 {
		buf = appendTruncateRecord(buf, truncFrom)
	}
	for _, run := range runs {
		buf = appendEntriesRecord(buf, run)
	}
	if hs != nil {
		buf = appendHardStateRecord(buf, *hs)
	}
	if err := j.write(buf); err != nil {
		return err
	}

	if truncFrom != 0 {
		j.st.mustApply(&record{kind: kindTruncate, from: truncFrom})
	}
	if len(entries) > 0 {
		j.st.mustApply(&record{kind: kindEntries, entries: cloneEntries(entries)})
	}
	if hs != nil {
		j.st.mustApply(&record{kind: kindHardState, hs: *hs})
	}
	j.mustHoldInvariants(false)
	if sync {
		return j.sync()
	}
	return nil
}

// checkSave panics unless hs and entries keep the log's rules. It returns
// the index a truncate must start at (0: none) and the bytes it drops.
func (j *Journal) checkSave(hs *HardState, entries []Entry) (truncFrom, dropped uint64) {
	last := j.st.lastIndex()
	if len(entries) > 0 {
		from := entries[0].Index
		if from <= last {
			if err := j.st.checkTruncate(from); err != nil {
				panic(fmt.Sprintf("journal: Save: %v", err))
			}
			truncFrom = from
			for _, e := range j.st.ents[from-j.st.firstIndex():] {
				dropped += e.Size()
			}
		}
		if from > last+1 {
			panic(fmt.Sprintf("journal: Save: entry %d leaves a gap after the last index %d", from, last))
		}
		if from <= j.st.snap.Meta.Index {
			panic(fmt.Sprintf("journal: Save: entry %d is compacted (snapshot at %d)", from, j.st.snap.Meta.Index))
		}
		if err := checkEntries(entries, from-1, j.st.term(from-1)); err != nil {
			panic(fmt.Sprintf("journal: Save: %v", err))
		}
		last = entries[len(entries)-1].Index
	}
	if hs != nil {
		if err := j.st.checkHardState(*hs, last); err != nil {
			panic(fmt.Sprintf("journal: Save: hard state %+v: %v", *hs, err))
		}
	}
	return truncFrom, dropped
}

// ApplySnapshot replaces the log with snap, as a follower does when the
// leader sends one: every entry, before and after it, is gone, and the
// commit index rises to snap's index. It syncs before returning. Call it
// before the Save of the same Ready, whose entries follow the snapshot.
//
// A snapshot no newer than the current one returns ErrSnapshotOutOfDate;
// one below the commit index panics (raft never installs such a snapshot).
// The journal keeps its own copy of snap's bytes.
func (j *Journal) ApplySnapshot(snap Snapshot) error {
	if err := j.usable(); err != nil {
		return err
	}
	if snap.Meta.Index <= j.st.snap.Meta.Index {
		return fmt.Errorf("%w: snapshot at %d, have %d", ErrSnapshotOutOfDate, snap.Meta.Index, j.st.snap.Meta.Index)
	}
	if err := j.st.checkSnapshot(snap.Meta); err != nil {
		panic(fmt.Sprintf("journal: ApplySnapshot: %v", err))
	}
	if n := snapshotBodyLen(&snap); n > j.cfg.MaxRecordBytes {
		return fmt.Errorf("%w: snapshot record of %d bytes, max %d", ErrTooLarge, n, j.cfg.MaxRecordBytes)
	}
	snap.Meta.ConfState = cloneBytes(snap.Meta.ConfState)
	snap.Data = cloneBytes(snap.Data)
	if err := j.write(appendSnapshotRecord(nil, &snap)); err != nil {
		return err
	}
	j.st.mustApply(&record{kind: kindSnapshot, snap: snap})
	j.mustHoldInvariants(false)
	return j.sync()
}

// Close closes the file. Unsynced records may or may not survive it. The
// journal is unusable afterwards.
func (j *Journal) Close() error {
	if errors.Is(j.err, errClosed) {
		return errClosed
	}
	j.err = errClosed
	return j.f.Close()
}

// usable returns the sticky error, if any.
func (j *Journal) usable() error {
	switch {
	case j.err == nil:
		return nil
	case errors.Is(j.err, errClosed):
		return j.err
	}
	return fmt.Errorf("%w: %w", ErrFailed, j.err)
}

// fail records a storage error; every later write will return it.
func (j *Journal) fail(err error) error {
	j.err = err
	return j.usable()
}

func (j *Journal) write(buf []byte) error {
	n, err := j.f.Write(buf)
	j.size += int64(n)
	if n > 0 {
		j.dirty = true
	}
	if err == nil && n != len(buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return j.fail(fmt.Errorf("append to %s: %w", j.name, err))
	}
	return nil
}

func (j *Journal) sync() error {
	if !j.dirty {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return j.fail(fmt.Errorf("sync %s: %w", j.name, err))
	}
	j.dirty = false
	return nil
}

// mustHoldInvariants panics if the state breaks an invariant: after the
// checks every write makes first, that can only be a journal bug.
func (j *Journal) mustHoldInvariants(full bool) {
	if err := j.st.invariants(full); err != nil {
		panic(fmt.Sprintf("journal: bug: invariant broken: %v", err))
	}
}
