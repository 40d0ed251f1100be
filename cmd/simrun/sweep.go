package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

// outcome is what one worker process reported for one seed.
type outcome struct {
	seed    uint64
	verdict string // ok, FAIL, undecided, or crashed
	trace   string
	summary string
	detail  string // the last lines of a crashed worker's output, or its UNDECIDED lines
	// slowest is the wall time of the run's slowest porcupine check.
	slowest time.Duration
	// busy is the wall time the run held its worker: what -catch-rates
	// sums per bug, so that CI's budget can be spent where it buys most.
	busy  time.Duration
	job   job
	drawn []string // the files -out had it write
	// inventory is the run's -inventory lines (fault, ops, finding).
	inventory []string
}

// work reads the summary's work=name:n,... field.
func (o outcome) work() map[string]int {
	out := map[string]int{}
	for _, kv := range strings.Split(field(o.summary, "work"), ",") {
		name, n, ok := strings.Cut(kv, ":")
		if v, err := strconv.Atoi(n); ok && err == nil {
			out[name] = v
		}
	}
	return out
}

// sweep runs a range of seeds in worker processes, one run at a time in
// each: etcd raft's election randomness comes through the process-wide
// crypto/rand.Reader, which each run replaces with its own seeded reader
// while it runs (scenarios.Execute), so two runs in one process must not
// overlap.
func sweep(c config, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "simrun: cannot find my own executable:", err)
		return exitUsage
	}
	total := int(c.seedsTo - c.seedsFrom + 1)
	runsPerSeed := 1
	if c.determinism {
		runsPerSeed = 2
	}
	fmt.Fprintf(stdout, "SEEDS=%d..%d scenario=%s%s jobs=%d runs=%d\n",
		c.seedsFrom, c.seedsTo, c.scenario, bugSuffix(c.bugs), c.jobs, total*runsPerSeed)

	var work []job
	for s := c.seedsFrom; ; s++ {
		for p := 0; p < runsPerSeed; p++ {
			work = append(work, job{scenario: c.scenario, bugs: c.bugs, seed: s})
		}
		if s == c.seedsTo {
			break
		}
	}
	// With -fail-fast, a failure stops the hand-out: every seed below a
	// failing one was handed out before it, so it still runs, and the
	// lowest failing seed is the same as a whole sweep's.
	var failedOnce atomic.Bool
	results := poolSkipping(exe, c, work, func(job) bool { return c.failFast && failedOnce.Load() })

	start := time.Now()
	bySeed := map[uint64][]outcome{}
	done, failed, undecided := 0, 0, 0
	var slowest outcome
	// least is the smallest count of each kind of work over the sweep,
	// and the seed that did it: what a scenario's floors are set against.
	least := map[string][2]int{}
	step := max(1, total*runsPerSeed/20)
	var virtual time.Duration
	for r := range results {
		done++
		v, _ := time.ParseDuration(field(r.summary, "virtual"))
		virtual += v
		bySeed[r.seed] = append(bySeed[r.seed], r)
		switch r.verdict {
		case "ok":
		case "undecided":
			undecided++
		default:
			failed++
			failedOnce.Store(true)
		}
		if r.slowest > slowest.slowest {
			slowest = r
		}
		for name, n := range r.work() { //fenceline:unordered a minimum per name
			if l, ok := least[name]; !ok || n < l[0] {
				least[name] = [2]int{n, int(r.seed)}
			}
		}
		if done%step == 0 || done == total*runsPerSeed {
			fmt.Fprintf(stderr, "progress %d/%d runs, %d failed, %d undecided, %v\n", done, total*runsPerSeed, failed, undecided, time.Since(start).Round(time.Second))
		}
	}

	seeds := make([]uint64, 0, len(bySeed))
	for s := range bySeed {
		seeds = append(seeds, s)
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	var failing, unsure, diverged []uint64
	for _, s := range seeds {
		rs := bySeed[s]
		// The seed's verdict is its worst run's: crashed or FAIL, then
		// undecided, then ok.
		worst := rs[0]
		for _, r := range rs[1:] {
			if rank(r.verdict) > rank(worst.verdict) {
				worst = r
			}
		}
		switch worst.verdict {
		case "ok":
		case "undecided":
			unsure = append(unsure, s)
			fmt.Fprintf(stdout, "UNDECIDED seed=%d: %s\n", s, worst.summary)
		default:
			failing = append(failing, s)
			fmt.Fprintf(stdout, "FAIL seed=%d: %s\n", s, worst.summary)
		}
		if worst.verdict != "ok" {
			if worst.detail != "" {
				fmt.Fprintf(stdout, "%s\n", indent(worst.detail))
			}
			fmt.Fprintf(stdout, "  replay: %s\n", replay(c, s))
			for _, f := range worst.drawn {
				fmt.Fprintf(stdout, "  drawn: %s\n", f)
			}
		}
		if c.determinism && len(rs) == 2 && rs[0].trace != rs[1].trace {
			diverged = append(diverged, s)
			fmt.Fprintf(stdout, "NONDETERMINISTIC seed=%d: trace %s then %s\n  replay: %s\n", s, rs[0].trace, rs[1].trace, replay(c, s))
		}
	}
	verdict := "ok"
	switch {
	case len(failing) > 0 || len(diverged) > 0:
		verdict = "FAIL"
	case len(unsure) > 0:
		verdict = "undecided"
	}
	slow := "none"
	if slowest.slowest > 0 {
		slow = fmt.Sprintf("%v(seed %d)", slowest.slowest.Round(time.Millisecond), slowest.seed)
	}
	fmt.Fprintf(stdout, "seeds=%d..%d scenario=%s%s runs=%d ok=%d failed=%d undecided=%d nondeterministic=%d slowest-check=%s verdict=%s wall=%v\n",
		c.seedsFrom, c.seedsTo, c.scenario, bugSuffix(c.bugs), done, len(seeds)-len(failing)-len(unsure), len(failing), len(unsure), len(diverged),
		slow, verdict, time.Since(start).Round(time.Millisecond))
	if len(failing) > 0 {
		fmt.Fprintf(stdout, "failing seeds: %s\n", joinSeeds(failing))
	}
	if done < total*runsPerSeed {
		fmt.Fprintf(stdout, "fail-fast: %d of %d runs started; the seeds above the last were not run\n", done, total*runsPerSeed)
	}
	if len(unsure) > 0 {
		fmt.Fprintf(stdout, "undecided seeds: %s\n", joinSeeds(unsure))
	}
	if len(least) > 0 {
		names := make([]string, 0, len(least))
		for name := range least {
			names = append(names, name)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s=%d(seed %d)", name, least[name][0], least[name][1])
		}
		fmt.Fprintf(stdout, "least work: %s\n", strings.Join(parts, " "))
	}
	el := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "throughput: %.1f seeds/s, %.0fx real time (%d workers)\n", float64(done)/el, virtual.Seconds()/el, c.jobs)
	return exitCode(verdict)
}

