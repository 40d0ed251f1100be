// Command imposterbench is the imposter benchmark behind
// scripts/imposter-bench: it starts mountebank, the fenceline node and a
// net/http hello-world server (the ceiling: what a Go server answering a
// fixed body does on this machine), creates the same four imposters on
// mountebank and fenceline, checks that each answers what it should, and
// drives each with wrk. It prints requests/s, p50, p99 and errors for every
// server and workload, the ratios, and whether each of the bars
// passes:
//
//   - (a) one static stub: fenceline at least 70% of the ceiling's
//     throughput and at least 5× mountebank's;
//   - (b) 100 stubs with equals on distinct paths, hitting the last: at
//     least 20× mountebank;
//   - (c) a JSON body equals with a jsonpath selector: at least 20×
//     mountebank;
//   - (d) 1,000 stubs with matches regexes on paths, hitting the last: at
//     least 100× mountebank;
//   - fenceline's p99 under 5 ms on (a)–(c).
//
// The workloads are imposter/bench_test.go's, each response with a
// Connection: keep-alive header: mountebank closes the connection after
// every imposter response whose stub sets no Connection header, and wrk's
// connections are meant to be kept alive.
//
// Everything listens on 127.0.0.1: mountebank on 3725 with its imposters
// on 5601-5604, fenceline on 3825 (peer port 38825) with its imposters on
// 5701-5704, the ceiling on a port the kernel picks. Every process it
// starts is stopped before it exits, on an error or a signal too. Use the
// script, which installs wrk and mountebank and builds the node:
//
//	scripts/imposter-bench -d 10s -c 50
//
// That is -suite static, the default. -suite stateful is the stateful
// benchmark behind scripts/stateful-bench instead: scenarios per flow on
// one fenceline node and on three, against WireMock's (stateful.go).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The addresses. Other benchmarks and test suites on this machine use
// 2525, 25525, 3525, 3625 and 47xx/48xx; these stay clear of them.
const (
	host          = "127.0.0.1"
	mbPort        = 3725
	nodeHTTPPort  = 3825
	nodePeerPort  = 38825
	mbFirstImp    = 5601
	nodeFirstImp  = 5701
	readyTimeout  = 60 * time.Second
	stopGrace     = 5 * time.Second
	ceilingBody   = "hello"
	serverCeiling = "ceiling"
	serverMB      = "mountebank"
	serverNode    = "fenceline"
)

// A workload is one imposter: its stubs, the request wrk sends and the
// body that request must get.
type workload struct {
	name        string
	stubs       []any
	method      string
	path        string
	body        string
	contentType string
	want        string
	// orWant: other bodies the request may get (a stateful stub's, when
	// the check does not know the flow's state).
	orWant []string
	// header: what check sends besides (wrk's own come from its script).
	header map[string]string
	// flowState is the imposter's _rift.flowState; nil: stateless.
	flowState map[string]any
}

// response is a stub's one response: 200 with body, and the header that
// keeps mountebank from closing the connection.
func response(body string) []any {
	return []any{map[string]any{"is": map[string]any{
		"statusCode": 200,
		"headers":    map[string]any{"Connection": "keep-alive"},
		"body":       body,
	}}}
}

