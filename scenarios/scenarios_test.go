package scenarios

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests install the simulator's crypto/rand reader for each run, so
// none of them may call t.Parallel.

// TestEveryScenarioPassesItsFirstSeeds runs seeds 1..3 of every scenario
// in this process: what a change breaks at once shows here. CI then
// judges seeds 1..10 of each twice, in worker processes, and sweeps on to
// 20 or 30 (.ci/run).
func TestEveryScenarioPassesItsFirstSeeds(t *testing.T) {
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				res, err := Execute(s.Name, Options{Seed: seed})
				require.NoError(t, err)
				require.True(t, res.OK(), "seed %d: %v\nreplay: go run ./cmd/simrun -scenario %s -seed %d", seed, res.Findings, s.Name, seed)
				require.Positive(t, res.Events)
				require.Equal(t, s.Duration, res.Virtual)
			}
		})
	}
}

func TestSameSeedSameTrace(t *testing.T) {
	for _, s := range All() {
		a, err := Execute(s.Name, Options{Seed: 42})
		require.NoError(t, err)
		b, err := Execute(s.Name, Options{Seed: 42})
		require.NoError(t, err)
		c, err := Execute(s.Name, Options{Seed: 43})
		require.NoError(t, err)
		require.Equal(t, a.Trace, b.Trace, "%s: seed 42 replayed differently", s.Name)
		require.Equal(t, a.Events, b.Events)
		require.NotEqual(t, a.Trace, c.Trace, "%s: seeds 42 and 43 gave one trace", s.Name)
	}
}

// TestPlantedBugsAreCaught holds every planted bug to its pin: with the
// bug switched on, at least MinCaught of seeds 1..Window fail (an
// undecided run is no catch). The full windows take minutes, so by
// default the test stops at the first catch, and tries first the seed
// that caught it when catchrates.txt was written: one run per bug, and a
// scan of the window only for a bug whose recorded seed no longer fails.
// FENCELINE_CATCH_RATES=1 runs the windows whole. CI measures every
// window in worker processes with `simrun -catch-rates`, which is the
// same check, two at a time.
func TestPlantedBugsAreCaught(t *testing.T) {
	full := os.Getenv("FENCELINE_CATCH_RATES") == "1"
	for _, s := range All() {
		for _, b := range s.Bugs {
			t.Run(s.Name+"/"+b.Name, func(t *testing.T) {
				run := func(seed uint64) Result {
					res, err := Execute(s.Name, Options{Seed: seed, Bugs: []string{b.Name}})
					require.NoError(t, err)
					return res
				}
				if m, ok := LastMeasured(s.Name, b.Name); ok && m.First > 0 && !full {
					if res := run(uint64(m.First)); res.Failed() {
						t.Logf("caught at seed %d (its recorded first) by %s", m.First, strings.Join(res.Checkers(), ","))
						return
					}
					t.Logf("seed %d, recorded as its first catch, no longer fails; scanning the window", m.First)
				}
				caught := 0
				for seed := uint64(1); seed <= uint64(b.Window); seed++ {
					if res := run(seed); res.Failed() {
						caught++
						if !full {
							t.Logf("caught at seed %d by %s", seed, strings.Join(res.Checkers(), ","))
							return
						}
					}
				}
				require.GreaterOrEqual(t, caught, b.MinCaught, "planted bug %s caught in %d of seeds 1..%d of %s; its pin is %d", b.Name, caught, b.Window, s.Name, b.MinCaught)
			})
		}
	}
}

// onceFailed are seeds beyond CI's sweeps that failed on main, each with
// what was wrong: they pass for good.
var onceFailed = []struct {
	scenario string
	seed     uint64
	why      string
}{
	{"imposter-scenarios", 26, "a leader's disk stalled as it applied a join: it sent the newcomer a snapshot that did not name it, again and again (stale-snapshot)"},
	{"imposter-scenarios", 1302, "a leader whose disk stalled served by the membership before its own removal, which it knew committed (d17; stale-membership)"},
	{"imposter-scenarios", 2075, "a removal asked before calm committed after it: the removed node was held to serving"},
	{"imposter-scenarios", 2091, "an adoption's ask refused by a previous owner stopped in order was not counted a lost handover"},
	{"durability-restart", 207, "replica-disk held a successor to the mode a repair recorded"},
	{"shrink-to-one", 16, "a removed node's adoption answers met its adopter's stalled disk, were refused, and the node was stopped: an acknowledged delete lost (refused-answer)"},
	{"shrink-to-one", 424, "the last voter's asks waited out a second quiet span, past the run's end"},
	{"shrink-to-one", 596, "a removal held back by the removed node's stalled disk: served-after-removal made no allowance for it"},
}

func TestSeedsThatOnceFailedPass(t *testing.T) {
	for _, c := range onceFailed {
		res, err := Execute(c.scenario, Options{Seed: c.seed})
		require.NoError(t, err)
		require.True(t, res.OK(), "%s seed %d (%s): %v", c.scenario, c.seed, c.why, res.Findings)
	}
}

