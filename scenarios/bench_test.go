package scenarios

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// BenchmarkKernelSelftest measures the kernel on the self-test workload:
// events per wall second and virtual seconds per wall second. The cluster
// size is drawn by the seed, so seeds are picked by size: seeds whose draw
// gives 3 nodes and seeds whose draw gives 5.
func BenchmarkKernelSelftest(b *testing.B) {
	for _, nodes := range []int{3, 5} {
		seeds := seedsWithNodes(nodes, 8)
		b.Run(map[int]string{3: "nodes=3", 5: "nodes=5"}[nodes], func(b *testing.B) {
			var events uint64
			var virtual time.Duration
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				res, err := Execute("kernel-selftest", Options{Seed: seeds[i%len(seeds)]})
				if err != nil || !res.OK() {
					b.Fatalf("seed %d: %v %v", seeds[i%len(seeds)], err, res.Findings)
				}
				events += res.Events
				virtual += res.Virtual
			}
			wall := time.Since(start).Seconds()
			b.ReportMetric(float64(events)/wall, "events/s")
			b.ReportMetric(virtual.Seconds()/wall, "virtual-s/s")
			b.ReportMetric(float64(events)/float64(b.N), "events/run")
		})
	}
}

// seedsWithNodes finds the first count seeds whose self-test run draws the
// given cluster size, by reading the knob the run prints.
func seedsWithNodes(nodes, count int) []uint64 {
	var out []uint64
	for seed := uint64(1); len(out) < count; seed++ {
		if selftestNodes(seed) == nodes {
			out = append(out, seed)
		}
	}
	return out
}

// BenchmarkOwnerPathVsRaft is the seed's argument in numbers: a flow
// write through the owner path (one RPC to the owner, no quorum round)
// against the same write as a raft proposal, each from a client on a node
// that is neither owner nor leader, on a healthy simulated LAN (0.2–2ms
// one way), 32 closed-loop clients. It reports operations per virtual
// second (what the cluster could serve) and per wall second (what the
// simulator costs).
func BenchmarkOwnerPathVsRaft(b *testing.B) {
	for _, mode := range []string{"owner-path", "raft-proposal"} {
		b.Run(mode, func(b *testing.B) {
			k := sim.New(1)
			defer k.InstallCryptoRand()()
			run := &Run{Kernel: k, Duration: time.Hour, out: io.Discard, bugs: map[string]bool{}, result: &Result{}}
			c := newRaftCluster(run, names(3), 3, netsim.DefaultConfig, sim.DefaultDiskConfig)
			h := startFlowCluster(c, flow.Config{})
			for _, n := range c.nodes {
				n.Start()
			}
			if err := k.RunUntil(2 * time.Second); err != nil {
				b.Fatal(err)
			}
			var leader *sim.Machine
			for _, n := range c.nodes {
				if c.node(n).IsLeader() {
					leader = n
				}
			}
			// A flow owned by neither the client's node nor the leader.
			var client *sim.Machine
			for _, n := range c.nodes {
				if n != leader {
					client = n
				}
			}
			var f string
			for i := 0; ; i++ {
				f = fmt.Sprintf("i8080:bench-%d", i)
				if o, _ := h.flows[client.Name()].Owner(f); o != client.ID() && o != leader.ID() {
					break
				}
			}
			// Warm up: the first call on the flow starts its adoption,
			// which takes AdoptWait on a fresh cluster; measure after it.
			client.Exec(func() {
				h.flows[client.Name()].Do(flow.Request{Flow: f, Op: flow.OpGet, Key: "k"}, func(flow.Response, error) {})
			})
			if err := k.RunUntil(k.Now() + 2*time.Second); err != nil {
				b.Fatal(err)
			}
			done := 0
			var issue func(i int)
			issue = func(i int) {
				key := fmt.Sprintf("k%d", i)
				if mode == "owner-path" {
					h.flows[client.Name()].Do(flow.Request{Flow: f, Op: flow.OpSet, Key: key, Value: []byte("v")}, func(_ flow.Response, err error) {
						if err == nil {
							done++
						}
						issue(i)
					})
					return
				}
				c.node(client).Propose(kv.Put(key, []byte("v")), func(_ kv.Result, err error) {
					if err == nil {
						done++
					}
					issue(i)
				})
			}
			client.Exec(func() {
				for i := 0; i < 32; i++ {
					issue(i)
				}
			})
			start := k.Now()
			for b.Loop() {
				k.Step()
			}
			virtual := (k.Now() - start).Seconds()
			b.ReportMetric(float64(done)/virtual, "ops/virtual-s")
			b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "ops/wall-s")
		})
	}
}

// BenchmarkScenarios measures the simulator on every scenario, one
// sub-benchmark each, over seeds 1..b.N (run it with -benchtime 20x): the
// median over its seeds of virtual seconds per wall second and of events
// per wall second, and allocations per event over all of them. Compare
// two builds with benchstat:
//
//	go test ./scenarios -run XXX -bench Scenarios -benchtime 20x -count 3 > old.txt
//	(change, then the same into new.txt); benchstat old.txt new.txt
//
// It sets the collector as simrun does (TuneGC): GOGC=100 in the
// environment measures with Go's default instead.
func BenchmarkScenarios(b *testing.B) {
	TuneGC() // as simrun runs
	for _, s := range All() {
		b.Run(s.Name, func(b *testing.B) {
			var speed, rate []float64
			var events uint64
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			seed := uint64(0)
			for b.Loop() {
				seed++
				start := time.Now()
				res, err := Execute(s.Name, Options{Seed: seed})
				wall := time.Since(start).Seconds()
				if err != nil || !res.OK() {
					b.Fatalf("seed %d: %v %v", seed, err, res.Findings)
				}
				speed = append(speed, res.Virtual.Seconds()/wall)
				rate = append(rate, float64(res.Events)/wall)
				events += res.Events
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(median(speed), "virtual-s/s")
			b.ReportMetric(median(rate), "events/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(max(events, 1)), "allocs/event")
		})
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
