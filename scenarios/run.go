// Package scenarios holds the named simulated runs: a workload, a fault
// schedule and the checkers that judge it, each a function of one seed.
// cmd/simrun runs them by name; tests run them over seed ranges.
package scenarios

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

// Options choose one run.
type Options struct {
	Seed     uint64
	Duration time.Duration // 0: the scenario's own
	Bugs     []string      // planted bugs to switch on; each must be the scenario's
	Out      io.Writer     // knobs and checker findings; nil: discard
	Trace    io.Writer     // a line per event, for people; nil: off
	// CheckTimeout bounds each porcupine check in wall time (0: the
	// default, DefaultCheckTimeout). A check that runs out of it is
	// undecided, never passed.
	CheckTimeout time.Duration
	// ClientsOff starts no client workload: faults and checkers run, and
	// the work floors must then fail the run. For tests of the floors.
	ClientsOff bool
	// OutDir, if set, is where a failing run draws its failure
	// (artifacts.go): the offending key's history as porcupine's HTML,
	// a timeline around the violation, the replay command.
	OutDir string
	// Replay is the command that reruns this run, for OutDir.
	Replay string
	// Skip leaves faults and client operations out (skip.go).
	Skip Skip
	// NoSwarm runs the full fault mix on every seed, as before swarm
	// mixes (swarm.go): for measuring what they change.
	NoSwarm bool
}

// DefaultCheckTimeout is how long one porcupine check (one flow, one key)
// may search before it is called undecided.
const DefaultCheckTimeout = 20 * time.Second

// Finding is one checker failure.
type Finding struct {
	Checker string
	Message string
}

func (f Finding) String() string { return f.Checker + ": " + f.Message }

// Result is the outcome of one run.
type Result struct {
	Scenario string
	Seed     uint64
	Bugs     []string
	Findings []Finding // at most maxFindings; Failures counts them all
	Failures int
	// Undecided lists the checks that could not decide (a porcupine
	// search that ran out of time, a run too short for a check to
	// apply). Such a run is not a pass.
	Undecided []Finding
	Trace     uint64
	Events    uint64
	Virtual   time.Duration
	Wall      time.Duration
	// SlowestCheck is the wall time of the run's slowest porcupine
	// check, and SlowestCheckName what it checked. Like Wall, it is
	// reported and never part of the trace.
	SlowestCheck     time.Duration
	SlowestCheckName string
	// Work is what the run did, by the names its floors use.
	Work map[string]int
	// Drawn lists the files a failing run wrote into Options.OutDir.
	Drawn []string
	// Faults are the faults the run injected, in order; Ops the
	// operations each client sent, by the client's ordinals (skip.go).
	Faults []FaultRecord
	Ops    map[string][]int
}

// The three verdicts. Only VerdictOK is a pass.
const (
	VerdictOK        = "ok"
	VerdictFail      = "FAIL"
	VerdictUndecided = "undecided"
)

// OK reports whether the run passed: no checker failed and every check
// decided.
func (r Result) OK() bool { return r.Failures == 0 && len(r.Undecided) == 0 }

// Failed reports whether a checker failed.
func (r Result) Failed() bool { return r.Failures > 0 }

// Verdict is VerdictOK, VerdictFail or VerdictUndecided. A failure
// outranks an undecided check: what was judged and failed is known.
func (r Result) Verdict() string {
	switch {
	case r.Failures > 0:
		return VerdictFail
	case len(r.Undecided) > 0:
		return VerdictUndecided
	}
	return VerdictOK
}

// Checkers names the checkers that failed, sorted.
func (r Result) Checkers() []string { return checkerNames(r.Findings) }

// UndecidedCheckers names the checkers that could not decide, sorted.
func (r Result) UndecidedCheckers() []string { return checkerNames(r.Undecided) }

