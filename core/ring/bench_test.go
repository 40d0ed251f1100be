package ring

import (
	"fmt"
	"strings"
	"testing"
)

// benchKeys are realistic flow keys: imposter scope, header-derived ids.
func benchKeys() []string {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = ImposterKey(8080, fmt.Sprintf("session-%08x", i*2654435761))
	}
	return keys
}

// BenchmarkOwner reports the cost of one ownership lookup, the question every
// stateful request asks first. ns/op is per lookup; lookups/s is its
// inverse.
func BenchmarkOwner(b *testing.B) {
	keys := benchKeys()
	for _, n := range []int{3, 9, 33} {
		b.Run(fmt.Sprintf("voters=%d", n), func(b *testing.B) {
			r := New(testIDs(n))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Owner(ClassFlow, keys[i&(len(keys)-1)])
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}

// BenchmarkPlacement is Owner plus ranking the two successors, the lookup an
// owner makes before pushing a write.
func BenchmarkPlacement(b *testing.B) {
	keys := benchKeys()
	for _, n := range []int{3, 9, 33} {
		b.Run(fmt.Sprintf("voters=%d", n), func(b *testing.B) {
			r := New(testIDs(n))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.Placement(ClassFlow, keys[i&(len(keys)-1)])
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
		})
	}
}

// BenchmarkOwnerLongKey takes the streamed path: a key longer than the stack
// buffer.
func BenchmarkOwnerLongKey(b *testing.B) {
	key := ImposterKey(8080, strings.Repeat("x", 400))
	r := New(testIDs(9))
	b.ReportAllocs()
	for b.Loop() {
		r.Owner(ClassFlow, key)
	}
}
