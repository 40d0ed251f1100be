package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A worker runs job after job and ends each with its exit status; a line
// that is not a job is a usage error of that job alone; a seed replays to
// the same trace whatever the worker ran before it.
func TestWorkerRunsJobsInTurn(t *testing.T) {
	seed := func(n string) string {
		return `["-quiet","-scenario","kernel-selftest","-seed","` + n + `"]`
	}
	jobs := strings.Join([]string{seed("3"), `not json`, `["-no-such-flag"]`, seed("5"), seed("3")}, "\n") + "\n"
	var out bytes.Buffer
	require.Equal(t, exitOK, workerLoop(strings.NewReader(jobs), &out))

	parts := strings.Split(out.String(), endMark)
	require.Len(t, parts, 6, out.String()) // five jobs, each closed by the mark
	var codes []string
	var traces []string
	for i, p := range parts[:5] {
		if i > 0 {
			code, rest, _ := strings.Cut(p, "\n")
			codes = append(codes, code)
			p = rest
		}
		traces = append(traces, field(lastLine("x\n"+p), "trace"))
	}
	last, _, _ := strings.Cut(parts[5], "\n")
	codes = append(codes, last)
	require.Equal(t, []string{"0", "2", "2", "0", "0"}, codes)
	require.Contains(t, parts[1], "not a JSON list")
	require.NotEmpty(t, traces[0])
	require.Equal(t, traces[0], traces[4], "seed 3 replays the same after seed 5 ran in the same worker")
	require.NotEqual(t, traces[0], traces[3])
}

// A worker that dies mid-run makes that run crashed, with what it printed,
// and is not used again; the next job starts a fresh worker.
func TestWorkerDeathCostsOneRun(t *testing.T) {
	dying := filepath.Join(t.TempDir(), "dying")
	require.NoError(t, os.WriteFile(dying, []byte("#!/bin/sh\nread job\necho 'panic: boom' >&2\nexit 2\n"), 0o755))
	w, o := runJob(nil, dying, config{}, job{scenario: "kernel-selftest", seed: 4})
	require.Nil(t, w, "a dead worker is not kept")
	require.Equal(t, "crashed", o.verdict)
	require.Equal(t, uint64(4), o.seed)
	require.Contains(t, o.detail, "panic: boom")

	bin := buildSimrun(t, "builds the binary")
	w, o = runJob(nil, bin, config{}, job{scenario: "kernel-selftest", seed: 4})
	require.NotNil(t, w)
	require.Equal(t, "ok", o.verdict, o.detail)
	w, o2 := runJob(w, bin, config{}, job{scenario: "kernel-selftest", seed: 4})
	require.NotNil(t, w)
	require.Equal(t, o.trace, o2.trace, "the same worker replays a seed")
	w.stop()
}
