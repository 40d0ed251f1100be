package shard

import (
	"errors"
	"fmt"
)

// Mode is an imposter's durability: when a write to one of its flows is
// acknowledged, relative to its reaching the disk.
type Mode uint8

// Durability modes. The zero value is the default, Async. The numbers are
// on the wire (they travel with every replication push): append only.
const (
	// Async: writes reach the backend in order without an fsync; one
	// group fsync every SyncEvery makes them durable. The ack does not
	// wait, so a crash loses at most the last SyncEvery of this copy's
	// writes — and the write is lost to the cluster only if every copy
	// lost it.
	Async Mode = iota
	// Sync: a write is acknowledged only once it is on disk. Concurrent
	// sync writers share one fsync (group commit).
	Sync
	// None: memory only, for throwaway imposters. A restarted node gets a
	// none flow back only from the copies that stayed up.
	None
)

var modeNames = [...]string{Async: "async", Sync: "sync", None: "none"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m <= None }

// ErrBadMode is the error ParseMode wraps; the engine's imposter
// validation answers it with a 400.
var ErrBadMode = errors.New("shard: unknown durability mode")

// ParseMode reads an imposter's durability setting. The empty string is
// the default, async.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "async":
		return Async, nil
	case "sync":
		return Sync, nil
	case "none":
		return None, nil
	}
	return 0, fmt.Errorf("%w %q: want sync, async or none", ErrBadMode, s)
}
