package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/pinned-traces.txt with the traces the code makes now")

// machineFields are the summary's fields that measure this machine, not
// the run: they differ between any two runs.
var machineFields = regexp.MustCompile(`(wall|slowest-check)=[^ ]+`)

// TestReadmeExampleIsReal runs what the README's "What the output means"
// shows (`simrun -seed 1`) and compares every line it quotes, the
// machine's timings aside, so the README can never drift from the code.
func TestReadmeExampleIsReal(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "## What the output means\n\n```\n")
	require.True(t, ok, "README has its example block")
	block, _, ok := strings.Cut(after, "```")
	require.True(t, ok)
	head, tail, ok := strings.Cut(strings.TrimSuffix(block, "\n"), "\n...\n")
	require.True(t, ok, "the block quotes the first lines, then ..., then the last")

	code, out, _ := runCLI("-seed", "1")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := func(quoted, got []string) {
		for i := range quoted {
			require.Equal(t, machineFields.ReplaceAllString(quoted[i], "$1=…"), machineFields.ReplaceAllString(got[i], "$1=…"),
				"README line %q: simrun -seed 1 prints %q (update the README with the real output)", quoted[i], got[i])
		}
	}
	hl, tl := strings.Split(head, "\n"), strings.Split(tail, "\n")
	require.GreaterOrEqual(t, len(lines), len(hl)+len(tl))
	want(hl, lines[:len(hl)])
	want(tl, lines[len(lines)-len(tl):])
}

// pinnedRuns are runs whose traces are pinned: scenarios whose code rarely
// changes, so a trace that moves is a change of behaviour nobody meant,
// or a platform that replays differently. An intended change updates
// them: go test ./cmd/simrun -run TestPinnedTraces -update
var pinnedRuns = []struct {
	scenario string
	seed     int
}{{"kernel-selftest", 1}, {"kernel-selftest", 2}, {"kernel-selftest", 3}, {"raft-partitions", 1}, {"flow-ops", 1}}

func TestPinnedTraces(t *testing.T) {
	const file = "testdata/pinned-traces.txt"
	var got []string
	for _, p := range pinnedRuns {
		code, out, _ := runCLI("-scenario", p.scenario, "-seed", fmt.Sprint(p.seed), "-quiet")
		require.Equal(t, 0, code, out)
		got = append(got, fmt.Sprintf("%s %d %s", p.scenario, p.seed, field(lastLine(out), "trace")))
	}
	now := strings.Join(got, "\n") + "\n"
	if *update {
		require.NoError(t, os.WriteFile(file, []byte(now), 0o644))
		return
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(b), now, "a pinned trace moved: if the change was meant, go test ./cmd/simrun -run TestPinnedTraces -update")
}
