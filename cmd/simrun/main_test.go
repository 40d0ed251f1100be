package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/scenarios"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestOneSeedPrintsKnobsThenSummary(t *testing.T) {
	code, out, _ := runCLI("-seed", "7")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.True(t, strings.HasPrefix(lines[0], "SEED=7 "))
	require.True(t, strings.HasPrefix(lines[1], "knob "), "knobs come before the run")
	last := lines[len(lines)-1]
	require.Contains(t, last, "seed=7 scenario="+scenarios.Default()+" verdict=ok trace=", "the default is the richest scenario")

	_, again, _ := runCLI("-seed", "7")
	require.Equal(t, field(last, "trace"), field(lastLine(again), "trace"))
	_, other, _ := runCLI("-seed", "8")
	require.NotEqual(t, field(last, "trace"), field(lastLine(other), "trace"))
}

// buildSimrun builds the binary for a test that runs worker processes
// (skipped under -short, saying why).
func buildSimrun(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	bin := filepath.Join(t.TempDir(), "simrun")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-to-pin"}, "-to-pin stops -catch-rates early"},
		{[]string{"-fail-fast"}, "-fail-fast stops a sweep of -seeds early"},
		{[]string{"-fail-fast", "-seeds", "1..3", "-check-determinism"}, "-fail-fast stops a sweep of -seeds early"},
		{[]string{"-catch-rates", "-to-pin", "-write", "x.txt"}, "-to-pin stops -catch-rates early"},
		{[]string{"-shard", "2/4"}, "-shard slices -seeds or -random"},
		{[]string{"-seeds", "1..10", "-shard", "0/4"}, "want i/n with 1 <= i <= n"},
		{[]string{"-seeds", "1..10", "-shard", "5/4"}, "want i/n with 1 <= i <= n"},
		{[]string{"-seeds", "1..2", "-shard", "1/3"}, "is empty: fewer seeds than shards"},
		{[]string{"-random"}, "-random needs -for"},
		{[]string{"-for", "1m"}, "-for and -random-base go with -random"},
		{[]string{"-random", "-for", "1m", "-seeds", "1..3"}, "-random runs its own seeds"},
		{[]string{"-random", "-for", "1m", "-random-base", "x"}, "-random-base \"x\": want an unsigned integer"},
		{[]string{"-scenario", "nonsense"}, "valid scenarios: bridge-saturation, durability-restart, election-crash, fleet-grow, fleet-resize, fleet-routing, flow-ops, imposter-scenarios, injected-counter, isolated-owner, journal-crash, kernel-selftest"},
		{[]string{"-seed", "x"}, `-seed "x": want an unsigned integer`},
		{[]string{"-seeds", "5..1"}, "B is less than A"},
		{[]string{"-seeds", "1-5"}, "want A..B"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-bug", "nope"}, `unknown bug "nope"`},
		{[]string{"-scenario", "raft-partitions", "-bug", "selftest-no-gossip"}, `unknown bug "selftest-no-gossip" for scenario raft-partitions`},
		{[]string{"-j", "0"}, "-j 0"},
		{[]string{"-seeds", "1..2", "-v"}, "-v traces one seed"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-skip", "faults:0"}, "-skip: skip faults"},
		{[]string{"-skip", "bogus:1"}, "want faults:LIST, aimed:LIST or ops:CLIENT/LIST"},
		{[]string{"-skip", "@/nonexistent/skip.txt"}, "-skip @/nonexistent/skip.txt"},
		{[]string{"-seeds", "1..3", "-shrink"}, "-skip, -inventory and -shrink go with one -seed"},
		{[]string{"-shrink", "-v"}, "-shrink prints the minimized run's replay command"},
		{[]string{"-shrink", "-shrink-for", "0s"}, "-shrink-for 0s: must be positive"},
	} {
		code, _, stderr := runCLI(tc.args...)
		require.Equal(t, 2, code, "%v", tc.args)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

func TestPlantedBugExits1WithReplay(t *testing.T) {
	code, out, _ := runCLI("-scenario", "kernel-selftest", "-seed", "1", "-bug", "selftest-no-gossip")
	require.Equal(t, 1, code)
	require.Contains(t, out, "replay: go run ./cmd/simrun -scenario kernel-selftest -seed 1 -bug selftest-no-gossip")
	require.Contains(t, lastLine(out), "verdict=FAIL")
	require.Contains(t, lastLine(out), "checkers=convergence")
}

func TestUndecidedExits3(t *testing.T) {
	code, out, _ := runCLI("-scenario", "flow-ops", "-seed", "1", "-check-timeout", "1ns", "-quiet")
	require.Equal(t, exitUndecided, code, out)
	require.Contains(t, out, "UNDECIDED flow-linearizability: flow ", "printed even under -quiet")
	require.Contains(t, lastLine(out), "verdict=undecided")
}

func TestList(t *testing.T) {
	code, out, _ := runCLI("-list")
	require.Equal(t, 0, code)
	require.Contains(t, out, scenarios.Default()+" (default)")
	require.Contains(t, out, "bug selftest-ack-before-sync")
	require.Contains(t, out, "bug value-guard")
}

func TestVerboseTracesEvents(t *testing.T) {
	code, out, _ := runCLI("-seed", "3", "-v", "-duration", "2s")
	require.Equal(t, exitUndecided, code, "a shortened run is not judged whole")
	require.Contains(t, out, "n1 start")
}

// TestSweepInWorkerProcesses builds the binary and runs a small sweep and a
// determinism check through real worker processes.
func TestSweepInWorkerProcesses(t *testing.T) {
	bin := buildSimrun(t, "builds the binary")

	cmd := exec.Command(bin, "-check-determinism", "-seeds", "1..4", "-j", "2")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "runs=8 ok=4 failed=0 undecided=0 nondeterministic=0")
	require.Contains(t, string(out), "verdict=ok")
	require.Contains(t, string(out), "progress 8/8")

	cmd = exec.Command(bin, "-scenario", "kernel-selftest", "-bug", "selftest-no-gossip", "-seeds", "1..3", "-j", "2")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, 1, cmd.ProcessState.ExitCode())
	require.Contains(t, string(out), "failing seeds: 1 2 3")
	require.Contains(t, string(out), "replay: go run ./cmd/simrun -scenario kernel-selftest -seed 2 -bug selftest-no-gossip")

	// -fail-fast: the seeds handed out before the first failure finish
	// (so seed 1 is still named), and the rest are never started: at
	// most one per worker and the one the hand-out holds beyond it.
	cmd = exec.Command(bin, "-scenario", "kernel-selftest", "-bug", "selftest-no-gossip", "-seeds", "1..40", "-j", "2", "-fail-fast")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, 1, cmd.ProcessState.ExitCode())
	require.Regexp(t, `failing seeds: 1( [2-4])*\n`, string(out))
	require.Regexp(t, `fail-fast: [1-4] of 40 runs started`, string(out))

	// An undecided seed is counted as such, printed, and exits 3.
	cmd = exec.Command(bin, "-scenario", "flow-ops", "-seeds", "1..2", "-j", "2", "-check-timeout", "1ns")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, exitUndecided, cmd.ProcessState.ExitCode(), string(out))
	require.Contains(t, string(out), "ok=0 failed=0 undecided=2")
	require.Contains(t, string(out), "UNDECIDED flow-linearizability")
	require.Contains(t, string(out), "undecided seeds: 1 2")

	// A shard of a range runs its slice; the last line is the throughput.
	cmd = exec.Command(bin, "-scenario", "kernel-selftest", "-seeds", "1..10", "-shard", "2/3", "-j", "2")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "seeds=4..6 scenario=kernel-selftest runs=3 ok=3")
	require.Regexp(t, `throughput: [0-9.]+ seeds/s, [0-9]+x real time \(2 workers\)\n$`, string(out))

	// Random seeds for a while, on one scenario: every run reported, and
	// the stream's base printed so it can be run again.
	cmd = exec.Command(bin, "-random", "-for", "2s", "-scenario", "kernel-selftest", "-random-base", "7", "-shard", "1/2", "-j", "2")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "RANDOM base=7 shard=1/2 for=2s jobs=2 scenarios=kernel-selftest")
	require.Regexp(t, `random base=7 shard=1/2 runs=[1-9][0-9]* failed=0 undecided=0 verdict=ok`, lastLine(string(out)))
}

