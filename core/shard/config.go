package shard

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
)

// This file: the shard's configuration, environment, errors and counters.

// Config configures a shard. Zero fields take defaults.
type Config struct {
	// MaxFlows bounds the live flows a node holds (a flow is live while
	// any of its keys is an unexpired value). Beyond it the least recently
	// used flows are evicted whole, never key by key: a half-evicted
	// scenario is torn state. Default 100 000.
	MaxFlows int
	// SyncEvery is the async mode's group fsync interval: the most of
	// this copy's acknowledged async writes a crash can take. Default 50ms.
	SyncEvery time.Duration
	// CommitDelay is how long the writer lingers before it writes a batch,
	// so that concurrent writers share one fsync. Zero writes at the next
	// turn of the node's loop; while a batch is on its way to the backend
	// the next one gathers whatever arrives until it completes (group
	// commit), whatever the delay.
	CommitDelay time.Duration
	// AsyncDelay is how long an async write may wait for company before
	// the writer takes it (unless a sync write, a waiter or the cap calls
	// the writer sooner): one backend transaction then carries every
	// async write of the span, where at the next turn it would carry the
	// few that came in one turn of the loop. A crash may take an async
	// write for this much longer. Default 5ms; negative: none (the next
	// turn, at CommitDelay).
	AsyncDelay time.Duration
	// MaxPending bounds the mutations waiting for the writer, the batch
	// on its way to the backend included. At the bound Put refuses with
	// ErrBusy and changes nothing. A single Put larger than the bound is
	// taken into an empty queue, alone. Default 65 536.
	MaxPending int
	// MaxWait bounds how long a durability wait (WhenDurable,
	// WhenFloorDurable) is held. One the disk has not answered by then is
	// answered ErrWaitTimeout: a disk that stalls (a volume re-attaching,
	// a controller resetting) must not hold a request past the time its
	// caller waits, and the write may still reach the disk, so its
	// outcome is unknown. Default 1s.
	MaxWait time.Duration
	// MaxWaiters bounds the durability waits held at once. At the bound
	// the oldest is answered ErrWaitTimeout to make room: it is the one
	// nearest its own MaxWait, and its caller has waited longest.
	// Default 65 536.
	MaxWaiters int
	// MaxBatch bounds the mutations in one backend write. Default 4096.
	MaxBatch int
	// MaxBatchBytes bounds the bytes (flow ids, keys, values) in one
	// backend write, well under what a backend takes in one record.
	// A single Put larger than either bound is written whole. Default 16 MiB.
	MaxBatchBytes int
	// PurgeEvery is how often the writer removes flows that have been
	// dead (every key expired or deleted) for GraceMs. Default 1s.
	PurgeEvery time.Duration
	// GraceMs is how long a dead flow's tombstones and expired entries
	// are kept. A stale copy elsewhere (a replica that missed the delete)
	// can bring a value back through a merge only while the entry that
	// shadows it is gone and the value itself has not expired; every
	// value expires at most the longest TTL after it was written, so a
	// grace of at least that TTL plus the clock skew makes purging safe
	// on every copy independently, with no coordination. Default 1h+1min.
	GraceMs int64

	Bugs bugs.Set
}

func (c Config) withDefaults() Config {
	if c.MaxFlows == 0 {
		c.MaxFlows = 100_000
	}
	if c.SyncEvery == 0 {
		c.SyncEvery = 50 * time.Millisecond
	}
	switch {
	case c.AsyncDelay == 0:
		c.AsyncDelay = 5 * time.Millisecond
	case c.AsyncDelay < 0:
		c.AsyncDelay = 0
	}
	if c.MaxPending == 0 {
		c.MaxPending = 1 << 16
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Second
	}
	if c.MaxWaiters == 0 {
		c.MaxWaiters = 1 << 16
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 4096
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 16 << 20
	}
	if c.PurgeEvery == 0 {
		c.PurgeEvery = time.Second
	}
	if c.GraceMs == 0 {
		c.GraceMs = 3_660_000
	}
	return c
}

// Validate reports why a configuration cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MaxFlows < 1 || c.SyncEvery <= 0 || c.CommitDelay < 0 || c.MaxPending < 1 || c.MaxWait <= 0 || c.MaxWaiters < 1 || c.MaxBatch < 1 || c.MaxBatchBytes < 1 ||
		c.PurgeEvery <= 0 || c.GraceMs < 0 {
		return fmt.Errorf("shard: every bound must be positive: %+v", c)
	}
	return nil
}

// Env is what a shard is handed.
type Env struct {
	Clock   clock.Clock
	Backend Backend // nil: memory only (every mode behaves as None)
	// Worker runs the backend's calls beside the loop. Nil: the writer
	// calls the backend on the loop and waits for it (unit tests).
	Worker Worker
}

// Errors.
var (
	// ErrBusy: the writer's queue is full. Nothing was changed.
	ErrBusy = errors.New("shard: writer queue full")
	// ErrWaitTimeout: a durability wait was not answered within MaxWait,
	// or was the oldest at MaxWaiters. What it waited for may still
	// become durable.
	ErrWaitTimeout = errors.New("shard: the disk did not answer within the wait bound; the write may still become durable")
)

// Stats count the writer's work.
type Stats struct {
	Puts      uint64 `json:"puts"`      // Put calls that changed the shard
	Batches   uint64 `json:"batches"`   // backend writes
	Commits   uint64 `json:"commits"`   // turns of the writer: each hands the backend everything pending
	Fsyncs    uint64 `json:"fsyncs"`    // backend writes with sync, and Syncs
	SyncAcks  uint64 `json:"sync_acks"` // WhenDurable answers that waited for an fsync
	WaitsCut  uint64 `json:"waits_cut"` // durability waits answered ErrWaitTimeout (MaxWait, MaxWaiters)
	Evicted   uint64 `json:"evicted"`   // flows evicted over the cap
	Purged    uint64 `json:"purged"`    // dead flows removed after their grace
	Busy      uint64 `json:"busy"`      // Puts refused at MaxPending
	Behind    uint64 `json:"behind"`    // PutReplicas held in memory at MaxPending, written once the queue had room
	Recovered int    `json:"recovered"` // flows found on the backend at open
}