// rank orders verdicts from best to worst.
func rank(verdict string) int {
	switch verdict {
	case "ok":
		return 0
	case "undecided":
		return 1
	}
	return 2
}

// job is one run for a worker process.
type job struct {
	scenario string
	bugs     []string
	seed     uint64
	// For the shrinker: what to leave out, a length (0: the config's),
	// and whether to list the run's inventory.
	skip      scenarios.Skip
	duration  time.Duration
	inventory bool
	tag       int // the shrinker's index of the job in its batch
}

// pool runs each job of work (a seed may appear more than once) in
// worker processes (worker.go), c.jobs at a time, and streams the
// outcomes in the order they finish.
func pool(exe string, c config, work []job) <-chan outcome { return poolSkipping(exe, c, work, nil) }

// poolSkipping is pool that drops, when its turn comes, every job skip
// says is no longer needed (skip may be nil).
func poolSkipping(exe string, c config, work []job, skip func(job) bool) <-chan outcome {
	i := 0
	return poolFrom(exe, c, func() (job, bool) {
		for ; i < len(work); i++ {
			if skip == nil || !skip(work[i]) {
				i++
				return work[i-1], true
			}
		}
		return job{}, false
	})
}

// poolFrom runs the jobs next hands out, until it has no more, in worker
// processes, c.jobs at a time, and streams the outcomes as they finish.
// next is called from one goroutine, each time a worker is free.
func poolFrom(exe string, c config, next func() (job, bool)) <-chan outcome {
	jobs := make(chan job)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for w := 0; w < c.jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var w *worker // started at the first job, again after a crash
			defer func() { w.stop() }()
			for j := range jobs {
				var o outcome
				began := time.Now()
				w, o = runJob(w, exe, c, j)
				o.job = j
				o.busy = time.Since(began)
				results <- o
			}
		}()
	}
	go func() {
		for j, ok := next(); ok; j, ok = next() {
			jobs <- j
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()
	return results
}

// jobArgs are the simrun arguments that run j alone.
func jobArgs(c config, j job) []string {
	args := []string{"-quiet", "-seed", fmt.Sprint(j.seed), "-scenario", j.scenario}
	if len(j.bugs) > 0 {
		args = append(args, "-bug", strings.Join(j.bugs, ","))
	}
	if d := cmp.Or(j.duration, c.duration); d != 0 {
		args = append(args, "-duration", d.String())
	}
	if c.checkTimeout != 0 {
		args = append(args, "-check-timeout", c.checkTimeout.String())
	}
	if !j.skip.Empty() {
		args = append(args, "-skip", j.skip.String())
	}
	if j.inventory {
		args = append(args, "-inventory")
	}
	if c.noSwarm {
		args = append(args, "-no-swarm")
	}
	if c.out != "" {
		args = append(args, "-out", filepath.Join(c.out, fmt.Sprintf("%s-%d", j.scenario, j.seed)))
	}
	return args
}

// runJob runs j in worker w (starting one if w is nil) and reads its
// outcome. A worker that dies mid-job (a panic outside a node, a kill)
// makes the job crashed and is not used again: the next job starts a
// fresh one, so one bad seed costs one process, as it always did.
func runJob(w *worker, exe string, c config, j job) (*worker, outcome) {
	var err error
	if w == nil {
		if w, err = startWorker(exe); err != nil {
			return nil, readOutcome(j, nil, 0, err)
		}
	}
	out, code, err := w.do(jobArgs(c, j))
	if err != nil {
		w.stop()
		w = nil
	}
	return w, readOutcome(j, out, code, err)
}

// readOutcome reads a run's output and exit code (err: it did not finish).
func readOutcome(j job, out []byte, code int, err error) outcome {
	o := outcome{seed: j.seed}
	var last string
	var unsure []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "seed="):
			last = line
		case strings.HasPrefix(line, "UNDECIDED "):
			unsure = append(unsure, line)
		case strings.HasPrefix(line, "drawn: "):
			o.drawn = append(o.drawn, strings.TrimPrefix(line, "drawn: "))
		case j.inventory && (strings.HasPrefix(line, "fault #") || strings.HasPrefix(line, "ops ") || strings.HasPrefix(line, "finding ")):
			o.inventory = append(o.inventory, line)
		}
	}
	o.summary = last
	o.trace = field(last, "trace")
	o.verdict = field(last, "verdict")
	o.slowest, _ = time.ParseDuration(field(last, "slowest-check"))
	switch {
	case err == nil && code == exitOK && o.verdict == "ok":
	case err == nil && code == exitUndecided && o.verdict == "undecided":
		o.detail = strings.Join(unsure, "\n")
	case err == nil && code == exitFail && o.verdict == "FAIL":
	default:
		// A panic, a usage error, a kill: the run did not finish.
		o.verdict = "crashed"
		o.detail = tail(string(out), 20)
		if o.summary == "" {
			o.summary = fmt.Sprintf("worker exited: exit status %d %v", code, err)
		}
	}
	return o
}

func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return "  | " + strings.ReplaceAll(s, "\n", "\n  | ") }

func joinSeeds(seeds []uint64) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, " ")
}
