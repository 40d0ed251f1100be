package main

import (
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

// The shrinker: given a failing seed, find a smaller run that fails the
// same checker. A run is made smaller by leaving out faults and client
// operations (-skip, which keeps every other draw of the seed) and by
// running less virtual time (-duration). It is delta debugging (after
// Zeller and Hildebrandt's ddmin; see reduce) over the run's faults, then
// a search over its length, then delta debugging over its operations;
// every attempt runs in a worker process of this binary, c.jobs at a time. Attempts run in fixed batches
// and the first failing candidate in a batch's order wins, so the result
// does not depend on which worker finished first.

// shrinker holds one minimization's state.
type shrinker struct {
	c        config
	exe      string
	target   string // the checker that must keep failing
	start    time.Time
	attempts int
	crashed  int // attempts whose worker did not finish
	timedOut bool
	stderr   io.Writer
	// best is the smallest failing run so far: its job and outcome.
	best    job
	bestOut outcome
}

func shrink(c config, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "simrun: cannot find my own executable:", err)
		return exitUsage
	}
	// Workers get a long porcupine budget unless one was given: a check
	// that runs out of wall time is undecided, not a failure, and a
	// verdict that turns on the machine's load would make the shrinker's
	// result turn on it too.
	wc := c
	if wc.checkTimeout == 0 {
		wc.checkTimeout = 5 * time.Minute
	}
	s := &shrinker{c: wc, exe: exe, start: time.Now(), stderr: stderr}
	base := job{scenario: c.scenario, bugs: c.bugs, seed: c.seed, skip: c.skip, duration: c.duration, inventory: true}
	orig := s.run([]job{base})[0]
	if orig.verdict != "FAIL" {
		fmt.Fprintf(stdout, "nothing to shrink: the run's verdict is %s\n%s\n", orig.verdict, orig.summary)
		if orig.verdict == "crashed" {
			fmt.Fprintln(stdout, indent(orig.detail))
		}
		return exitUsage
	}
	s.target = targetChecker(orig)
	if judgesWholeRun(s.target) {
		fmt.Fprintf(stdout, "nothing to shrink: the run fails only %s, which judges the whole run; a run with anything left out or cut short cannot fail it\n%s\n", s.target, orig.summary)
		return exitUsage
	}
	s.best, s.bestOut = base, orig
	fmt.Fprintf(stdout, "shrinking: %s, which fails %s\n", replay(c, c.seed), s.target)
	origFaults, origOps := inventoryFaults(orig), inventoryOps(orig)
	fmt.Fprintf(stdout, "original: %s\n", s.describe(orig))

	// Faults first: they are few, and each one left out usually
	// removes much of what happens after it.
	keepFaults := s.reduce("faults", len(origFaults), func(keep []int) job {
		j := base
		j.skip = faultsKept(origFaults, keep, base.skip)
		return j
	})
	fmt.Fprintf(stdout, "faults: %d -> %d (%d attempts so far)\n", len(origFaults), len(keepFaults), s.attempts)

	// Then the length: the shortest whole number of virtual seconds that
	// still fails. Before the operations: a run cut short leaves out, in
	// one attempt, every operation after the failure.
	before := virtualOf(s.bestOut)
	s.shortest()
	fmt.Fprintf(stdout, "virtual time: %v -> %v (%d attempts so far)\n", before, virtualOf(s.bestOut), s.attempts)

	// Then operations, as the shortest failing run sent them.
	shortest := s.best
	ops := inventoryOps(s.bestOut)
	keepOps := s.reduce("operations", len(ops), func(keep []int) job {
		j := shortest
		j.skip = scenarios.Skip{Faults: shortest.skip.Faults, Aimed: shortest.skip.Aimed, Ops: opsSkipped(ops, keep, base.skip.Ops)}
		return j
	})
	fmt.Fprintf(stdout, "operations: %d -> %d (%d attempts so far)\n", len(origOps), len(keepOps), s.attempts)

	best := s.bestOut
	bestFaults := inventoryFaults(best)
	if s.timedOut {
		fmt.Fprintf(stdout, "out of time (-shrink-for %v): this is the smallest failing run found so far\n", c.shrinkFor)
	}
	if s.crashed > 0 {
		fmt.Fprintf(stdout, "warning: %d attempts crashed (a panic or a kill; the first is on stderr) and counted as not failing\n", s.crashed)
	}
	fmt.Fprintf(stdout, "minimized: %s\n", s.describe(best))
	fmt.Fprintf(stdout, "kept: %.0f%% of the faults, %.1f%% of the operations; %d attempts in %v\n",
		pct(len(bestFaults), len(origFaults)), pct(len(inventoryOps(best)), len(origOps)), s.attempts, time.Since(s.start).Round(100*time.Millisecond))
	for _, line := range best.inventory {
		if f, ok := strings.CutPrefix(line, "finding "+s.target+": "); ok {
			fmt.Fprintf(stdout, "checker %s: %s\n", s.target, f)
			break
		}
	}
	fmt.Fprintln(stdout, "faults kept:")
	for _, f := range bestFaults {
		fmt.Fprintf(stdout, "  %s\n", f.text)
	}
	if len(bestFaults) == 0 {
		fmt.Fprintln(stdout, "  none: the failure needs no injected fault")
	}
	mc := c
	mc.skip, mc.duration = s.best.skip, s.best.duration
	fmt.Fprintf(stdout, "replay: %s\n", replay(mc, c.seed))
	return exitFail
}

