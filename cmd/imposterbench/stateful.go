package main

// The stateful suite (-suite stateful, scripts/stateful-bench): scenarios
// per flow, measured on WireMock, on one fenceline node and on three.
//
// Two imposters, the same on every server (on WireMock, each on a path
// and scenario of its own):
//
//   - gate: one stub, scenario "s" in state Started answers "open": a
//     read of the flow's state per request, no move;
//   - toggle: Started→B answering "to-b", B→Started answering
//     "to-started": a read and a compare-and-set per request.
//
// On fenceline the state is per flow (flowIdSource header:X-Flow), and
// wrk's requests draw X-Flow from [0, 10000): ten thousand scenarios,
// each owned by one node. WireMock's scenarios are global: one state for
// the whole server, which every request reads and toggle's move, and
// X-Flow means nothing to it. Under concurrent requests a WireMock toggle
// request may find the state moved between its look at the two mappings
// and get a 404: counted as a wrong answer. One fenceline node also
// serves a stateless stub, the reference a gate is measured against.
//
// The runs go one after another, each server stopped before the next
// starts (the machine's cores are shared with wrk): WireMock, one node,
// three nodes. Addresses, clear of scripts/imposter-bench (127.0.0.1:
// 3725, 3825, 38825, 5601-5704) and the tests (127.0.0.1-9: 2525, 25525,
// 4545):
//
//	WireMock     127.0.0.21:4600 (gate on /gate, toggle on /toggle)
//	one node     127.0.0.21: API 4625, peers 46025, imposters 4701 (static), 4702 (gate), 4703 (toggle)
//	three nodes  127.0.0.21, .22, .23: API 4626, peers 46026, imposters 4711 (gate), 4712 (toggle)
//
// The three nodes form a cluster as README.md's "A real cluster on
// loopback" does: n1 founds it, n2 and n3 join through n1's API with the
// same keys; the imposters are created through n1, and wrk drives n1.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	sfHost        = "127.0.0.21" // WireMock, the one node, and the three's n1 (which wrk drives)
	wmPort        = 4600
	oneHTTPPort   = 4625
	onePeerPort   = 46025
	oneFirstImp   = 4701
	threeHTTPPort = 4626
	threePeerPort = 46026
	threeFirstImp = 4711
	flowHeader    = "X-Flow"
	serverWM      = "wiremock"
	serverOne     = "fenceline-1"
	serverThree   = "fenceline-3"
	// maxProfile: the node answers its API within 60 s (its write
	// timeout), and net/http/pprof refuses a profile that long.
	maxProfile = 59 * time.Second
	// threeP99 is the bar on three nodes' p99.
	threeP99 = 20 * time.Millisecond
)

var threeHosts = []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}

// An sfWorkload is one of the suite's imposters.
type sfWorkload struct {
	// workload is the fenceline imposter; its want and orWant are what
	// any request may get, whatever its flow's state.
	workload
	// sequence: what a fresh flow's requests get, in order.
	sequence []string
	// mappings are WireMock's for the same scenario, on wmPath; nil:
	// not run there.
	mappings []any
	wmPath   string
}

func statefulWorkloads() []sfWorkload {
	flowState := map[string]any{"flowIdSource": "header:" + flowHeader}
	stub := func(required, next, body string) map[string]any {
		st := map[string]any{"scenarioName": "s", "requiredScenarioState": required, "responses": response(body)}
		if next != "" {
			st["newScenarioState"] = next
		}
		return st
	}
	// WireMock serves both workloads on its one port, each on a path and
	// scenario of its own: a request of the gate's run that WireMock was
	// still working through when the toggle's began would otherwise
	// move the toggle's state.
	mapping := func(scenario, required, next, body string) map[string]any {
		m := map[string]any{"scenarioName": scenario, "requiredScenarioState": required,
			"request":  map[string]any{"method": "GET", "url": "/" + scenario},
			"response": map[string]any{"status": 200, "body": body}}
		if next != "" {
			m["newScenarioState"] = next
		}
		return m
	}
	return []sfWorkload{
		{workload: workload{name: "static", stubs: []any{map[string]any{"responses": response("static")}},
			method: "GET", path: "/", want: "static"},
			sequence: []string{"static"}},
		{workload: workload{name: "gate", stubs: []any{stub("Started", "", "open")},
			method: "GET", path: "/", want: "open", flowState: flowState},
			sequence: []string{"open", "open", "open"},
			mappings: []any{mapping("gate", "Started", "", "open")}, wmPath: "/gate"},
		{workload: workload{name: "toggle", stubs: []any{stub("Started", "B", "to-b"), stub("B", "Started", "to-started")},
			method: "GET", path: "/", want: "to-b", orWant: []string{"to-started"}, flowState: flowState},
			sequence: []string{"to-b", "to-started", "to-b"},
			mappings: []any{mapping("toggle", "Started", "B", "to-b"), mapping("toggle", "B", "Started", "to-started")},
			wmPath:   "/toggle"},
	}
}

