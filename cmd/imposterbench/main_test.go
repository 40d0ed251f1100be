package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Real wrk 4.1.0 outputs.
const (
	wrkClean = `Running 10s test @ http://127.0.0.1:5701/
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms    1.51ms  30.12ms   91.20%
    Req/Sec    29.13k     2.31k   34.50k    71.00%
  Latency Distribution
     50%  720.00us
     75%    1.10ms
     90%    2.05ms
     99%    8.53ms
  580123 requests in 10.00s, 55.87MB read
Requests/sec:  58012.30
Transfer/sec:      5.59MB
`
	wrkNon2xx = `Running 1s test @ http://127.0.0.1:5699/404
  2 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   402.13us  820.63us   7.78ms   90.15%
    Req/Sec    34.61k     4.57k   41.07k    63.64%
  Latency Distribution
     50%  110.00us
     75%  244.00us
     90%    1.20ms
     99%    4.06ms
  75615 requests in 1.10s, 9.23MB read
  Non-2xx or 3xx responses: 75615
Requests/sec:  68820.80
Transfer/sec:      8.40MB
`
	wrkSlow = `Running 10s test @ http://127.0.0.1:5604/items/999/42
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.21s     2.40s    8.61s    58.00%
    Req/Sec     2.10      3.00    10.00     80.00%
  Latency Distribution
     50%    4.19s
     75%    6.30s
     90%    7.75s
     99%    8.52s
  58 requests in 10.01s, 9.11KB read
  Socket errors: connect 0, read 3, write 1, timeout 2
Requests/sec:      5.79
Transfer/sec:      0.91KB
`
)

func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want wrkResult
	}{
		{"clean", wrkClean, wrkResult{Requests: 580123, RPS: 58012.30, P50: 720 * time.Microsecond, P99: 8530 * time.Microsecond}},
		{"non-2xx", wrkNon2xx, wrkResult{Requests: 75615, RPS: 68820.80, P50: 110 * time.Microsecond, P99: 4060 * time.Microsecond, Non2xx: 75615}},
		{"socket errors, seconds", wrkSlow, wrkResult{Requests: 58, RPS: 5.79, P50: 4190 * time.Millisecond, P99: 8520 * time.Millisecond,
			Read: 3, Write: 1, Timeout: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk(tc.out)
			require.NoError(t, err)
			require.InDelta(t, tc.want.RPS, got.RPS, 1e-9)
			got.RPS = tc.want.RPS
			require.InDelta(t, tc.want.P50, got.P50, float64(time.Microsecond))
			require.InDelta(t, tc.want.P99, got.P99, float64(time.Microsecond))
			got.P50, got.P99 = tc.want.P50, tc.want.P99
			require.Equal(t, tc.want, got)
		})
	}
	r, _ := parseWrk(wrkSlow)
	require.Equal(t, int64(6), r.Errors())
	r, _ = parseWrk(wrkNon2xx)
	require.Equal(t, int64(75615), r.Errors())
}

func TestParseWrkRefusesIncompleteOutput(t *testing.T) {
	noLatency := strings.Join(strings.Split(wrkClean, "\n")[:5], "\n") + "\n  580123 requests in 10.00s, 55.87MB read\nRequests/sec:  58012.30\n"
	_, err := parseWrk(noLatency)
	require.ErrorContains(t, err, "latency 50%")
	_, err = parseWrk("unable to connect to 127.0.0.1:5698 Connection refused\n")
	require.ErrorContains(t, err, "Requests/sec")
	_, err = parseWrk(strings.Replace(wrkClean, "8.53ms", "8.53", 1))
	require.ErrorContains(t, err, "no unit")
	_, err = parseWrk(strings.Replace(wrkSlow, "timeout 2", "timeout x", 1))
	require.ErrorContains(t, err, "socket errors")
}

func TestParseWrkDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0.00us": 0, "512.00us": 512 * time.Microsecond, "1.50ms": 1500 * time.Microsecond,
		"2.25s": 2250 * time.Millisecond, "1.00m": time.Minute, "1.00h": time.Hour,
	} {
		got, err := parseWrkDuration(in)
		require.NoError(t, err, in)
		require.InDelta(t, want, got, float64(time.Microsecond), in)
	}
	for _, bad := range []string{"", "ms", "1.2", "x ms", "-1.00ms"} {
		_, err := parseWrkDuration(bad)
		require.Error(t, err, bad)
	}
}

