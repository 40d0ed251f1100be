package journal

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/fenceline/fenceline/core/recfile"
)

// Journal is an open raft log file and its content in memory. Reads are
// served from memory. A write has two halves: Stage checks it, changes
// memory and queues its records; Take hands every queued record over as
// one Write, whose Run appends them to the file (and syncs) and may run
// beside the caller's loop; Done takes its outcome back. Save does it all
// at once.
type Journal struct {
	fs   recfile.FS
	name string
	cfg  Config
	f    recfile.File
	// size is the file's length, as far as completed writes go.
	size int64
	// dirty: bytes were taken since the last sync taken.
	dirty bool
	// queued holds the records staged and not yet taken; queuedSync, that
	// a stage asked for a sync.
	queued     []byte
	queuedSync bool
	// running is the write taken and not yet Done: Compact, which
	// replaces the file under it, needs none.
	running *Write
	st      state
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
// It is Stage, then the Write's Run, then Done.
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
	if err := j.Stage(hs, entries, sync); err != nil {
		return err
	}
	return j.runNow()
}

// runNow takes what is queued, runs it here and takes its outcome back.
func (j *Journal) runNow() error {
	w := j.Take()
	if w == nil {
		return nil
	}
	return j.Done(w, w.Run())
}

// Stage is Save's first half: it checks hs and entries as Save does,
// applies them to memory (what Entries, Term and the rest answer from
// now on) and queues their records, and a sync if sync is set, for the
// next Take. Memory runs ahead of the file until then: the caller must
// not promise anything staged (a vote, an append acknowledgement) before
// a synced Write taken after it completed. ErrTooLarge and ErrLogFull
// leave the journal unchanged.
func (j *Journal) Stage(hs *HardState, entries []Entry, sync bool) error {
	if err := j.usable(); err != nil {
		return err
	}
	j.queuedSync = j.queuedSync || sync
	if hs != nil && *hs == j.st.hs {
		hs = nil
	}
	if hs == nil && len(entries) == 0 {
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

	// The records of a stage go out in one Write, and a crash keeps a
	// prefix of them like of any write.
	if j.queued == nil {
		estimate := 64 + len(runs)*(recfile.RecordHeaderSize+batchPrefixMax)
		for i := range entries {
			estimate += entryLen(&entries[i])
		}
		j.queued = make([]byte, 0, estimate)
	}
	if truncFrom != 0 {
		j.queued = appendTruncateRecord(j.queued, truncFrom)
	}
	for _, run := range runs {
		j.queued = appendEntriesRecord(j.queued, run)
	}
	if hs != nil {
		j.queued = appendHardStateRecord(j.queued, *hs)
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
	return nil
}

// Take hands over everything staged since the last Take as one Write,
// synced if any stage asked for a sync and anything was written since
// the last one; nil if there is nothing to do. One Write runs at a time:
// Take panics while the last one is not Done. A synced Write makes
// durable everything staged before its Take.
func (j *Journal) Take() *Write {
	if j.running != nil {
		panic("journal: Take while a write is running")
	}
	if len(j.queued) > 0 {
		j.dirty = true
	}
	w := &Write{f: j.f, buf: j.queued, sync: j.queuedSync && j.dirty}
	j.queued, j.queuedSync = nil, false
	if len(w.buf) == 0 && !w.sync {
		return nil
	}
	if w.sync {
		j.dirty = false
	}
	j.running = w
	return w
}

// Queued reports whether anything is staged and not yet taken.
func (j *Journal) Queued() bool { return len(j.queued) > 0 || j.queuedSync }

// A Write is the file work of what was staged before a Take.
type Write struct {
	f    recfile.File
	buf  []byte
	sync bool
	n    int // bytes appended
}

// Synced reports whether the write ends with a sync.
func (w *Write) Synced() bool { return w.sync }

// Run appends the write's records and syncs if it was asked to. It
// touches nothing but the write and the file, so it may run beside the
// goroutine that owns the journal.
func (w *Write) Run() error {
	if len(w.buf) > 0 {
		n, err := w.f.Write(w.buf)
		w.n = n
		if err == nil && n != len(w.buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fmt.Errorf("append: %w", err)
		}
	}
	if w.sync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	return nil
}

// Done takes a write's outcome back: err is its Run's. A failed write is
// sticky, as any storage error: the file may now hold less than memory
// says, and only a restart's replay can tell what.
func (j *Journal) Done(w *Write, err error) error {
	if j.running != w {
		panic("journal: Done of a write that is not running")
	}
	j.running = nil
	j.size += int64(w.n)
	if err != nil {
		return j.fail(fmt.Errorf("%s: %w", j.name, err))
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
	if err := j.StageSnapshot(snap); err != nil {
		return err
	}
	return j.runNow()
}

// StageSnapshot is ApplySnapshot's first half, as Stage is Save's: it
// applies snap to memory and queues its record and a sync.
func (j *Journal) StageSnapshot(snap Snapshot) error {
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
	j.queued = appendSnapshotRecord(j.queued, &snap)
	j.queuedSync = true
	j.st.mustApply(&record{kind: kindSnapshot, snap: snap})
	j.mustHoldInvariants(false)
	return nil
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

// mustHoldInvariants panics if the state breaks an invariant: after the
// checks every write makes first, that can only be a journal bug.
func (j *Journal) mustHoldInvariants(full bool) {
	if err := j.st.invariants(full); err != nil {
		panic(fmt.Sprintf("journal: bug: invariant broken: %v", err))
	}
}