// flowScript is the wrk script every run of the suite uses, the
// stateless stub's too (so that each pays wrk the same): each request
// carries X-Flow, a random integer in [0, flows). Thread i seeds Lua's
// math.random with seed+i; the requests are formatted once, in init, so
// that wrk spends on a request no more than a table lookup.
func flowScript(flows int, seed int64) string {
	return fmt.Sprintf(`-- X-Flow: a random flow in [0, %[1]d) per request; thread i seeds with %[2]d+i.
local threads = 0
function setup(thread)
  thread:set("seed", %[2]d + threads)
  threads = threads + 1
end

local requests = {}
function init(args)
  math.randomseed(seed)
  for i = 0, %[1]d - 1 do
    requests[i + 1] = wrk.format(nil, nil, {["%[3]s"] = tostring(i)})
  end
end

function request()
  return requests[math.random(%[1]d)]
end
`, flows, seed, flowHeader)
}

// rightPerSecond is r's right answers per second: req/s less the share
// that was not 2xx or 3xx.
func rightPerSecond(r wrkResult) float64 {
	if r.Requests <= 0 {
		return 0
	}
	return r.RPS * float64(r.Requests-r.Non2xx) / float64(r.Requests)
}

// --- the checks

// checkFlows counts the fresh flows the checks use, apart from wrk's.
var checkFlows atomic.Int64

func freshFlow() string { return fmt.Sprintf("check-%d", checkFlows.Add(1)) }

// checkSequence sends w's sequence of requests for flow, request i to
// urls[i%len(urls)], and wants each answer in turn.
func checkSequence(ctx context.Context, urls []string, w sfWorkload, flow string) error {
	for i, body := range w.sequence {
		x := w.workload
		x.header = map[string]string{flowHeader: flow}
		x.want, x.orWant = body, nil
		if err := check(ctx, urls[i%len(urls)], x); err != nil {
			return fmt.Errorf("%s: %s, request %d of %d: %w", flowHeader, flow, i+1, len(w.sequence), err)
		}
	}
	return nil
}

// checkAny sends one request, and wants any answer w may give.
func checkAny(ctx context.Context, url string, w sfWorkload) error {
	x := w.workload
	x.header = map[string]string{flowHeader: "0"}
	return check(ctx, url, x)
}

// --- processes and calls

// call sends a request with no body; the answer's status and body.
func call(ctx context.Context, method, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, got, err
}

// wmLoad makes mappings WireMock's only ones, and every scenario Started.
func wmLoad(ctx context.Context, admin string, mappings []any) error {
	if code, got, err := call(ctx, "DELETE", admin+"/__admin/mappings"); err != nil || code != http.StatusOK {
		return fmt.Errorf("WireMock: DELETE /__admin/mappings: %d %v %.300s", code, err, got)
	}
	for _, m := range mappings {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if code, got, err := post(ctx, admin+"/__admin/mappings", b); err != nil || code != http.StatusCreated {
			return fmt.Errorf("WireMock: POST /__admin/mappings: %d %v %.300s", code, err, got)
		}
	}
	if err := wmReset(ctx, admin); err != nil {
		return err
	}
	code, got, err := call(ctx, "GET", admin+"/__admin/mappings")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("WireMock: GET /__admin/mappings: %d %v %.300s", code, err, got)
	}
	var list struct {
		Mappings []json.RawMessage `json:"mappings"`
	}
	if err := json.Unmarshal(got, &list); err != nil {
		return fmt.Errorf("WireMock: GET /__admin/mappings: %w", err)
	}
	if len(list.Mappings) != len(mappings) {
		return fmt.Errorf("WireMock has %d mappings, want %d", len(list.Mappings), len(mappings))
	}
	return nil
}

