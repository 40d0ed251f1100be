// Command simrun runs fenceline's simulated scenarios: one seed, a range of
// seeds in worker processes, or each seed twice to prove it replays.
//
//	simrun -seed 7                          one seed of the default scenario
//	simrun -scenario NAME -seed 7 -v        with a line per event
//	simrun -seeds 1..200 -j 2               a sweep in 2 worker processes
//	simrun -check-determinism -seeds 1..20  each seed twice; traces must match
//	simrun -scenario NAME -bug BUG -seeds 1..50   a planted bug must be caught
//	simrun -list                            scenarios and their planted bugs
//	simrun -scenario NAME -bug BUG -seed 2 -shrink   the smallest run that fails the same checker
//	simrun -seed 3 -inventory -skip 'faults:2 ops:f0/1-'   faults and operations by name; some left out
//
// Exit status: 0 when every run passed; 1 when a checker failed, a seed
// replayed differently or a worker crashed; 2 on a usage error; 3 when
// nothing failed but some check could not decide (a porcupine search that
// ran out of time, a run too short to judge): undecided is not a pass.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

func main() {
	scenarios.TuneGC()
	if len(os.Args) == 2 && os.Args[1] == workerFlag {
		os.Exit(workerLoop(os.Stdin, os.Stdout))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	seed        uint64
	seedsFrom   uint64
	seedsTo     uint64
	rangeMode   bool
	jobs        int
	scenario    string
	duration    time.Duration
	bugs        []string
	determinism bool
	list        bool
	verbose     bool
	quiet       bool
	catchRates  bool
	writeRates  string // with catchRates: rewrite this file with what was measured
	scenarioSet bool   // -scenario was given
	// checkTimeout bounds each porcupine check (0: the default).
	checkTimeout time.Duration
	// shardI of shardN (1/1 by default) slices -seeds or -random.
	shardI, shardN int
	// random runs random seeds for runFor; randomBase (if set) fixes
	// the stream.
	random        bool
	runFor        time.Duration
	randomBase    uint64
	randomBaseSet bool
	// out is where a failing run draws its failure (-out).
	out string
	// toPin stops each bug's window once it reaches its pin (-to-pin).
	toPin bool
	// failFast stops handing out a sweep's seeds once one has failed
	// (-fail-fast).
	failFast bool
	// skip leaves faults and operations out of one run (-skip); inventory
	// prints what the run injected and sent (-inventory); shrink
	// minimizes a failing run (-shrink), within shrinkFor.
	skip      scenarios.Skip
	noSwarm   bool // -no-swarm
	inventory bool
	shrink    bool
	shrinkFor time.Duration
}

// Exit codes.
const (
	exitOK        = 0
	exitFail      = 1
	exitUsage     = 2
	exitUndecided = 3
)

// usageError is a bad command line: exit 2 with the message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("simrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.String("seed", "1", "run this one seed (an unsigned integer)")
	seeds := fs.String("seeds", "", "run the seeds A..B (inclusive) in worker processes")
	fs.IntVar(&c.jobs, "j", runtime.NumCPU(), "worker processes for -seeds")
	fs.StringVar(&c.scenario, "scenario", scenarios.Default(), "the scenario to run (see -list)")
	fs.DurationVar(&c.duration, "duration", 0, "virtual time to run (0: the scenario's own)")
	bug := fs.String("bug", "", "switch on planted bugs, comma-separated (see -list)")
	fs.BoolVar(&c.determinism, "check-determinism", false, "run each seed twice, in separate processes, and fail if a trace differs")
	fs.BoolVar(&c.list, "list", false, "list scenarios, their work floors and planted bugs")
	fs.BoolVar(&c.catchRates, "catch-rates", false, "measure every planted bug (of -scenario, -bug if given) over its pinned window; fail if one is caught less than its pin")
	fs.BoolVar(&c.toPin, "to-pin", false, "with -catch-rates: stop each bug's seeds once it is caught as often as its pin asks (a verdict, not a measurement)")
	fs.BoolVar(&c.failFast, "fail-fast", false, "with -seeds: start no more seeds once one fails (those already running finish, so the lowest failing seed is always found)")
	fs.StringVar(&c.writeRates, "write", "", "with -catch-rates: record the measured rates in this file (scenarios/catchrates.txt)")
	fs.BoolVar(&c.verbose, "v", false, "print a line per event (one seed only)")
	fs.BoolVar(&c.quiet, "quiet", false, "print only the summary line and undecided checks (used by worker processes)")
	fs.DurationVar(&c.checkTimeout, "check-timeout", 0, "wall time each porcupine check may take before it is undecided (0: the default, 20s)")
	fs.StringVar(&c.out, "out", "", "a failing run writes its failure here: porcupine's HTML of the offending key, a timeline, the replay command (a sweep: one subdirectory per failing seed)")
	shard := fs.String("shard", "", "i/n: run the i-th of n disjoint slices of -seeds, or of the -random stream (for a CI matrix)")
	fs.BoolVar(&c.random, "random", false, "run random 64-bit seeds over every scenario (or -scenario) until -for has passed")
	fs.DurationVar(&c.runFor, "for", 0, "with -random: how long to run")
	randomBase := fs.String("random-base", "", "with -random: the stream's base (default: drawn, and printed); machines running shards of one stream share it")
	skip := fs.String("skip", "", "leave faults and client operations out of the run: 'faults:3,17,22- ops:f1/5-40,kv2/1-' (ordinals as -inventory names them), or @FILE holding that text")
	fs.BoolVar(&c.noSwarm, "no-swarm", false, "run every seed with the full fault mix (no swarm mixes), for measuring what the mixes change")
	fs.BoolVar(&c.inventory, "inventory", false, "after the run, list the faults it injected (ordinal, time, what) and the operations each client sent")
	fs.BoolVar(&c.shrink, "shrink", false, "minimize a failing -seed: leave out faults, then operations, then virtual time, while the same checker still fails; print the smallest run and its replay command")
	fs.DurationVar(&c.shrinkFor, "shrink-for", 10*time.Minute, "with -shrink: stop looking after this long and print the smallest failing run found")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simrun [-scenario NAME] [-seed N | -seeds A..B [-j K] [-shard i/n]] [-check-determinism] [-bug B] [-duration D] [-v] [-skip S] [-inventory] [-shrink] | -random -for D [-shard i/n] | -list")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, usageError{err.Error()}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "scenario" {
			c.scenarioSet = true
		}
	})
	if fs.NArg() > 0 {
		return c, usageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	var err error
	if c.seed, err = strconv.ParseUint(*seed, 10, 64); err != nil {
		return c, usageError{fmt.Sprintf("-seed %q: want an unsigned integer", *seed)}
	}
	if *seeds != "" {
		c.rangeMode = true
		if c.seedsFrom, c.seedsTo, err = parseRange(*seeds); err != nil {
			return c, usageError{err.Error()}
		}
	}
	c.shardI, c.shardN = 1, 1
	if *shard != "" {
		if c.shardI, c.shardN, err = parseShard(*shard); err != nil {
			return c, usageError{err.Error()}
		}
		if !c.rangeMode && !c.random {
			return c, usageError{"-shard slices -seeds or -random; give one of them"}
		}
		if c.rangeMode {
			lo, hi, ok := shardRange(c.seedsFrom, c.seedsTo, c.shardI, c.shardN)
			if !ok {
				return c, usageError{fmt.Sprintf("-shard %s of -seeds %s is empty: fewer seeds than shards", *shard, *seeds)}
			}
			c.seedsFrom, c.seedsTo = lo, hi
		}
	}
	if *randomBase != "" {
		if c.randomBase, err = strconv.ParseUint(*randomBase, 10, 64); err != nil {
			return c, usageError{fmt.Sprintf("-random-base %q: want an unsigned integer", *randomBase)}
		}
		c.randomBaseSet = true
	}
	switch {
	case c.out != "" && (c.catchRates || c.random):
		return c, usageError{"-out draws the failures of -seed or -seeds"}
	case c.random && (c.rangeMode || c.determinism || c.catchRates || c.verbose || *bug != ""):
		return c, usageError{"-random runs its own seeds over clean scenarios; it takes no -seeds, -check-determinism, -catch-rates, -v or -bug"}
	case c.random && c.runFor <= 0:
		return c, usageError{"-random needs -for, e.g. -for 10m"}
	case !c.random && (c.runFor != 0 || c.randomBaseSet):
		return c, usageError{"-for and -random-base go with -random"}
	}
	if *skip != "" {
		text := *skip
		if path, ok := strings.CutPrefix(text, "@"); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return c, usageError{fmt.Sprintf("-skip %s: %v", text, err)}
			}
			text = string(b)
		}
		if c.skip, err = scenarios.ParseSkip(text); err != nil {
			return c, usageError{fmt.Sprintf("-skip: %v", err)}
		}
	}
	if (!c.skip.Empty() || c.inventory || c.shrink) && (c.rangeMode || c.random || c.catchRates || c.determinism) {
		return c, usageError{"-skip, -inventory and -shrink go with one -seed"}
	}
	if c.shrink && (c.verbose || c.out != "") {
		return c, usageError{"-shrink prints the minimized run's replay command; run that with -v or -out"}
	}
	if c.shrinkFor <= 0 {
		return c, usageError{fmt.Sprintf("-shrink-for %v: must be positive", c.shrinkFor)}
	}
	if c.determinism && !c.rangeMode {
		c.rangeMode, c.seedsFrom, c.seedsTo = true, c.seed, c.seed
	}
	if c.jobs < 1 || c.jobs > 64 {
		return c, usageError{fmt.Sprintf("-j %d: want 1..64", c.jobs)}
	}
	if c.duration < 0 {
		return c, usageError{fmt.Sprintf("-duration %v: must not be negative", c.duration)}
	}
	if c.checkTimeout < 0 {
		return c, usageError{fmt.Sprintf("-check-timeout %v: must not be negative", c.checkTimeout)}
	}
	if c.verbose && c.rangeMode {
		return c, usageError{"-v traces one seed; use -seed, not -seeds"}
	}
	if c.catchRates && (c.rangeMode || c.verbose || c.determinism || c.duration != 0) {
		return c, usageError{"-catch-rates runs each bug's own window at full length; it takes no -seeds, -v, -check-determinism or -duration"}
	}
	if c.toPin && (!c.catchRates || c.writeRates != "") {
		return c, usageError{"-to-pin stops -catch-rates early: it records nothing (-write needs whole windows)"}
	}
	if c.failFast && (!c.rangeMode || c.determinism) {
		return c, usageError{"-fail-fast stops a sweep of -seeds early; it takes no -check-determinism (a divergence needs both runs)"}
	}
	if c.writeRates != "" && !c.catchRates {
		return c, usageError{"-write records what -catch-rates measured; use them together"}
	}
	if *bug != "" {
		for _, b := range strings.Split(*bug, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.bugs = append(c.bugs, b)
			}
		}
	}
	if c.catchRates && !c.scenarioSet {
		// -catch-rates -bug B: any scenario's bug B.
		for _, b := range c.bugs {
			found := false
			for _, s := range scenarios.All() {
				found = found || hasBug(s, b)
			}
			if !found {
				return c, usageError{fmt.Sprintf("no scenario has a bug %q; see simrun -list", b)}
			}
		}
		return c, nil
	}
	if !c.list {
		// Validate the scenario and bugs now, so a sweep fails before it
		// starts a single worker.
		s, err := scenarios.Lookup(c.scenario)
		if err != nil {
			return c, usageError{err.Error()}
		}
		for _, b := range c.bugs {
			if !hasBug(s, b) {
				return c, usageError{fmt.Sprintf("unknown bug %q for scenario %s; see simrun -list", b, s.Name)}
			}
		}
	}
	return c, nil
}

