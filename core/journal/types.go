package journal

import (
	"errors"

	"github.com/fenceline/fenceline/core/recfile"
)

// Entry is one raft log entry. The driver converts raftpb.Entry to and from
// it; the journal reads Index and Term and stores the rest unread.
type Entry struct {
	Index uint64
	Term  uint64
	// Type is raft's entry type, opaque to the journal.
	Type uint8
	// Data is the payload. Entries handed out by the journal share their
	// Data with its memory: read it, never write to it. Empty is nil.
	Data []byte
}

// entryOverhead is what Size charges an entry beyond its payload: index,
// term and type. Without it a log of empty entries (raft appends one per
// new leader) would count as zero bytes and escape every bound.
const entryOverhead = 8 + 8 + 1

// Size is the bytes the entry counts for against Entries' maxBytes and
// Config.MaxLogBytes: len(Data) plus 17 for index, term and type.
func (e Entry) Size() uint64 { return uint64(len(e.Data)) + entryOverhead }

// HardState is raft's persistent per-node state.
//
// Invariants (checked on every write and at replay): Term never decreases;
// within one term Vote changes only from 0; Commit never decreases and never
// passes the last entry.
type HardState struct {
	Term   uint64
	Vote   uint64 // node id voted for in Term; 0: none
	Commit uint64 // highest index known committed
}

// SnapshotMeta says where a snapshot sits in the log.
type SnapshotMeta struct {
	Index uint64 // the last index the snapshot covers; 0: no snapshot
	Term  uint64 // the term of the entry at Index
	// ConfState is raft's membership at Index, encoded by the driver and
	// opaque to the journal.
	ConfState []byte
}

// Snapshot is a compacted prefix of the log: the state machine's image as of
// Meta.Index. Data is opaque to the journal.
type Snapshot struct {
	Meta SnapshotMeta
	Data []byte
}

// Errors. Out-of-range reads return ErrCompacted and ErrUnavailable, which
// the driver maps to raft's errors of the same names.
var (
	// ErrCompacted: the index is at or before the snapshot.
	ErrCompacted = errors.New("journal: index is compacted")
	// ErrUnavailable: the index is past the last entry.
	ErrUnavailable = errors.New("journal: index is past the last entry")
	// ErrSnapshotOutOfDate: ApplySnapshot was handed a snapshot no newer
	// than the one the journal holds.
	ErrSnapshotOutOfDate = errors.New("journal: snapshot is not newer than the current one")
	// ErrCorrupt: replay met damage it must not repair (see the package
	// doc); the wrapping error names the file and offset. It is the
	// record file's (core/recfile), whose rules tell damage from a tear.
	ErrCorrupt = recfile.ErrCorrupt
	// ErrVersion: the file was written in a format version this code does
	// not read.
	ErrVersion = recfile.ErrVersion
	// ErrTooLarge: a record would exceed Config.MaxRecordBytes. Nothing was
	// written.
	ErrTooLarge = errors.New("journal: record over MaxRecordBytes")
	// ErrLogFull: the entries in memory would exceed Config.MaxLogBytes.
	// Nothing was written; the driver should compact and retry.
	ErrLogFull = errors.New("journal: log over MaxLogBytes, compact it")
	// ErrFailed: an earlier storage error left the file in an unknown
	// state; reopen the journal.
	ErrFailed = errors.New("journal: failed earlier, reopen")
	// ErrConfig: Open was handed an invalid Config.
	ErrConfig = errors.New("journal: invalid config")
)
