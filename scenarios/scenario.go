// Package scenarios holds the named simulated runs: a workload, a fault
// schedule and the checkers that judge it, each a function of one seed.
// cmd/simrun runs them by name; tests run them over seed ranges.
package scenarios

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fenceline/fenceline/sim"
)

// Scenario is one named simulated run.
type Scenario struct {
	Name     string
	Summary  string        // one line: what it provokes
	Duration time.Duration // virtual time, unless the caller sets one
	// Richness orders scenarios for the default choice: simrun with no
	// -scenario runs the richest one that exists.
	Richness int
	Bugs     []Bug
	// Run draws the run's knobs (reporting each with r.Knob before any
	// event runs), builds the cluster on r.Kernel, runs it for r.Duration
	// and reports what its checkers find with r.Fail.
	Run func(r *Run) error
}

// Bug is a planted bug: a switch that turns one defence off, so a test can
// prove the scenario's checkers notice when the defence is missing.
type Bug struct {
	Name    string
	Summary string
	// CaughtWithin is the number of consecutive seeds, from 1, within
	// which the scenario must catch the bug; a test holds it to that.
	CaughtWithin int
}

var registry = map[string]Scenario{}

// Register adds a scenario; names are unique.
func Register(s Scenario) {
	if s.Name == "" || s.Run == nil || s.Duration <= 0 {
		panic(fmt.Sprintf("scenarios: incomplete scenario %q", s.Name))
	}
	if _, dup := registry[s.Name]; dup {
		panic(fmt.Sprintf("scenarios: %q registered twice", s.Name))
	}
	registry[s.Name] = s
}

// All returns every scenario, sorted by name.
func All() []Scenario {
	names := Names()
	out := make([]Scenario, len(names))
	for i, name := range names {
		out[i] = registry[name]
	}
	return out
}

// Names returns the scenario names, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Default is the name of the richest scenario.
func Default() string {
	best := ""
	for _, s := range All() {
		if best == "" || s.Richness > registry[best].Richness {
			best = s.Name
		}
	}
	return best
}

// ErrUnknownScenario and ErrUnknownBug are usage errors.
var (
	ErrUnknownScenario = fmt.Errorf("unknown scenario")
	ErrUnknownBug      = fmt.Errorf("unknown bug")
)

// Lookup returns the named scenario, or an error that lists the valid names.
func Lookup(name string) (Scenario, error) {
	s, ok := registry[name]
	if !ok {
		return Scenario{}, fmt.Errorf("%w %q; valid scenarios: %s", ErrUnknownScenario, name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Options choose one run.
type Options struct {
	Seed     uint64
	Duration time.Duration // 0: the scenario's own
	Bugs     []string      // planted bugs to switch on; each must be the scenario's
	Out      io.Writer     // knobs and checker findings; nil: discard
	Trace    io.Writer     // a line per event, for people; nil: off
}

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
	Trace    uint64
	Events   uint64
	Virtual  time.Duration
	Wall     time.Duration
}

// OK reports whether every checker passed.
func (r Result) OK() bool { return r.Failures == 0 }

// Verdict is "ok" or "FAIL".
func (r Result) Verdict() string {
	if r.OK() {
		return "ok"
	}
	return "FAIL"
}

// Checkers names the checkers that failed, sorted.
func (r Result) Checkers() []string {
	seen := map[string]bool{}
	for _, f := range r.Findings {
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
	if !r.OK() {
		fmt.Fprintf(&b, " failures=%d checkers=%s", r.Failures, strings.Join(r.Checkers(), ","))
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
	out      io.Writer
	bugs     map[string]bool
	result   *Result
}

// Bug reports whether the named planted bug is switched on.
func (r *Run) Bug(name string) bool { return r.bugs[name] }

// Knob reports one value the seed drew. Every knob is printed before the
// run and folded into the trace hash.
func (r *Run) Knob(name string, value any) {
	line := fmt.Sprintf("knob %s=%v", name, value)
	fmt.Fprintln(r.out, line)
	r.Kernel.Mix([]byte(line))
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
	k.SetTrace(opts.Trace)
	restore := k.InstallCryptoRand()
	defer restore()
	run := &Run{Kernel: k, Seed: opts.Seed, Duration: opts.Duration, out: out, bugs: bugs, result: res}
	start := time.Now() // wall time is reported, never used by the run
	if err := s.Run(run); err != nil {
		run.Fail("run", "%v", err)
	}
	res.Wall = time.Since(start)
	res.Trace = k.Trace()
	res.Events = k.Events()
	res.Virtual = k.Now()
	return *res, nil
}

func (s Scenario) hasBug(name string) bool {
	for _, b := range s.Bugs {
		if b.Name == name {
			return true
		}
	}
	return false
}

func (s Scenario) bugNames() string {
	if len(s.Bugs) == 0 {
		return "(none)"
	}
	names := make([]string, len(s.Bugs))
	for i, b := range s.Bugs {
		names[i] = b.Name
	}
	return strings.Join(names, ", ")
}