func hasBug(s scenarios.Scenario, name string) bool {
	for _, b := range s.Bugs {
		if b.Name == name {
			return true
		}
	}
	return false
}

// maxRange bounds one sweep; a typo like 1..10000000000 should not start.
const maxRange = 1_000_000

func parseRange(s string) (uint64, uint64, error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		return 0, 0, fmt.Errorf("-seeds %q: want A..B, e.g. 1..100", s)
	}
	from, err1 := strconv.ParseUint(a, 10, 64)
	to, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("-seeds %q: A and B must be unsigned integers", s)
	}
	if to < from {
		return 0, 0, fmt.Errorf("-seeds %q: B is less than A", s)
	}
	if to-from >= maxRange {
		return 0, 0, fmt.Errorf("-seeds %q: at most %d seeds per sweep", s, maxRange)
	}
	return from, to, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			if !errors.Is(err, flag.ErrHelp) && ue.msg != flag.ErrHelp.Error() {
				fmt.Fprintln(stderr, "simrun:", ue.msg)
			}
			return exitUsage
		}
		fmt.Fprintln(stderr, "simrun:", err)
		return exitUsage
	}
	switch {
	case c.list:
		list(stdout)
		return exitOK
	case c.catchRates:
		return catchRates(c, stdout, stderr)
	case c.rangeMode:
		return sweep(c, stdout, stderr)
	case c.random:
		return randomRun(c, stdout, stderr)
	case c.shrink:
		return shrink(c, stdout, stderr)
	default:
		return one(c, stdout, stderr)
	}
}

