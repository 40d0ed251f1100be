package journal

import (
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/core/recfile"
)

// compactSuffix names the sibling Compact writes before renaming it over
// the journal.
const compactSuffix = ".compact"

// Open opens the journal file name in fs, creating it if it does not exist,
// and replays it into memory. A torn tail is cut; corruption before the
// tail fails with ErrCorrupt (see the package doc for exactly which is
// which). Either way the file is synced before Open returns, so everything
// the journal then serves is durable. A sibling left by an interrupted
// compaction is removed first: the journal file itself is the whole truth.
func Open(fs recfile.FS, name string, cfg Config) (*Journal, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := removeSibling(fs, name); err != nil {
		return nil, err
	}
	f, err := fs.Open(name)
	if errors.Is(err, recfile.ErrNotExist) {
		f, err = create(fs, name)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", name, err)
	}
	j := &Journal{fs: fs, name: name, cfg: cfg, f: f}
	if err := j.replay(); err != nil {
		_ = f.Close() // the replay error is the one worth reporting
		return nil, err
	}
	j.mustHoldInvariants(true)
	return j, nil
}

// create makes an empty journal. The header is synced before the name, so
// a name that survives a crash always has its header behind it.
func create(fs recfile.FS, name string) (recfile.File, error) {
	f, err := fs.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(format.AppendHeader(nil)); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := fs.SyncDir(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func removeSibling(fs recfile.FS, name string) error {
	names, err := fs.List()
	if err != nil {
		return fmt.Errorf("journal: list: %w", err)
	}
	sib := name + compactSuffix
	for _, n := range names {
		if n != sib {
			continue
		}
		if err := fs.Remove(sib); err != nil {
			return fmt.Errorf("journal: remove leftover %s: %w", sib, err)
		}
		if err := fs.SyncDir(); err != nil {
			return fmt.Errorf("journal: remove leftover %s: %w", sib, err)
		}
	}
	return nil
}

// replay reads the file into j.st, cuts a torn tail, and leaves j.size at
// the end of the last whole record.
func (j *Journal) replay() error {
	size, err := j.f.Size()
	if err != nil {
		return fmt.Errorf("journal: size of %s: %w", j.name, err)
	}
	short, err := format.CheckHeader(j.f, j.name, size)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if short {
		// create syncs the header before the name, so a shorter file
		// never held a record: start it over.
		return j.reset()
	}

	sc := recfile.NewScanner(j.f, j.name, int64(format.HeaderSize()), size, j.cfg.MaxRecordBytes)
	sc.Bugs = recfile.Bugs{
		KeepTorn:    j.cfg.Bugs.JournalTrustTail,
		TearDamage:  j.cfg.Bugs.RecfileTearDamage,
		NoHoleCheck: j.cfg.Bugs.RecfileNoHoleCheck,
		BodyVouches: j.cfg.Bugs.RecfileBodyVouches,
	}
	for {
		body, err := sc.Next()
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if body == nil {
			break
		}
		rec, err := decodeRecord(body)
		if err != nil {
			return fmt.Errorf("journal: %w", sc.Corrupt(sc.RecordStart(body), "%v", err))
		}
		if err := j.st.apply(&rec); err != nil {
			return fmt.Errorf("journal: %w", sc.Corrupt(sc.RecordStart(body), "%s record does not fit the log: %v", rec.kind, err))
		}
	}
	j.size = sc.Off
	var tail []byte
	if trusted := trustTorn(sc); trusted != nil && j.st.apply(trusted) == nil {
		// The planted bug: keep what decoded from the torn record, and
		// write it whole so the next replay reads it as data too.
		tail = appendRecordOf(trusted)
	}
	return j.seal(tail)
}

// reset rewrites a file too short to hold a header.
func (j *Journal) reset() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: reset %s: %w", j.name, err)
	}
	j.size = 0
	return j.seal(format.AppendHeader(nil))
}

// seal ends a replay: it cuts the file at j.size if a torn tail lies
// beyond, appends tail, and syncs. The cut must be durable before anything
// is appended after it, or a crash could bring the torn bytes back in
// front of new records, in the middle. The sync is needed even with
// nothing to cut: after a process restart (no machine crash) the file may
// hold records that were never synced, the journal is about to serve them
// and raft may act on them, and no later Save(sync) covers them (Sync
// covers what this journal wrote).
func (j *Journal) seal(tail []byte) error {
	size, err := j.f.Size()
	if err != nil {
		return fmt.Errorf("journal: size of %s: %w", j.name, err)
	}
	if size > j.size {
		if err := j.f.Truncate(j.size); err != nil {
			return fmt.Errorf("journal: cut torn tail of %s at %d: %w", j.name, j.size, err)
		}
	}
	j.queued, j.queuedSync = tail, true
	j.dirty = true // a restart may find records written and never synced
	return j.runNow()
}

// appendRecordOf encodes a decoded record again.
func appendRecordOf(r *record) []byte {
	switch r.kind {
	case kindEntries:
		return appendEntriesRecord(nil, r.entries)
	case kindHardState:
		return appendHardStateRecord(nil, r.hs)
	case kindTruncate:
		return appendTruncateRecord(nil, r.from)
	case kindSnapshot:
		return appendSnapshotRecord(nil, &r.snap)
	}
	panic(fmt.Sprintf("journal: bug: encode %s", r.kind))
}
