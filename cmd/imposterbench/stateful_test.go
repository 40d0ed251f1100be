package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scenarioStub is what the scenario machines below read of a fenceline
// stub or a WireMock mapping.
type scenarioStub struct {
	Scenario string `json:"scenarioName"`
	Required string `json:"requiredScenarioState"`
	Next     string `json:"newScenarioState"`
	body     string
}

// play answers n requests of one fresh flow as a scenario engine would:
// the first stub whose required state is the flow's (or that has no
// scenario) answers, and moves the state if it says to; "" when none
// matches (WireMock's 404).
func play(stubs []scenarioStub, n int) []string {
	state := "Started"
	var out []string
	for range n {
		got := ""
		for _, s := range stubs {
			if s.Scenario == "" || s.Required == state {
				got = s.body
				if s.Next != "" {
					state = s.Next
				}
				break
			}
		}
		out = append(out, got)
	}
	return out
}

func TestStatefulWorkloads(t *testing.T) {
	ws := statefulWorkloads()
	require.Equal(t, []string{"static", "gate", "toggle"}, []string{ws[0].name, ws[1].name, ws[2].name})
	for _, w := range ws {
		body, err := w.creation(4702)
		require.NoError(t, err)
		var imp struct {
			Port int `json:"port"`
			Rift *struct {
				FlowState map[string]any `json:"flowState"`
			} `json:"_rift"`
			Stubs []struct {
				scenarioStub
				Responses []struct {
					Is struct {
						StatusCode int               `json:"statusCode"`
						Headers    map[string]string `json:"headers"`
						Body       string            `json:"body"`
					} `json:"is"`
				} `json:"responses"`
			} `json:"stubs"`
		}
		require.NoError(t, json.Unmarshal(body, &imp), w.name)
		require.Equal(t, 4702, imp.Port)
		var stubs []scenarioStub
		for _, st := range imp.Stubs {
			require.Len(t, st.Responses, 1, w.name)
			r := st.Responses[0].Is
			require.Equal(t, 200, r.StatusCode, w.name)
			// wrk's connections stay open.
			require.Equal(t, "keep-alive", r.Headers["Connection"], w.name)
			s := st.scenarioStub
			s.body = r.Body
			stubs = append(stubs, s)
		}
		// The sequence is what the stubs answer a fresh flow, and every
		// answer is one that want or orWant allows.
		require.Equal(t, w.sequence, play(stubs, len(w.sequence)), w.name)
		for _, b := range play(stubs, 7) {
			require.Contains(t, append([]string{w.want}, w.orWant...), b, w.name)
		}

		if w.name == "static" {
			require.Nil(t, imp.Rift, "the reference is stateless")
			require.Nil(t, w.mappings, "WireMock runs the scenarios only")
			continue
		}
		require.NotNil(t, imp.Rift, w.name)
		require.Equal(t, map[string]any{"flowIdSource": "header:X-Flow"}, imp.Rift.FlowState, w.name)

		// WireMock's mappings are the same scenario, on a path and
		// scenario of the workload's own.
		var maps []scenarioStub
		for _, m := range w.mappings {
			b, err := json.Marshal(m)
			require.NoError(t, err)
			var v struct {
				scenarioStub
				Request  map[string]string `json:"request"`
				Response struct {
					Status int    `json:"status"`
					Body   string `json:"body"`
				} `json:"response"`
			}
			require.NoError(t, json.Unmarshal(b, &v))
			require.Equal(t, map[string]string{"method": "GET", "url": w.wmPath}, v.Request, w.name)
			require.Equal(t, "/"+w.name, w.wmPath)
			require.Equal(t, 200, v.Response.Status, w.name)
			require.Equal(t, w.name, v.Scenario, w.name)
			v.scenarioStub.body = v.Response.Body
			v.Scenario = "s"
			maps = append(maps, v.scenarioStub)
		}
		require.Equal(t, stubs, maps, w.name)
	}
	require.Equal(t, []string{"to-b", "to-started", "to-b"}, ws[2].sequence)
	require.Len(t, ws[1].stubs, 1)
	require.Len(t, ws[2].stubs, 2)
}

func TestFlowScript(t *testing.T) {
	s := flowScript(10000, 7)
	require.Contains(t, s, `thread:set("seed", 7 + threads)`)
	require.Contains(t, s, "math.randomseed(seed)")
	require.Contains(t, s, "for i = 0, 10000 - 1 do")
	require.Contains(t, s, `{["X-Flow"] = tostring(i)}`)
	require.Contains(t, s, "return requests[math.random(10000)]")
}

