// Command simrun runs fenceline's simulated scenarios: one seed, a range of
// seeds in worker processes, or each seed twice to prove it replays.
//
//	simrun -seed 7                          one seed of the default scenario
//	simrun -scenario NAME -seed 7 -v        with a line per event
//	simrun -seeds 1..200 -j 2               a sweep in 2 worker processes
//	simrun -check-determinism -seeds 1..20  each seed twice; traces must match
//	simrun -scenario NAME -bug BUG -seeds 1..50   a planted bug must be caught
//	simrun -list                            scenarios and their planted bugs
//
// Exit status: 0 when every run passed, 1 when a checker failed (or a seed
// replayed differently), 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

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
}

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
	fs.BoolVar(&c.list, "list", false, "list scenarios and their planted bugs")
	fs.BoolVar(&c.verbose, "v", false, "print a line per event (one seed only)")
	fs.BoolVar(&c.quiet, "quiet", false, "print only the summary line (used by worker processes)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: simrun [-scenario NAME] [-seed N | -seeds A..B [-j K]] [-check-determinism] [-bug B] [-duration D] [-v] | -list")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, usageError{err.Error()}
	}
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
	if c.determinism && !c.rangeMode {
		c.rangeMode, c.seedsFrom, c.seedsTo = true, c.seed, c.seed
	}
	if c.jobs < 1 || c.jobs > 64 {
		return c, usageError{fmt.Sprintf("-j %d: want 1..64", c.jobs)}
	}
	if c.duration < 0 {
		return c, usageError{fmt.Sprintf("-duration %v: must not be negative", c.duration)}
	}
	if c.verbose && c.rangeMode {
		return c, usageError{"-v traces one seed; use -seed, not -seeds"}
	}
	if *bug != "" {
		for _, b := range strings.Split(*bug, ",") {
			if b = strings.TrimSpace(b); b != "" {
				c.bugs = append(c.bugs, b)
			}
		}
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
			return 2
		}
		fmt.Fprintln(stderr, "simrun:", err)
		return 2
	}
	switch {
	case c.list:
		list(stdout)
		return 0
	case c.rangeMode:
		return sweep(c, stdout, stderr)
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
		for _, b := range s.Bugs {
			fmt.Fprintf(w, "    bug %s: %s (caught within %d seeds)\n", b.Name, b.Summary, b.CaughtWithin)
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
		Seed: c.seed, Duration: c.duration, Bugs: c.bugs, Out: out, Trace: trace,
	})
	if err != nil {
		fmt.Fprintln(stderr, "simrun:", err)
		return 2
	}
	if !res.OK() && !c.quiet {
		fmt.Fprintf(stdout, "replay: %s\n", replay(c, c.seed))
	}
	fmt.Fprintln(stdout, res.Summary())
	if !res.OK() {
		return 1
	}
	return 0
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
	return cmd
}