// wmReset sets every WireMock scenario to Started.
func wmReset(ctx context.Context, admin string) error {
	if code, got, err := post(ctx, admin+"/__admin/scenarios/reset", nil); err != nil || code != http.StatusOK {
		return fmt.Errorf("WireMock: POST /__admin/scenarios/reset: %d %v %.300s", code, err, got)
	}
	return nil
}

// startNode starts a fenceline node named name whose files are under
// dir, with args after the addresses.
func startNode(c config, tmp, label, name, host string, httpPort, peerPort int, args ...string) (*proc, error) {
	dir := filepath.Join(tmp, label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	argv := []string{c.node, "-name", name,
		"-http", net.JoinHostPort(host, strconv.Itoa(httpPort)),
		"-peer", net.JoinHostPort(host, strconv.Itoa(peerPort)),
		"-data-dir", filepath.Join(dir, "data")}
	if c.profileDir != "" {
		argv = append(argv, "-pprof")
	}
	argv = append(argv, args...)
	return startProc(label, filepath.Join(tmp, label+".log"), dir, argv...)
}

// writeKey writes a fresh cluster key, as 64 hex digits, to path.
func writeKey(path string) error {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600)
}

// waitMembers polls every node's /_cluster/status until each names the
// same n voters, each with its HTTP address.
func waitMembers(ctx context.Context, ps []*proc, admins []string, n int) error {
	deadline := time.Now().Add(readyTimeout)
	for i := 0; i < len(admins); {
		var st struct {
			Voters []struct {
				Name string `json:"name"`
				HTTP string `json:"http"`
			} `json:"voters"`
		}
		code, got, err := call(ctx, "GET", admins[i]+"/_cluster/status")
		ok := err == nil && code == http.StatusOK && json.Unmarshal(got, &st) == nil && len(st.Voters) == n
		for _, v := range st.Voters {
			ok = ok && v.HTTP != ""
		}
		if ok {
			i++
			continue
		}
		if ps[i].exited() {
			return ps[i].diedError()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not %d voters after %v (last: %d %v %.300s)", admins[i], n, readyTimeout, code, err, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// fetchProfile saves a CPU profile of d (whole seconds, at most
// maxProfile) from the node whose API is admin.
func fetchProfile(ctx context.Context, admin string, d time.Duration, path string) error {
	secs := max(1, int(min(d, maxProfile)/time.Second))
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		got, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("profile: GET %s: %s: %s", url, resp.Status, got)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("profile: GET %s: %w", url, err)
	}
	return f.Close()
}

// --- the runs

// sfTarget is one measured run.
type sfTarget struct {
	server string
	w      sfWorkload
	url    string  // what wrk drives
	procs  []*proc // the servers, which must outlive the run
	warmup time.Duration
	// prepare readies the server for the run (nil: nothing to do).
	prepare func(ctx context.Context) error
	// verify checks the answers, after the warm-up and after wrk.
	verify func(ctx context.Context) error
	// profiles: the nodes' APIs to take a CPU profile from during the
	// run, with the files to save each in (with -profile).
	profiles []profileFrom
}

type profileFrom struct{ admin, file string }

// sfInfo is what the report tells besides the measurements.
type sfInfo struct {
	java, wiremock string
	profiles       []string
}

func runStateful(ctx context.Context, c config, stdout, stderr io.Writer) int {
	if c.wiremock == "" || c.flows < 1 {
		fmt.Fprintln(stderr, "usage: imposterbench -suite stateful -wiremock PATH/wiremock-standalone.jar -node PATH/node [-d 10s] [-c 50] [-profile DIR] (scripts/stateful-bench runs it)")
		return 2
	}
	info, ms, err := statefulBench(ctx, c, stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "imposterbench: interrupted; every process it started is stopped")
			return 130
		}
		fmt.Fprintln(stderr, "imposterbench:", err)
		return 1
	}
	if !statefulReport(stdout, c, ms, info) && c.strict {
		return 1
	}
	return 0
}

