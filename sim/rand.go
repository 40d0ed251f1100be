package sim

import (
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
)

// Stream returns the random stream named label under root. Streams are
// independent: drawing more from one never shifts another, so adding a draw
// to the network model does not change which node a fault picks.
//
// PCG is used because its output is specified (math/rand/v2 promises the
// algorithm), so the same seed draws the same numbers on every machine and
// Go release.
func Stream(root uint64, label string) *rand.Rand {
	return rand.New(rand.NewPCG(root, xxhash.Sum64String(label)))
}

// Chance reports true with probability p.
func Chance(r *rand.Rand, p float64) bool {
	if p <= 0 {
		return false
	}
	return r.Float64() < p
}

// Between draws a duration uniformly in [lo, hi].
func Between[T ~int64](r *rand.Rand, lo, hi T) T {
	if hi <= lo {
		return lo
	}
	return lo + T(r.Int64N(int64(hi-lo)+1))
}
