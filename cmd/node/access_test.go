package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/imposterhttp"
)

// These tests are issue 26's findings, each against the real binary:
// what a caller without credentials can no longer do.

// callAs is call with headers (name, value pairs), from a chosen local
// address if from is not empty.
func callAs(method, url, body, from string, headers ...string) (int, string, http.Header) {
	tr := &http.Transport{DisableKeepAlives: true}
	if from != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 3 * time.Second}
		tr.DialContext = d.DialContext
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// single starts one node on 127.0.0.6 with extra flags, its API key (if
// one is given) known to its status calls.
func single(t *testing.T, key string, extra ...string) *proc {
	nodeBinary(t)
	dir := t.TempDir()
	args := append([]string{"-http", "127.0.0.6:2525", "-peer", "127.0.0.6:25525"}, extra...)
	if key != "" {
		f := filepath.Join(dir, "api.key")
		require.NoError(t, os.WriteFile(f, []byte(key+"\n"), 0o600))
		args = append(args, "-apikey-file", f)
	}
	p := &proc{t: t, name: "n1", args: args, dir: dir, http: "127.0.0.6:2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, key: key}
	p.start()
	t.Cleanup(p.kill)
	require.Eventually(t, func() bool { st := p.status(); return st != nil && st.IsLeader }, 10*time.Second, 20*time.Millisecond)
	return p
}

// Finding 1: with an API key, every call without it is 401 in
// mountebank's words — mountebank's API, the cluster API, the flow
// state, the raw KV, member removal without an attestation — while the
// imposters themselves answer anyone, as mountebank's do.
func TestTheAPIKeyGuardsEveryCall(t *testing.T) {
	p := single(t, "s3cret")
	base := "http://" + p.http
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/imposters", ""},
		{"POST", "/imposters", `{"protocol":"http","port":4601}`},
		{"DELETE", "/imposters", ""},
		{"GET", "/config", ""},
		{"GET", "/_cluster/status", ""},
		{"PUT", "/_cluster/kv/x", `{"value":1}`},
		{"PUT", "/admin/imposters/4601/flow-state/f/k", `{"value":1}`},
		{"DELETE", "/_cluster/leases/l", ""},
		{"GET", "/metrics", ""},
	} {
		for _, key := range []string{"", "wrong", "s3cre", "s3cret2"} {
			code, body, _ := callAs(c.method, base+c.path, c.body, "", apiKeyHeader, key)
			require.Equal(t, http.StatusUnauthorized, code, "%s %s with key %q: %s", c.method, c.path, key, body)
			require.Contains(t, body, `"code":"unauthorized"`)
		}
	}
	code, body, _ := callAs("POST", base+"/imposters", `{"protocol":"http","port":4601,"stubs":[{"responses":[{"is":{"body":"hi"}}]}]}`, "", apiKeyHeader, "s3cret")
	require.Equal(t, http.StatusCreated, code, body)
	code, body, _ = callAs("GET", "http://127.0.0.6:4601/", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "hi", body, "imposters answer without the key")
	code, _, _ = callAs("GET", base+"/imposters", "", "", apiKeyHeader, "s3cret")
	require.Equal(t, http.StatusOK, code)
	// The members' own routes need the control key, not the API key: a
	// stranger gets nothing from them either.
	code, body, _ = callAs("DELETE", base+"/_cluster/members/n1", "", "")
	require.NotEqual(t, http.StatusOK, code, body)
	code, body, _ = callAs("POST", base+"/_cluster/records", `[{"port":4601,"list":true}]`, "")
	require.Equal(t, http.StatusForbidden, code, body)
	// A resize and an added group are the control key's word too (a
	// fleet's founder asks with its attestation, and has no API key).
	code, body, _ = callAs("PUT", base+"/_cluster/fleet/target", `{"groups":1,"epoch":1}`, "")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "attestation")
	code, body, _ = callAs("POST", base+"/_cluster/fleet/groups", `{"name":"n9","peer":"127.0.0.9:7000","group":1,"mIdx":1,"attestation":"v2.0.0.00.00"}`, "")
	require.NotEqual(t, http.StatusOK, code, body)
	require.NotEqual(t, http.StatusUnauthorized, code, body)
	code, _, _ = callAs("GET", base+"/imposters/4601", "", "", apiKeyHeader, "s3cret")
	require.Equal(t, http.StatusOK, code, "still there")
}