// statefulBench runs WireMock, one node and three, one after another;
// every process it started is stopped when it returns.
func statefulBench(ctx context.Context, c config, stderr io.Writer) (info sfInfo, ms []measurement, err error) {
	for _, f := range []string{c.node, c.wiremock} {
		if _, err := os.Stat(f); err != nil {
			return info, nil, err
		}
	}
	if c.java, err = exec.LookPath(c.java); err != nil {
		return info, nil, fmt.Errorf("java is needed for WireMock: %w", err)
	}
	if c.wrk, err = exec.LookPath(c.wrk); err != nil {
		return info, nil, err
	}
	addrs := []string{net.JoinHostPort(sfHost, strconv.Itoa(wmPort))}
	for _, p := range []int{oneHTTPPort, onePeerPort, oneFirstImp, oneFirstImp + 1, oneFirstImp + 2} {
		addrs = append(addrs, net.JoinHostPort(sfHost, strconv.Itoa(p)))
	}
	for _, h := range threeHosts {
		for _, p := range []int{threeHTTPPort, threePeerPort, threeFirstImp, threeFirstImp + 1} {
			addrs = append(addrs, net.JoinHostPort(h, strconv.Itoa(p)))
		}
	}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return info, nil, fmt.Errorf("%s is taken (another stateful benchmark still running?): %w", a, err)
		}
		_ = ln.Close()
	}
	if c.profileDir != "" {
		if err := os.MkdirAll(c.profileDir, 0o755); err != nil {
			return info, nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "statefulbench-")
	if err != nil {
		return info, nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "flows.lua")
	if err := os.WriteFile(script, []byte(flowScript(c.flows, c.seed)), 0o644); err != nil {
		return info, nil, err
	}
	info.java = javaVersion(c.java)

	ws := statefulWorkloads()
	for _, phase := range []func(context.Context, config, string, []sfWorkload, *sfInfo) ([]sfTarget, func(), error){
		wiremockPhase, onePhase, threePhase,
	} {
		targets, stop, err := phase(ctx, c, tmp, ws, &info)
		if err == nil {
			for _, t := range targets {
				var m measurement
				if m, err = measure(ctx, c, script, t, stderr); err != nil {
					break
				}
				ms = append(ms, m)
				for _, p := range t.profiles {
					info.profiles = append(info.profiles, p.file)
				}
			}
		}
		stop()
		if err != nil {
			return info, nil, err
		}
	}
	return info, ms, nil
}

// stopAll stops ps, the last started first.
func stopAll(ps []*proc) func() {
	return func() {
		for i := len(ps) - 1; i >= 0; i-- {
			ps[i].stop()
		}
	}
}

// wiremockPhase starts WireMock with every workload's mappings.
func wiremockPhase(ctx context.Context, c config, tmp string, ws []sfWorkload, info *sfInfo) ([]sfTarget, func(), error) {
	dir := filepath.Join(tmp, serverWM)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, func() {}, err
	}
	p, err := startProc(serverWM, filepath.Join(tmp, serverWM+".log"), dir, c.java, "-jar", c.wiremock,
		"--port", strconv.Itoa(wmPort), "--bind-address", sfHost, "--root-dir", dir,
		"--no-request-journal", "--disable-request-logging", "--disable-banner")
	if err != nil {
		return nil, func() {}, err
	}
	stop := stopAll([]*proc{p})
	admin := fmt.Sprintf("http://%s:%d", sfHost, wmPort)
	if err := waitReady(ctx, p, admin+"/__admin/mappings"); err != nil {
		return nil, stop, fmt.Errorf("WireMock: %w", err)
	}
	info.wiremock = wmVersion(ctx, admin, c.wiremock)
	var mappings []any
	for _, w := range ws {
		mappings = append(mappings, w.mappings...)
	}
	if err := wmLoad(ctx, admin, mappings); err != nil {
		return nil, stop, err
	}
	var targets []sfTarget
	for _, w := range ws {
		if w.mappings == nil {
			continue
		}
		url := admin + w.wmPath
		targets = append(targets, sfTarget{server: serverWM, w: w, url: url, procs: []*proc{p}, warmup: c.wmWarmup,
			// Checked from Started, and Started again for wrk.
			prepare: func(ctx context.Context) error {
				if err := wmReset(ctx, admin); err != nil {
					return err
				}
				if err := checkSequence(ctx, []string{url}, w, "0"); err != nil {
					return err
				}
				return wmReset(ctx, admin)
			},
			// The state is global, and wrk leaves it anywhere.
			verify: func(ctx context.Context) error { return checkAny(ctx, url, w) }})
	}
	return targets, stop, nil
}

