// Package clock is the time seam. Code under core/ learns the time and asks
// for callbacks only through a Clock, so the same code runs against the wall
// clock in a real node and against a node's skewed, drifting, jumping virtual
// clock in the simulator.
package clock

import "time"

// Clock is what a node knows about time.
//
// Now is the node's wall reading: in the simulator it includes the node's
// offset, drift and any steps, so two nodes may disagree and one node's
// reading may go backwards. AfterFunc measures its delay on the monotonic
// clock, as Go timers do on a real machine: a step of the wall reading does
// not move a pending timer, drift does.
//
// Mono is the monotonic reading, from an arbitrary origin: no step of the
// wall reading moves it; drift does. It is what a node measures elapsed
// time with when it must not count on its timers firing on time: a loop
// blocked in an fsync runs a timer late, and a ticker that has fallen
// behind drops ticks, so counting ticks measures less time than passed.
//
// Callbacks run on the node's own loop, one at a time, never concurrently
// with any other code of that node.
type Clock interface {
	Now() time.Time
	Mono() time.Duration
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc callback.
type Timer interface {
	// Stop cancels the callback. It reports whether the call stopped it;
	// false means the callback already ran or was already stopped. Once
	// Stop has been called from the node's loop the callback will not run.
	Stop() bool
}
