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
		if p, ok := drawMove(t, d, i); ok {
			if _, _, _, moving := d.Moving(p); moving {
				d, err = d.Publish([]partition.Partition{p})
			} else {
				d, err = d.Fence([]partition.Partition{p}, drawOther(t, d, p, i))
			}
		} else if rapid.Bool().Draw(t, fmt.Sprintf("resize%d", i)) {
			d, err = d.WithTarget(rapid.SampledFrom([]int{1, 2, 4, 8, 16}[:bitsLen(d.Groups())]).Draw(t, fmt.Sprintf("t%d", i)))
		} else if d.Groups() < 16 && rapid.Bool().Draw(t, fmt.Sprintf("add%d", i)) {
			d, err = d.WithNewGroup(addedGroup(d.Groups()))
		} else {
			g := rapid.IntRange(0, d.Groups()-1).Draw(t, fmt.Sprintf("m%d", i))
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
	d, err = d.Fence([]partition.Partition{7}, 0) // partition 7 is group 1's by the table
	require.NoError(t, err)
	d, err = d.Publish([]partition.Partition{7})
	require.NoError(t, err)
	b := d.Encode()
	require.Less(t, len(b), 300, "a directory one move from the table is small (two groups of three: 221 bytes)")

	bad := append([]byte(nil), b...)
	bad[0] = 1
	_, err = Decode(bad)
	require.ErrorContains(t, err, "encoding version 1")

	// A move listed where the table puts it is a second encoding of the
	// directory without it, so it is refused. Founded at 3 with no moves,
	// the bytes end in the moved count, 0; list partition 7 at group 1
	// (where the table puts it in a fleet of two) since 3.
	d0, err := New(3, groupsOf(2))
	require.NoError(t, err)
	b0 := d0.Encode()
	require.Equal(t, byte(0), b0[len(b0)-1])
	listed := append(b0[:len(b0)-1:len(b0)-1], 1, 7, 1, 3, 0)
	_, err = Decode(listed)
	require.ErrorContains(t, err, "listed as moved where the table puts it")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 2, 9, 0, 3, 0, 8, 0, 3, 0))
	require.ErrorContains(t, err, "ascending")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 2, 3, 0))
	require.ErrorContains(t, err, "held by group 2 of 2")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 0, 4, 0))
	require.ErrorContains(t, err, "outside [3, 3]")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 1, 3, 2))
	require.ErrorContains(t, err, "moving from group 1 to 1")
	_, err = Decode(append(b0[:len(b0)-1:len(b0)-1], 1, 7, 1, 3, 3))
	require.ErrorContains(t, err, "moving from group 1 to 2 of 2")
	moving := append(b0[:len(b0)-1:len(b0)-1], 1, 7, 1, 3, 1)
	dm, err := Decode(moving)
	require.NoError(t, err, "partition 7 moving from group 1 to 0, fenced at 3")
	_, to, _, ok := dm.Moving(7)
	require.True(t, ok)
	require.Equal(t, 0, to)
	target := append([]byte(nil), b0...)
	target[3] = 3 // version, epoch 3, base 3, target
	_, err = Decode(target)
	require.ErrorContains(t, err, "target of 3 groups")

	_, err = Decode(make([]byte, MaxEncoded+1))
	require.ErrorContains(t, err, "at most")

	// A fleet with a group added is version 3, with the founded count
	// after the target; that count must be a founding the table can
	// describe, and fewer than the groups (else it is version 2's).
	d3, err := d0.WithNewGroup(addedGroup(2))
	require.NoError(t, err)
	b3 := d3.Encode()
	require.Equal(t, []byte{codecVersionAdded, 4, 3, 2, 2, 3}, b3[:6], "version, epoch, base, target, founded, groups")
	for founded, want := range map[byte]string{0: "founded with 0 of its 3", 3: "founded with 3 of its 3"} {
		bad := append([]byte(nil), b3...)
		bad[4] = founded
		_, err = Decode(bad)
		require.ErrorContains(t, err, want, "founded %d", founded)
	}
	one := append([]byte(nil), b3...)
	one[4] = 1
	d1, err := Decode(one)
	require.NoError(t, err, "another directory: a fleet founded with one group, two added")
	g, _ := d1.Holder(1)
	require.Equal(t, []int{1, 0}, []int{d1.Founded(), g})
	two := append([]byte{codecVersion}, b3[1:4]...)
	two = append(two, b3[5:]...)
	_, err = Decode(two)
	require.ErrorIs(t, err, ErrInvalid, "read as version 2, three founded groups do not divide the table")
}

func TestEveryPartitionMovedStaysBounded(t *testing.T) {
	d, err := New(1, groupsOf(2))
	require.NoError(t, err)
	var all []partition.Partition
	for p := range partition.Count / 2 {
		all = append(all, partition.Partition(2*p)) // group 0's by the table
	}
	d, err = d.Fence(all, 1)
	require.NoError(t, err)
	d, err = d.Publish(all)
	require.NoError(t, err)
	var odd []partition.Partition
	for _, p := range all {
		odd = append(odd, p+1)
	}
	d, err = d.Fence(odd, 0)
	require.NoError(t, err)
	b := d.Encode()
	require.Less(t, len(b), 50<<10)
	back, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, d, back)
}

// bitsLen is how many of 1, 2, 4, 8, 16 are at most groups.
func bitsLen(groups int) int {
	n := 0
	for c := 1; c <= groups; c *= 2 {
		n++
	}
	return n
}
