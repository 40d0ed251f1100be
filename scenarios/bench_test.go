package scenarios

import (
	"testing"
	"time"
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