// onePhase starts one node and creates the three imposters on it.
func onePhase(ctx context.Context, c config, tmp string, ws []sfWorkload, _ *sfInfo) ([]sfTarget, func(), error) {
	p, err := startNode(c, tmp, serverOne, "n1", sfHost, oneHTTPPort, onePeerPort)
	if err != nil {
		return nil, func() {}, err
	}
	stop := stopAll([]*proc{p})
	admin := fmt.Sprintf("http://%s:%d", sfHost, oneHTTPPort)
	if err := waitReady(ctx, p, admin+"/imposters"); err != nil {
		return nil, stop, fmt.Errorf("%s: %w", serverOne, err)
	}
	var targets []sfTarget
	for i, w := range ws {
		port := oneFirstImp + i
		urls := []string{fmt.Sprintf("http://%s:%d%s", sfHost, port, w.path)}
		if _, err := createImposter(ctx, admin, w.workload, port); err != nil {
			return nil, stop, fmt.Errorf("%s: %w", serverOne, err)
		}
		if err := checkSequence(ctx, urls, w, freshFlow()); err != nil {
			return nil, stop, fmt.Errorf("%s, workload %s, answers wrong: %w", serverOne, w.name, err)
		}
		t := sfTarget{server: serverOne, w: w, url: urls[0], procs: []*proc{p}, warmup: c.warmup,
			verify: func(ctx context.Context) error { return checkSequence(ctx, urls, w, freshFlow()) }}
		if c.profileDir != "" {
			t.profiles = []profileFrom{{admin, filepath.Join(c.profileDir, serverOne+"-"+w.name+".pprof")}}
		}
		targets = append(targets, t)
	}
	return targets, stop, nil
}

