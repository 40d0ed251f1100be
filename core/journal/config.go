package journal

import (
	"fmt"

	"github.com/fenceline/fenceline/core/bugs"
)

// Bounds on Config.MaxRecordBytes.
const (
	// DefaultMaxRecordBytes is the largest record body by default: room for
	// a large snapshot, small enough that replay may allocate it.
	DefaultMaxRecordBytes = 64 << 20
	// MinRecordBytes fits the largest hard state, truncate and empty
	// snapshot records with room to spare.
	MinRecordBytes = 64
	// MaxMaxRecordBytes caps the setting: the length prefix is 32 bits, and
	// replay allocates a whole record body at once.
	MaxMaxRecordBytes = 1 << 30
)

// DefaultMaxLogBytes bounds the entries held in memory by default (summed
// Entry.Size).
const DefaultMaxLogBytes = 1 << 30

// Config bounds a journal. The zero value is valid and means the defaults.
type Config struct {
	// MaxRecordBytes bounds one record's body. Save splits a batch of
	// entries over several records to stay under it and fails with
	// ErrTooLarge on a single entry or snapshot that does not fit. Replay
	// never allocates a declared length over it: such a length is torn if
	// it reaches past the end of the file and corrupt otherwise, so lower
	// it only below records already written if losing them is acceptable.
	// 0 means DefaultMaxRecordBytes; otherwise it must be in
	// [MinRecordBytes, MaxMaxRecordBytes].
	MaxRecordBytes int
	// MaxLogBytes bounds the entries held in memory (summed Entry.Size,
	// snapshot excluded). A Save that would pass it fails with ErrLogFull
	// before writing anything, which tells the driver to compact. Replay
	// does not enforce it: a node must be able to reopen what it wrote.
	// 0 means DefaultMaxLogBytes; otherwise it must be positive.
	MaxLogBytes int64
	// Bugs plants defects for the simulator's checkers to catch.
	Bugs bugs.Set
}

// resolve fills in the defaults and validates.
func (c Config) resolve() (Config, error) {
	switch {
	case c.MaxRecordBytes == 0:
		c.MaxRecordBytes = DefaultMaxRecordBytes
	case c.MaxRecordBytes < MinRecordBytes || c.MaxRecordBytes > MaxMaxRecordBytes:
		return c, fmt.Errorf("%w: MaxRecordBytes %d outside [%d, %d]", ErrConfig, c.MaxRecordBytes, MinRecordBytes, MaxMaxRecordBytes)
	}
	switch {
	case c.MaxLogBytes == 0:
		c.MaxLogBytes = DefaultMaxLogBytes
	case c.MaxLogBytes < 0:
		return c, fmt.Errorf("%w: MaxLogBytes %d is negative", ErrConfig, c.MaxLogBytes)
	}
	return c, nil
}
