package main

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/scenarios"
)

// This file: -shard and -random, for fuzzing on many machines at once.

// shardRange is the i-th (1-based) of n contiguous, disjoint slices of
// [from, to], which together cover it; ok is false if the slice is empty.
func shardRange(from, to uint64, i, n int) (lo, hi uint64, ok bool) {
	count := to - from + 1
	start := from + count*uint64(i-1)/uint64(n)
	end := from + count*uint64(i)/uint64(n) // exclusive
	if end <= start {
		return 0, 0, false
	}
	return start, end - 1, true
}

// parseShard reads i/n.
func parseShard(s string) (i, n int, err error) {
	if _, err := fmt.Sscanf(s, "%d/%d", &i, &n); err != nil || fmt.Sprintf("%d/%d", i, n) != s || n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("-shard %q: want i/n with 1 <= i <= n, e.g. 2/4", s)
	}
	return i, n, nil
}

// mix is a bijection of the 64-bit integers (splitmix64's finalizer): the
// random stream's k-th seed is mix(base + k), so distinct positions give
// distinct seeds, and shard i of n takes the positions ≡ i-1 (mod n).
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// randomSeed is the seed at position k of shard i/n of the stream from base.
func randomSeed(base uint64, k uint64, i, n int) uint64 {
	return mix(base + k*uint64(n) + uint64(i-1))
}

// drawBase is a fresh stream base from the OS (printed, so the stream
// can be run again or split across machines with -random-base).
func drawBase() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// perScenario is what the random run did with one scenario.
type perScenario struct {
	runs, failed, undecided int
	wall                    time.Duration // summed over its runs
	virtual                 time.Duration
}

// randomRun runs random seeds over every scenario (or -scenario's) until
// -for has passed: each next seed goes to the scenario that has had the
// least wall time so far, so fast scenarios run more seeds and every
// scenario gets a share of the time. It prints progress, then every
// failure with its replay command; exit 1 if any failed.
func randomRun(c config, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "simrun: cannot find my own executable:", err)
		return exitUsage
	}
	names := []string{c.scenario}
	if !c.scenarioSet {
		names = nil
		for _, s := range scenarios.All() {
			names = append(names, s.Name)
		}
	}
	base := c.randomBase
	if !c.randomBaseSet {
		base = drawBase()
	}
	fmt.Fprintf(stdout, "RANDOM base=%d shard=%d/%d for=%v jobs=%d scenarios=%s\n", base, c.shardI, c.shardN, c.runFor, c.jobs, strings.Join(names, ","))

	var mu sync.Mutex
	stats := map[string]*perScenario{}
	for _, n := range names {
		stats[n] = &perScenario{}
	}
	// inFlight counts each scenario's running seeds, as if each had
	// taken the scenario's mean so far, so the producer does not pile
	// every worker onto the one scenario that has not reported yet.
	inFlight := map[string]int{}
	pick := func() string {
		best, bestCost := "", time.Duration(-1)
		for _, n := range names {
			st := stats[n]
			mean := time.Second
			if st.runs > 0 {
				mean = st.wall / time.Duration(st.runs)
			}
			if cost := st.wall + mean*time.Duration(inFlight[n]); bestCost < 0 || cost < bestCost {
				best, bestCost = n, cost
			}
		}
		return best
	}
	start := time.Now()
	deadline := start.Add(c.runFor)
	k := uint64(0)
	results := poolFrom(exe, c, func() (job, bool) {
		if !time.Now().Before(deadline) {
			return job{}, false
		}
		mu.Lock()
		name := pick()
		inFlight[name]++
		mu.Unlock()
		k++
		return job{scenario: name, seed: randomSeed(base, k-1, c.shardI, c.shardN)}, true
	})

	var bad []outcome
	runs := 0
	var virtual time.Duration
	lastReport := start
	for r := range results {
		mu.Lock()
		st := stats[r.job.scenario]
		inFlight[r.job.scenario]--
		st.runs++
		wall, _ := time.ParseDuration(field(r.summary, "wall"))
		virt, _ := time.ParseDuration(field(r.summary, "virtual"))
		st.wall += wall
		st.virtual += virt
		switch r.verdict {
		case "ok":
		case "undecided":
			st.undecided++
			bad = append(bad, r)
		default:
			st.failed++
			bad = append(bad, r)
		}
		mu.Unlock()
		runs++
		virtual += virt
		if time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(stderr, "progress %d runs, %.1f seeds/s, %.0fx real time, %d failed or undecided, %v left\n",
				runs, float64(runs)/el, virtual.Seconds()/el, len(bad), time.Until(deadline).Round(time.Second))
		}
	}
	sort.Slice(bad, func(i, j int) bool {
		return bad[i].job.scenario < bad[j].job.scenario || (bad[i].job.scenario == bad[j].job.scenario && bad[i].seed < bad[j].seed)
	})
	failed := 0
	for _, r := range bad {
		word := "FAIL"
		if r.verdict == "undecided" {
			word = "UNDECIDED"
		} else {
			failed++
		}
		fmt.Fprintf(stdout, "%s scenario=%s seed=%d: %s\n", word, r.job.scenario, r.seed, r.summary)
		if r.detail != "" {
			fmt.Fprintf(stdout, "%s\n", indent(r.detail))
		}
		fmt.Fprintf(stdout, "  replay: go run ./cmd/simrun -scenario %s -seed %d\n", r.job.scenario, r.seed)
	}
	for _, n := range names {
		st := stats[n]
		if st.runs == 0 {
			continue
		}
		// Per worker: seeds per second of one process's time.
		fmt.Fprintf(stdout, "scenario=%s runs=%d failed=%d undecided=%d seeds/s=%.2f virtual/wall=%.0fx\n",
			n, st.runs, st.failed, st.undecided, float64(st.runs)/max(st.wall.Seconds(), 1e-9),
			st.virtual.Seconds()/max(st.wall.Seconds(), 1e-9))
	}
	el := time.Since(start).Seconds()
	verdict := "ok"
	switch {
	case failed > 0:
		verdict = "FAIL"
	case len(bad) > 0:
		verdict = "undecided"
	}
	fmt.Fprintf(stdout, "random base=%d shard=%d/%d runs=%d failed=%d undecided=%d verdict=%s wall=%v seeds/s=%.1f virtual/wall=%.0fx\n",
		base, c.shardI, c.shardN, runs, failed, len(bad)-failed, verdict, time.Since(start).Round(time.Second), float64(runs)/el, virtual.Seconds()/el)
	return exitCode(verdict)
}
