package consensus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceline/fenceline/core/kv"
)

// BenchmarkProposalsSim measures a 3-node group in the simulator: 32
// closed-loop proposers on the leader, each proposing a put as soon as its
// last one applied. It reports committed proposals per wall second and
// virtual seconds simulated per wall second. The network is the default
// healthy LAN (0.2–2ms one way), so virtual throughput is bound by round
// trips, and wall throughput by the cost of simulating them.
func BenchmarkProposalsSim(b *testing.B) {
	c := newCluster(&testing.T{}, 1, 3, 0)
	c.start(c.nodes...)
	c.run(2 * time.Second)
	l := c.leader()
	if l < 0 {
		b.Fatal("no leader")
	}
	committed := 0
	var propose func(i int)
	propose = func(i int) {
		c.node(l).Propose(kv.Put(fmt.Sprintf("k%d", i), []byte("value")), func(_ kv.Result, err error) {
			if err == nil {
				committed++
			}
			propose(i)
		})
	}
	c.nodes[l].Exec(func() {
		for i := 0; i < 32; i++ {
			propose(i)
		}
	})
	startVirtual := c.k.Now()
	for b.Loop() {
		c.k.Step()
	}
	wall := b.Elapsed().Seconds()
	b.ReportMetric(float64(committed)/wall, "proposals/s")
	b.ReportMetric((c.k.Now()-startVirtual).Seconds()/wall, "virtual-s/s")
	b.ReportMetric(float64(committed)/(c.k.Now()-startVirtual).Seconds(), "proposals/virtual-s")
}
