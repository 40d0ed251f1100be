package sim

import (
	"testing"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// BenchmarkKernelTimers is the kernel's own cost per event: nodes whose
// only work is re-arming a timer, so every event is queue, trace and clock
// overhead. Compare with scenarios.BenchmarkKernelSelftest, whose events
// carry a workload.
func BenchmarkKernelTimers(b *testing.B) {
	k := New(1)
	for _, name := range []string{"a", "b", "c"} {
		var arm func(env *Env)
		arm = func(env *Env) {
			env.Clock.AfterFunc(time.Duration(1+env.Rand.IntN(1000))*time.Microsecond, func() { arm(env) })
		}
		n := k.AddMachine(name, func(env *Env) dial.Handler {
			for i := 0; i < 100; i++ {
				arm(env)
			}
			return nopHandler{}
		}, nopNet{}, DefaultDiskConfig)
		n.Start()
	}
	for b.Loop() {
		k.Step()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
