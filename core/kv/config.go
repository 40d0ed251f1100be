package kv

import (
	"fmt"

	"github.com/fenceline/fenceline/core/bugs"
)

// Defaults for Config. A zero field in a Config takes its default.
const (
	// DefaultMaxKeyBytes bounds data keys, lease names and lease holders.
	DefaultMaxKeyBytes = 1 << 10
	// DefaultMaxValueBytes bounds a value, in a Put or in a guard.
	DefaultMaxValueBytes = 1 << 20
	// DefaultMaxTxnOps bounds a transaction's guards, and separately the
	// ops of its two branches together.
	DefaultMaxTxnOps = 128
	// DefaultMaxLeaseTTLMs is ten minutes. A longer lease held by a wedged
	// holder keeps the cluster without its singleton for longer than anyone
	// will wait.
	DefaultMaxLeaseTTLMs = 10 * 60 * 1000
	// DefaultMaxCommandBytes bounds one encoded entry. It leaves room for
	// a maximal value both in a Put and in the guard that protects it.
	DefaultMaxCommandBytes = 4 << 20
	// DefaultEventLogLen is how many watch events a state keeps.
	DefaultEventLogLen = 4096
	// DefaultEventLogBytes bounds the memory the kept events hold, because
	// 4096 events of 1 MiB each would be 4 GiB.
	DefaultEventLogBytes = 64 << 20
)

// MaxAtMs is the latest proposer stamp a command may carry (about 73
// million years after the epoch). It keeps now+TTL far from overflow.
const MaxAtMs int64 = 1 << 61

// eventOverheadBytes is what one kept event costs beyond its key, value
// and holder bytes, for the EventLogBytes bound.
const eventOverheadBytes = 96

// Config holds the bounds of a state machine. Every replica of a group must
// run the same Config: the bounds decide which entries apply, so replicas
// with different bounds would diverge.
type Config struct {
	// MaxKeyBytes bounds data keys, lease names and holder names.
	MaxKeyBytes int
	// MaxValueBytes bounds a Put's value and a guard's observed value.
	MaxValueBytes int
	// MaxTxnOps bounds a transaction's guards, and separately the ops of
	// OnSuccess and OnFailure together.
	MaxTxnOps int
	// MaxLeaseTTLMs bounds the TTL of an acquire or a renewal.
	MaxLeaseTTLMs int64
	// MaxCommandBytes bounds one encoded Command. Apply checks it before
	// decoding, so an oversized entry costs no allocation.
	MaxCommandBytes int
	// EventLogLen is how many watch events the state keeps; at the limit
	// the oldest is dropped and EventsSince answers ErrCompacted for
	// versions before it.
	EventLogLen int
	// EventLogBytes bounds the bytes the kept events hold (keys, values,
	// holders and a fixed overhead per event), dropping the oldest first.
	EventLogBytes int
	// Bugs turns defences off so the simulator can prove it notices.
	// Always zero outside tests and simulation.
	Bugs bugs.Set
}

// DefaultConfig returns the documented defaults, with no bugs planted.
func DefaultConfig() Config { return Config{}.withDefaults() }

// withDefaults fills each zero field with its default.
func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxKeyBytes, DefaultMaxKeyBytes)
	def(&c.MaxValueBytes, DefaultMaxValueBytes)
	def(&c.MaxTxnOps, DefaultMaxTxnOps)
	def(&c.MaxCommandBytes, DefaultMaxCommandBytes)
	def(&c.EventLogLen, DefaultEventLogLen)
	def(&c.EventLogBytes, DefaultEventLogBytes)
	if c.MaxLeaseTTLMs == 0 {
		c.MaxLeaseTTLMs = DefaultMaxLeaseTTLMs
	}
	return c
}

// check reports whether a defaulted Config is usable.
func (c Config) check() error {
	switch {
	case c.MaxKeyBytes < 1, c.MaxValueBytes < 1, c.MaxTxnOps < 1,
		c.MaxCommandBytes < 1, c.EventLogLen < 1, c.EventLogBytes < 1:
		return fmt.Errorf("kv: config bounds must be positive: %+v", c)
	case c.MaxLeaseTTLMs < 1 || c.MaxLeaseTTLMs > MaxAtMs:
		return fmt.Errorf("kv: MaxLeaseTTLMs %d outside [1, %d]", c.MaxLeaseTTLMs, MaxAtMs)
	}
	// A Put of a maximal key and value must fit in one entry, or the value
	// bound would be a lie.
	if need := maxPutCommandBytes(c); c.MaxCommandBytes < need {
		return fmt.Errorf("kv: MaxCommandBytes %d cannot hold a maximal put (%d bytes)", c.MaxCommandBytes, need)
	}
	// The newest event must always fit in the log, or an event would be
	// dropped the moment it was made and a watcher would never see it.
	if need := 2*c.MaxKeyBytes + c.MaxValueBytes + eventOverheadBytes; c.EventLogBytes < need {
		return fmt.Errorf("kv: EventLogBytes %d cannot hold a maximal event (%d bytes)", c.EventLogBytes, need)
	}
	return nil
}
