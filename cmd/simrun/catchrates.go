package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

// pinned is one planted bug and what its window measured.
type pinned struct {
	scenario  string
	bug       scenarios.Bug
	caught    int
	undecided int
	crashed   int
	first     uint64 // first catching seed; 0: none
	checkers  map[string]int
	runs      int // seeds run (fewer than the window with -to-pin)
	busy      time.Duration
}

// catchRates runs every planted bug (of the scenario and bugs named, if
// any) over its pinned window, seeds 1..Window, all in one pool of worker
// processes, and holds each to its MinCaught. Only a FAIL is a catch: an
// undecided run proves nothing, and a crashed worker fails the mode.
func catchRates(c config, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "simrun: cannot find my own executable:", err)
		return exitUsage
	}
	var bugs []*pinned
	var work []job
	for _, s := range scenarios.All() {
		if c.scenarioSet && s.Name != c.scenario {
			continue
		}
		for _, b := range s.Bugs {
			if len(c.bugs) > 0 && !contains(c.bugs, b.Name) {
				continue
			}
			bugs = append(bugs, &pinned{scenario: s.Name, bug: b, checkers: map[string]int{}})
			for seed := uint64(1); seed <= uint64(b.Window); seed++ {
				work = append(work, job{scenario: s.Name, bugs: []string{b.Name}, seed: seed})
			}
		}
	}
	if len(bugs) == 0 {
		fmt.Fprintln(stderr, "simrun: no planted bug matches")
		return exitUsage
	}
	fmt.Fprintf(stdout, "CATCH-RATES bugs=%d runs=%d jobs=%d\n", len(bugs), len(work), c.jobs)
	start := time.Now()
	byKey := map[string]*pinned{}
	for _, p := range bugs {
		byKey[p.scenario+" "+p.bug.Name] = p
	}
	done := 0
	step := max(1, len(work)/20)
	// With -to-pin, a bug's remaining seeds are dropped once it has been
	// caught as often as its pin asks: enough for the verdict, not a
	// measurement (so no -write).
	var mu sync.Mutex
	var skip func(job) bool
	if c.toPin {
		skip = func(j job) bool {
			mu.Lock()
			defer mu.Unlock()
			p := byKey[j.scenario+" "+j.bugs[0]]
			return p.caught >= p.bug.MinCaught
		}
	}
	for o := range poolSkipping(exe, c, work, skip) {
		done++
		p := byKey[o.job.scenario+" "+o.job.bugs[0]]
		mu.Lock()
		p.runs++
		mu.Unlock()
		p.busy += o.busy
		switch o.verdict {
		case scenarios.VerdictFail:
			mu.Lock()
			p.caught++
			mu.Unlock()
			if p.first == 0 || o.seed < p.first {
				p.first = o.seed
			}
			for _, name := range strings.Split(field(o.summary, "checkers"), ",") {
				p.checkers[name]++
			}
		case scenarios.VerdictUndecided:
			p.undecided++
		case scenarios.VerdictOK:
		default:
			p.crashed++
			fmt.Fprintf(stdout, "CRASHED %s -bug %s seed=%d: %s\n%s\n", o.job.scenario, o.job.bugs[0], o.seed, o.summary, indent(o.detail))
		}
		if done%step == 0 {
			fmt.Fprintf(stderr, "progress %d/%d runs, %v\n", done, len(work), time.Since(start).Round(time.Second))
		}
	}
	below := 0
	var measured []scenarios.Measured
	for _, p := range bugs {
		verdict := "ok"
		if p.caught < p.bug.MinCaught || p.crashed > 0 {
			verdict = "BELOW"
			below++
		}
		// busy (the workers' time, this machine's) is last, after the
		// verdict, so that lines compare across machines without it.
		fmt.Fprintf(stdout, "catch-rate scenario=%s bug=%s caught=%d/%d min=%d undecided=%d first=%d checkers=%s verdict=%s busy=%v\n",
			p.scenario, p.bug.Name, p.caught, p.runs, p.bug.MinCaught, p.undecided, p.first, countList(p.checkers), verdict, p.busy.Round(100*time.Millisecond))
		measured = append(measured, scenarios.Measured{Scenario: p.scenario, Bug: p.bug.Name, Caught: p.caught, Window: p.bug.Window, First: int(p.first)})
	}
	verdict := "ok"
	if below > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "catch-rates bugs=%d below=%d verdict=%s wall=%v\n", len(bugs), below, verdict, time.Since(start).Round(time.Second))
	if c.writeRates != "" {
		if err := writeRates(c.writeRates, measured); err != nil {
			fmt.Fprintln(stderr, "simrun:", err)
			return exitFail
		}
	}
	if below > 0 {
		return exitFail
	}
	return exitOK
}

// writeRates merges measured into the catch-rate file at path: the bugs
// measured now replace their lines, the others keep theirs, and bugs no
// scenario has any more are dropped.
func writeRates(path string, measured []scenarios.Measured) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	prev, err := scenarios.ParseCatchRates(string(old))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	keep := map[string]scenarios.Measured{}
	for _, m := range prev {
		keep[m.Scenario+" "+m.Bug] = m
	}
	for _, m := range measured {
		keep[m.Scenario+" "+m.Bug] = m
	}
	var out []scenarios.Measured
	for _, s := range scenarios.All() {
		for _, b := range s.Bugs {
			if m, ok := keep[s.Name+" "+b.Name]; ok {
				out = append(out, m)
			}
		}
	}
	return os.WriteFile(path, []byte(scenarios.FormatCatchRates(out)), 0o644)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// countList formats counts as name:n,... in name order.
func countList(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s:%d", name, m[name])
	}
	return strings.Join(parts, ",")
}