// Finding 1, from a browser: without a key, a page elsewhere cannot
// create an imposter with a text/plain POST (Origin), nor reach the API
// through a DNS name it rebound to loopback (Host).
func TestBrowsersCannotDriveALoopbackNode(t *testing.T) {
	p := single(t, "")
	base := "http://" + p.http
	create := `{"protocol":"http","port":4602}`
	code, body, _ := callAs("POST", base+"/imposters", create, "", "Content-Type", "text/plain", "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body, _ = callAs("POST", base+"/imposters", create, "", "Host", "rebound.evil.example:2525")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body, _ = callAs("POST", base+"/imposters", create, "", "Origin", "null")
	require.Equal(t, http.StatusForbidden, code, body)
	code, _, _ = callAs("GET", base+"/imposters/4602", "", "")
	require.Equal(t, http.StatusNotFound, code, "nothing was created")
	// The node's own page and command-line clients are served.
	code, body, _ = callAs("POST", base+"/imposters", create, "", "Origin", base)
	require.Equal(t, http.StatusCreated, code, body)
	code, body, _ = callAs("GET", base+"/imposters", "", "", "Host", "localhost:2525")
	require.Equal(t, http.StatusOK, code, body)
	code, body, _ = callAs("GET", base+"/config", "", "")
	require.Equal(t, http.StatusOK, code, body)
}

// Finding 1, the network: -ipWhitelist refuses other addresses at
// accept, for the API and the imposters alike; 127.0.0.1 is always let
// in, as mountebank lets in its own interfaces.
func TestTheAllowListClosesOtherAddresses(t *testing.T) {
	p := single(t, "", "-ipWhitelist", "127.0.0.8|127.0.0.1")
	base := "http://" + p.http
	code, body, _ := callAs("POST", base+"/imposters", `{"protocol":"http","port":4603,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`, "127.0.0.8")
	require.Equal(t, http.StatusCreated, code, body)
	code, _, _ = callAs("GET", base+"/imposters", "", "127.0.0.9")
	require.Equal(t, 0, code, "closed at accept")
	code, _, _ = callAs("GET", "http://127.0.0.6:4603/", "", "127.0.0.9")
	require.Equal(t, 0, code, "the imposter too")
	code, body, _ = callAs("GET", "http://127.0.0.6:4603/", "", "127.0.0.8")
	require.Equal(t, "ok", body)
	code, _, _ = callAs("GET", base+"/imposters", "", "127.0.0.1")
	require.Equal(t, http.StatusOK, code)
}

// Findings 1 and 6: imposters listen on their own host, apart from the
// API; only in the node's port range; never below 1024 unless the range
// says so; and an imposter without a port gets one in the range.
func TestImpostersHaveTheirOwnHostAndPorts(t *testing.T) {
	p := single(t, "", "-imposter-host", "127.0.0.7", "-imposter-ports", "4610-4612")
	base := "http://" + p.http
	code, body, _ := callAs("POST", base+"/imposters", `{"protocol":"http","port":4610,"stubs":[{"responses":[{"is":{"body":"here"}}]}]}`, "")
	require.Equal(t, http.StatusCreated, code, body)
	code, body, _ = callAs("GET", "http://127.0.0.7:4610/", "", "")
	require.Equal(t, "here", body)
	code, _, _ = callAs("GET", "http://127.0.0.6:4610/", "", "")
	require.Equal(t, 0, code, "not on the API's host")
	for _, port := range []int{80, 4613, 8080} {
		code, body, _ = callAs("POST", base+"/imposters", fmt.Sprintf(`{"protocol":"http","port":%d}`, port), "")
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "outside this node's imposter ports")
	}
	for range 2 {
		code, body, _ = callAs("POST", base+"/imposters", `{"protocol":"http"}`, "")
		require.Equal(t, http.StatusCreated, code, body)
		require.Regexp(t, `"port":\s*461[12]`, body)
	}
	code, body, _ = callAs("POST", base+"/imposters", `{"protocol":"http"}`, "")
	require.Equal(t, http.StatusBadRequest, code, "the range is full: %s", body)
}

// Finding 7: the API's connections are bounded, per address and in all:
// one address cannot hold more than maxAdminConnsPerIP, and the others
// are still served.
func TestTheAPIConnectionBudget(t *testing.T) {
	p := single(t, "")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.8")}}
	for range maxAdminConnsPerIP {
		c, err := d.Dial("tcp", p.http)
		require.NoError(t, err)
		held = append(held, c)
	}
	// One more from the same address is closed at accept.
	c, err := d.Dial("tcp", p.http)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := c.Read(make([]byte, 1))
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF, "closed, not held")
	_ = c.Close()
	code, _, _ := callAs("GET", "http://"+p.http+"/imposters", "", "127.0.0.9")
	require.Equal(t, http.StatusOK, code, "another address is served")
}

