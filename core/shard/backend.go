// Package shard is the FlowShard: the per-node store of flow state that
// must survive a full restart without a quorum round per write. This file
// holds only the durable seam; the real implementation (bbolt) lives in
// realnet, and the simulator supplies its own.
package shard

// Mutation is one change to the flow store: set Key of Flow to Value, or,
// when Value is nil, delete it. Value is opaque to the backend: the flow
// store encodes its value and fencing tuple into it, so the backend never
// needs to change when that encoding does. A non-nil empty Value is a put
// of an empty value, not a delete.
type Mutation struct {
	Flow, Key string
	Value     []byte
}

// Backend is the durable store behind a shard. It is deliberately small:
// the shard batches and orders mutations itself, and asks the backend only
// to apply a batch atomically, to make it durable when told to, and to hand
// everything back on recovery.
//
// A Backend has one writer and is not safe for concurrent use: the shard's
// single writer calls every method. That keeps implementations free of
// locking and lets them reconfigure per call (as the bbolt one does).
type Backend interface {
	// Write applies batch in order as one atomic unit: after a crash
	// either every mutation of the batch survives or none does, so a
	// scenario transition that touches several keys is never torn.
	//
	// With sync, the batch, and every batch written before it, is durable
	// when Write returns. Without, the batch is ordered after earlier
	// batches but may be lost in a crash until the next Sync or sync
	// Write; this lets an imposter trade durability for throughput.
	//
	// Write must not keep batch (the slice) once it returns: the shard
	// reuses it for the next batch. The mutations' strings and values are
	// never changed and may be kept.
	Write(batch []Mutation, sync bool) error

	// Sync makes every batch written so far durable.
	Sync() error

	// Scan calls fn once per stored key, in (Flow, Key) order (byte-wise
	// lexicographic on Flow, then on Key), so recovery sees each flow's
	// keys together and two backends holding the same state replay it
	// identically. Value is never nil and fn may keep it. Scan stops at
	// and returns the first error from fn. fn must not call Write.
	Scan(fn func(Mutation) error) error

	// Close makes every write durable and releases the store.
	Close() error
}

// Worker runs the writer's backend calls beside the node's loop, so a
// commit and its fsync never hold up the requests behind them. It is the
// seam between the core, which never starts a goroutine or blocks, and
// whatever runs the work: a goroutine in a real node (realnet.Worker), a
// disk completion event in the simulator (sim.Disk).
//
// The shard keeps at most one call in flight and touches its Backend only
// inside work while one is, so a Backend still has one writer at a time.
type Worker interface {
	// Go runs work away from the loop, after every work handed to it
	// before, and then done with work's error back on the loop. Go itself
	// never waits. If the node stops first (a crash), work may not run and
	// done never does.
	Go(work func() error, done func(error))
	// Settle runs, on the loop and before it returns, everything handed
	// to Go: it waits for the work and delivers each done (including
	// those of work that done hands to Go). Only an orderly shutdown
	// calls it.
	Settle()
}