// Shards of a range are disjoint and cover it, whatever the sizes.
func TestShardsCoverTheRange(t *testing.T) {
	for _, tc := range []struct {
		from, to uint64
		n        int
	}{{1, 1000, 4}, {1, 10, 3}, {5, 5, 1}, {0, 99, 7}, {1, 6, 6}} {
		seen := map[uint64]int{}
		for i := 1; i <= tc.n; i++ {
			lo, hi, ok := shardRange(tc.from, tc.to, i, tc.n)
			require.True(t, ok)
			for s := lo; s <= hi; s++ {
				seen[s]++
			}
		}
		require.Len(t, seen, int(tc.to-tc.from+1), "%+v covers the range", tc)
		for s, k := range seen {
			require.Equal(t, 1, k, "%+v: seed %d in one shard", tc, s)
			require.True(t, s >= tc.from && s <= tc.to)
		}
	}
	_, _, ok := shardRange(1, 2, 1, 3)
	require.False(t, ok, "more shards than seeds: some are empty")
}

// The random stream's shards never share a seed, and a shard's stream is
// the same every time for one base.
func TestRandomShardsAreDisjoint(t *testing.T) {
	seen := map[uint64]int{}
	for i := 1; i <= 4; i++ {
		for k := uint64(0); k < 5000; k++ {
			seen[randomSeed(99, k, i, 4)]++
		}
	}
	require.Len(t, seen, 4*5000)
	require.Equal(t, randomSeed(99, 17, 3, 4), randomSeed(99, 17, 3, 4))
	require.NotEqual(t, randomSeed(99, 17, 3, 4), randomSeed(100, 17, 3, 4))
}

