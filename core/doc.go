// Package core is the part of fenceline that decides things: ownership,
// the raft log and state machine, the flow store, proxyOnce claims, shards,
// routing and the transport envelope, in the packages below this one. This
// package holds no code; it documents, and its test enforces, the rule every
// package under core/ lives by.
//
// # The one rule
//
// Core code is a pure, single-threaded, event-driven state machine. Events
// come in (a frame arrived, a timer fired, a client submitted an operation,
// a write completed) and effects go out through seams (frames through dial,
// timers through clock.Clock, bytes through the storage seams). A node's code
//
//   - never starts a goroutine and never waits in a select;
//   - never blocks and never sleeps;
//   - never reads the wall clock: time comes from clock.Clock or as an
//     argument;
//   - never draws randomness except from the seeded source it was handed;
//   - imports only what an allow list names (guard.CorePolicy): the
//     standard library's pure packages, the seams (clock, dial), other core
//     packages, xxhash, and etcd raft inside core/consensus alone; so it
//     never touches the OS, the network or shared-memory synchronisation,
//     nor the simulator, the checkers, bbolt or porcupine;
//   - never lets Go's map iteration order reach an output: it sorts.
//
// # Why
//
// The same core runs under two drivers: the simulator, which runs a whole
// cluster on one goroutine in virtual time, and the real node. The simulator
// is only worth having if a run is a function of its seed: every event is
// folded into a trace hash, and running a seed twice must print the same
// hash, so that a failure found once can be replayed, shrunk and fixed. A
// single time.Now, goroutine or unsorted map range breaks that replay in a
// way no fault schedule explains. Such a line cannot be caught at run time,
// so it is caught at test time.
//
// # Enforcement
//
// guard_test.go runs package core/guard over the source of every non-test
// file under core/ and fails, naming file, line and rule, on go and select
// statements, wall-clock calls of the time package (under any import name,
// or as function values), imports not on the allow list, and ranges over
// maps or over maps.Keys, maps.Values and maps.All. A second test reads the
// module's whole import graph (go list -deps) and fails if a core package
// reaches anything off the list through another package of the module (a
// seam importing the simulator, say), or if the simulated world (sim,
// netsim) and the real one (realnet) reach each other. A map range is allowed when its body
// only appends the key or value to a slice that a later statement of the
// same block sorts (collect-then-sort), or when an exception on the line of
// the for or the line above gives a reason:
//
//	//fenceline:unordered order does not reach output: summing counts
//	for _, n := range counts {
//		total += n
//	}
//
// An exception without a reason, or one that excuses no map range, is
// itself a violation. Test files are not checked: tests may use the real
// clock and goroutines.
package core
