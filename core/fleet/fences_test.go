package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/partition"
)

// Fences read back as themselves, one encoding each; a later fence of a
// partition replaces an earlier one, never the other way.
func TestFencesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f Fences
		for range rapid.IntRange(0, 6).Draw(t, "fences") {
			ps := rapid.SliceOfNDistinct(rapid.IntRange(0, partition.Count-1), 1, 20, rapid.ID[int]).Draw(t, "ps")
			e := rapid.Uint64Range(1, 1<<40).Draw(t, "epoch")
			var parts []partition.Partition
			for _, p := range ps {
				parts = append(parts, partition.Partition(p))
			}
			before := map[partition.Partition]uint64{}
			for _, p := range parts {
				before[p] = f.At(p)
			}
			f = f.With(parts, e)
			require.True(t, f.Covers(parts, e))
			for _, p := range parts {
				require.Equal(t, max(before[p], e), f.At(p))
			}
		}
		b := f.Encode()
		back, err := DecodeFences(b)
		require.NoError(t, err)
		require.Equal(t, b, back.Encode())
		for p := range partition.Count {
			require.Equal(t, f.At(partition.Partition(p)), back.At(partition.Partition(p)))
		}
		if len(b) > 2 {
			_, err = DecodeFences(b[:len(b)-1])
			require.ErrorIs(t, err, ErrInvalid, "cut short")
		}
		_, err = DecodeFences(append(b[:len(b):len(b)], 0))
		require.ErrorIs(t, err, ErrInvalid, "a trailing byte")
	})
}

func TestFencesRefusals(t *testing.T) {
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte{2, 0}, "version 2"},
		{[]byte{1, 2, 5, 1, 5, 1}, "ascending"},
		{[]byte{1, 1, 7, 0}, "epoch 0"},
		{[]byte{1, 1, 0x80, 0x20, 1}, "below 4096"}, // partition 4096
		{[]byte{1, 9, 1, 1}, "count"},
	} {
		_, err := DecodeFences(c.b)
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, c.want)
	}
	require.Equal(t, ^uint64(0), FenceAll.At(4095), "what does not decode fences everything")
	require.True(t, FenceAll.Covers([]partition.Partition{0, 4095}, 1<<62))
}