// Secure by default: a node whose API is reachable beyond loopback
// without a key does not start, unless told to.
func TestExposedWithoutAKeyRefusesToStart(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	for _, addr := range []string{"0.0.0.0:2591", ":2591", "10.9.8.7:2591"} {
		cmd := exec.Command(bin, "-http", addr, "-peer", "127.0.0.6:25591")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, addr)
		require.Equal(t, 2, exit.ExitCode(), addr)
		require.Contains(t, stderr.String(), "no API key is set", addr)
	}
	// -insecure says it is meant: it gets past the check (and fails here
	// only at binding an address this machine does not have).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "-http", "10.9.8.7:2591", "-peer", "127.0.0.6:25591", "-insecure", "-data-dir", t.TempDir()).CombinedOutput()
	require.NotContains(t, string(out), "no API key is set")
	require.Contains(t, string(out), "listen for HTTP on 10.9.8.7:2591")

	// Injection runs what API callers send: exposed, it needs the key,
	// -insecure or not; with one it gets past the check.
	out, err := exec.CommandContext(ctx, bin, "-http", "10.9.8.7:2591", "-peer", "127.0.0.6:25591", "-insecure", "-allowInjection", "-data-dir", t.TempDir()).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.ExitCode())
	require.Contains(t, string(out), "-allowInjection with -http 10.9.8.7:2591 reachable beyond loopback needs an API key")
	out, _ = exec.CommandContext(ctx, bin, "-http", "10.9.8.7:2591", "-peer", "127.0.0.6:25591", "-apikey", "k", "-allowInjection", "-data-dir", t.TempDir()).CombinedOutput()
	require.Contains(t, string(out), "listen for HTTP on 10.9.8.7:2591")
}

// A cluster with an API key works as one without: members join (the
// control key's attestation, not the API key), a change made through one
// member is answered once all serve it, and a read through another
// gathers every member's records (the member MAC) with nobody missing.
func TestAClusterWithAnAPIKey(t *testing.T) {
	nodeBinary(t)
	f := filepath.Join(t.TempDir(), "api.key")
	require.NoError(t, os.WriteFile(f, []byte("cluster-key\n"), 0o600))
	ps := clusterWith(t, nil, "-apikey-file", f)
	key := []string{apiKeyHeader, "cluster-key"}
	code, body, h := callAs("POST", "http://"+ps[0].http+"/imposters",
		`{"protocol":"http","port":4620,"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`, "", key...)
	require.Equal(t, http.StatusCreated, code, body)
	require.Empty(t, h.Get("X-Fenceline-Unconfirmed"))
	for _, p := range ps {
		code, body, _ := callAs("GET", "http://"+host(p)+":4620/from-"+p.name, "", "")
		require.Equal(t, http.StatusOK, code, body)
	}
	code, body, h = callAs("GET", "http://"+ps[2].http+"/imposters/4620", "", "", key...)
	require.Equal(t, http.StatusOK, code, body)
	require.Empty(t, h.Get("X-Fenceline-Missing"), "every member answered the gather")
	for _, p := range ps {
		require.Contains(t, body, `"/from-`+p.name+`"`)
	}
	code, _, _ = callAs("GET", "http://"+ps[2].http+"/imposters/4620", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
}

// The egress policy of an exposed node (finding 5): its proxies reach
// neither loopback (its own API among it), nor link-local metadata
// addresses, nor its own addresses; a node on loopback keeps
// mountebank's open proxies, and -egress-deny narrows them.
func TestAnExposedNodesProxiesStayOut(t *testing.T) {
	exposed, err := egressPolicy(config{http: "0.0.0.0:2525", imposterHost: "0.0.0.0"},
		&net.TCPAddr{IP: net.IPv4zero, Port: 2525}, "0.0.0.0:25525")
	require.NoError(t, err)
	local, err := egressPolicy(config{http: "127.0.0.1:2525", imposterHost: "127.0.0.1"}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2525}, "127.0.0.1:25525")
	require.NoError(t, err)
	narrowed, err := egressPolicy(config{http: "127.0.0.1:2525", imposterHost: "127.0.0.1", egressDeny: []string{"127.0.0.0/8"}},
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2525}, "127.0.0.1:25525")
	require.NoError(t, err)
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "upstream") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = upstream.Serve(ln) }()
	defer upstream.Close()
	for name, tc := range map[string]struct {
		e    imposterhttp.Egress
		want string
	}{"exposed": {exposed, "the egress policy refuses 127.0.0.1"}, "loopback": {local, "upstream"}, "narrowed": {narrowed, "the egress policy refuses"}} {
		s := imposterhttp.New("127.0.0.1", slog.New(slog.NewTextHandler(io.Discard, nil)), imposterhttp.NewMemoryConfig())
		s.UseEgress(tc.e)
		mux := http.NewServeMux()
		s.Register(mux)
		adm, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := &http.Server{Handler: mux}
		go func() { _ = srv.Serve(adm) }()
		code, body, _ := callAs("POST", "http://"+adm.Addr().String()+"/imposters",
			`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://`+ln.Addr().String()+`"}}]}]}`, "")
		require.Equal(t, http.StatusCreated, code, body)
		port := regexp.MustCompile(`"port":\s*(\d+)`).FindStringSubmatch(body)[1]
		_, body, _ = callAs("GET", "http://127.0.0.1:"+port+"/", "", "")
		require.Contains(t, body, tc.want, name)
		_ = srv.Close()
		s.Close()
	}
}

