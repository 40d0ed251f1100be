// Package checker holds the checkers that judge a simulated run. Each is a
// function of plain records (a client history, the simulator's log of
// crashes, partitions, clocks and frames, what the simulator read off the
// nodes' disks and stores), never of a node's own account of itself, and
// each reports through a Reporter, so a unit test can feed it a crafted
// record and see it pass, fail, or say it could not decide.
//
// The scenarios package gathers the records while a run goes and calls
// these at its end (or at the instants they judge).
package checker

import "fmt"

// Reporter receives a checker's findings. A failure is a broken promise;
// undecided is a check that could not judge (a search that ran out of
// time, a record too thin to judge): never a pass.
type Reporter interface {
	Fail(checker, format string, args ...any)
	Undecided(checker, format string, args ...any)
}

// Record is a Reporter that keeps what it is told, for tests.
type Record struct {
	Failures []string // "checker: message"
	Unsure   []string // the checks that could not decide
}

// Fail records a failure.
func (r *Record) Fail(checker, format string, args ...any) {
	r.Failures = append(r.Failures, checker+": "+fmt.Sprintf(format, args...))
}

// Undecided records a check that could not decide.
func (r *Record) Undecided(checker, format string, args ...any) {
	r.Unsure = append(r.Unsure, checker+": "+fmt.Sprintf(format, args...))
}

// OK reports whether nothing failed and everything decided.
func (r *Record) OK() bool { return len(r.Failures) == 0 && len(r.Unsure) == 0 }