func list(w io.Writer) {
	def := scenarios.Default()
	for _, s := range scenarios.All() {
		mark := ""
		if s.Name == def {
			mark = " (default)"
		}
		fmt.Fprintf(w, "%s%s\n    %s; %v virtual\n", s.Name, mark, s.Summary, s.Duration)
		floors := make([]string, len(s.Floors))
		for i, f := range s.Floors {
			floors[i] = fmt.Sprintf("%s>=%d", f.Work, f.Least)
		}
		fmt.Fprintf(w, "    work floors: %s\n", strings.Join(floors, " "))
		fmt.Fprintf(w, "    checkers: %s\n", strings.Join(s.Checkers, " "))
		for _, b := range s.Bugs {
			last := "not measured yet"
			if m, ok := scenarios.LastMeasured(s.Name, b.Name); ok {
				last = fmt.Sprintf("last measured %d of %d", m.Caught, m.Window)
			}
			fmt.Fprintf(w, "    bug %s: %s (caught in at least %d of seeds 1..%d; %s)\n", b.Name, b.Summary(), b.MinCaught, b.Window, last)
		}
	}
}

// one runs a single seed in this process.
func one(c config, stdout, stderr io.Writer) int {
	out := stdout
	if c.quiet {
		out = io.Discard
	}
	var trace io.Writer
	if c.verbose {
		trace = stdout
	}
	fmt.Fprintf(out, "SEED=%d scenario=%s%s\n", c.seed, c.scenario, bugSuffix(c.bugs))
	res, err := scenarios.Execute(c.scenario, scenarios.Options{
		Seed: c.seed, Duration: c.duration, Bugs: c.bugs, Out: out, Trace: trace, CheckTimeout: c.checkTimeout,
		OutDir: c.out, Replay: replay(c, c.seed), Skip: c.skip, NoSwarm: c.noSwarm,
	})
	if err != nil {
		fmt.Fprintln(stderr, "simrun:", err)
		return exitUsage
	}
	if c.quiet {
		// Undecided checks are printed whatever the verbosity: a sweep
		// shows them, so none passes unseen.
		for _, f := range res.Undecided {
			fmt.Fprintf(stdout, "UNDECIDED %s\n", f)
		}
	}
	if !res.OK() && !c.quiet {
		fmt.Fprintf(stdout, "replay: %s\n", replay(c, c.seed))
	}
	for _, f := range res.Drawn {
		fmt.Fprintf(stdout, "drawn: %s\n", f) // under -quiet too: a sweep names them
	}
	if c.inventory {
		printInventory(stdout, res)
	}
	fmt.Fprintln(stdout, res.Summary())
	return exitCode(res.Verdict())
}

