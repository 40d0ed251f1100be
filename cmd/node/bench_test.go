package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/dial"
)

// BenchmarkLeaderKillPause kills -9 the leader of a three-process
// cluster, b.N times, while a client writes one flow owned by a surviving
// node through that node every few milliseconds. It reports how long the
// survivors took to elect a new leader, and the flow-operation pause: the
// longest gap between two successful writes around the kill (an owner
// that stops hearing a leader stops serving within its isolation window,
// D-17, and serves again once it hears the new one). The killed node is
// restarted and rejoins before the next round. (A flow the killed node
// owned answers 503 until it is back or removed: ownership follows the
// committed membership, not liveness.)
//
//	go test -run XXX -bench LeaderKillPause -benchtime 5x ./cmd/node
func BenchmarkLeaderKillPause(b *testing.B) {
	ps := cluster(b)
	var elections, pauses []time.Duration
	for i := 0; i < b.N; i++ {
		leader, leaderID := -1, ""
		require.Eventually(b, func() bool {
			for j, p := range ps {
				if st := p.status(); st != nil && st.IsLeader && len(st.Voters) == 3 {
					leader, leaderID = j, st.ID
					return true
				}
			}
			return false
		}, 20*time.Second, 20*time.Millisecond, "a leader of three voters")
		survivor := ps[(leader+1)%3]
		survivorID := survivor.status().ID
		// A flow the survivor owns, written once so it is adopted.
		var path string
		require.Eventually(b, func() bool {
			for f := range 64 {
				path = fmt.Sprintf("/admin/imposters/4545/flow-state/pause-%d-%d/k", i, f)
				if a := do(survivor.http, flowCall{"PUT", path, `{"value": 1}`}); a.code == http.StatusOK && a.owner == survivorID {
					return true
				}
			}
			return false
		}, 20*time.Second, 50*time.Millisecond, "a flow the survivor owns")
		var oks []time.Time
		write := func() {
			if a := do(survivor.http, flowCall{"PUT", path, `{"value": 2}`}); a.code == http.StatusOK {
				oks = append(oks, time.Now())
			}
			time.Sleep(2 * time.Millisecond)
		}
		for start := time.Now(); time.Since(start) < 500*time.Millisecond; {
			write()
		}
		killed := time.Now()
		ps[leader].kill()
		var elected time.Duration
		for time.Since(killed) < 10*time.Second && (elected == 0 || time.Since(killed) < elected+2*time.Second) {
			if elected == 0 {
				if st := survivor.status(); st != nil && st.Leader != "" && st.Leader != leaderID {
					elected = time.Since(killed)
				}
			}
			write()
		}
		require.NotZero(b, elected, "a new leader within 10s")
		var gap time.Duration
		for j := 1; j < len(oks); j++ {
			gap = max(gap, oks[j].Sub(oks[j-1]))
		}
		elections = append(elections, elected)
		pauses = append(pauses, gap)
		ps[leader].start()
	}
	slices.Sort(elections)
	slices.Sort(pauses)
	b.ReportMetric(float64(elections[len(elections)/2].Milliseconds()), "ms-election-median")
	b.ReportMetric(float64(pauses[len(pauses)/2].Milliseconds()), "ms-flow-pause-median")
	b.ReportMetric(float64(pauses[len(pauses)-1].Milliseconds()), "ms-flow-pause-max")
	b.Logf("elections %v; flow pauses %v", elections, pauses)
}

// BenchmarkScenarioRoute measures the two ways a stateful request
// reaches its flow's owner, side by side, on a three-process loopback
// cluster: a scenario stub with a gate and a transition (a read of the
// flow and a compare-and-set: two store operations per request), every
// request sent to n1 for flows another node owns. per-op serves the
// request on n1 with each operation one RPC to the owner; forward sends
// the whole request to the owner's imposter once. It reports requests
// per second and latency percentiles.
//
//	go test -run XXX -bench ScenarioRoute -benchtime 3000x ./cmd/node
func BenchmarkScenarioRoute(b *testing.B) {
	for _, route := range []string{"per-op", "forward"} {
		b.Run(route, func(b *testing.B) {
			ps := clusterWith(b, nil, "-route", route)
			createGate(b, ps)
			// Flows owned by n2 or n3, each adopted by a first request.
			ids := make([]dial.NodeID, 3)
			for i, p := range ps {
				ids[i] = dial.IDFromName(p.name)
			}
			dir := routing.NewRingDirectory(ids[0], routing.OneGroup, 1, []routing.Member{{ID: ids[0]}, {ID: ids[1]}, {ID: ids[2]}})
			var flows []string
			for i := 0; len(flows) < 64; i++ {
				if f := fmt.Sprintf("f%d", i); dir.OwnerOf("i4545:"+f).View == routing.Remote {
					flows = append(flows, f)
				}
			}
			client := gateClient()
			for _, f := range flows {
				_, err := gateGet(client, ps[0], f)
				require.NoError(b, err, "first request of %s", f)
			}
			var next atomic.Int64
			measureGates(b, func() (time.Duration, error) {
				return gateGet(client, ps[0], flows[next.Add(1)%int64(len(flows))])
			})
		})
	}
}