// TestFlowScriptUnderWrk runs the script in wrk against a server that
// notes the X-Flow of every request: each is an integer in [0, flows),
// and they spread over the range.
func TestFlowScriptUnderWrk(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("no wrk")
	}
	const flows = 50
	var mu sync.Mutex
	seen := map[string]int{}
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := r.Header.Get("X-Flow")
		mu.Lock()
		defer mu.Unlock()
		if n, err := strconv.Atoi(f); err != nil || n < 0 || n >= flows || r.URL.Path != "/p" {
			bad = append(bad, r.URL.Path+" "+f)
		}
		seen[f]++
	}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "flows.lua")
	require.NoError(t, os.WriteFile(script, []byte(flowScript(flows, 1)), 0o644))
	out, err := exec.Command(wrk, "-t2", "-c4", "-d1s", "--latency", "-s", script, srv.URL+"/p").CombinedOutput()
	require.NoError(t, err, "%s", out)
	res, err := parseWrk(string(out))
	require.NoError(t, err, "%s", out)
	require.Zero(t, res.Errors())
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad)
	require.Len(t, seen, flows, "every flow drawn in a second of requests")
}

func TestRightPerSecond(t *testing.T) {
	require.Zero(t, rightPerSecond(wrkResult{}))
	require.InDelta(t, 1000, rightPerSecond(wrkResult{Requests: 5000, RPS: 1000}), 1e-9)
	require.InDelta(t, 900, rightPerSecond(wrkResult{Requests: 5000, RPS: 1000, Non2xx: 500}), 1e-9)
	// Socket errors are no answers at all: not in Requests.
	require.InDelta(t, 1000, rightPerSecond(wrkResult{Requests: 5000, RPS: 1000, Read: 3}), 1e-9)
}

func barLines(bs []bar) []string {
	var got []string
	for _, b := range bs {
		v := "missed"
		if b.pass {
			v = "met"
		}
		line := v + " " + b.what + ": " + b.got
		if b.note != "" {
			line += " (" + b.note + ")"
		}
		got = append(got, line)
	}
	return got
}

func TestStatefulBars(t *testing.T) {
	ms := []measurement{
		{server: serverWM, workload: "gate", res: wrkResult{Requests: 40000, RPS: 4000}},
		{server: serverWM, workload: "toggle", res: wrkResult{Requests: 50000, RPS: 5000, Non2xx: 5000}},
		{server: serverOne, workload: "static", res: wrkResult{Requests: 500000, RPS: 50000}},
		{server: serverOne, workload: "gate", res: wrkResult{Requests: 300000, RPS: 30000}},
		{server: serverOne, workload: "toggle", res: wrkResult{Requests: 210000, RPS: 21000}},
		{server: serverThree, workload: "gate", res: wrkResult{Requests: 150000, RPS: 15000, P99: 19 * time.Millisecond}},
		{server: serverThree, workload: "toggle", res: wrkResult{Requests: 100000, RPS: 10000, P99: 21 * time.Millisecond}},
	}
	require.Equal(t, []string{
		"met one node: toggle ≥ 70% of gate: 70%",
		"met one node: gate ≥ 60% of the static stub: 60%",
		"missed three nodes: toggle ≥ 50% of one node's toggle: 48%",
		"missed three nodes: p99 ≤ 20ms (gate, toggle): 19.00ms, 21.00ms",
		"met three nodes: no non-2xx nor socket errors (gate, toggle): 0, 0",
		"met one node's toggle > WireMock toggle's right answers/s: 21000 vs 4500 (4.7×)",
	}, barLines(statefulBars(ms)))

	// fenceline's errors: its ratios are not of right answers.
	ms[4].res.Non2xx = 10
	ms[5].res.Timeout = 2
	require.Equal(t, []string{
		"missed one node: toggle ≥ 70% of gate: 70% (fenceline-1 toggle counted 10 errors)",
		"met one node: gate ≥ 60% of the static stub: 60%",
		"missed three nodes: toggle ≥ 50% of one node's toggle: 48% (fenceline-1 toggle counted 10 errors)",
		"missed three nodes: p99 ≤ 20ms (gate, toggle): 19.00ms, 21.00ms",
		"missed three nodes: no non-2xx nor socket errors (gate, toggle): 2, 0 (non-2xx 0, 0)",
		"missed one node's toggle > WireMock toggle's right answers/s: 20999 vs 4500 (4.7×) (fenceline counted 10 errors)",
	}, barLines(statefulBars(ms)))

	// A run that is not there, or completed nothing, passes no bar.
	require.Equal(t, []string{
		"missed one node: toggle ≥ 70% of gate: not measured",
		"missed one node: gate ≥ 60% of the static stub: n/a (fenceline-1 static completed no requests)",
		"missed three nodes: toggle ≥ 50% of one node's toggle: not measured",
		"missed three nodes: p99 ≤ 20ms (gate, toggle): not measured",
		"missed three nodes: no non-2xx nor socket errors (gate, toggle): not measured",
		"missed one node's toggle > WireMock toggle's right answers/s: not measured",
	}, barLines(statefulBars([]measurement{
		{server: serverOne, workload: "static"},
		{server: serverOne, workload: "gate", res: wrkResult{Requests: 10, RPS: 10}},
	})))
}