// targetChecker is the checker a shrunk run must keep failing: the
// original's first, passing over the ones that judge the run itself
// (work floors, a scenario error), which leaving things out could trip.
func targetChecker(o outcome) string {
	names := strings.Split(field(o.summary, "checkers"), ",")
	for _, n := range names {
		if !judgesWholeRun(n) {
			return n
		}
	}
	return names[0]
}

// judgesWholeRun reports whether a checker judges the run as a whole
// (its work floors, the scenario's own error, an undeclared finding):
// a shortened run, or one that left anything out, is undecided by it.
func judgesWholeRun(checker string) bool {
	return checker == "workload" || checker == "run" || checker == "undeclared"
}

// fails reports whether an outcome is a failure of the target checker.
func (s *shrinker) fails(o outcome) bool {
	return o.verdict == "FAIL" && slices.Contains(strings.Split(field(o.summary, "checkers"), ","), s.target)
}

// run runs jobs in worker processes and returns their outcomes in the
// jobs' order.
func (s *shrinker) run(jobs []job) []outcome {
	for i := range jobs {
		jobs[i].tag = i
	}
	out := make([]outcome, len(jobs))
	for o := range pool(s.exe, s.c, jobs) {
		out[o.job.tag] = o
	}
	s.attempts += len(jobs)
	return out
}

// first runs candidates in batches of c.jobs, in order, and returns the
// index of the first that fails the target checker (keeping it as the
// best so far), or -1; also -1 once -shrink-for has run out.
func (s *shrinker) first(cands []job) int {
	for lo := 0; lo < len(cands); lo += s.c.jobs {
		if time.Since(s.start) > s.c.shrinkFor {
			s.timedOut = true
			return -1
		}
		batch := cands[lo:min(lo+s.c.jobs, len(cands))]
		for i, o := range s.run(slices.Clone(batch)) {
			if o.verdict == "crashed" {
				// A worker that did not finish is no verdict: counted
				// as not failing, and reported.
				if s.crashed++; s.crashed == 1 {
					fmt.Fprintf(s.stderr, "shrink: an attempt crashed (-skip '%s'):\n%s\n", batch[i].skip, indent(o.detail))
				}
				continue
			}
			if s.fails(o) {
				s.best, s.bestOut = batch[i], o
				return lo + i
			}
		}
	}
	return -1
}

// reduce finds a small subset of n elements (by index) whose config
// still fails: first the empty set, then a greedy pass that tries to
// leave out chunks of half the elements, then of a quarter, and so on
// down to single elements, keeping every removal after which the run
// still fails (the "halving pass followed by single removals" form of
// delta debugging, which stays linear when most elements do not matter,
// where ddmin's complements go quadratic). c.jobs neighbouring chunks are
// tried at once; the first in order that still fails is kept.
func (s *shrinker) reduce(what string, n int, config func(keep []int) job) []int {
	keep := make([]int, n)
	for i := range keep {
		keep[i] = i
	}
	if n == 0 || s.first([]job{config(nil)}) == 0 {
		return nil
	}
	if n == 1 {
		return keep // leaving it out was just tried
	}
	for chunk := max(1, n/2); !s.timedOut; chunk /= 2 {
		fmt.Fprintf(s.stderr, "shrink %s: %d left, leaving out %d at a time (%d attempts, %v)\n", what, len(keep), chunk, s.attempts, time.Since(s.start).Round(100*time.Millisecond))
		for i := 0; i < len(keep) && !s.timedOut; {
			var cands []job
			var starts []int
			for p := i; p < len(keep) && len(cands) < s.c.jobs; p += chunk {
				cands = append(cands, config(without(keep, keep[p:min(p+chunk, len(keep))])))
				starts = append(starts, p)
			}
			k := s.first(cands)
			if k < 0 {
				i = starts[len(starts)-1] + chunk
				continue
			}
			p := starts[k]
			keep, i = without(keep, keep[p:min(p+chunk, len(keep))]), p
		}
		if chunk == 1 {
			break
		}
	}
	return keep
}