func checkerNames(fs []Finding) []string {
	seen := map[string]bool{}
	for _, f := range fs {
		seen[f.Checker] = true
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Summary is the one line simrun ends with; its fields are parsed by
// simrun's worker pool and by people, so keep it key=value.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d scenario=%s", r.Seed, r.Scenario)
	if len(r.Bugs) > 0 {
		fmt.Fprintf(&b, " bug=%s", strings.Join(r.Bugs, ","))
	}
	fmt.Fprintf(&b, " verdict=%s trace=%016x events=%d virtual=%v wall=%v",
		r.Verdict(), r.Trace, r.Events, r.Virtual, r.Wall.Round(time.Millisecond))
	if r.SlowestCheck > 0 {
		fmt.Fprintf(&b, " slowest-check=%v", r.SlowestCheck.Round(time.Millisecond))
	}
	if len(r.Work) > 0 {
		fmt.Fprintf(&b, " work=%s", formatWork(r.Work, ":", ","))
	}
	if r.Failures > 0 {
		fmt.Fprintf(&b, " failures=%d checkers=%s", r.Failures, strings.Join(r.Checkers(), ","))
	}
	if len(r.Undecided) > 0 {
		fmt.Fprintf(&b, " undecided=%d undecided-checkers=%s", len(r.Undecided), strings.Join(r.UndecidedCheckers(), ","))
	}
	return b.String()
}

// maxFindings bounds the findings a run keeps; past it they are counted.
const maxFindings = 50

// Run is the context a scenario runs in.
type Run struct {
	Kernel   *sim.Kernel
	Seed     uint64
	Duration time.Duration
	// Shortened is set when the caller cut the run below the scenario's
	// own duration (-duration): checks that need the whole run cannot
	// judge it, so such a run is at best undecided.
	Shortened bool
	// CheckTimeout bounds each porcupine check (see Options).
	CheckTimeout time.Duration
	// ClientsOff: start no client workload (see Options).
	ClientsOff bool
	work       map[string]int
	out        io.Writer
	bugs       map[string]bool
	result     *Result
	// For OutDir: the histories the checkers judge, by checker, and the
	// first key each failing checker named.
	histories map[string]*linearizability.History
	offenses  []offense
	// What the run leaves out, and the counters that name faults and
	// operations (skip.go).
	skip     Skip
	floors   []Floor // the scenario's, for a harness that holds its workload to them
	faultSeq int
	aimedSeq int
	opSeq    map[string]int
	opNames  map[string][]string // opOf's client names, by prefix
	// The run's swarm fault mix, if its scenario opts in (swarm.go).
	swarmOn bool
	// noAimedIO: Scenario.NoAimedIO.
	noAimedIO bool
	// callBounds: Scenario.CallBounds.
	callBounds bool
	// diskStalls: Scenario.DiskStalls; bootFaults: Scenario.BootFaults;
	// confStalls: Scenario.ConfStalls.
	diskStalls, bootFaults, confStalls bool
	swarm                              Swarm
	// retired are the nodes an operator stopped for good (Retire): the
	// supervisor restarts none of them.
	retired map[dial.NodeID]bool
	// supervised: the run's supervisor and node-panic hook are in (one
	// per run, however many raft groups it builds).
	supervised bool
}

// Retire stops n as an operator stops a removed member: at once if it is
// up, and for good: a halt's restart, already on its way when n was
// retired (n halted just before), does not bring it back. A scenario that
// brings n back later calls Start through Rejoin.
func (run *Run) Retire(n *sim.Machine) {
	if run.retired == nil {
		run.retired = map[dial.NodeID]bool{}
	}
	run.retired[n.ID()] = true
	n.Crash()
}

// CrashFor crashes n and starts it again down later, unless an operator
// has retired it meanwhile (Retire).
func (run *Run) CrashFor(n *sim.Machine, down time.Duration) {
	n.Crash()
	run.Kernel.After(down, sim.EvFault, xxhash.Sum64String("restart "+n.Name()), func() {
		if !n.Up() && !run.retired[n.ID()] {
			n.Start()
		}
	})
}

// Rejoin starts n again after Retire, with what its disk kept, as an
// operator brings a member back to add it again.
func (run *Run) Rejoin(n *sim.Machine) {
	delete(run.retired, n.ID())
	if !n.Up() {
		n.Start()
	}
}

// offense is a failing checker's key and when its failure first shows.
type offense struct {
	checker, key string
	at           time.Duration
}

// History names the history a checker judges, so that a failure can be
// drawn from it.
func (r *Run) History(checker string, h *linearizability.History) {
	if r.histories == nil {
		r.histories = map[string]*linearizability.History{}
	}
	r.histories[checker] = h
}

// Offending records the key a checker's failure is about (checker.Offender).
func (r *Run) Offending(checker, key string, at time.Duration) {
	r.offenses = append(r.offenses, offense{checker, key, at})
}

// Bugs is the set of planted bugs switched on for this run, for the
// configurations of the core packages the scenario runs.
func (r *Run) Bugs() bugs.Set {
	s, err := bugs.Of(slices.Sorted(maps.Keys(r.bugs))...)
	if err != nil {
		panic(err) // Execute only lets a scenario's pinned bugs through
	}
	return s
}

// Knob reports one value the seed drew. Every knob is printed before the
// run and folded into the trace hash.
func (r *Run) Knob(name string, value any) {
	line := fmt.Sprintf("knob %s=%v", name, value)
	fmt.Fprintln(r.out, line)
	r.Kernel.Mix([]byte(line))
}

// HalfTheRuns draws, from a stream of its own ("knobs/" and the knob's
// name with dashes), whether an aimed fault is on in this run, and
// records it as knob name: an aim added to a scenario moves none of its
// other draws.
func (r *Run) HalfTheRuns(name string) bool {
	on := r.Kernel.Stream("knobs/"+strings.ReplaceAll(name, "_", "-")).IntN(2) == 0
	r.Knob(name, on)
	return on
}

// Fail records a checker failure.
func (r *Run) Fail(checker, format string, args ...any) {
	r.result.Failures++
	msg := fmt.Sprintf(format, args...)
	r.Kernel.Logf("CHECK FAILED %s: %s", checker, msg)
	if len(r.result.Findings) < maxFindings {
		f := Finding{Checker: checker, Message: msg}
		r.result.Findings = append(r.result.Findings, f)
		fmt.Fprintf(r.out, "FAIL %s at %v\n", f, r.Kernel.Now())
	}
	// A verdict is part of what a seed replays to.
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(r.result.Failures))
	r.Kernel.Mix(b[:])
}