func workloads() []workload {
	var b []any
	for i := range 100 {
		b = append(b, map[string]any{
			"predicates": []any{map[string]any{"equals": map[string]any{"path": fmt.Sprintf("/stub/%d", i)}}},
			"responses":  response(fmt.Sprintf("stub %d", i)),
		})
	}
	var d []any
	for i := range 1000 {
		d = append(d, map[string]any{
			"predicates": []any{map[string]any{"matches": map[string]any{"path": fmt.Sprintf(`^/items/%d/\d+$`, i)}}},
			"responses":  response(fmt.Sprintf("item %d", i)),
		})
	}
	return []workload{
		{name: "a-static", stubs: []any{map[string]any{"responses": response("hello")}},
			method: "GET", path: "/", want: "hello"},
		{name: "b-100-equals", stubs: b, method: "GET", path: "/stub/99", want: "stub 99"},
		{name: "c-jsonpath", stubs: []any{map[string]any{
			"predicates": []any{map[string]any{
				"equals":   map[string]any{"body": "gold"},
				"jsonpath": map[string]any{"selector": "$.customer.tier"},
			}},
			"responses": response("gold"),
		}}, method: "POST", path: "/orders", body: `{"customer": {"id": 42, "tier": "gold"}, "items": [1, 2, 3]}`,
			contentType: "application/json", want: "gold"},
		{name: "d-1000-matches", stubs: d, method: "GET", path: "/items/999/42", want: "item 999"},
		// JavaScript: a response an injected function makes, and a
		// decorate behavior on an is response (both servers run with
		// injection allowed).
		{name: "e-inject", stubs: []any{map[string]any{"responses": []any{map[string]any{
			"inject": "(config) => ({ statusCode: 200, headers: { Connection: 'keep-alive' }, body: 'hello ' + config.request.path })"}}}},
			method: "GET", path: "/js", want: "hello /js"},
		{name: "f-decorate", stubs: []any{map[string]any{"responses": []any{map[string]any{
			"is":        map[string]any{"statusCode": 200, "headers": map[string]any{"Connection": "keep-alive"}, "body": "plain"},
			"behaviors": []any{map[string]any{"decorate": "(config) => { config.response.body = 'decorated ' + config.request.method; }"}}}}}},
			method: "GET", path: "/", want: "decorated GET"},
	}
}

// creation is the POST /imposters body for w on port.
func (w workload) creation(port int) ([]byte, error) {
	imp := map[string]any{"protocol": "http", "port": port, "name": "bench " + w.name, "stubs": w.stubs}
	if w.flowState != nil {
		imp["_rift"] = map[string]any{"flowState": w.flowState}
	}
	return json.Marshal(imp)
}

// luaScript is the wrk script that sends w's method, body and content
// type; "" when a plain GET does.
func (w workload) luaScript() string {
	if w.method == "GET" && w.body == "" {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "wrk.method = %s\n", luaString(w.method))
	fmt.Fprintf(&s, "wrk.body = %s\n", luaString(w.body))
	if w.contentType != "" {
		fmt.Fprintf(&s, "wrk.headers[\"Content-Type\"] = %s\n", luaString(w.contentType))
	}
	return s.String()
}

// luaString quotes s as a Lua long string, whose level no "]=*]" in s
// closes.
func luaString(s string) string {
	eq := ""
	for strings.Contains(s, "]"+eq+"]") {
		eq += "="
	}
	// A long string drops a newline right after its opening bracket.
	return "[" + eq + "[" + "\n" + s + "]" + eq + "]"
}

// --- wrk's output

// wrkResult is what one wrk run reports.
type wrkResult struct {
	Requests                      int64
	RPS                           float64
	P50, P99                      time.Duration
	Connect, Read, Write, Timeout int64 // socket errors
	Non2xx                        int64 // "Non-2xx or 3xx responses"
}

// Errors is every failed request wrk counted.
func (r wrkResult) Errors() int64 { return r.Connect + r.Read + r.Write + r.Timeout + r.Non2xx }

