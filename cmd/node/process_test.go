package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/realnet"
)

// These tests start the real binary as separate processes on loopback
// (127.0.0.1-3), with real TCP between them and real files.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func nodeBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts the node binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fenceline-node-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "node")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// proc is one node process.
type proc struct {
	t      testing.TB
	name   string
	args   []string
	dir    string
	http   string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	mu     *sync.Mutex
	key    string // the API key it was started with, if any
}

type lockedBuffer struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (b lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(binPath, p.args...)
	p.cmd.Dir = p.dir
	p.cmd.Stderr = lockedBuffer{p.mu, p.stderr}
	require.NoError(p.t, p.cmd.Start())
	require.Eventually(p.t, func() bool { return p.status() != nil }, 10*time.Second, 20*time.Millisecond,
		"%s serves its status", p.name)
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type status struct {
	Name     string `json:"name"`
	ID       string `json:"id"`
	Leader   string `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Isolated bool   `json:"isolated"`
	Voters   []struct {
		Name string `json:"name"`
		HTTP string `json:"http"`
	} `json:"voters"`
}

var httpClient = &http.Client{Timeout: 3 * time.Second}

func (p *proc) status() *status {
	var st status
	if !p.statusInto(&st) {
		return nil
	}
	return &st
}

// statusInto decodes the node's status into v: false if it does not
// answer 200 with JSON.
func (p *proc) statusInto(v any) bool {
	req, _ := http.NewRequest("GET", "http://"+p.http+"/_cluster/status", nil)
	if p.key != "" {
		req.Header.Set(apiKeyHeader, p.key)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(v) == nil
}

// cluster starts n1 (founding) and joins n2 and n3 through it.
func cluster(t testing.TB) []*proc { return clusterVia(t, nil) }

// clusterVia is cluster with every node's peer traffic through px, if
// given: node i listens on 127.0.0.i:25525 and advertises its proxy on
// 127.0.0.i:26525.
func clusterVia(t testing.TB, px *proxies) []*proc { return clusterWith(t, px) }

// keyedRoot is a fresh directory for a cluster's nodes, with a control
// key and a data key every node is started with.
func keyedRoot(t testing.TB) (root, controlKey, dataKey string) {
	root = t.TempDir()
	keyFile := func(name string) string {
		path := filepath.Join(root, name)
		require.NoError(t, os.WriteFile(path, []byte(hex.EncodeToString(realnet.GenerateKey())+"\n"), 0o600))
		return path
	}
	return root, keyFile("control.key"), keyFile("data.key")
}

// clusterWith is clusterVia with extra flags for every node.
func clusterWith(t testing.TB, px *proxies, extra ...string) []*proc {
	nodeBinary(t)
	root, ck, dk := keyedRoot(t)
	var ps []*proc
	for i, name := range []string{"n1", "n2", "n3"} {
		ip := fmt.Sprintf("127.0.0.%d", i+1)
		args := []string{"-name", name, "-data-dir", filepath.Join(root, name), "-peer", ip + ":25525", "-http", ip + ":2525",
			"-control-key-file", ck, "-data-key-file", dk}
		if px != nil {
			px.listen(t, ip, ip+":26525", ip+":25525")
			args = append(args, "-advertise-peer", ip+":26525")
		}
		if i > 0 {
			args = append(args, "-join", "127.0.0.1:2525")
		}
		args = append(args, extra...)
		p := &proc{t: t, name: name, args: args, dir: root, http: ip + ":2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
		for j, a := range extra {
			if a == "-apikey-file" && j+1 < len(extra) {
				b, err := os.ReadFile(extra[j+1])
				require.NoError(t, err)
				p.key = strings.TrimSpace(string(b))
			}
		}
		p.start()
		ps = append(ps, p)
		t.Cleanup(p.kill)
	}
	require.Eventually(t, func() bool {
		st := ps[0].status()
		return st != nil && len(st.Voters) == 3
	}, 15*time.Second, 50*time.Millisecond, "three voters")
	// Every member's HTTP address is in its membership entry: each node
	// knows all three from the log.
	for _, p := range ps {
		require.Eventually(t, func() bool {
			st := p.status()
			if st == nil || len(st.Voters) != 3 {
				return false
			}
			for _, v := range st.Voters {
				if v.HTTP != "127.0.0."+v.Name[1:]+":2525" {
					return false
				}
			}
			return true
		}, 5*time.Second, 50*time.Millisecond, "%s knows every member's HTTP address", p.name)
	}
	return ps
}

// flowCall is one flow-state request through a node's API, as a client
// records it: ok with an answer, refused (a 4xx, or a 503 whose reason
// says nothing was applied), or unknown (a timeout, a dropped connection,
// a 503 "timeout").
type flowCall struct {
	method, path, body string
}

type flowAnswer struct {
	code   int
	owner  string // the Fenceline-Owner header
	reason string
	body   map[string]json.RawMessage
	err    error // transport failure: the outcome is unknown
}

func do(node string, c flowCall) flowAnswer {
	req, _ := http.NewRequest(c.method, "http://"+node+c.path, strings.NewReader(c.body))
	resp, err := httpClient.Do(req)
	if err != nil {
		return flowAnswer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := flowAnswer{code: resp.StatusCode, owner: resp.Header.Get("Fenceline-Owner")}
	_ = json.Unmarshal(b, &a.body)
	if r, ok := a.body["reason"]; ok {
		_ = json.Unmarshal(r, &a.reason)
	}
	return a
}

// refused reports an answer that says the operation was not applied.
func (a flowAnswer) refused() bool {
	if a.err != nil {
		return false
	}
	switch a.reason {
	case "fenced", "not_owner", "isolated", "not_adopted", "shed", "unreachable", "bad_request":
		return true
	}
	return a.code >= 400 && a.code < 500 && a.code != http.StatusNotFound
}

// recorder is a history shared by concurrent clients.
type recorder struct {
	mu    sync.Mutex
	h     *linearizability.History
	start time.Time
	// stale is the harness switch that proves the check bites: every
	// read that found a value is recorded as having found the value the
	// flow's previous read found, as a node serving a stale copy would
	// answer.
	stale    bool
	lastRead map[string]string
}

func (r *recorder) call(client int, flow string, in linearizability.FlowInput) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h.Call(client, flow, in, time.Since(r.start))
}

func (r *recorder) finish(id int, in linearizability.FlowInput, a flowAnswer) (ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Since(r.start)
	switch {
	case a.err == nil && (a.code == http.StatusOK || (a.code == http.StatusNotFound && a.reason == "not_found")):
		out := linearizability.FlowOutput{}
		switch in.Op {
		case linearizability.FlowGet:
			if v, found := a.body["value"]; found && a.code == http.StatusOK {
				out.Found, out.Value = true, string(v)
				flow := r.h.Op(id).Key
				if prev, seen := r.lastRead[flow]; r.stale && seen {
					out.Value = prev
				}
				r.lastRead[flow] = string(v)
			}
		case linearizability.FlowCas:
			_ = json.Unmarshal(a.body["succeeded"], &out.Succeeded)
		}
		r.h.Return(id, out, now)
		return true
	case a.refused():
		r.h.Refuse(id, a.reason, now)
	default:
		why := a.reason
		if a.err != nil {
			why = a.err.Error()
		}
		r.h.GiveUp(id, why, now)
	}
	return false
}

// load is eight clients running random set, get, cas and clear operations
// on six flows of imposter 4545 through random nodes, into one history.
type load struct {
	t     *testing.T
	nodes []string
	rec   *recorder
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	oks   int64
	// lastOK is when an operation last succeeded, gap the longest time
	// between two successes since longestGap last asked.
	lastOK time.Time
	gap    time.Duration
}

// longestGap is the longest stretch without a success since it was last
// asked (or since the start): what the clients saw of an outage.
func (l *load) longestGap() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gap
	l.gap = 0
	return g
}

// startLoad starts the clients; stale is the recorder's harness switch.
func startLoad(t *testing.T, ps []*proc, stale bool) *load {
	l := &load{t: t, stop: make(chan struct{}),
		rec: &recorder{h: linearizability.NewHistory(0), start: time.Now(), stale: stale, lastRead: map[string]string{}}}
	for _, p := range ps {
		l.nodes = append(l.nodes, p.http)
	}
	for id := range 8 {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); l.client(id) }()
	}
	return l
}

func (l *load) count() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.oks
}

// resumed waits until operations succeed again and says how long it took.
func (l *load) resumed(what string) time.Duration {
	start, before := time.Now(), l.count()
	require.Eventually(l.t, func() bool { return l.count() > before+20 }, 20*time.Second, 10*time.Millisecond, "operations resume after %s", what)
	return time.Since(start)
}

// finish stops the clients and checks the history: enough answered to
// judge, and every flow linearizable (porcupine's picture of one that is
// not is written beside the test output).
func (l *load) finish(least int) {
	close(l.stop)
	l.wg.Wait()
	ok, refused, unknown := l.rec.h.Count()
	l.t.Logf("history: ok=%d refused=%d unknown=%d", ok, refused, unknown)
	require.Greater(l.t, ok, least, "enough answered to judge")
	for _, res := range linearizability.CheckFlows(l.rec.h, 30*time.Second) {
		require.NotEqual(l.t, porcupine.Unknown, res.Verdict, "flow %s: the check could not decide", res.Flow)
		if res.Verdict != porcupine.Ok {
			l.t.Logf("porcupine's picture of %s: %s", res.Flow, visualize(l.t, l.rec.h, res.Flow))
		}
		require.Equal(l.t, porcupine.Ok, res.Verdict, "flow %s is not linearizable:\n%s", res.Flow, res.Describe)
	}
}

// client runs random operations until the load stops.
// add has the clients call through addrs too from now on.
func (l *load) add(addrs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = append(slices.Clip(l.nodes), addrs...)
}

func (l *load) client(id int) {
	r, stop := l.rec, l.stop
	rnd := rand.New(rand.NewPCG(uint64(id), 7))
	flows := []string{"f0", "f1", "f2", "f3", "f4", "f5"}
	for {
		select {
		case <-stop:
			return
		default:
		}
		f := flows[rnd.IntN(len(flows))]
		base := "/admin/imposters/4545/flow-state/" + f
		v := fmt.Sprintf("%d", rnd.IntN(4))
		var in linearizability.FlowInput
		var c flowCall
		switch rnd.IntN(4) {
		case 0:
			in = linearizability.FlowInput{Op: linearizability.FlowSet, Key: "k", Value: v}
			c = flowCall{"PUT", base + "/k", `{"value": ` + v + `, "durability": "sync"}`}
		case 1:
			in = linearizability.FlowInput{Op: linearizability.FlowGet, Key: "k"}
			c = flowCall{"GET", base + "/k", ""}
		case 2:
			e := fmt.Sprintf("%d", rnd.IntN(4))
			in = linearizability.FlowInput{Op: linearizability.FlowCas, Key: "k", Expect: e, Value: v}
			c = flowCall{"POST", base + "/k/cas", `{"expect": ` + e + `, "value": ` + v + `}`}
		default:
			in = linearizability.FlowInput{Op: linearizability.FlowClear}
			c = flowCall{"DELETE", base, ""}
		}
		l.mu.Lock()
		via := l.nodes[rnd.IntN(len(l.nodes))]
		l.mu.Unlock()
		op := r.call(id, "i4545:"+f, in)
		if r.finish(op, in, do(via, c)) {
			l.mu.Lock()
			l.oks++
			now := time.Now()
			if !l.lastOK.IsZero() {
				l.gap = max(l.gap, now.Sub(l.lastOK))
			}
			l.lastOK = now
			l.mu.Unlock()
		}
		time.Sleep(time.Duration(rnd.IntN(10)) * time.Millisecond)
	}
}

// Three real processes under concurrent flow operations through every
// node, while a node that is not the leader is killed -9 and restarted,
// then the leader: the history, with 503s and timeouts as unknown
// outcomes, is linearizable flow by flow, and operations resume after
// each kill.
func TestThreeProcessesKilledUnderLoad(t *testing.T) {
	ps := cluster(t)
	ld := startLoad(t, ps, false)
	leader := func() int {
		for i, p := range ps {
			if st := p.status(); st != nil && st.IsLeader {
				return i
			}
		}
		return -1
	}
	resumed := ld.resumed
	resumed("the start")

	// Kill a node that is not the leader; restart it.
	l := leader()
	require.GreaterOrEqual(t, l, 0)
	victim := ps[(l+1)%3]
	victim.kill()
	t.Logf("killed %s (not the leader); operations went on after %v", victim.name, resumed("killing "+victim.name))
	time.Sleep(time.Second)
	victim.start()
	resumed("restarting " + victim.name)

	// Kill the leader; a new one is elected; restart the old one.
	l = leader()
	require.GreaterOrEqual(t, l, 0)
	old := ps[l]
	killedAt := time.Now()
	old.kill()
	require.Eventually(t, func() bool { nl := leader(); return nl >= 0 && ps[nl] != old }, 15*time.Second, 10*time.Millisecond, "a new leader")
	t.Logf("killed the leader %s; a new leader after %v; operations resumed after %v", old.name, time.Since(killedAt), resumed("killing the leader"))
	old.start()
	resumed("restarting " + old.name)
	ld.finish(200)

	// An explicit removal: n3 leaves the voters.
	code, body := removeMember(t, ps[0].http, filepath.Join(ps[0].dir, "control.key"), "n3")
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		st := ps[0].status()
		return st != nil && len(st.Voters) == 2
	}, 10*time.Second, 20*time.Millisecond, "n3 removed")
}

// The check bites: with the harness switch that records stale reads, the
// same workload on the same cluster is not linearizable.
func TestTheCheckBitesOnStaleReads(t *testing.T) {
	ps := cluster(t)
	ld := startLoad(t, ps, true)
	time.Sleep(3 * time.Second)
	close(ld.stop)
	ld.wg.Wait()
	rec := ld.rec
	failed := 0
	for _, res := range linearizability.CheckFlows(rec.h, 30*time.Second) {
		if res.Verdict == porcupine.Illegal {
			failed++
		}
	}
	require.Positive(t, failed, "stale reads must fail the check")
	t.Logf("porcupine's picture of i4545:f0 with stale reads: %s", visualize(t, rec.h, "i4545:f0"))
}

// With no flags at all the node founds a one-node cluster on loopback,
// with keys generated into ./fenceline-data (mode 0600), and leads it.
func TestNoFlagsFoundsAOneNodeCluster(t *testing.T) {
	nodeBinary(t)
	dir := t.TempDir()
	p := &proc{t: t, name: "n1", dir: dir, http: defaultHTTP, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
	p.start()
	defer p.kill()
	require.Eventually(t, func() bool { st := p.status(); return st != nil && st.IsLeader }, 10*time.Second, 20*time.Millisecond)
	for _, k := range []string{"control.key", "data.key"} {
		fi, err := os.Stat(filepath.Join(dir, defaultDataDir, k))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), k)
	}
	// The node serves mountebank's API: an imposter created through it
	// answers on its own port, and records what it was asked.
	resp, err := httpClient.Post("http://"+defaultHTTP+"/imposters", "application/json", strings.NewReader(
		`{"protocol":"http","port":4545,"recordRequests":true,"stubs":[{"predicates":[{"equals":{"path":"/hello"}}],"responses":[{"is":{"body":"world"}}]}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, err = httpClient.Get("http://127.0.0.1:4545/hello?x=1")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "world", string(b))
	resp, err = httpClient.Get("http://" + defaultHTTP + "/imposters/4545")
	require.NoError(t, err)
	var imp struct {
		NumberOfRequests int `json:"numberOfRequests"`
		Requests         []struct {
			Path  string            `json:"path"`
			Query map[string]string `json:"query"`
		} `json:"requests"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&imp))
	resp.Body.Close()
	require.Equal(t, 1, imp.NumberOfRequests)
	require.Equal(t, "/hello", imp.Requests[0].Path)
	require.Equal(t, map[string]string{"x": "1"}, imp.Requests[0].Query)
	// SIGTERM: a clean stop, exit 0.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Wait())
	require.Contains(t, p.log(), "msg=stopped")
}

// A mistake in how the node is started is one line on stderr and exit
// code 2: a bad flag, a short key file, a data dir another node holds.
func TestBadStartsExitTwo(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("short"), 0o600))
	holder := &proc{t: t, name: "n1", dir: dir, http: "127.0.0.4:2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{},
		args: []string{"-http", "127.0.0.4:2525", "-peer", "127.0.0.4:25525"}}
	holder.start()
	defer holder.kill()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown flag":   {[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		"short key":      {[]string{"-control-key-file", short}, "holds 5 bytes"},
		"bad address":    {[]string{"-http", "nowhere"}, "-http"},
		"locked dir":     {[]string{"-http", "127.0.0.5:2525", "-peer", "127.0.0.5:25525"}, "another process holds its lock"},
		"stray argument": {[]string{"extra"}, `unexpected argument "extra"`},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, name)
		require.Equal(t, 2, exit.ExitCode(), name)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		require.Contains(t, lines[len(lines)-1], tc.want, name)
		require.True(t, strings.HasPrefix(lines[len(lines)-1], "node: "), name)
	}
}

// Leases through the API: a refusal is 409 naming the holder and when its
// lease lapses; only the holder releases; the watch stream shows the
// grant, the expiry and the release as distinct events.
func TestLeasesAndWatch(t *testing.T) {
	nodeBinary(t)
	dir := t.TempDir()
	p := &proc{t: t, name: "n1", dir: dir, http: "127.0.0.6:2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{},
		args: []string{"-http", "127.0.0.6:2525", "-peer", "127.0.0.6:25525"}}
	p.start()
	defer p.kill()
	require.Eventually(t, func() bool { st := p.status(); return st != nil && st.IsLeader }, 10*time.Second, 20*time.Millisecond)

	resp, err := http.Get("http://" + p.http + "/_cluster/watch?prefix=sched")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))
	events := make(chan map[string]any, 16)
	go func() {
		dec := json.NewDecoder(resp.Body)
		for {
			var e map[string]any
			if dec.Decode(&e) != nil {
				close(events)
				return
			}
			events <- e
		}
	}()
	lease := func(c flowCall) flowAnswer { return do(p.http, c) }
	a := lease(flowCall{"PUT", "/_cluster/leases/scheduler", `{"holder": "a", "ttlSeconds": 0.5}`})
	require.Equal(t, http.StatusOK, a.code)
	b := lease(flowCall{"PUT", "/_cluster/leases/scheduler", `{"holder": "b", "ttlSeconds": 5}`})
	require.Equal(t, http.StatusConflict, b.code)
	require.Equal(t, "held", b.reason)
	require.JSONEq(t, `"a"`, string(b.body["holder"]))
	require.Contains(t, b.body, "until_ms")
	require.Equal(t, http.StatusConflict, lease(flowCall{"DELETE", "/_cluster/leases/scheduler?holder=b", ""}).code, "only the holder releases")
	require.Equal(t, http.StatusBadRequest, lease(flowCall{"PUT", "/_cluster/leases/scheduler", `{"holder": "b"}`}).code, "no ttl")
	require.Eventually(t, func() bool {
		return lease(flowCall{"GET", "/_cluster/leases/scheduler", ""}).code == http.StatusNotFound
	}, 5*time.Second, 50*time.Millisecond, "a's lease lapses")
	require.Equal(t, http.StatusOK, lease(flowCall{"PUT", "/_cluster/leases/scheduler", `{"holder": "b", "ttlSeconds": 5}`}).code)
	require.Equal(t, http.StatusOK, lease(flowCall{"DELETE", "/_cluster/leases/scheduler?holder=b", ""}).code)

	var kinds []string
	for len(kinds) < 4 {
		select {
		case e, ok := <-events:
			require.True(t, ok, "the stream ended")
			kinds = append(kinds, fmt.Sprintf("%v %v", e["type"], e["holder"]))
		case <-time.After(5 * time.Second):
			t.Fatalf("events so far: %v", kinds)
		}
	}
	require.Equal(t, []string{"put a", "expired a", "put b", "deleted b"}, kinds)
}

// A stranger at the peer port gets bounded work: garbage, a frame sealed
// under other keys and an oversize length each end in a closed connection;
// the node keeps serving and counts each.
func TestStrangersAtThePeerPort(t *testing.T) {
	nodeBinary(t)
	dir := t.TempDir()
	p := &proc{t: t, name: "n1", dir: dir, http: "127.0.0.7:2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{},
		args: []string{"-http", "127.0.0.7:2525", "-peer", "127.0.0.7:25525"}}
	p.start()
	defer p.kill()
	// A frame sealed under another cluster's keys, addressed to n1.
	var foreign []byte
	other, err := transport.New(transport.Config{Self: 9, Epoch: 1, Keys: transport.Keys{Data: realnet.GenerateKey()},
		Rand: rand.New(rand.NewPCG(1, 2)), Clock: clock.NewManual(time.Unix(0, 0)),
		Classify: func([]byte) (transport.Kind, bool) { return transport.Kind{Class: transport.Data}, true }},
		senderFunc(func(_ dial.NodeID, f []byte) error { foreign = f; return nil }), dial.HandlerFunc(func(dial.NodeID, []byte) {}))
	require.NoError(t, err)
	require.NoError(t, other.Send(dial.IDFromName("n1"), []byte("hello")))
	for name, first := range map[string][]byte{
		"garbage":         append(binary.BigEndian.AppendUint32(nil, 18), "GET / HTTP/1.1\r\n\r\n"...),
		"oversize length": binary.BigEndian.AppendUint32(nil, 0xFFFFFFF0),
		"a bare forgery":  frameOf(transport.Forge(transport.Control, 1, 2, dial.IDFromName("n1"), 1, transport.Nonce{}, transport.Nonce{}, []byte{1, 8, 4})),
		"another cluster": frameOf(foreign),
	} {
		c, err := net.Dial("tcp", "127.0.0.7:25525")
		require.NoError(t, err, name)
		_, _ = c.Write(first)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = c.Read(make([]byte, 1))
		require.Error(t, err, name)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: closed, not left open", name)
		_ = c.Close()
	}
	require.NotNil(t, p.status(), "still serving")
	var st struct {
		Transport realnet.TCPStats `json:"transport"`
	}
	resp, err := http.Get("http://" + p.http + "/_cluster/status")
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Equal(t, uint64(3), st.Transport.AuthFailed, "garbage, the forgery, another cluster's frame")
	require.Equal(t, uint64(1), st.Transport.Oversize)
}

func frameOf(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

type senderFunc func(dial.NodeID, []byte) error

func (f senderFunc) Send(to dial.NodeID, b []byte) error { return f(to, b) }

// visualize writes porcupine's HTML picture of a flow's history beside
// the test's output (the system's temporary directory, which outlives the
// test) and returns its path.
func visualize(t *testing.T, h *linearizability.History, flow string) string {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("fenceline-%s-%s.html", t.Name(), strings.NewReplacer(":", "_", "/", "_").Replace(flow)))
	f, err := os.Create(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if _, err := linearizability.VisualizeFlow(h, flow, 30*time.Second, f); err != nil {
		return err.Error()
	}
	return path
}

// proxies stand between the nodes' peer ports: each forwards connections
// to one node, and knows the node a connection comes from by its source
// address (nodes dial from the address they listen on). Cutting a link
// closes its connections and refuses new ones, as a partition would.
type proxies struct {
	mu      sync.Mutex
	blocked map[[2]string]bool       // {from IP, to IP}
	conns   map[[2]string][]net.Conn // open connections per link
	lns     []net.Listener
}

func newProxies(t *testing.T) *proxies {
	p := &proxies{blocked: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, ln := range p.lns {
			_ = ln.Close()
		}
		for _, cs := range p.conns {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	})
	return p
}

func (p *proxies) listen(t testing.TB, toIP, addr, target string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p.mu.Lock()
	p.lns = append(p.lns, ln)
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			from, _, _ := net.SplitHostPort(in.RemoteAddr().String())
			link := [2]string{from, toIP}
			p.mu.Lock()
			if p.blocked[link] {
				p.mu.Unlock()
				_ = in.Close()
				continue
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				_ = in.Close()
				continue
			}
			p.conns[link] = append(p.conns[link], in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
}

// cut blocks both directions between a and the others.
func (p *proxies) cut(a string, others ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range others {
		for _, link := range [][2]string{{a, b}, {b, a}} {
			p.blocked[link] = true
			for _, c := range p.conns[link] {
				_ = c.Close()
			}
			delete(p.conns, link)
		}
	}
}

func (p *proxies) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = map[[2]string]bool{}
}

// The leader cut off from the other two and healed: the cut-off side stops
// serving as an owner within the isolation window (D-17), the majority
// elects a new leader and serves, every copy converges after the heal,
// and the whole history is linearizable.
func TestLeaderCutOffAndHealed(t *testing.T) {
	px := newProxies(t)
	ps := clusterVia(t, px)
	ld := startLoad(t, ps, false)
	nodes, resumed := ld.nodes, ld.resumed
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	resumed("the start")
	l := -1
	require.Eventually(t, func() bool {
		for i, p := range ps {
			if st := p.status(); st != nil && st.IsLeader {
				l = i
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	var others []string
	for i, ip := range ips {
		if i != l {
			others = append(others, ip)
		}
	}
	cutAt := time.Now()
	px.cut(ips[l], others...)
	require.Eventually(t, func() bool { st := ps[l].status(); return st != nil && st.Isolated }, 10*time.Second, 10*time.Millisecond,
		"the cut-off leader knows it is isolated")
	t.Logf("cut off the leader %s; it declared itself isolated after %v", ps[l].name, time.Since(cutAt))
	require.Eventually(t, func() bool { return metric(ps[l].http, "fenceline_isolated_seconds_total") > 0 }, 5*time.Second, 50*time.Millisecond,
		"its metrics count the time it has been isolated")
	require.Equal(t, 1.0, metric(ps[l].http, "fenceline_isolated"))
	// From now on it serves no flow as owner: nothing through it succeeds.
	for i := range 20 {
		a := do(ps[l].http, flowCall{"GET", fmt.Sprintf("/admin/imposters/4545/flow-state/f%d/k", i%6), ""})
		require.NotEqual(t, http.StatusOK, a.code, "the isolated node answered a flow read")
		require.NotEqual(t, http.StatusNotFound, a.code, "the isolated node answered a flow read")
	}
	require.Eventually(t, func() bool {
		for i, p := range ps {
			if i != l {
				if st := p.status(); st != nil && st.IsLeader {
					return true
				}
			}
		}
		return false
	}, 15*time.Second, 10*time.Millisecond, "the majority elects a leader")
	resumed("the cut")
	t.Logf("the majority elected a leader and served again %v after the cut", time.Since(cutAt))

	healAt := time.Now()
	px.heal()
	resumed("the heal")
	t.Logf("healed; operations went on %v after", time.Since(healAt))
	ld.finish(50)

	// Every copy converges: each node's local copy of every flow says
	// what the owner says.
	require.Eventually(t, func() bool {
		for f := range 6 {
			path := fmt.Sprintf("/admin/imposters/4545/flow-state/f%d/k", f)
			want := do(nodes[0], flowCall{"GET", path, ""})
			if want.err != nil || (want.code != http.StatusOK && want.code != http.StatusNotFound) {
				return false
			}
			for _, n := range nodes {
				got := do(n, flowCall{"GET", path + "?consistency=local", ""})
				if got.code != want.code || string(got.body["value"]) != string(want.body["value"]) {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "every copy converges after the heal")
}

// metric reads one unlabelled metric from a node's /metrics (-1 if absent).
func metric(node, name string) float64 {
	resp, err := httpClient.Get("http://" + node + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
