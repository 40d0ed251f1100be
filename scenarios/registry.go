package scenarios

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/bugs"
)

// Scenario is one named simulated run.
type Scenario struct {
	Name     string
	Summary  string        // one line: what it provokes
	Duration time.Duration // virtual time, unless the caller sets one
	// Default marks the one scenario simrun runs with no -scenario: the
	// one that exercises the most of the core at once.
	Default bool
	Bugs    []Bug
	// Floors are the least work a run must do to be judged at all: a run
	// whose clients did too little (answered nothing, granted no lease,
	// met no fault) proves nothing, and fails the "workload" checker, the
	// way a VOPR run whose requests were never answered fails. Every
	// scenario states at least one.
	Floors []Floor
	// Checkers names every checker the run may report under, besides the
	// ones every harness has (harnessCheckers). A finding under a name
	// not declared is itself a failure ("undeclared"), so the list stays
	// the truth about what judges the scenario.
	Checkers []string
	// Swarm opts the scenario into swarm fault mixes (swarm.go): each
	// seed draws which kinds of fault its Chaos injects. A scenario opts
	// in where the mixes were measured not to lower any planted bug's
	// catch rate (CONTRIBUTING).
	Swarm bool
	// NoAimedIO keeps aimed I/O errors (aimIOErrors) out of a scenario
	// whose measure the halts they cause would starve (bridge-saturation
	// needs a bridge under load); its I/O errors come at rates only.
	NoAimedIO bool
	// CallBounds draws consensus's bound on the calls in flight at a node
	// (MaxPending) small in half the runs, so its clients reach it; only
	// where the checkers take a call refused busy as what it is (the
	// consensus scenarios: a refusal, known not applied). The imposter
	// scenarios judge that a healed cluster serves, which a bound of two
	// calls would not let it.
	CallBounds bool
	// DiskStalls opts the scenario into disk stalls (aimDiskStalls): in
	// half its runs a node's disk answers nothing for a while. Every flow
	// scenario opts in but bridge-saturation, whose measure is a bridge
	// under steady load (as with NoAimedIO), and the benchmarks.
	DiskStalls bool
	// BootFaults opts the scenario into faults of the record files'
	// readers (aimBootFaults): in half its runs, restarts that read a
	// record header damaged or fail a read, and power cuts aimed where a
	// crash leaves a hole under a record. The scenarios that restart
	// raft nodes often opt in: journal-crash, election-crash,
	// durability-restart.
	BootFaults bool
	// ConfStalls opts the scenario into membership stalls
	// (aimConfStalls): in half its runs a leader's disk stalls as it
	// sends or applies a membership change. owner-handoff and
	// imposter-scenarios opt in. shrink-to-one does not: its bound on how
	// long a survivor may refuse flows after a removal has no allowance
	// for a disk stalled at that removal (seed 120 failed it so).
	ConfStalls bool
	// Run draws the run's knobs (reporting each with r.Knob before any
	// event runs), builds the cluster on r.Kernel, runs it for r.Duration
	// and reports what its checkers find with r.Fail.
	Run func(r *Run) error
}

// harnessCheckers may report in any scenario: the run itself, its work
// floors, a node that failed to boot or panicked, a node that carried on
// after a failed fsync (fault schedules with disk failures), and the
// disk's record of a node that cut what an fsync made durable or came up
// from a boot that read damage (sim.Disk).
var harnessCheckers = []string{"run", "workload", "boot", "node-panic", "fail-stop", "halt-cause", "synced-cut", "damaged-boot"}

// declares reports whether a finding under checker is one the scenario
// declared.
func (s Scenario) declares(checker string) bool {
	return slices.Contains(harnessCheckers, checker) || slices.Contains(s.Checkers, checker)
}

// plus is base with more checkers, for a scenario that runs a harness's
// checkers and its own.
func plus(base []string, more ...string) []string {
	return append(slices.Clip(base), more...)
}

// Bug is a planted bug: a switch that turns one defence off, so a test can
// prove the scenario's checkers notice when the defence is missing.
type Bug struct {
	Name string // a line of core/bugs.Table
	// Window and MinCaught pin the catch rate: with the bug switched on,
	// at least MinCaught of seeds 1..Window must fail. An undecided run
	// is not a catch. A checker that decays from catching a bug in a
	// fifth of seeds to one in fifty fails here long before it stops
	// catching it at all. `simrun -catch-rates` measures every bug
	// against its pin (CI runs it); catchrates.txt keeps the last
	// measurement, which `simrun -list` prints.
	Window, MinCaught int
}

// Summary is the bug's line in core/bugs.Table: what it breaks.
func (b Bug) Summary() string {
	t, _ := bugs.Lookup(b.Name)
	return t.Summary
}

// Floor is one kind of work a run must do at least Least of. The run
// reports what it did with Run.Did under the same name.
type Floor struct {
	Work  string
	Least int
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
	if len(s.Checkers) == 0 {
		panic(fmt.Sprintf("scenarios: %q declares no checker", s.Name))
	}
	if len(s.Floors) == 0 {
		panic(fmt.Sprintf("scenarios: %q states no work floor", s.Name))
	}
	for _, f := range s.Floors {
		if f.Work == "" || f.Least < 1 {
			panic(fmt.Sprintf("scenarios: %q has an empty work floor %+v", s.Name, f))
		}
	}
	for _, b := range s.Bugs {
		if _, ok := bugs.Lookup(b.Name); !ok {
			panic(fmt.Sprintf("scenarios: %q pins bug %q, which core/bugs.Table does not name", s.Name, b.Name))
		}
		if b.Window < 1 || b.MinCaught < 1 || b.MinCaught > b.Window {
			panic(fmt.Sprintf("scenarios: %q bug %q needs 1 <= MinCaught <= Window, has %d of %d", s.Name, b.Name, b.MinCaught, b.Window))
		}
	}
	if s.Default {
		for _, other := range registry {
			if other.Default {
				panic(fmt.Sprintf("scenarios: %q and %q are both marked Default", other.Name, s.Name))
			}
		}
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

// Default is the name of the scenario marked Default.
func Default() string {
	for _, s := range All() {
		if s.Default {
			return s.Name
		}
	}
	panic("scenarios: no scenario is marked Default")
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
