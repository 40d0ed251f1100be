package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// outcome is what one worker process reported for one seed.
type outcome struct {
	seed    uint64
	verdict string // ok, FAIL, or crashed
	trace   string
	summary string
	detail  string // the last lines of a crashed worker's output
}

// sweep runs a range of seeds, each in its own process: etcd raft's
// election randomness comes through the process-wide crypto/rand.Reader,
// so two seeds in one process would share it.
func sweep(c config, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "simrun: cannot find my own executable:", err)
		return 2
	}
	total := int(c.seedsTo - c.seedsFrom + 1)
	runsPerSeed := 1
	if c.determinism {
		runsPerSeed = 2
	}
	fmt.Fprintf(stdout, "SEEDS=%d..%d scenario=%s%s jobs=%d runs=%d\n",
		c.seedsFrom, c.seedsTo, c.scenario, bugSuffix(c.bugs), c.jobs, total*runsPerSeed)

	type job struct {
		seed uint64
		pass int
	}
	jobs := make(chan job)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for w := 0; w < c.jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results <- runWorker(exe, c, j.seed)
			}
		}()
	}
	go func() {
		for s := c.seedsFrom; ; s++ {
			for p := 0; p < runsPerSeed; p++ {
				jobs <- job{s, p}
			}
			if s == c.seedsTo {
				break
			}
		}
		close(jobs)
		wg.Wait()
		close(results)
	}()

	start := time.Now()
	bySeed := map[uint64][]outcome{}
	done, failed := 0, 0
	step := max(1, total*runsPerSeed/20)
	for r := range results {
		done++
		bySeed[r.seed] = append(bySeed[r.seed], r)
		if r.verdict != "ok" {
			failed++
		}
		if done%step == 0 || done == total*runsPerSeed {
			fmt.Fprintf(stderr, "progress %d/%d runs, %d failed, %v\n", done, total*runsPerSeed, failed, time.Since(start).Round(time.Second))
		}
	}

	seeds := make([]uint64, 0, len(bySeed))
	for s := range bySeed {
		seeds = append(seeds, s)
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	var failing, diverged []uint64
	for _, s := range seeds {
		rs := bySeed[s]
		bad := false
		for _, r := range rs {
			if r.verdict != "ok" {
				bad = true
			}
		}
		if bad {
			failing = append(failing, s)
			r := rs[0]
			fmt.Fprintf(stdout, "FAIL seed=%d: %s\n", s, r.summary)
			if r.detail != "" {
				fmt.Fprintf(stdout, "%s\n", indent(r.detail))
			}
			fmt.Fprintf(stdout, "  replay: %s\n", replay(c, s))
		}
		if c.determinism && len(rs) == 2 && rs[0].trace != rs[1].trace {
			diverged = append(diverged, s)
			fmt.Fprintf(stdout, "NONDETERMINISTIC seed=%d: trace %s then %s\n  replay: %s\n", s, rs[0].trace, rs[1].trace, replay(c, s))
		}
	}
	verdict := "ok"
	if len(failing) > 0 || len(diverged) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "seeds=%d..%d scenario=%s%s runs=%d failed=%d nondeterministic=%d verdict=%s wall=%v\n",
		c.seedsFrom, c.seedsTo, c.scenario, bugSuffix(c.bugs), done, len(failing), len(diverged), verdict, time.Since(start).Round(time.Millisecond))
	if len(failing) > 0 {
		fmt.Fprintf(stdout, "failing seeds: %s\n", joinSeeds(failing))
	}
	if verdict != "ok" {
		return 1
	}
	return 0
}

// runWorker runs one seed in a child process and reads its summary line.
func runWorker(exe string, c config, seed uint64) outcome {
	args := []string{"-quiet", "-seed", fmt.Sprint(seed), "-scenario", c.scenario}
	if len(c.bugs) > 0 {
		args = append(args, "-bug", strings.Join(c.bugs, ","))
	}
	if c.duration != 0 {
		args = append(args, "-duration", c.duration.String())
	}
	cmd := exec.Command(exe, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	o := outcome{seed: seed}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "seed=") {
			last = sc.Text()
		}
	}
	o.summary = last
	o.trace = field(last, "trace")
	o.verdict = field(last, "verdict")
	var exit *exec.ExitError
	switch {
	case err == nil && o.verdict == "ok":
	case errors.As(err, &exit) && exit.ExitCode() == 1 && o.verdict == "FAIL":
	default:
		// A panic, a usage error, a kill: the run did not finish.
		o.verdict = "crashed"
		o.detail = tail(out.String(), 20)
		if o.summary == "" {
			o.summary = fmt.Sprintf("worker exited: %v", err)
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