// TestClientsOffFailsTheWorkload: a scenario whose clients do nothing
// must not pass. Every scenario's floors catch it.
func TestClientsOffFailsTheWorkload(t *testing.T) {
	for _, s := range All() {
		res, err := Execute(s.Name, Options{Seed: 1, ClientsOff: true})
		require.NoError(t, err)
		require.True(t, res.Failed(), "%s passed with its clients off", s.Name)
		require.Contains(t, res.Checkers(), "workload", "%s with its clients off: %v", s.Name, res.Findings)
	}
}

func TestCatchRatesFileParses(t *testing.T) {
	ms, err := ParseCatchRates(catchRatesFile)
	require.NoError(t, err)
	for _, m := range ms {
		s, err := Lookup(m.Scenario)
		require.NoError(t, err, "catchrates.txt names a scenario that does not exist")
		require.True(t, s.hasBug(m.Bug), "catchrates.txt names bug %s, which %s does not have", m.Bug, m.Scenario)
	}
	round, err := ParseCatchRates(FormatCatchRates(ms))
	require.NoError(t, err)
	require.ElementsMatch(t, ms, round)
	_, err = ParseCatchRates("flow-ops no-fence 5\n")
	require.ErrorContains(t, err, "line 1")
	for _, bad := range []string{
		"flow-ops no-fence 9 5 1", // caught more than the window
		"flow-ops no-fence 3 5 0", // caught, with no first seed
		"flow-ops no-fence 0 5 2", // a first seed, never caught
		"flow-ops no-fence 3 5 6", // first seed past the window
	} {
		_, err = ParseCatchRates(bad + "\n")
		require.ErrorContains(t, err, "bad counts", bad)
	}
}

func TestUsageErrors(t *testing.T) {
	_, err := Execute("nonsense", Options{Seed: 1})
	require.ErrorIs(t, err, ErrUnknownScenario)
	require.Contains(t, err.Error(), "kernel-selftest", "the error lists the valid names")
	_, err = Execute("kernel-selftest", Options{Seed: 1, Bugs: []string{"no-such-bug"}})
	require.ErrorIs(t, err, ErrUnknownBug)
	require.Contains(t, err.Error(), "selftest-ack-before-sync")
}

func TestSummaryLine(t *testing.T) {
	res, err := Execute("kernel-selftest", Options{Seed: 7})
	require.NoError(t, err)
	line := res.Summary()
	for _, key := range []string{"seed=7 ", "scenario=kernel-selftest ", "verdict=ok ", "trace=", "events=", "virtual=30s", "wall="} {
		require.Contains(t, line, key)
	}
	require.Contains(t, line, fmt.Sprintf("trace=%016x", res.Trace))
}

func TestExactlyOneScenarioIsTheDefault(t *testing.T) {
	var marked []string
	for _, s := range All() {
		if s.Default {
			marked = append(marked, s.Name)
		}
	}
	require.Equal(t, []string{"flow-ops"}, marked)
	require.Equal(t, "flow-ops", Default())
}

func TestSelftestRecordCodec(t *testing.T) {
	r := toyRecord{ID: "w0001", Value: "v1", WallMs: -5}
	b := encodeToy(r)
	got, n, err := decodeToy(b, false)
	require.NoError(t, err)
	require.Equal(t, r, got)
	require.Equal(t, len(b), n)
	for cut := 0; cut < len(b); cut++ {
		_, _, err := decodeToy(b[:cut], false)
		require.Error(t, err, "a record cut at %d bytes must not decode", cut)
	}
	b[len(b)-1] ^= 1
	_, _, err = decodeToy(b, false)
	require.Error(t, err, "a flipped bit must not decode")
}

// TestShortRunsAreUndecided: -duration shortens a run; checkers must then
// judge only what had time to happen (no liveness failure because the
// run ended before the calm phase did), and the run, which could not be
// judged whole, is undecided, never ok.
func TestShortRunsAreUndecided(t *testing.T) {
	for _, s := range All() {
		for _, d := range []time.Duration{time.Second, 3 * time.Second} {
			for seed := uint64(1); seed <= 3; seed++ {
				res, err := Execute(s.Name, Options{Seed: seed, Duration: d})
				require.NoError(t, err)
				require.False(t, res.Failed(), "%s seed %d duration %v: %v", s.Name, seed, d, res.Findings)
				require.Equal(t, VerdictUndecided, res.Verdict(), "%s seed %d duration %v", s.Name, seed, d)
				require.Contains(t, res.UndecidedCheckers(), "run")
			}
		}
	}
}

// TestCheckOutOfTimeIsUndecided: a porcupine search that runs out of its
// time decides nothing, and the run says so instead of passing.
func TestCheckOutOfTimeIsUndecided(t *testing.T) {
	res, err := Execute("flow-ops", Options{Seed: 1, CheckTimeout: time.Nanosecond})
	require.NoError(t, err)
	require.False(t, res.OK())
	require.Equal(t, VerdictUndecided, res.Verdict())
	require.Contains(t, res.UndecidedCheckers(), "flow-linearizability")
	require.Contains(t, res.Summary(), "verdict=undecided")
	require.Contains(t, res.Summary(), "undecided-checkers=flow-linearizability")

	full, err := Execute("flow-ops", Options{Seed: 1})
	require.NoError(t, err)
	require.Equal(t, full.Trace, res.Trace, "a check's timeout must not reach the trace")
}