func TestWorkloads(t *testing.T) {
	ws := workloads()
	require.Len(t, ws, 6)
	for _, w := range ws {
		body, err := w.creation(5601)
		require.NoError(t, err)
		var v struct {
			Port  int `json:"port"`
			Stubs []struct {
				Responses []struct {
					Is struct {
						Headers map[string]string `json:"headers"`
						Body    string            `json:"body"`
					} `json:"is"`
				} `json:"responses"`
			} `json:"stubs"`
		}
		require.NoError(t, json.Unmarshal(body, &v), w.name)
		require.Equal(t, 5601, v.Port)
		// Every response keeps the connection open on mountebank, and the
		// request hits the last stub.
		if strings.HasPrefix(w.name, "e-") || strings.HasPrefix(w.name, "f-") {
			// JavaScript makes (or changes) the answer: its text says so.
			require.Contains(t, string(body), "keep-alive", w.name)
			continue
		}
		for _, st := range v.Stubs {
			require.Equal(t, "keep-alive", st.Responses[0].Is.Headers["Connection"], w.name)
		}
		require.Equal(t, w.want, v.Stubs[len(v.Stubs)-1].Responses[0].Is.Body, w.name)
	}
	require.Len(t, ws[1].stubs, 100)
	require.Len(t, ws[3].stubs, 1000)
	creation, err := ws[3].creation(5604)
	require.NoError(t, err)
	require.Contains(t, string(creation), `"^/items/999/\\d+$"`)
	require.Empty(t, ws[0].luaScript())
	require.Equal(t, "wrk.method = [[\nPOST]]\nwrk.body = [[\n"+ws[2].body+"]]\nwrk.headers[\"Content-Type\"] = [[\napplication/json]]\n", ws[2].luaScript())
	require.Equal(t, "[==[\na]]b]=]c]==]", luaString("a]]b]=]c"))
}

func TestBars(t *testing.T) {
	ms := []measurement{
		{server: serverCeiling, workload: serverCeiling, res: wrkResult{RPS: 1000, P99: 2 * time.Millisecond}},
		{server: serverMB, workload: "a-static", res: wrkResult{RPS: 100}},
		{server: serverNode, workload: "a-static", res: wrkResult{RPS: 800, P99: 4 * time.Millisecond}},
		{server: serverMB, workload: "b-100-equals", res: wrkResult{RPS: 10}},
		{server: serverNode, workload: "b-100-equals", res: wrkResult{RPS: 150, P99: 6 * time.Millisecond}},
		{server: serverMB, workload: "c-jsonpath", res: wrkResult{RPS: 10}},
		{server: serverNode, workload: "c-jsonpath", res: wrkResult{RPS: 500, P99: time.Millisecond, Non2xx: 1}},
		{server: serverMB, workload: "d-1000-matches", res: wrkResult{RPS: 0}},
		{server: serverNode, workload: "d-1000-matches", res: wrkResult{RPS: 500}},
	}
	var got []string
	for _, b := range bars(ms) {
		v := "FAIL"
		if b.pass {
			v = "PASS"
		}
		got = append(got, v+" "+b.what+": "+b.got)
	}
	require.Equal(t, []string{
		"PASS (a) fenceline req/s ≥ 70% of the ceiling's: 80%",
		"PASS (a) fenceline req/s ≥ 5× mountebank's: 8.0×",
		"FAIL (b) fenceline req/s ≥ 20× mountebank's: 15×",
		"FAIL (c) fenceline req/s ≥ 20× mountebank's: 50×", // fenceline answered an error
		"FAIL (d) fenceline req/s ≥ 100× mountebank's: n/a",
		"FAIL (e) fenceline req/s ≥ 2× mountebank's: not measured",
		"FAIL (f) fenceline req/s ≥ 2× mountebank's: not measured",
		"FAIL (g) fenceline req/s ≥ 1× mountebank's: not measured",
		"PASS (a) fenceline p99 < 5 ms: 4.00ms",
		"FAIL (b) fenceline p99 < 5 ms: 6.00ms",
		"FAIL (c) fenceline p99 < 5 ms: 1.00ms",
	}, got)
}