// exitCode maps a verdict to simrun's exit status.
func exitCode(verdict string) int {
	switch verdict {
	case scenarios.VerdictOK:
		return exitOK
	case scenarios.VerdictUndecided:
		return exitUndecided
	}
	return exitFail
}

func bugSuffix(bugs []string) string {
	if len(bugs) == 0 {
		return ""
	}
	return " bug=" + strings.Join(bugs, ",")
}

// replay is the command that runs one seed of this configuration again.
func replay(c config, seed uint64) string {
	cmd := fmt.Sprintf("go run ./cmd/simrun -scenario %s -seed %d", c.scenario, seed)
	if len(c.bugs) > 0 {
		cmd += " -bug " + strings.Join(c.bugs, ",")
	}
	if c.duration != 0 {
		cmd += " -duration " + c.duration.String()
	}
	if c.checkTimeout != 0 {
		cmd += " -check-timeout " + c.checkTimeout.String()
	}
	if c.noSwarm {
		cmd += " -no-swarm"
	}
	if !c.skip.Empty() {
		cmd += " -skip '" + c.skip.String() + "'"
	}
	return cmd
}

// printInventory lists what a run injected and sent, as the shrinker
// reads it: "fault #N t=T what", "ops CLIENT ORDINALS", and each finding.
func printInventory(w io.Writer, res scenarios.Result) {
	for _, f := range res.Faults {
		fmt.Fprintf(w, "fault %s\n", f)
	}
	clients := make([]string, 0, len(res.Ops))
	for c := range res.Ops {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		fmt.Fprintf(w, "ops %s %s\n", c, scenarios.OrdinalsOf(res.Ops[c]))
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "finding %s\n", f)
	}
}