// threePhase forms a three-node cluster and creates gate and toggle on
// it through n1. wrk drives n1; the checks go to each node in turn.
func threePhase(ctx context.Context, c config, tmp string, ws []sfWorkload, _ *sfInfo) ([]sfTarget, func(), error) {
	ck, dk := filepath.Join(tmp, "control.key"), filepath.Join(tmp, "data.key")
	for _, k := range []string{ck, dk} {
		if err := writeKey(k); err != nil {
			return nil, func() {}, err
		}
	}
	var ps []*proc
	var admins []string
	stop := func() { stopAll(ps)() }
	for i, h := range threeHosts {
		args := []string{"-control-key-file", ck, "-data-key-file", dk}
		if i > 0 {
			args = append(args, "-join", net.JoinHostPort(threeHosts[0], strconv.Itoa(threeHTTPPort)))
		}
		name := fmt.Sprintf("n%d", i+1)
		p, err := startNode(c, tmp, serverThree+"-"+name, name, h, threeHTTPPort, threePeerPort, args...)
		if err != nil {
			return nil, stop, err
		}
		ps = append(ps, p)
		admins = append(admins, fmt.Sprintf("http://%s:%d", h, threeHTTPPort))
	}
	for i, p := range ps {
		if err := waitReady(ctx, p, admins[i]+"/imposters"); err != nil {
			return nil, stop, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if err := waitMembers(ctx, ps, admins, len(ps)); err != nil {
		return nil, stop, err
	}
	var targets []sfTarget
	i := 0
	for _, w := range ws {
		if w.flowState == nil {
			continue
		}
		port := threeFirstImp + i
		i++
		var urls []string
		for _, h := range threeHosts {
			urls = append(urls, fmt.Sprintf("http://%s:%d%s", h, port, w.path))
		}
		if _, err := createImposter(ctx, admins[0], w.workload, port); err != nil {
			return nil, stop, fmt.Errorf("%s: %w", serverThree, err)
		}
		if err := checkSequence(ctx, urls, w, freshFlow()); err != nil {
			return nil, stop, fmt.Errorf("%s, workload %s, answers wrong: %w", serverThree, w.name, err)
		}
		t := sfTarget{server: serverThree, w: w, url: urls[0], procs: ps, warmup: c.warmup,
			verify: func(ctx context.Context) error { return checkSequence(ctx, urls, w, freshFlow()) }}
		if c.profileDir != "" {
			for j, a := range admins {
				file := serverThree + "-" + w.name
				if j > 0 {
					file += fmt.Sprintf("-n%d", j+1)
				}
				t.profiles = append(t.profiles, profileFrom{a, filepath.Join(c.profileDir, file+".pprof")})
			}
		}
		targets = append(targets, t)
	}
	return targets, stop, nil
}

// measure prepares t, warms it up, verifies it, and runs wrk on it, with
// the profiles taken meanwhile; then the servers must still be up and
// answer right.
func measure(ctx context.Context, c config, script string, t sfTarget, stderr io.Writer) (measurement, error) {
	m := measurement{server: t.server, workload: t.w.name, url: t.url}
	what := fmt.Sprintf("%s, workload %s", t.server, t.w.name)
	if t.prepare != nil {
		if err := t.prepare(ctx); err != nil {
			return m, fmt.Errorf("%s: %w", what, err)
		}
	}
	if t.warmup > 0 {
		if _, err := runWrk(ctx, c, t.warmup, script, t.url); err != nil {
			return m, fmt.Errorf("%s, warm-up: %w", what, err)
		}
		if err := t.verify(ctx); err != nil {
			return m, fmt.Errorf("%s, after the warm-up: %w", what, err)
		}
	}
	fmt.Fprintf(stderr, "imposterbench: wrk on %s (%s)\n", what, t.url)
	profiled := make(chan error, len(t.profiles))
	for _, p := range t.profiles {
		go func() { profiled <- fetchProfile(ctx, p.admin, c.duration, p.file) }()
	}
	res, err := runWrk(ctx, c, c.duration, script, t.url)
	var perrs []error
	for range t.profiles {
		perrs = append(perrs, <-profiled)
	}
	if err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	if err := errors.Join(perrs...); err != nil {
		return m, fmt.Errorf("%s: %w", what, err)
	}
	for _, p := range t.procs {
		if p.exited() {
			return m, p.diedError()
		}
	}
	if err := t.verify(ctx); err != nil {
		return m, fmt.Errorf("%s, after wrk: %w", what, err)
	}
	m.res = res
	return m, nil
}

func javaVersion(java string) string {
	out, _ := exec.Command(java, "-version").CombinedOutput()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if first == "" {
		return "?"
	}
	return strings.ReplaceAll(first, `"`, "")
}

// wmVersion asks WireMock its version; the jar's name if it does not say.
func wmVersion(ctx context.Context, admin, jar string) string {
	code, got, err := call(ctx, "GET", admin+"/__admin/version")
	var v struct {
		Version string `json:"version"`
	}
	if err == nil && code == http.StatusOK && json.Unmarshal(got, &v) == nil && v.Version != "" {
		return v.Version
	}
	return filepath.Base(jar)
}

// --- the report

// statefulBars evaluates the bars on ms. As in the static suite,
// a bar on a run where fenceline counted errors is missed: its
// throughput is not of right answers.
func statefulBars(ms []measurement) []bar {
	find := func(server, w string) (wrkResult, bool) {
		for _, m := range ms {
			if m.server == server && m.workload == w {
				return m.res, true
			}
		}
		return wrkResult{}, false
	}
	errNote := func(rs map[string]wrkResult) string {
		var n []string
		for _, k := range slices.Sorted(maps.Keys(rs)) {
			if e := rs[k].Errors(); e > 0 {
				n = append(n, fmt.Sprintf("%s counted %d errors", k, e))
			}
		}
		return strings.Join(n, "; ")
	}
	var out []bar
	// fenceline a.server's a.w req/s at least min × b.server's b.w's.
	type run struct{ server, w string }
	ratio := func(what string, a, b run, min float64) {
		bb := bar{what: what}
		ra, ok1 := find(a.server, a.w)
		rb, ok2 := find(b.server, b.w)
		switch {
		case !ok1 || !ok2:
			bb.got = "not measured"
		case rb.RPS <= 0:
			bb.got = "n/a"
			bb.note = b.server + " " + b.w + " completed no requests"
		default:
			r := ra.RPS / rb.RPS
			bb.got = fmt.Sprintf("%.0f%%", 100*r)
			bb.pass = r >= min
			if n := errNote(map[string]wrkResult{a.server + " " + a.w: ra, b.server + " " + b.w: rb}); n != "" {
				bb.pass = false
				bb.note = n
			}
		}
		out = append(out, bb)
	}
	ratio("one node: toggle ≥ 70% of gate", run{serverOne, "toggle"}, run{serverOne, "gate"}, 0.70)
	ratio("one node: gate ≥ 60% of the static stub", run{serverOne, "gate"}, run{serverOne, "static"}, 0.60)
	ratio("three nodes: toggle ≥ 50% of one node's toggle", run{serverThree, "toggle"}, run{serverOne, "toggle"}, 0.50)

	gate, ok1 := find(serverThree, "gate")
	toggle, ok2 := find(serverThree, "toggle")
	p99 := bar{what: fmt.Sprintf("three nodes: p99 ≤ %v (gate, toggle)", threeP99), got: "not measured"}
	clean := bar{what: "three nodes: no non-2xx nor socket errors (gate, toggle)", got: "not measured"}
	if ok1 && ok2 {
		p99.got = fmtLatency(gate.P99) + ", " + fmtLatency(toggle.P99)
		p99.pass = gate.P99 <= threeP99 && toggle.P99 <= threeP99
		clean.got = fmt.Sprintf("%d, %d", gate.Errors(), toggle.Errors())
		clean.pass = gate.Errors() == 0 && toggle.Errors() == 0
		if !clean.pass {
			clean.note = fmt.Sprintf("non-2xx %d, %d", gate.Non2xx, toggle.Non2xx)
		}
	}
	out = append(out, p99, clean)

	vs := bar{what: "one node's toggle > WireMock toggle's right answers/s", got: "not measured"}
	fl, ok1 := find(serverOne, "toggle")
	wm, ok2 := find(serverWM, "toggle")
	if ok1 && ok2 {
		f, w := rightPerSecond(fl), rightPerSecond(wm)
		vs.got = fmt.Sprintf("%.0f vs %.0f", f, w)
		vs.pass = f > w
		if w > 0 {
			vs.got += fmt.Sprintf(" (%s)", fmtRatio(f/w, serverWM))
		}
		if fl.Errors() > 0 {
			vs.pass = false
			vs.note = fmt.Sprintf("fenceline counted %d errors", fl.Errors())
		}
	}
	out = append(out, vs)
	return out
}

// statefulReport prints the table, the ratios and the bars; true if
// every bar is met.
func statefulReport(w io.Writer, c config, ms []measurement, info sfInfo) bool {
	model := cpuModel()
	if model != "" {
		model = " (" + model + ")"
	}
	fmt.Fprintf(w, "machine: %d CPUs%s, %s/%s; wrk (%d threads) and the servers share them, one server at a time\n",
		runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, c.threads)
	fmt.Fprintf(w, "versions: wrk %s, java %s, WireMock %s, fenceline node built with %s\n",
		wrkVersion(c.wrk), info.java, info.wiremock, runtime.Version())
	fmt.Fprintf(w, "wrk: %d keep-alive connections, %v per run after a %v warm-up (WireMock: %v, for the JIT), --timeout %v, --latency\n",
		c.conns, c.duration, c.warmup, c.wmWarmup, c.timeout)
	fmt.Fprintf(w, "every request, in every run, carries %s: a random integer in [0, %d) (Lua's math.random, thread i seeded with %d+i)\n",
		flowHeader, c.flows, c.seed)
	fmt.Fprintln(w, "gate: scenario \"s\" in state Started answers \"open\" (a state read per request); toggle: Started→B answers \"to-b\", B→Started \"to-started\" (a read and a move per request)")
	fmt.Fprintf(w, "fenceline: scenarios per flow (flowIdSource header:%s), so %d scenarios, each owned by one node; every stub response sets Connection: keep-alive\n",
		flowHeader, c.flows)
	fmt.Fprintf(w, "WireMock: scenarios are global, not per flow: %s means nothing to it, and all %d connections read (toggle: move) one state; a toggle request that finds the state moved under it gets a 404, counted as wrong: right/s = req/s × (requests − non-2xx) / requests; gate and toggle on /gate and /toggle, a scenario each\n",
		flowHeader, c.conns)
	fmt.Fprintf(w, "one node on %s; three nodes on %s, n2 and n3 joined through n1 with the same keys, imposters created through n1, wrk on n1 (a flow another node owns costs calls to its owner)\n",
		sfHost, strings.Join(threeHosts, ", "))
	if len(info.profiles) > 0 {
		fmt.Fprintf(w, "CPU profiles (go tool pprof -top FILE): %s\n", strings.Join(info.profiles, " "))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "%-12s %-8s %10s %9s %9s %9s %9s %8s %9s\n", "server", "workload", "requests", "req/s", "right/s", "p50", "p99", "non-2xx", "sock err")
	for _, m := range ms {
		r := m.res
		fmt.Fprintf(w, "%-12s %-8s %10d %9.0f %9.0f %9s %9s %8d %9d\n", m.server, m.workload, r.Requests, r.RPS, rightPerSecond(r),
			fmtLatency(r.P50), fmtLatency(r.P99), r.Non2xx, r.Connect+r.Read+r.Write+r.Timeout)
	}
	for _, m := range ms {
		if r := m.res; r.Errors()-r.Non2xx > 0 {
			fmt.Fprintf(w, "  socket errors, %s %s: connect %d, read %d, write %d, timeout %d\n",
				m.server, m.workload, r.Connect, r.Read, r.Write, r.Timeout)
		}
	}

	fmt.Fprintln(w, "\nratios (req/s; the last of right answers/s)")
	byKey := map[[2]string]wrkResult{}
	for _, m := range ms {
		byKey[[2]string{m.server, m.workload}] = m.res
	}
	for _, r := range []struct {
		what   string
		a, b   [2]string
		rights bool
	}{
		{"one node, gate / static", [2]string{serverOne, "gate"}, [2]string{serverOne, "static"}, false},
		{"one node, toggle / gate", [2]string{serverOne, "toggle"}, [2]string{serverOne, "gate"}, false},
		{"three nodes / one node, gate", [2]string{serverThree, "gate"}, [2]string{serverOne, "gate"}, false},
		{"three nodes / one node, toggle", [2]string{serverThree, "toggle"}, [2]string{serverOne, "toggle"}, false},
		{"one node / WireMock, toggle", [2]string{serverOne, "toggle"}, [2]string{serverWM, "toggle"}, true},
	} {
		a, ok1 := byKey[r.a]
		b, ok2 := byKey[r.b]
		if !ok1 || !ok2 {
			continue
		}
		x, y := a.RPS, b.RPS
		if r.rights {
			x, y = rightPerSecond(a), rightPerSecond(b)
		}
		v := "n/a"
		if y > 0 {
			v = fmt.Sprintf("%.2f", x/y)
		}
		fmt.Fprintf(w, "  %-32s %8s\n", r.what, v)
	}

	fmt.Fprintln(w, "\nbars")
	all, met := true, 0
	bs := statefulBars(ms)
	for _, b := range bs {
		verdict := "met"
		if b.pass {
			met++
		} else {
			verdict = "MISSED"
			all = false
		}
		note := ""
		if b.note != "" {
			note = " (" + b.note + ")"
		}
		fmt.Fprintf(w, "  %-6s %-57s got %s%s\n", verdict, b.what, b.got, note)
	}
	fmt.Fprintf(w, "%d of %d bars met\n", met, len(bs))
	return all
}