func TestStatefulReport(t *testing.T) {
	c := config{threads: 2, conns: 50, duration: 10 * time.Second, warmup: time.Second, wmWarmup: 10 * time.Second,
		timeout: 30 * time.Second, flows: 10000, seed: 1, wrk: "/nonexistent/wrk"}
	ms := []measurement{
		{server: serverWM, workload: "toggle", res: wrkResult{Requests: 50000, RPS: 5000, Non2xx: 5000, P50: time.Millisecond, P99: 40 * time.Millisecond}},
		{server: serverOne, workload: "toggle", res: wrkResult{Requests: 210000, RPS: 21000, P50: time.Millisecond, P99: 3 * time.Millisecond, Read: 1}},
	}
	var b bytes.Buffer
	require.False(t, statefulReport(&b, c, ms, sfInfo{java: "openjdk 17", wiremock: "3.13.2", profiles: []string{"/p/fenceline-1-toggle.pprof"}}))
	out := b.String()
	for _, want := range []string{
		"versions: wrk ?, java openjdk 17, WireMock 3.13.2, fenceline node built with go",
		"scenarios are global, not per flow",
		"go tool pprof -top FILE): /p/fenceline-1-toggle.pprof",
		"wiremock     toggle        50000      5000      4500    1.00ms   40.00ms     5000         0",
		"fenceline-1  toggle       210000     21000     21000    1.00ms    3.00ms        0         1",
		"  socket errors, fenceline-1 toggle: connect 0, read 1, write 0, timeout 0",
		"  one node / WireMock, toggle          4.67",
		"  MISSED one node's toggle > WireMock toggle's right answers/s",
		"0 of 6 bars met",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "gate / static", "a ratio of runs not measured")
}

// TestCheckSendsHeadersAndTakesAlternatives: the stateful suite's checks
// go through check, with X-Flow and a toggle's two bodies.
func TestCheckSendsHeadersAndTakesAlternatives(t *testing.T) {
	var mu sync.Mutex
	state := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		f := r.Header.Get("X-Flow")
		if f == "" {
			http.Error(w, "no flow", http.StatusBadRequest)
			return
		}
		if state[f] {
			_, _ = io.WriteString(w, "to-started")
		} else {
			_, _ = io.WriteString(w, "to-b")
		}
		state[f] = !state[f]
	}))
	defer srv.Close()
	ctx := context.Background()
	toggle := statefulWorkloads()[2]
	require.NoError(t, checkSequence(ctx, []string{srv.URL + "/"}, toggle, "a"))
	require.NoError(t, checkAny(ctx, srv.URL+"/", toggle))
	require.NoError(t, checkAny(ctx, srv.URL+"/", toggle))
	// "a" is at B after three requests: a fresh sequence on it is wrong.
	require.ErrorContains(t, checkSequence(ctx, []string{srv.URL + "/"}, toggle, "a"), `X-Flow: a, request 1 of 3`)
	gate := statefulWorkloads()[1]
	require.ErrorContains(t, checkAny(ctx, srv.URL+"/", gate), `want "open"`)
	x := toggle.workload
	require.ErrorContains(t, check(ctx, srv.URL+"/", x), "400 Bad Request", "no header, no flow")
	f1, f2 := freshFlow(), freshFlow()
	require.NotEqual(t, f1, f2)
	_, err := strconv.Atoi(f1)
	require.Error(t, err, "a check's flow is never one of wrk's")
	require.True(t, strings.HasPrefix(f1, "check-"))
}

func TestRunRefusesBadSuites(t *testing.T) {
	for _, args := range [][]string{
		{"-suite", "nope", "-node", "n"},
		{"-suite", "stateful", "-node", "n"},         // no -wiremock
		{"-node", "n"},                               // static: no -mb
		{"-suite", "stateful", "-wiremock", "w.jar"}, // no -node
		{"-suite", "stateful", "-node", "n", "-wiremock", "w", "-flows", "0"},
	} {
		var out, errs bytes.Buffer
		require.Equal(t, 2, run(args, &out, &errs), "%q", args)
		require.Empty(t, out.String())
		require.NotEmpty(t, errs.String())
	}
}