// shortest searches the whole virtual seconds below the best run's
// length for the shortest that still fails: a binary search, one length
// at a time, so that which lengths are tried never depends on -j (failing
// is not monotone in the length: a cut that moves the calm phase can
// fail another checker, or none).
func (s *shrinker) shortest() {
	lo, hi := 1, int(virtualOf(s.bestOut)/time.Second) // hi fails
	for lo < hi && !s.timedOut {
		mid := lo + (hi-lo)/2
		j := s.best
		j.duration = time.Duration(mid) * time.Second
		fmt.Fprintf(s.stderr, "shrink length: %ds..%ds, trying %ds (%d attempts, %v)\n", lo, hi, mid, s.attempts, time.Since(s.start).Round(100*time.Millisecond))
		if s.first([]job{j}) == 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
}

func (s *shrinker) describe(o outcome) string {
	return fmt.Sprintf("%d faults, %d operations, %v virtual, %s events (verdict %s: %s)",
		len(inventoryFaults(o)), len(inventoryOps(o)), virtualOf(o), field(o.summary, "events"), o.verdict, field(o.summary, "checkers"))
}

// faultLine is one "fault #N t=T what" (or "#aN", an aimed fault) line
// of an inventory.
type faultLine struct {
	id   scenarios.FaultID
	text string // "#N t=T what", as printed
}

// inventoryLines yields, for each line of o's inventory that starts with
// prefix, the rest of it.
func inventoryLines(o outcome, prefix string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, line := range o.inventory {
			if rest, ok := strings.CutPrefix(line, prefix); ok && !yield(rest) {
				return
			}
		}
	}
}

func inventoryFaults(o outcome) []faultLine {
	var out []faultLine
	for rest := range inventoryLines(o, "fault #") {
		num, text, _ := strings.Cut(rest, " ")
		digits, aimed := strings.CutPrefix(num, "a")
		if n, err := strconv.Atoi(digits); err == nil {
			out = append(out, faultLine{scenarios.FaultID{Aimed: aimed, N: n}, "#" + num + " " + text})
		}
	}
	return out
}

// opRef is one operation: its client and the client's ordinal.
type opRef struct {
	client string
	ord    int
}

// inventoryOps lists the operations a run sent, by client name, then
// ordinal.
func inventoryOps(o outcome) []opRef {
	var out []opRef
	for rest := range inventoryLines(o, "ops ") {
		client, list, _ := strings.Cut(rest, " ")
		sk, err := scenarios.ParseSkip("ops:" + client + "/" + list)
		if err != nil {
			continue
		}
		for _, r := range sk.Ops[client] {
			for k := r.Lo; k <= r.Hi; k++ {
				out = append(out, opRef{client, k})
			}
		}
	}
	return out
}

// faultsKept is the skip that keeps only the faults at keep (indexes into
// faults) and the operations skip says: every other ordinal, scheduled
// and aimed, including any the original run never reached.
func faultsKept(faults []faultLine, keep []int, skip scenarios.Skip) scenarios.Skip {
	var sched, aimed []int
	for _, k := range keep {
		if id := faults[k].id; id.Aimed {
			aimed = append(aimed, id.N)
		} else {
			sched = append(sched, id.N)
		}
	}
	return scenarios.Skip{Faults: scenarios.OrdinalsOf(sched).Complement(), Aimed: scenarios.OrdinalsOf(aimed).Complement(), Ops: skip.Ops}
}

// opsSkipped is the skip set that keeps only the operations at keep
// (indexes into ops): for every client that sent any, every other
// ordinal; a client that sent none keeps what given skipped of it.
func opsSkipped(ops []opRef, keep []int, given map[string]scenarios.Ordinals) map[string]scenarios.Ordinals {
	kept := map[string][]int{}
	for _, op := range ops {
		if _, ok := kept[op.client]; !ok {
			kept[op.client] = nil // a client with nothing kept skips all
		}
	}
	for _, k := range keep {
		kept[ops[k].client] = append(kept[ops[k].client], ops[k].ord)
	}
	out := map[string]scenarios.Ordinals{}
	for client, ords := range given { //fenceline:unordered building a map
		out[client] = ords
	}
	for client, ords := range kept { //fenceline:unordered building a map
		out[client] = scenarios.OrdinalsOf(ords).Complement()
	}
	return out
}

func virtualOf(o outcome) time.Duration {
	d, _ := time.ParseDuration(field(o.summary, "virtual"))
	return d
}

func pct(a, b int) float64 {
	if b == 0 {
		return 100
	}
	return 100 * float64(a) / float64(b)
}

// split cuts xs into n nearly equal, contiguous chunks.
func split(xs []int, n int) [][]int {
	out := make([][]int, 0, n)
	for i := 0; i < n; i++ {
		lo, hi := len(xs)*i/n, len(xs)*(i+1)/n
		if hi > lo {
			out = append(out, xs[lo:hi:hi])
		}
	}
	return out
}

// without is xs less the elements of drop (both sorted).
func without(xs, drop []int) []int {
	out := make([]int, 0, len(xs)-len(drop))
	for _, x := range xs {
		if _, found := slices.BinarySearch(drop, x); !found {
			out = append(out, x)
		}
	}
	return out
}
