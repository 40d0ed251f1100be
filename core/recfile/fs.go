// This file holds the storage seam every record file is written through:
// the File and FS interfaces, implemented by the simulator's disk (sim)
// and by OS files (realnet).

package recfile

import "errors"

// ErrNotExist is returned by FS.Open for a name that does not exist.
var ErrNotExist = errors.New("recfile: file does not exist")

// File is one open file. Writes go to the end; reads may go anywhere.
//
// Durability contract: bytes written are visible to reads at once but
// survive a crash only after a Sync that returned nil. A crash may keep any
// prefix of the bytes written since the last Sync (a torn write), or any
// subset of their BlockSize blocks, the lost ones reading as zeros where
// the file grew past them (a hole), so a reader must be able to tell a
// whole record from a partial one. A Sync that fails may have dropped
// what it was to make durable: a caller that sees one must stop, never
// retry and carry on.
type File interface {
	// Write appends p at the end of the file.
	Write(p []byte) (int, error)
	// ReadAt reads len(p) bytes at off; it returns io.EOF past the end.
	ReadAt(p []byte, off int64) (int, error)
	// Size is the current length, synced or not.
	Size() (int64, error)
	// Truncate cuts the file to size bytes (size <= Size()). Like a write,
	// it is durable only after Sync.
	Truncate(size int64) error
	// Sync makes everything written so far durable.
	Sync() error
	Close() error
}

// BlockSize is the unit in which a crash keeps or loses unsynced bytes.
const BlockSize = 4096

// HoleIn reports whether a bad record that starts at from and reaches to
// touches a hole a crash left: zeros from from to the end of its block, or
// a whole BlockSize-aligned block of zeros (to the end of the file, if
// that comes first) beginning in (from, to). A crash loses unsynced bytes
// a block at a time, and a record's start is where a sync may have left
// the synced part, mid-block. Appends are sequential, so everything after
// an unsynced byte was unsynced too: a reader that finds such a hole
// under a bad record has found a torn tail, not damage.
func HoleIn(f File, size, from, to int64) (bool, error) {
	buf := make([]byte, BlockSize)
	zeros := func(p int64) (bool, error) {
		end := min((p/BlockSize+1)*BlockSize, size)
		if end <= p {
			return false, nil
		}
		n := end - p
		if _, err := f.ReadAt(buf[:n], p); err != nil {
			return false, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		return true, nil
	}
	if ok, err := zeros(from); ok || err != nil {
		return ok, err
	}
	for b := (from/BlockSize + 1) * BlockSize; b < to && b < size; b += BlockSize {
		if ok, err := zeros(b); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// FS is a flat directory of files.
//
// Directory changes (create, rename, remove) are durable only after SyncDir,
// as on a POSIX file system: a crash before it may bring back the old name.
type FS interface {
	// Create makes an empty file, replacing any file of that name.
	Create(name string) (File, error)
	// Open opens an existing file for reading and appending.
	Open(name string) (File, error)
	// Rename replaces newname with oldname atomically (rename-over).
	Rename(oldname, newname string) error
	Remove(name string) error
	// List returns the names in the directory, sorted.
	List() ([]string, error)
	// SyncDir makes the directory's names durable.
	SyncDir() error
}