// parseWrk reads the output of wrk --latency. Requests/sec and the latency
// distribution's 50% and 99% must be there; the error lines appear only
// when there were errors.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var haveRPS, have50, have99, haveTotal bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		var err error
		switch {
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			r.RPS, err = strconv.ParseFloat(f[1], 64)
			haveRPS = true
		case len(f) == 2 && f[0] == "50%":
			r.P50, err = parseWrkDuration(f[1])
			have50 = true
		case len(f) == 2 && f[0] == "99%":
			r.P99, err = parseWrkDuration(f[1])
			have99 = true
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			r.Requests, err = strconv.ParseInt(f[0], 10, 64)
			haveTotal = true
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 0, write 0, timeout 0
			rest := strings.TrimPrefix(line, "Socket errors:")
			for _, part := range strings.Split(rest, ",") {
				kv := strings.Fields(part)
				if len(kv) != 2 {
					return r, fmt.Errorf("wrk: bad socket errors line %q", line)
				}
				n, perr := strconv.ParseInt(kv[1], 10, 64)
				if perr != nil {
					return r, fmt.Errorf("wrk: bad socket errors line %q: %v", line, perr)
				}
				switch kv[0] {
				case "connect":
					r.Connect = n
				case "read":
					r.Read = n
				case "write":
					r.Write = n
				case "timeout":
					r.Timeout = n
				default:
					return r, fmt.Errorf("wrk: unknown socket error %q in %q", kv[0], line)
				}
			}
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) == 5:
			r.Non2xx, err = strconv.ParseInt(f[4], 10, 64)
		}
		if err != nil {
			return r, fmt.Errorf("wrk: line %q: %v", line, err)
		}
	}
	var missing []string
	for what, ok := range map[string]bool{"Requests/sec": haveRPS, "latency 50%": have50, "latency 99%": have99, "request count": haveTotal} {
		if !ok {
			missing = append(missing, what)
		}
	}
	if len(missing) > 0 {
		return r, fmt.Errorf("wrk: output has no %s (was --latency given?)", strings.Join(missing, ", "))
	}
	return r, nil
}

// parseWrkDuration reads wrk's times: a number and us, ms, s, m or h.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("bad time %q", s)
			}
			return time.Duration(v * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("bad time %q: no unit", s)
}

// --- processes

// proc is a server process this command started.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProc(name, logPath, dir string, argv ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C reaches this command, which stops
	// it (and anything it started) itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends the process group SIGTERM, and SIGKILL if it is still there
// after the grace.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail is the end of the process's log, for an error message.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// diedError says a server process is gone, with the end of its log.
func (p *proc) diedError() error {
	return fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.name, p.err, p.tail())
}

// --- HTTP

var client = &http.Client{Timeout: 30 * time.Second}

