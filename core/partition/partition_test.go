package partition

import (
	"strconv"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// divisors are every legal group count: the powers of two up to Count.
func divisors() []int {
	var ds []int
	for g := 1; g <= Count; g *= 2 {
		ds = append(ds, g)
	}
	return ds
}

// TestTheTableIsBitIdenticalToModulo is the table's contract: for every
// legal group count, the two-level mapping names the group plain
// xxh64(key) mod G names, for any key; and a key's partition depends on
// the key alone.
func TestTheTableIsBitIdenticalToModulo(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.String().Draw(t, "key")
		p := Of(key)
		require.Less(t, int(p), Count)
		h := xxhash.Sum64String(key)
		for _, g := range divisors() {
			require.Equal(t, int(h%uint64(g)), GroupOf(key, g), "key %q, %d groups", key, g)
			require.Equal(t, p, Of(key), "a key's partition never changes")
		}
	})
}

// TestTheTableSweep sweeps the keys the node makes (every scope, ids
// 0..19999) over every legal group count, beside the random keys above.
func TestTheTableSweep(t *testing.T) {
	for i := range 20000 {
		for _, key := range []string{
			"i4545:" + strconv.Itoa(i), "s4545:" + strconv.Itoa(i), "f:" + strconv.Itoa(i), "tacme:" + strconv.Itoa(i),
		} {
			h := xxhash.Sum64String(key)
			for _, g := range divisors() {
				if got := GroupOf(key, g); got != int(h%uint64(g)) {
					t.Fatalf("key %q, %d groups: table says %d, modulo %d", key, g, got, h%uint64(g))
				}
			}
		}
	}
}

// TestGrowingMovesOnlyWholePartitions: doubling G moves a partition from
// group g to g or g+G (never elsewhere), and every key of a partition
// moves with it (a key's group is a function of its partition), so a
// resize is partitions handed over, not keys.
func TestGrowingMovesOnlyWholePartitions(t *testing.T) {
	for _, g := range divisors()[:len(divisors())-1] {
		moved := 0
		for p := Partition(0); p < Count; p++ {
			from, to := p.Group(g), p.Group(2*g)
			require.True(t, to == from || to == from+g, "partition %d: group %d of %d became %d of %d", p, from, g, to, 2*g)
			if to != from {
				moved++
			}
		}
		require.Equal(t, Count/2, moved, "G %d → %d moves half the partitions", g, 2*g)
	}
}

func TestCompatibleRefusesWhatWouldSplitTheMapping(t *testing.T) {
	for _, g := range divisors() {
		require.NoError(t, Compatible(g), "%d groups", g)
	}
	for _, g := range []int{0, -1, -4096, 3, 5, 6, 12, 100, 1000, 4095, 4097, 8192, 1 << 40} {
		err := Compatible(g)
		require.ErrorIs(t, err, ErrIncompatible, "%d groups", g)
		require.ErrorContains(t, err, "power of two")
	}
	require.PanicsWithError(t, Compatible(3).Error(), func() { Partition(7).Group(3) })
	require.Panics(t, func() { GroupOf("i4545:a", 0) })
}

// TestGoldenPartitions pins the byte layout: every node of a fleet, of
// every version, must place these keys in these partitions.
func TestGoldenPartitions(t *testing.T) {
	for key, want := range map[string]Partition{
		"":                   2457,
		"i4545:alice":        2673,
		"i4545:bob":          3832,
		"s4545:stub-1":       3546,
		"f:order-17":         4001,
		"tacme:session-2026": 3966,
	} {
		require.Equal(t, want, Of(key), "key %q", key)
	}
}
