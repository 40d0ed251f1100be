package fleet

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/partition"
)

// drawDirectory builds a directory through a drawn history of moves and
// published memberships.
func drawDirectory(t *rapid.T) *Directory {
	groups := rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "groups")
	d, err := New(rapid.Uint64Range(1, 1<<40).Draw(t, "founded"), groupsOf(groups))
	require.NoError(t, err)
	for i := range rapid.IntRange(0, 20).Draw(t, "steps") {
		if rapid.Bool().Draw(t, fmt.Sprintf("move%d", i)) {
			p := partition.Partition(rapid.IntRange(0, partition.Count-1).Draw(t, fmt.Sprintf("p%d", i)))
			d, err = d.Assign(p, rapid.IntRange(0, groups-1).Draw(t, fmt.Sprintf("g%d", i)))
		} else {
			g := rapid.IntRange(0, groups-1).Draw(t, fmt.Sprintf("m%d", i))
			gr := d.Group(g)
			gr.MIdx += rapid.Uint64Range(1, 1000).Draw(t, fmt.Sprintf("dm%d", i))
			gr.Voters = gr.Voters[:rapid.IntRange(1, len(gr.Voters)).Draw(t, fmt.Sprintf("v%d", i))]
			d, err = d.WithGroup(g, gr)
		}
		require.NoError(t, err)
	}
	return d
}

// A directory reads back as itself, and its bytes are the only ones that
// do: the re-encoding is the same.
func TestDirectoryCodecRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := drawDirectory(t)
		b := d.Encode()
		back, err := Decode(b)
		require.NoError(t, err)
		require.Equal(t, d, back)
		require.Equal(t, b, back.Encode())
	})
}

// Bytes cut short, with a byte after them, or with any one byte changed
// are refused or read as some other valid directory, never panic; cut
// short or trailing, always refused.
func TestDirectoryCodecRefusesDamage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := drawDirectory(t).Encode()
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		_, err := Decode(b[:cut])
		require.ErrorIs(t, err, ErrInvalid, "cut at %d of %d", cut, len(b))
		_, err = Decode(append(b[:len(b):len(b)], 0))
		require.ErrorIs(t, err, ErrInvalid, "a trailing byte")
		flip := append([]byte(nil), b...)
		i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
		flip[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
		if d, err := Decode(flip); err == nil {
			require.Equal(t, flip, d.Encode(), "what decodes re-encodes to its bytes")
		} else {
			require.ErrorIs(t, err, ErrInvalid)
		}
	})
}

func TestDirectoryCodecRefusals(t *testing.T) {
	d, err := New(3, groupsOf(2))
	require.NoError(t, err)
	d, err = d.Assign(7, 0) // partition 7 is group 1's by the table
	require.NoError(t, err)
	b := d.Encode()
	require.Less(t, len(b), 300, "a directory one move from the table is small (two groups of three: 219 bytes)")

	bad := append([]byte(nil), b...)
	bad[0] = 2
	_, err = Decode(bad)
	require.ErrorContains(t, err, "encoding version 2")

	// A move listed where the table puts it is a second encoding of the
	// directory without it, so it is refused. Founded at 3 with no moves,
	// the bytes end in the moved count, 0; list partition 7 at group 1
	// (where the table puts it in a fleet of two) since 3.
	d0, err := New(3, groupsOf(2))
	require.NoError(t, err)
	b0 := d0.Encode()
	require.Equal(t, byte(0), b0[len(b0)-1])
	listed := append(b0[:len(b0)-1:len(b0)-1], 1, 7, 1, 3)
	_, err = Decode(listed)
	require.ErrorContains(t, err, "listed as moved where the table puts it")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 2, 9, 0, 3, 8, 0, 3))
	require.ErrorContains(t, err, "ascending")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 2, 3))
	require.ErrorContains(t, err, "held by group 2 of 2")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 0, 4))
	require.ErrorContains(t, err, "outside [3, 3]")

	_, err = Decode(make([]byte, MaxEncoded+1))
	require.ErrorContains(t, err, "at most")
}

func TestEveryPartitionMovedStaysBounded(t *testing.T) {
	d, err := New(1, groupsOf(2))
	require.NoError(t, err)
	for p := range partition.Count {
		d, err = d.Assign(partition.Partition(p), 1-partition.Partition(p).Group(2))
		require.NoError(t, err)
	}
	b := d.Encode()
	require.Less(t, len(b), 50<<10)
	back, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, d, back)
}