// A failing run draws its failure: porcupine's picture of the offending
// flow, a timeline around the violation that marks it, and the replay
// command; the trace is the same as without -out.
func TestOutDrawsTheFailure(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := runCLI("-scenario", "owner-handoff", "-bug", "no-fence", "-seed", "2", "-out", dir)
	require.Equal(t, exitFail, code, out)
	_, plain, _ := runCLI("-scenario", "owner-handoff", "-bug", "no-fence", "-seed", "2", "-quiet")
	require.Equal(t, field(lastLine(plain), "trace"), field(lastLine(out), "trace"), "drawing does not change the run")

	replayTxt, err := os.ReadFile(filepath.Join(dir, "replay.txt"))
	require.NoError(t, err)
	require.Contains(t, string(replayTxt), "go run ./cmd/simrun -scenario owner-handoff -seed 2 -bug no-fence\n")
	require.Contains(t, string(replayTxt), "FAIL flow-linearizability: flow ")

	htmls, _ := filepath.Glob(filepath.Join(dir, "flow-linearizability-*.html"))
	require.Len(t, htmls, 1)
	html, err := os.ReadFile(htmls[0])
	require.NoError(t, err)
	require.Contains(t, string(html), "<html")
	require.Contains(t, out, "drawn: "+htmls[0])

	timeline, err := os.ReadFile(strings.TrimSuffix(htmls[0], ".html") + "-timeline.txt")
	require.NoError(t, err)
	require.Contains(t, string(timeline), "flow-linearizability on ")
	require.Contains(t, string(timeline), "first fails at")
	require.Regexp(t, `(?m)^> +[0-9.]+m?s client `, string(timeline), "the failing call is marked")
	require.Contains(t, string(timeline), "fault", "faults around the violation are in it")
}