// Findings 2 and 3: one request no longer bricks a node. Removing the
// last voter is refused with 409, and the node serves on, after a
// restart too; the raw KV API cannot write an imposter definition past
// the admin API's checks, nor a fleet's directory or fences (a directory
// written so could hand a group partitions without a move).
func TestNoRequestBricksANode(t *testing.T) {
	p := single(t, "")
	code, body := removeMember(t, p.http, filepath.Join(p.dir, defaultDataDir, "control.key"), "n1")
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, "last_voter")
	for _, key := range []string{"imposter%2F4630", "proxyonce%2F4630:x", "fleet%2Fdirectory", "fleet%2Ffences"} {
		code, body, _ = callAs("PUT", "http://"+p.http+"/_cluster/kv/"+key, `{"value":{"creation":{"protocol":"http"}}}`, "")
		require.Equal(t, http.StatusForbidden, code, body)
	}
	code, body, _ = callAs("PUT", "http://"+p.http+"/_cluster/kv/mine", `{"value":1}`, "")
	require.Equal(t, http.StatusOK, code, body)
	p.kill()
	p.start()
	require.Eventually(t, func() bool { st := p.status(); return st != nil && st.IsLeader && len(st.Voters) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the node restarts and leads: nothing in its log removes its last voter")
	code, body, _ = callAs("POST", "http://"+p.http+"/imposters", `{"protocol":"http","port":4630}`, "")
	require.Equal(t, http.StatusCreated, code, body)
}

// Finding 7: a slow body and an idle keep-alive are no longer held
// forever: the first is closed at -http-read-timeout, the second at
// -http-idle-timeout (set short here; 30 s and 60 s by default).
func TestSlowAndIdleConnectionsAreLetGo(t *testing.T) {
	p := single(t, "", "-http-read-timeout", "1s", "-http-idle-timeout", "1s")
	slow, err := net.Dial("tcp", p.http)
	require.NoError(t, err)
	defer slow.Close()
	_, err = io.WriteString(slow, "POST /imposters HTTP/1.1\r\nHost: 127.0.0.6\r\nContent-Length: 100\r\n\r\n{\"proto")
	require.NoError(t, err)
	idle, err := net.Dial("tcp", p.http)
	require.NoError(t, err)
	defer idle.Close()
	_, err = io.WriteString(idle, "GET /imposters HTTP/1.1\r\nHost: 127.0.0.6\r\n\r\n")
	require.NoError(t, err)
	start := time.Now()
	for name, c := range map[string]net.Conn{"slow body": slow, "idle keep-alive": idle} {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.ReadAll(c) // an answer (the idle one's first call) then the close
		require.NoError(t, err, "%s: closed by the node, not by the test's deadline", name)
	}
	require.Less(t, time.Since(start), 9*time.Second)
}

// Finding 4: a lookup cannot read a file outside the node's data root,
// whatever path it names; its failure names no OS detail; and one under
// the root, written after the imposter was created, is read when the
// response is made.
func TestLookupReadsOnlyUnderTheDataRoot(t *testing.T) {
	root := t.TempDir()
	p := single(t, "", "-data-root", root)
	lookup := func(port int, path string) string {
		return fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"is":{"body":"row=${R}[\"x\"]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"/(.*)$"},"index":1},"fromDataSource":{"csv":{"path":%q,"keyColumn":"root"}},"into":"${R}"}}]}]}]}`, port, path)
	}
	for i, path := range []string{"/etc/passwd", "../../../../etc/passwd", "/dev/zero"} {
		code, body, _ := callAs("POST", "http://"+p.http+"/imposters", lookup(4640+i, path), "")
		require.Equal(t, http.StatusCreated, code, body)
		code, body, _ = callAs("GET", fmt.Sprintf("http://127.0.0.6:%d/root", 4640+i), "", "")
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, `row=${R}["x"]`, body, "%s: the tokens stay, nothing read", path)
	}
	_, logs, _ := callAs("GET", "http://"+p.http+"/logs", "", "")
	require.Contains(t, logs, "cannot read the CSV file")
	require.NotContains(t, logs, "no such file")
	require.NotContains(t, logs, "permission denied")
	code, body, _ := callAs("POST", "http://"+p.http+"/imposters", lookup(4650, "table.csv"), "")
	require.Equal(t, http.StatusCreated, code, body)
	require.NoError(t, os.WriteFile(filepath.Join(root, "table.csv"), []byte("root,x\nroot,found\n"), 0o600))
	_, body, _ = callAs("GET", "http://127.0.0.6:4650/root", "", "")
	require.Equal(t, "row=found", body)
}