// waitReady polls url until it answers 200, p dies, or the time is up.
func waitReady(ctx context.Context, p *proc, url string) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p != nil && p.exited() {
			return p.diedError()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v (last: %v)", url, readyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createImposter posts w's imposter on port to the admin API at admin,
// then checks that the imposter has all of w's stubs.
func createImposter(ctx context.Context, admin string, w workload, port int) (note string, err error) {
	body, err := w.creation(port)
	if err != nil {
		return "", err
	}
	code, got, err := post(ctx, admin+"/imposters", body)
	if err != nil {
		return "", fmt.Errorf("create %s on %s: %w", w.name, admin, err)
	}
	if code != http.StatusCreated {
		return note, fmt.Errorf("create %s on %s: %d: %.500s", w.name, admin, code, got)
	}
	// All the stubs are there, in order: the one hit is the last.
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/imposters/%d", admin, port), nil)
	resp, err := client.Do(req)
	if err != nil {
		return note, err
	}
	defer resp.Body.Close()
	var imp struct {
		Stubs []json.RawMessage `json:"stubs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&imp); err != nil {
		return note, fmt.Errorf("GET %s/imposters/%d: %w", admin, port, err)
	}
	if len(imp.Stubs) != len(w.stubs) {
		return note, fmt.Errorf("%s/imposters/%d has %d stubs, want %d", admin, port, len(imp.Stubs), len(w.stubs))
	}
	return note, nil
}

// post sends a JSON body, and returns the answer's status and body.
func post(ctx context.Context, url string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	got, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, got, err
}

// check sends w's request to url once, and wants 200, w's body, and a
// connection left open.
func check(ctx context.Context, url string, w workload) error {
	var body io.Reader
	if w.body != "" {
		body = strings.NewReader(w.body)
	}
	req, err := http.NewRequestWithContext(ctx, w.method, url, body)
	if err != nil {
		return err
	}
	if w.contentType != "" {
		req.Header.Set("Content-Type", w.contentType)
	}
	for k, v := range w.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.method, url, err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s %s: %s, want 200 OK (body %.200q)", w.method, url, resp.Status, got)
	case string(got) != w.want && !slices.Contains(w.orWant, string(got)):
		if len(w.orWant) > 0 {
			return fmt.Errorf("%s %s: body %.200q, want one of %q", w.method, url, got, append([]string{w.want}, w.orWant...))
		}
		return fmt.Errorf("%s %s: body %.200q, want %q", w.method, url, got, w.want)
	case resp.Close:
		return fmt.Errorf("%s %s: the server closes the connection (Connection: %s): wrk's connections would not be kept alive",
			w.method, url, resp.Header.Get("Connection"))
	}
	return nil
}

// --- the run

type config struct {
	suite         string // static (mountebank and the ceiling) or stateful (stateful.go)
	mb, node, wrk string
	duration      time.Duration
	conns         int
	threads       int
	timeout       time.Duration
	warmup        time.Duration
	mbLogLevel    string
	strict        bool

	// The stateful suite's (stateful.go).
	java, wiremock string
	wmWarmup       time.Duration
	flows          int
	seed           int64
	profileDir     string
}

// measurement is one wrk run's result.
type measurement struct {
	server, workload string
	res              wrkResult
	url              string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("imposterbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.suite, "suite", "static", "static: fenceline against mountebank and the ceiling (scripts/imposter-bench); stateful: scenarios per flow against WireMock, one node and three (scripts/stateful-bench)")
	fs.StringVar(&c.mb, "mb", "", "mountebank's bin/mb (run with node)")
	fs.StringVar(&c.node, "node", "", "the fenceline node binary (go build ./cmd/node)")
	fs.StringVar(&c.wrk, "wrk", "wrk", "the wrk binary")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "how long wrk drives each server and workload")
	fs.IntVar(&c.conns, "c", 50, "wrk's connections (kept alive)")
	fs.IntVar(&c.threads, "t", 2, "wrk's threads")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "wrk's --timeout: a slower response counts as a timeout error (mountebank on d answers in seconds)")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "an unmeasured wrk run before each measured one (0: none)")
	fs.StringVar(&c.mbLogLevel, "mb-loglevel", "", "mountebank's --loglevel, and no log file (default: as mb starts out of the box, at info with its log file: a line per request)")
	fs.BoolVar(&c.strict, "strict", false, "exit 1 when a bar is missed")
	fs.StringVar(&c.java, "java", "java", "stateful: the java binary WireMock runs on")
	fs.StringVar(&c.wiremock, "wiremock", "", "stateful: WireMock's standalone jar")
	fs.DurationVar(&c.wmWarmup, "wiremock-warmup", 10*time.Second, "stateful: WireMock's unmeasured wrk run before each measured one (the JVM compiles its hot paths meanwhile)")
	fs.IntVar(&c.flows, "flows", 10000, "stateful: wrk's requests carry X-Flow drawn from [0, flows)")
	fs.Int64Var(&c.seed, "seed", 1, "stateful: seeds wrk's draws of X-Flow (thread i: seed+i)")
	fs.StringVar(&c.profileDir, "profile", "", "stateful: serve pprof on the nodes and save a CPU profile of each fenceline run, from the node wrk drives, as DIR/<run>.pprof")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || c.node == "" || c.duration < time.Second || c.conns < 1 || c.threads < 1 || c.threads > c.conns {
		fmt.Fprintln(stderr, "usage: imposterbench [-suite static] -mb PATH/bin/mb -node PATH/node [-d 10s] [-c 50] [-t 2] (scripts/imposter-bench runs it)")
		fmt.Fprintln(stderr, "       imposterbench -suite stateful -wiremock PATH/wiremock-standalone.jar -node PATH/node [-d 10s] [-c 50] [-profile DIR] (scripts/stateful-bench runs it)")
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	switch c.suite {
	case "static":
		if c.mb == "" {
			fmt.Fprintln(stderr, "imposterbench: -mb is needed (scripts/imposter-bench runs it)")
			return 2
		}
	case "stateful":
		return runStateful(ctx, c, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "imposterbench: -suite %q: static or stateful\n", c.suite)
		return 2
	}
	ms, notes, err := bench(ctx, c, stdout, stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "imposterbench: interrupted; every process it started is stopped")
			return 130
		}
		fmt.Fprintln(stderr, "imposterbench:", err)
		return 1
	}
	if !report(stdout, c, ms, notes) && c.strict {
		return 1
	}
	return 0
}

// bench starts the servers, creates and checks the imposters, and runs
// wrk on each; every process it started is stopped when it returns.
func bench(ctx context.Context, c config, stdout, stderr io.Writer) (ms []measurement, notes []string, err error) {
	for _, f := range []string{c.mb, c.node} {
		if _, err := os.Stat(f); err != nil {
			return nil, nil, err
		}
	}
	nodejs, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("node.js is needed for mountebank: %w", err)
	}
	if c.wrk, err = exec.LookPath(c.wrk); err != nil {
		return nil, nil, err
	}
	ws := workloads()
	ports := []int{mbPort, nodeHTTPPort, nodePeerPort}
	for i := range len(ws) + 1 { // and the tcp imposter's
		ports = append(ports, mbFirstImp+i, nodeFirstImp+i)
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return nil, nil, fmt.Errorf("port %d is taken (another benchmark still running?): %w", p, err)
		}
		_ = ln.Close()
	}
	tmp, err := os.MkdirTemp("", "imposterbench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)

	// The ceiling, in this process.
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, nil, err
	}
	ceiling := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, ceilingBody)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ceiling.Serve(ln) }()
	defer ceiling.Close()
	ceilingURL := "http://" + ln.Addr().String() + "/"

	mbDir := filepath.Join(tmp, "mb")
	nodeDir := filepath.Join(tmp, "node")
	for _, d := range []string{mbDir, nodeDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, nil, err
		}
	}
	mbArgs := []string{nodejs, c.mb, "start", "--port", strconv.Itoa(mbPort), "--host", host, "--pidfile", filepath.Join(mbDir, "mb.pid"), "--allowInjection"}
	if c.mbLogLevel != "" {
		mbArgs = append(mbArgs, "--nologfile", "--loglevel", c.mbLogLevel)
	}
	mb, err := startProc(serverMB, filepath.Join(tmp, "mb.log"), mbDir, mbArgs...)
	if err != nil {
		return nil, nil, err
	}
	defer mb.stop()
	node, err := startProc(serverNode, filepath.Join(tmp, "node.log"), nodeDir, c.node,
		"-http", net.JoinHostPort(host, strconv.Itoa(nodeHTTPPort)),
		"-peer", net.JoinHostPort(host, strconv.Itoa(nodePeerPort)),
		"-data-dir", filepath.Join(nodeDir, "data"), "-allowInjection")
	if err != nil {
		return nil, nil, err
	}
	defer node.stop()

	mbAdmin := fmt.Sprintf("http://%s:%d", host, mbPort)
	nodeAdmin := fmt.Sprintf("http://%s:%d", host, nodeHTTPPort)
	if err := waitReady(ctx, nil, ceilingURL); err != nil {
		return nil, nil, err
	}
	if err := waitReady(ctx, mb, mbAdmin+"/config"); err != nil {
		return nil, nil, fmt.Errorf("mountebank: %w", err)
	}
	if err := waitReady(ctx, node, nodeAdmin+"/imposters"); err != nil {
		return nil, nil, fmt.Errorf("fenceline: %w", err)
	}

	type target struct {
		server string
		proc   *proc
		url    string
		w      workload
	}
	var targets []target

	for i, w := range ws {
		for _, s := range []struct {
			server, admin string
			proc          *proc
			port          int
		}{{serverMB, mbAdmin, mb, mbFirstImp + i}, {serverNode, nodeAdmin, node, nodeFirstImp + i}} {
			note, err := createImposter(ctx, s.admin, w, s.port)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.server, err)
			}
			if note != "" {
				notes = append(notes, fmt.Sprintf("%s, workload %s: %s", s.server, w.name, note))
			}
			url := fmt.Sprintf("http://%s:%d%s", host, s.port, w.path)
			if err := check(ctx, url, w); err != nil {
				return nil, nil, fmt.Errorf("%s, workload %s, answers wrong: %w", s.server, w.name, err)
			}
			targets = append(targets, target{s.server, s.proc, url, w})
		}
	}
	ceilingW := workload{name: serverCeiling, method: "GET", path: "/", want: ceilingBody}
	if err := check(ctx, ceilingURL, ceilingW); err != nil {
		return nil, nil, fmt.Errorf("ceiling answers wrong: %w", err)
	}
	targets = append([]target{{serverCeiling, nil, ceilingURL, ceilingW}}, targets...)
	fmt.Fprintf(stderr, "imposterbench: all %d imposters answer as they should; %d wrk runs of %v each (+%v warm-up)\n",
		2*len(ws), len(targets), c.duration, c.warmup)

	for _, t := range targets {
		script := ""
		if lua := t.w.luaScript(); lua != "" {
			script = filepath.Join(tmp, t.w.name+".lua")
			if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
				return nil, nil, err
			}
		}
		if c.warmup > 0 {
			if _, err := runWrk(ctx, c, c.warmup, script, t.url); err != nil {
				return nil, nil, fmt.Errorf("%s, workload %s, warm-up: %w", t.server, t.w.name, err)
			}
			// wrk leaves with requests in flight, which a slow server
			// (mountebank on d) still works through: one more answer,
			// behind them, so that the measured run starts on an idle
			// server.
			if err := check(ctx, t.url, t.w); err != nil {
				return nil, nil, fmt.Errorf("%s, workload %s, after the warm-up: %w", t.server, t.w.name, err)
			}
		}
		fmt.Fprintf(stderr, "imposterbench: wrk on %s, workload %s (%s)\n", t.server, t.w.name, t.url)
		res, err := runWrk(ctx, c, c.duration, script, t.url)
		if err != nil {
			return nil, nil, fmt.Errorf("%s, workload %s: %w", t.server, t.w.name, err)
		}
		// A server that fell over under load measured nothing useful.
		if t.proc != nil && t.proc.exited() {
			return nil, nil, t.proc.diedError()
		}
		if err := check(ctx, t.url, t.w); err != nil {
			return nil, nil, fmt.Errorf("%s, workload %s, after wrk: %w", t.server, t.w.name, err)
		}
		ms = append(ms, measurement{t.server, t.w.name, res, t.url})
	}
	// tcp: wrk speaks only HTTP, so the echo stub is driven by tcpLoad,
	// c.conns connections each sending a line and reading the answer.
	for _, s := range []struct {
		server, admin string
		proc          *proc
		port          int
	}{{serverMB, mbAdmin, mb, mbFirstImp + len(ws)}, {serverNode, nodeAdmin, node, nodeFirstImp + len(ws)}} {
		body := fmt.Sprintf(`{"protocol":"tcp","port":%d,"name":"bench tcp","stubs":[{"responses":[{"is":{"data":"pong\n"}}]}]}`, s.port)
		code, out, err := post(ctx, s.admin+"/imposters", []byte(body))
		if err != nil || code != http.StatusCreated {
			return nil, nil, fmt.Errorf("%s: the tcp imposter: %d %v %s", s.server, code, err, out)
		}
		addr := net.JoinHostPort(host, strconv.Itoa(s.port))
		fmt.Fprintf(stderr, "imposterbench: tcp load on %s (%s)\n", s.server, addr)
		if c.warmup > 0 {
			if _, err := tcpLoad(ctx, addr, c.conns, c.warmup); err != nil {
				return nil, nil, fmt.Errorf("%s, tcp warm-up: %w", s.server, err)
			}
		}
		res, err := tcpLoad(ctx, addr, c.conns, c.duration)
		if err != nil {
			return nil, nil, fmt.Errorf("%s, tcp: %w", s.server, err)
		}
		if s.proc.exited() {
			return nil, nil, s.proc.diedError()
		}
		ms = append(ms, measurement{s.server, tcpEcho, res, "tcp://" + addr})
	}
	fmt.Fprintf(stdout, "versions: mountebank %s, fenceline node built with %s, wrk %s\n",
		mbVersion(ctx, mbAdmin), runtime.Version(), wrkVersion(c.wrk))
	return ms, notes, nil
}

func runWrk(ctx context.Context, c config, d time.Duration, script, url string) (wrkResult, error) {
	args := []string{"-t" + strconv.Itoa(c.threads), "-c" + strconv.Itoa(c.conns), "-d" + wrkSeconds(d),
		"--timeout", wrkSeconds(c.timeout), "--latency"}
	if script != "" {
		args = append(args, "-s", script)
	}
	args = append(args, url)
	out, err := exec.CommandContext(ctx, c.wrk, args...).CombinedOutput()
	if ctx.Err() != nil {
		return wrkResult{}, ctx.Err()
	}
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	res, err := parseWrk(string(out))
	if err != nil {
		return res, fmt.Errorf("%v; its output:\n%s", err, out)
	}
	return res, nil
}

// wrkSeconds is d in whole seconds, at least 1, as wrk takes it.
func wrkSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second/2)/time.Second))) + "s"
}

func mbVersion(ctx context.Context, admin string) string {
	req, _ := http.NewRequestWithContext(ctx, "GET", admin+"/config", nil)
	resp, err := client.Do(req)
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	var v struct {
		Version string `json:"version"`
		Process struct {
			NodeVersion string `json:"nodeVersion"`
		} `json:"process"`
	}
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return "?"
	}
	return v.Version + " (node.js " + v.Process.NodeVersion + ")"
}

func wrkVersion(wrk string) string {
	out, _ := exec.Command(wrk, "-v").CombinedOutput() // exits 1 after the usage
	first, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(first); len(f) >= 2 {
		return f[1]
	}
	return "?"
}

// cpuModel is the first "model name" in /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// --- the report

func fmtLatency(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// bar is one of the bars and whether this run passes it.
type bar struct {
	what, got string
	pass      bool
	note      string
}

// bars evaluates the bars on ms. A bar on a run where fenceline
// counted errors fails: its throughput is not of right answers.
func bars(ms []measurement) []bar {
	find := func(server, w string) (wrkResult, bool) {
		for _, m := range ms {
			if m.server == server && m.workload == w {
				return m.res, true
			}
		}
		return wrkResult{}, false
	}
	var out []bar
	ratio := func(w, over string, min float64) {
		b := bar{what: fmt.Sprintf("(%s) fenceline req/s ≥ %.0f× mountebank's", w[:1], min)}
		if over == serverCeiling {
			b.what = fmt.Sprintf("(%s) fenceline req/s ≥ %.0f%% of the ceiling's", w[:1], 100*min)
		}
		fl, ok1 := find(serverNode, w)
		o, ok2 := find(over, w)
		if over == serverCeiling {
			o, ok2 = find(serverCeiling, serverCeiling)
		}
		switch {
		case !ok1 || !ok2:
			b.got = "not measured"
		case o.RPS <= 0:
			b.got = "n/a"
			b.note = over + " completed no requests"
		default:
			r := fl.RPS / o.RPS
			b.got = fmtRatio(r, over)
			b.pass = r >= min
		}
		if fl.Errors() > 0 {
			b.pass = false
			b.note = fmt.Sprintf("fenceline counted %d errors", fl.Errors())
		}
		out = append(out, b)
	}
	ratio("a-static", serverCeiling, 0.70)
	ratio("a-static", serverMB, 5)
	ratio("b-100-equals", serverMB, 20)
	ratio("c-jsonpath", serverMB, 20)
	ratio("d-1000-matches", serverMB, 100)
	ratio("e-inject", serverMB, 2)
	ratio("f-decorate", serverMB, 2)
	ratio(tcpEcho, serverMB, 1)
	for _, w := range []string{"a-static", "b-100-equals", "c-jsonpath"} {
		b := bar{what: fmt.Sprintf("(%s) fenceline p99 < 5 ms", w[:1])}
		if fl, ok := find(serverNode, w); ok {
			b.got = fmtLatency(fl.P99)
			b.pass = fl.P99 < 5*time.Millisecond && fl.Errors() == 0
			if fl.Errors() > 0 {
				b.note = fmt.Sprintf("fenceline counted %d errors", fl.Errors())
			} else if ce, ok := find(serverCeiling, serverCeiling); ok {
				b.note = "the ceiling's p99: " + fmtLatency(ce.P99)
			}
		} else {
			b.got = "not measured"
		}
		out = append(out, b)
	}
	return out
}

// fmtRatio shows a ratio to the ceiling as a percentage, to mountebank as
// a multiple.
func fmtRatio(r float64, over string) string {
	if over == serverCeiling {
		return fmt.Sprintf("%.0f%%", 100*r)
	}
	if r < 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.0f×", r)
}

// report prints the table, the ratios and the bars; true if every bar
// passes.
func report(w io.Writer, c config, ms []measurement, notes []string) bool {
	model := cpuModel()
	if model != "" {
		model = " (" + model + ")"
	}
	fmt.Fprintf(w, "machine: %d CPUs%s, %s/%s; wrk (%d threads) and the servers share them\n",
		runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, c.threads)
	fmt.Fprintf(w, "wrk: %d keep-alive connections, %v per run after a %v warm-up, --timeout %v (a slower response is a timeout error), --latency\n",
		c.conns, c.duration, c.warmup, c.timeout)
	fmt.Fprintln(w, "every stub's response sets \"Connection: keep-alive\" on both servers: mountebank otherwise answers with Connection: close")
	mbHow := "as it starts out of the box (log level info, its log file in a temp dir)"
	if c.mbLogLevel != "" {
		mbHow = "with --loglevel " + c.mbLogLevel + " --nologfile"
	}
	fmt.Fprintf(w, "mountebank runs %s; the ceiling is a net/http hello-world server answering %q\n", mbHow, ceilingBody)
	for _, n := range notes {
		fmt.Fprintln(w, "note:", n)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "%-11s %-15s %12s %10s %10s %10s %8s\n", "server", "workload", "requests", "req/s", "p50", "p99", "errors")
	for _, m := range ms {
		fmt.Fprintf(w, "%-11s %-15s %12d %10.0f %10s %10s %8d\n", m.server, m.workload, m.res.Requests, m.res.RPS,
			fmtLatency(m.res.P50), fmtLatency(m.res.P99), m.res.Errors())
	}
	for _, m := range ms {
		if r := m.res; r.Errors() > 0 {
			fmt.Fprintf(w, "  errors, %s %s: connect %d, read %d, write %d, timeout %d, non-2xx/3xx %d\n",
				m.server, m.workload, r.Connect, r.Read, r.Write, r.Timeout, r.Non2xx)
		}
	}

	fmt.Fprintln(w, "\nratios (req/s)")
	byKey := map[[2]string]wrkResult{}
	for _, m := range ms {
		byKey[[2]string{m.server, m.workload}] = m.res
	}
	div := func(a, b float64) string {
		if b <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	if fl, ok := byKey[[2]string{serverNode, "a-static"}]; ok {
		fmt.Fprintf(w, "  %-15s fenceline/ceiling    %8s\n", "a-static", div(fl.RPS, byKey[[2]string{serverCeiling, serverCeiling}].RPS))
	}
	names := []string{}
	for _, wl := range workloads() {
		names = append(names, wl.name)
	}
	for _, name := range append(names, tcpEcho) {
		fl, ok1 := byKey[[2]string{serverNode, name}]
		mb, ok2 := byKey[[2]string{serverMB, name}]
		if ok1 && ok2 {
			fmt.Fprintf(w, "  %-15s fenceline/mountebank %8s\n", name, div(fl.RPS, mb.RPS))
		}
	}

	fmt.Fprintln(w, "\nbars")
	all := true
	passed := 0
	bs := bars(ms)
	for _, b := range bs {
		verdict := "PASS"
		if !b.pass {
			verdict = "FAIL"
			all = false
		} else {
			passed++
		}
		note := ""
		if b.note != "" {
			note = " (" + b.note + ")"
		}
		fmt.Fprintf(w, "  %-4s %-45s got %s%s\n", verdict, b.what, b.got, note)
	}
	fmt.Fprintf(w, "%d of %d bars pass\n", passed, len(bs))
	return all
}
