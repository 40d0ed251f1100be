// Package sim is the deterministic simulation kernel: one event queue
// ordered by (virtual time, sequence number), drained by one goroutine that
// runs a whole cluster; seeded random streams split by label; per-node
// virtual clocks with offset, drift and steps; a disk with fsync semantics
// that loses unsynced bytes on a crash; node crash and restart; and a trace
// hash that folds in every event, so a seed that replays differently is
// caught at once.
//
// Everything a simulated run does is a function of its root seed. Nothing in
// this package reads the wall clock except to report how long a run took.
package sim
