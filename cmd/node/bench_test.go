package main

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
