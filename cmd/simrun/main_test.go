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

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "nonsense"}, "valid scenarios: bridge-saturation, durability-restart, election-crash, flow-ops, imposter-scenarios, isolated-owner, journal-crash, kernel-selftest"},
		{[]string{"-seed", "x"}, `-seed "x": want an unsigned integer`},
		{[]string{"-seeds", "5..1"}, "B is less than A"},
		{[]string{"-seeds", "1-5"}, "want A..B"},
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-bug", "nope"}, `unknown bug "nope"`},
		{[]string{"-scenario", "raft-partitions", "-bug", "selftest-no-gossip"}, `unknown bug "selftest-no-gossip" for scenario raft-partitions`},
		{[]string{"-j", "0"}, "-j 0"},
		{[]string{"-seeds", "1..2", "-v"}, "-v traces one seed"},
		{[]string{"extra"}, "unexpected arguments"},
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
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "simrun")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

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

	// An undecided seed is counted as such, printed, and exits 3.
	cmd = exec.Command(bin, "-scenario", "flow-ops", "-seeds", "1..2", "-j", "2", "-check-timeout", "1ns")
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, exitUndecided, cmd.ProcessState.ExitCode(), string(out))
	require.Contains(t, string(out), "ok=0 failed=0 undecided=2")
	require.Contains(t, string(out), "UNDECIDED flow-linearizability")
	require.Contains(t, string(out), "undecided seeds: 1 2")
}