// Undecided records a check that could not decide: its search ran out of
// time, or the run gave it nothing it could judge. The run's verdict is
// then at best undecided. Nothing of it reaches the trace hash: a timeout
// is wall-clock, and a seed must replay to the same trace on any machine.
func (r *Run) Undecided(checker, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.Kernel.Logf("CHECK UNDECIDED %s: %s", checker, msg)
	if len(r.result.Undecided) < maxFindings {
		f := Finding{Checker: checker, Message: msg}
		r.result.Undecided = append(r.result.Undecided, f)
		fmt.Fprintf(r.out, "UNDECIDED %s\n", f)
	}
}

// TimeCheck runs one wall-clock-bounded check and keeps the slowest one's
// time for the summary.
func (r *Run) TimeCheck(name string, check func()) {
	start := time.Now() // reported, never used by the run
	check()
	if took := time.Since(start); took > r.result.SlowestCheck {
		r.result.SlowestCheck, r.result.SlowestCheckName = took, name
	}
}

// Did reports n more of one kind of work the run did, for its floors
// (Scenario.Floors) and its "work:" line.
func (r *Run) Did(work string, n int) {
	if r.work == nil {
		r.work = map[string]int{}
	}
	r.work[work] += n
}

// formatWork lists work counts in name order, as name<eq>n<sep>...
func formatWork(work map[string]int, eq, sep string) string {
	names := make([]string, 0, len(work))
	for name := range work {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + eq + fmt.Sprint(work[name])
	}
	return strings.Join(parts, sep)
}

// Floor is the least of one kind of work the scenario asks of a run, or
// 0 when it sets no floor on it.
func (r *Run) Floor(work string) int {
	for _, f := range r.floors {
		if f.Work == work {
			return f.Least
		}
	}
	return 0
}

