package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/imposterhttp"
)

// rotor sends each call to the next member in turn, as a round-robin
// balancer in front of the cluster does: admin calls to the members'
// HTTP addresses, imposter calls to the same port on their hosts.
type rotor struct {
	ps   []*proc
	next atomic.Uint64
}

func (r *rotor) member() *proc { return r.ps[int(r.next.Add(1)-1)%len(r.ps)] }

// answerOf is one call's answer: status, headers, body.
type answerOf struct {
	code   int
	header http.Header
	body   string
	err    error
}

func send(method, url, body string) answerOf {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := httpClient.Do(req)
	if err != nil {
		return answerOf{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answerOf{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (r *rotor) admin(method, path, body string) answerOf {
	return send(method, "http://"+r.member().http+path, body)
}

func (r *rotor) imposter(port int, path string) answerOf {
	return send("GET", fmt.Sprintf("http://%s:%d%s", host(r.member()), port, path), "")
}

// TestOneServerBehindARoundRobin holds a three-process cluster, every call
// sent to the next member in turn, to the answers one mountebank gives:
// an imposter created, changed or deleted is served so by every member
// once the call answers (from the first call after the cluster formed);
// recorded requests are every member's, once each, in order; a response
// cycle advances once per request across the cluster; proxyAlways
// recordings, and the replayable export, are the same through any member.
func TestOneServerBehindARoundRobin(t *testing.T) {
	ps := cluster(t)
	r := &rotor{ps: ps}

	// The first admin call, right after the cluster formed: no 503.
	a := r.admin("POST", "/imposters", `{"protocol":"http","port":4545,"recordRequests":true,"stubs":[
		{"predicates":[{"equals":{"path":"/retry"}}],"responses":[{"is":{"statusCode":500}},{"is":{"statusCode":200,"body":"ok"}}]},
		{"responses":[{"is":{"body":"hello"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	require.Empty(t, a.header.Get(imposterhttp.UnconfirmedHeader), "every member confirmed the creation")

	// Served by every member at once: no read first, no refused connection.
	for range 3 {
		require.Equal(t, "hello", r.imposter(4545, "/x").body)
	}
	// One cycle for the cluster: 500, 200, 500, 200 whichever member takes each.
	var codes []int
	for range 4 {
		codes = append(codes, r.imposter(4545, "/retry").code)
	}
	require.Equal(t, []int{500, 200, 500, 200}, codes)

	// Every request any member took, once each, in the order they came,
	// through any member.
	paths := func(a answerOf) []string {
		var v struct {
			N        int `json:"numberOfRequests"`
			Requests []struct {
				Path string `json:"path"`
			} `json:"requests"`
		}
		require.NoError(t, json.Unmarshal([]byte(a.body), &v), a.body)
		var out []string
		for _, q := range v.Requests {
			out = append(out, q.Path)
		}
		require.Equal(t, v.N, len(out), "numberOfRequests counts the list")
		return out
	}
	want := []string{"/x", "/x", "/x", "/retry", "/retry", "/retry", "/retry"}
	for range 3 {
		a := r.admin("GET", "/imposters/4545", "")
		require.Equal(t, http.StatusOK, a.code)
		require.Equal(t, want, paths(a))
		require.Empty(t, a.header.Get(imposterhttp.MissingHeader))
	}

	// A stub change through one member is what the next member serves.
	a = r.admin("PUT", "/imposters/4545/stubs/1", `{"responses":[{"is":{"body":"changed"}}]}`)
	require.Equal(t, http.StatusOK, a.code, a.body)
	for range 3 {
		require.Equal(t, "changed", r.imposter(4545, "/x").body)
	}
	// A reset through one member clears every member's records.
	a = r.admin("DELETE", "/imposters/4545/savedRequests", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	r.imposter(4545, "/after")
	for range 3 {
		require.Equal(t, []string{"/after"}, paths(r.admin("GET", "/imposters/4545", "")))
	}

	// proxyAlways: every member proxies, and every member's recordings
	// are the cluster's, in the order they were made.
	a = r.admin("POST", "/imposters", `{"protocol":"http","port":4546,"stubs":[{"responses":[{"is":{"body":"up"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	a = r.admin("POST", "/imposters", `{"protocol":"http","port":4547,"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:4546","mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	for _, p := range []string{"/a", "/b", "/a", "/a"} {
		require.Equal(t, "up", r.imposter(4547, p).body)
	}
	var exports []string
	for range 3 {
		a := r.admin("GET", "/imposters/4547?replayable=true&removeProxies=true", "")
		require.Equal(t, http.StatusOK, a.code)
		exports = append(exports, a.body)
	}
	require.Equal(t, exports[0], exports[1], "the export is the same through every member")
	require.Equal(t, exports[0], exports[2])
	var exp struct {
		Stubs []struct {
			Predicates []struct {
				DeepEquals map[string]string `json:"deepEquals"`
			} `json:"predicates"`
			Responses []any `json:"responses"`
		} `json:"stubs"`
	}
	require.NoError(t, json.Unmarshal([]byte(exports[0]), &exp))
	require.Len(t, exp.Stubs, 2, exports[0])
	require.Equal(t, "/a", exp.Stubs[0].Predicates[0].DeepEquals["path"])
	require.Len(t, exp.Stubs[0].Responses, 3, "three proxied /a, one stub")
	require.Equal(t, "/b", exp.Stubs[1].Predicates[0].DeepEquals["path"])
	// Each recording is an entry of its own; more than a transaction's
	// 128 operations of them still delete with their imposter.
	for i := range 130 {
		require.Equal(t, "up", r.imposter(4547, fmt.Sprintf("/many/%d", i)).body)
	}
	a = r.admin("DELETE", "/imposters/4547/savedProxyResponses", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	a = r.admin("GET", "/imposters/4547?replayable=true&removeProxies=true", "")
	require.NotContains(t, a.body, "/many/", "every recording is gone, on every member")
	a = r.admin("DELETE", "/imposters/4547", "")
	require.Equal(t, http.StatusOK, a.code, a.body)

	// proxyOnce: the first request, through one member, calls upstream
	// and records; the next, through another member, is answered from
	// the recording: upstream sees one call.
	a = r.admin("POST", "/imposters", `{"protocol":"http","port":4549,"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"once"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	a = r.admin("POST", "/imposters", `{"protocol":"http","port":4550,"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:4549","mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	for _, q := range []string{"/p?x=1", "/p?x=2", "/p?x=3"} {
		require.Equal(t, "once", r.imposter(4550, q).body)
	}
	require.Equal(t, []string{"/p"}, paths(r.admin("GET", "/imposters/4549", "")), "upstream called once, whichever member took each request")

	// A deletion through one member: the next member refuses the connection.
	a = r.admin("DELETE", "/imposters/4545", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	for range 3 {
		require.Error(t, r.imposter(4545, "/x").err)
	}

	// A member cut off (stopped) is named, never left out in silence: the
	// change answers after its bound, and reads say whose records are
	// missing.
	ps[2].kill()
	a = send("POST", "http://"+ps[0].http+"/imposters", `{"protocol":"http","port":4548,"recordRequests":true}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	require.Equal(t, "n3", a.header.Get(imposterhttp.UnconfirmedHeader))
	a = send("GET", "http://"+ps[1].http+"/imposters/4548", "")
	require.Equal(t, http.StatusOK, a.code)
	require.Equal(t, "n3", a.header.Get(imposterhttp.MissingHeader))
	ps[2].start()
	require.Eventually(t, func() bool {
		a := send("GET", "http://"+ps[0].http+"/imposters/4548", "")
		return a.code == http.StatusOK && a.header.Get(imposterhttp.MissingHeader) == "n3 (restarted)"
	}, 15*time.Second, 100*time.Millisecond, "a member back from a restart says its records are gone")
}

// BenchmarkOneServer measures what answering as one server costs, on a
// three-process loopback cluster, every call to the next member in turn:
//
//   - an admin change's latency (a stub replaced), p50 and p99, and of
//     that the rollout's wait for every member to serve it (the
//     fenceline_rollout_wait_seconds histogram, by bucket);
//
//   - GET /imposters/{port} with 10,000 recorded requests spread over
//     the three members, p50 and p99;
//
//   - a stub with one response next to a stub that cycles through two
//     (one step at the cycle's owner per request), requests per second:
//     wrk (-t2 -c50, keep-alive) against one member when wrk is
//     installed, else 32 Go clients rotating over the members.
//
//     go test -run XXX -bench OneServer -benchtime 1x ./cmd/node
func BenchmarkOneServer(b *testing.B) {
	ps := cluster(b)
	r := &rotor{ps: ps}
	// Keep-alive answers (mountebank's default closes the connection,
	// and wrk's are meant to stay open).
	const ka = `"headers":{"Connection":"keep-alive"}`
	a := r.admin("POST", "/imposters", `{"protocol":"http","port":4545,"recordRequests":true,"stubs":[
		{"predicates":[{"equals":{"path":"/cycle"}}],"responses":[{"is":{"body":"a",`+ka+`}},{"is":{"body":"b",`+ka+`}}]},
		{"responses":[{"is":{"body":"one",`+ka+`}}]}]}`)
	require.Equal(b, http.StatusCreated, a.code, a.body)
	pct := func(ds []time.Duration, p int) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, len(ds)*p/100)]
	}
	for i := 0; i < b.N; i++ {
		var admin []time.Duration
		for j := range 200 {
			start := time.Now()
			a := r.admin("PUT", "/imposters/4545/stubs/1", fmt.Sprintf(`{"responses":[{"is":{"body":"one %d",%s}}]}`, j, ka))
			admin = append(admin, time.Since(start))
			require.Equal(b, http.StatusOK, a.code, a.body)
		}
		b.ReportMetric(float64(pct(admin, 50).Microseconds())/1000, "ms-admin-p50")
		b.ReportMetric(float64(pct(admin, 99).Microseconds())/1000, "ms-admin-p99")
		w50, w99 := rolloutWait(b, ps)
		b.ReportMetric(w50*1000, "ms-rollout-p50")
		b.ReportMetric(w99*1000, "ms-rollout-p99")

		a := r.admin("DELETE", "/imposters/4545/savedRequests", "")
		require.Equal(b, http.StatusOK, a.code, a.body)
		spread(b, ps, 32, 10000, "/x")
		var gets []time.Duration
		size := 0
		for range 30 {
			start := time.Now()
			a := r.admin("GET", "/imposters/4545", "")
			gets = append(gets, time.Since(start))
			require.Equal(b, http.StatusOK, a.code)
			require.Contains(b, a.body, `"numberOfRequests": 10000`)
			size = len(a.body)
		}
		b.ReportMetric(float64(pct(gets, 50).Microseconds())/1000, "ms-get-10k-p50")
		b.ReportMetric(float64(pct(gets, 99).Microseconds())/1000, "ms-get-10k-p99")
		b.ReportMetric(float64(size)/1e6, "MB-get-10k")

		one := rate(b, ps, 32, 3*time.Second, "/x")
		cyc := rate(b, ps, 32, 3*time.Second, "/cycle")
		b.ReportMetric(one, "req/s-one-response")
		b.ReportMetric(cyc, "req/s-cycle")
		b.Logf("admin p50 %v p99 %v (rollout's wait p50 <= %.2fms, p99 <= %.2fms); GET 10k p50 %v p99 %v (%d bytes); one response %.0f req/s, cycle %.0f req/s (%.0f%%)",
			pct(admin, 50), pct(admin, 99), w50*1000, w99*1000, pct(gets, 50), pct(gets, 99), size, one, cyc, 100*cyc/one)
	}
}

// loadClient is a keep-alive client per member, for load.
func loadClients(ps []*proc, n int) []*http.Client {
	var cs []*http.Client
	for range n {
		cs = append(cs, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4,
			DialContext: (&net.Dialer{Timeout: 3 * time.Second}).DialContext}})
	}
	return cs
}

// spread sends total requests to path on port 4545 from conc clients, each
// to the next member in turn.
func spread(b *testing.B, ps []*proc, conc, total int, path string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, c := range loadClients(ps, conc) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				resp, err := c.Get(fmt.Sprintf("http://%s:4545%s", host(ps[i%int64(len(ps))]), path))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
}

// rolloutWait reads every member's fenceline_rollout_wait_seconds and
// returns the upper bounds of the buckets holding the 50th and 99th
// percentiles of the waits they observed together.
func rolloutWait(b *testing.B, ps []*proc) (p50, p99 float64) {
	bucket := regexp.MustCompile(`^fenceline_rollout_wait_seconds_bucket\{confirmed="[a-z]+",le="([^"]+)"\} (\d+)$`)
	counts := map[float64]float64{}
	for _, p := range ps {
		a := send("GET", "http://"+p.http+"/metrics", "")
		require.Equal(b, http.StatusOK, a.code)
		for _, l := range strings.Split(a.body, "\n") {
			if m := bucket.FindStringSubmatch(l); m != nil {
				le, _ := strconv.ParseFloat(m[1], 64)
				n, _ := strconv.ParseFloat(m[2], 64)
				counts[le] += n // cumulative per member; summed over members
			}
		}
	}
	les := slices.Sorted(maps.Keys(counts))
	total := counts[les[len(les)-1]]
	require.Positive(b, total, "the members observed rollouts")
	at := func(q float64) float64 {
		for _, le := range les {
			if counts[le] >= q*total {
				return le
			}
		}
		return les[len(les)-1]
	}
	return at(0.5), at(0.99)
}

// rate is the requests per second path on port 4545 answers 200: with
// wrk against the first member, if wrk is installed, else from conc Go
// clients each sending every request to the next member in turn.
func rate(b *testing.B, ps []*proc, conc int, d time.Duration, path string) float64 {
	if wrk, err := exec.LookPath("wrk"); err == nil {
		out, err := exec.Command(wrk, "-t2", "-c50", "-d"+d.String(), fmt.Sprintf("http://%s:4545%s", host(ps[0]), path)).CombinedOutput()
		require.NoError(b, err, "%s", out)
		m := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`).FindSubmatch(out)
		require.NotNil(b, m, "%s", out)
		require.NotContains(b, string(out), "Non-2xx", "every answer a 200: %s", out)
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	var ok atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for _, c := range loadClients(ps, conc) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := next.Add(1)
				resp, err := c.Get(fmt.Sprintf("http://%s:4545%s", host(ps[i%int64(len(ps))]), path))
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds()
}
