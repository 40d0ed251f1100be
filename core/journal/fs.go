// This file holds the journal's storage seam: the File and FS interfaces,
// implemented by the simulator's disk (sim) and by OS files (realnet).

package journal

import "errors"

// ErrNotExist is returned by FS.Open for a name that does not exist.
var ErrNotExist = errors.New("journal: file does not exist")

// File is one open file. Writes go to the end; reads may go anywhere.
//
// Durability contract: bytes written are visible to reads at once but
// survive a crash only after a Sync that returned nil. A crash may keep any
// prefix of the bytes written since the last Sync (a torn write), so a
// reader must be able to tell a whole record from a partial one.
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