// judgeWork prints what the run did and holds it to the scenario's
// floors. A shortened run below a floor is undecided: it had less time
// than the floor was set for.
func (r *Run) judgeWork(floors []Floor) {
	r.result.Work = r.work
	fmt.Fprintf(r.out, "work: %s\n", formatWork(r.work, "=", " "))
	for _, f := range floors {
		got := r.work[f.Work]
		if got >= f.Least {
			continue
		}
		if r.Shortened || !r.skip.Empty() {
			r.Undecided("workload", "%s=%d, under the %d the whole run must do (this run was cut or left things out)", f.Work, got, f.Least)
		} else {
			r.Fail("workload", "%s=%d, under the %d a meaningful run must do", f.Work, got, f.Least)
		}
	}
}

// Logf prints a line to the run's output (not the trace hash).
func (r *Run) Logf(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
}

// Execute runs one seed of the named scenario. Usage errors (unknown
// scenario, a bug the scenario does not have) come back as errors; checker
// failures come back in the Result.
func Execute(name string, opts Options) (Result, error) {
	s, err := Lookup(name)
	if err != nil {
		return Result{}, err
	}
	bugs := map[string]bool{}
	for _, b := range opts.Bugs {
		if !s.hasBug(b) {
			return Result{}, fmt.Errorf("%w %q for scenario %s; its bugs: %s", ErrUnknownBug, b, s.Name, s.bugNames())
		}
		bugs[b] = true
	}
	if opts.Duration == 0 {
		opts.Duration = s.Duration
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = DefaultCheckTimeout
	}
	if opts.Duration < 0 {
		return Result{}, fmt.Errorf("duration %v is negative", opts.Duration)
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	res := &Result{Scenario: s.Name, Seed: opts.Seed, Bugs: append([]string(nil), opts.Bugs...)}
	sort.Strings(res.Bugs)
	k := sim.New(opts.Seed)
	var events *eventLog
	trace := opts.Trace
	if opts.OutDir != "" {
		events = &eventLog{}
		if trace == nil {
			trace = events
		} else {
			trace = io.MultiWriter(trace, events)
		}
	}
	k.SetTrace(trace)
	restore := k.InstallCryptoRand()
	defer restore()
	run := &Run{Kernel: k, Seed: opts.Seed, Duration: opts.Duration, Shortened: opts.Duration < s.Duration,
		CheckTimeout: opts.CheckTimeout, ClientsOff: opts.ClientsOff, out: out, bugs: bugs, result: res, skip: opts.Skip,
		swarmOn: s.Swarm && !opts.NoSwarm, noAimedIO: s.NoAimedIO, callBounds: s.CallBounds, diskStalls: s.DiskStalls, bootFaults: s.BootFaults, confStalls: s.ConfStalls, floors: s.Floors}
	start := time.Now() // wall time is reported, never used by the run
	if err := s.Run(run); err != nil {
		run.Fail("run", "%v", err)
	}
	run.judgeWork(s.Floors)
	for _, c := range append(res.Checkers(), res.UndecidedCheckers()...) {
		if !s.declares(c) {
			run.Fail("undeclared", "scenario %s reported under checker %q, which its Checkers do not name", s.Name, c)
		}
	}
	if run.Shortened && res.Failures == 0 {
		run.Undecided("run", "shortened to %v of the scenario's %v: the checks that judge the whole run (liveness, convergence, work done) could not", opts.Duration, s.Duration)
	}
	if !opts.Skip.Empty() && res.Failures == 0 {
		run.Undecided("run", "it left out faults or operations (%s): a pass of part of a seed is not a pass of the seed", opts.Skip)
	}
	if opts.OutDir != "" && res.Failures > 0 {
		files, err := run.draw(opts.OutDir, opts.Replay, events)
		if err != nil {
			return *res, fmt.Errorf("drawing the failure into %s: %w", opts.OutDir, err)
		}
		res.Drawn = files
	}
	res.Wall = time.Since(start)
	res.Trace = k.Trace()
	res.Events = k.Events()
	res.Virtual = k.Now()
	return *res, nil
}