// BenchmarkFleetScaling measures stateful throughput of one raft group of
// three processes against a fleet of two groups of three, side by side on
// this machine: a scenario stub with a gate and a transition (two flow
// operations per request) over 256 flows, the requests spread over every
// node in turn, as a round-robin balancer spreads them, from 16 clients.
// Each group owns and replicates only its partitions' flows, so a fleet's
// stateful capacity grows with its groups where each has machines of its
// own; on one machine the processes share its cores, and the ratio shows
// what sharing costs. It reports requests per second and latency
// percentiles.
//
//	go test -run XXX -bench FleetScaling -benchtime 20000x ./cmd/node
func BenchmarkFleetScaling(b *testing.B) {
	for _, shape := range []string{"one-group", "two-groups"} {
		b.Run(shape, func(b *testing.B) {
			var ps []*proc
			if shape == "one-group" {
				ps = cluster(b)
			} else {
				ps = fleetOfTwo(b)
			}
			createGate(b, ps)
			client := gateClient()
			flows := make([]string, 256)
			for i := range flows {
				flows[i] = fmt.Sprintf("f%d", i)
				require.Eventually(b, func() bool { _, err := gateGet(client, ps[i%len(ps)], flows[i]); return err == nil },
					10*time.Second, 20*time.Millisecond, "first request of %s", flows[i])
			}
			var next atomic.Int64
			measureGates(b, func() (time.Duration, error) {
				i := next.Add(1)
				return gateGet(client, ps[i%int64(len(ps))], flows[(i*7)%int64(len(flows))])
			})
		})
	}
}

// createGate creates the gate benchmarks' imposter through ps[0]: a
// scenario stub with a gate and a transition (a read of the flow named
// by X-Flow and a compare-and-set), and waits until every node serves it.
func createGate(b *testing.B, ps []*proc) {
	code, body := call("POST", "http://"+ps[0].http+"/imposters", `{"protocol":"http","port":4545,
		"_rift":{"flowState":{"flowIdSource":"header:X-Flow"}},
		"stubs":[{"scenarioName":"s","requiredScenarioState":"Started","newScenarioState":"Started",
		          "responses":[{"is":{"body":"ok"}}]}]}`)
	require.Equal(b, http.StatusCreated, code, body)
	for _, p := range ps {
		require.Eventually(b, func() bool {
			code, _ := call("GET", "http://"+p.http+"/imposters/4545", "")
			return code == http.StatusOK
		}, 10*time.Second, 20*time.Millisecond, "%s serves the imposter", p.name)
	}
}

// gateClient is the gate benchmarks' HTTP client: keep-alive connections
// enough for their clients.
func gateClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
}

// gateGet sends one request for flow f to imposter 4545 at at, and times
// it; anything but a 200 is an error naming why.
func gateGet(client *http.Client, at *proc, f string) (time.Duration, error) {
	req, _ := http.NewRequest("GET", "http://"+host(at)+":4545/", nil)
	req.Header.Set("X-Flow", f)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d (%s)", resp.StatusCode, resp.Header.Get("X-Fenceline-Unavailable"))
	}
	return time.Since(start), nil
}

// measureGates runs b.N calls of get from 16 clients (8 per core on two
// cores), requires every one answered 200, and reports requests per
// second and latency percentiles.
func measureGates(b *testing.B, get func() (time.Duration, error)) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			d, err := get()
			if err != nil {
				failed.Add(1)
				continue
			}
			mine = append(mine, d)
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	require.Zero(b, failed.Load(), "every request answered 200")
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}
