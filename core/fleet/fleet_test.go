package fleet

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// groupsOf builds g groups of three voters each, named g<i>n<j>.
func groupsOf(g int) []Group {
	out := make([]Group, g)
	for i := range out {
		for j := range 3 {
			name := fmt.Sprintf("g%dn%d", i, j)
			out[i].Voters = append(out[i].Voters, Member{ID: dial.IDFromName(name), Name: name, Peer: name + ":7000", HTTP: name + ":8080"})
		}
		out[i].MIdx = uint64(10 + i)
	}
	return out
}

// addedGroup is a group of three voters, named a<g>n<j>, to add as group g.
func addedGroup(g int) Group {
	gr := Group{MIdx: 1}
	for j := range 3 {
		name := fmt.Sprintf("a%dn%d", g, j)
		gr.Voters = append(gr.Voters, Member{ID: dial.IDFromName(name), Name: name, Peer: name + ":7000", HTTP: name + ":8080"})
	}
	return gr
}

// A group added to a running fleet holds nothing until a resize moves
// partitions to it, each fenced and published; the founding placement
// stays what the unmoved partitions' assignments read against, and the
// directory's bytes stay those of a fleet with no group added until one
// is.
func TestAnAddedGroupHoldsOnlyWhatMoves(t *testing.T) {
	d, err := New(1, groupsOf(2))
	require.NoError(t, err)
	before := d.Encode()
	_, err = d.WithTarget(4)
	require.ErrorContains(t, err, "the fleet has 2", "no resize past the groups there are")
	d3, err := d.WithNewGroup(addedGroup(2))
	require.NoError(t, err)
	require.Equal(t, []int{3, 2, 2}, []int{d3.Groups(), d3.Founded(), d3.Target()})
	require.Equal(t, d.Epoch()+1, d3.Epoch())
	require.Equal(t, before, d.Encode(), "the directory added to is unchanged")
	require.Equal(t, byte(codecVersion), before[0], "a fleet with no group added encodes as before")
	require.Equal(t, byte(codecVersionAdded), d3.Encode()[0])
	for p := range partition.Count {
		g, e := d3.Holder(partition.Partition(p))
		wg, we := d.Holder(partition.Partition(p))
		require.Equal(t, []uint64{uint64(wg), we}, []uint64{uint64(g), e}, "partition %d", p)
	}
	_, err = d3.WithTarget(4)
	require.ErrorContains(t, err, "the fleet has 3")
	_, err = d3.WithTarget(3)
	require.ErrorIs(t, err, ErrInvalid, "3 groups do not divide the table")

	_, err = d3.WithNewGroup(addedGroup(2))
	require.ErrorContains(t, err, "a voter of groups 2 and 3", "a node belongs to one group")
	_, err = d3.WithNewGroup(Group{MIdx: 1})
	require.ErrorContains(t, err, "no voters")
	d4, err := d3.WithNewGroup(addedGroup(3))
	require.NoError(t, err)
	back, err := Decode(d4.Encode())
	require.NoError(t, err)
	require.Equal(t, d4, back)

	// 2 to 4: partitions 2 and 3 mod 4 move, from groups 0 and 1, to
	// the added groups; nothing else.
	d4, err = d4.WithTarget(4)
	require.NoError(t, err)
	moved := map[[2]int]int{}
	for {
		ps, from, to := d4.Misplaced(512)
		if len(ps) == 0 {
			break
		}
		moved[[2]int{from, to}] += len(ps)
		for _, p := range ps {
			require.Equal(t, to, p.Group(4))
		}
		d4, err = d4.Fence(ps, to)
		require.NoError(t, err)
		d4, err = d4.Publish(ps)
		require.NoError(t, err)
	}
	require.Equal(t, map[[2]int]int{{0, 2}: partition.Count / 4, {1, 3}: partition.Count / 4}, moved)
	back, err = Decode(d4.Encode())
	require.NoError(t, err)
	require.Equal(t, d4, back)
}

// A fleet has at most MaxGroups groups, founded or added.
func TestGroupsAreBounded(t *testing.T) {
	d, err := New(1, groupsOf(MaxGroups))
	require.NoError(t, err)
	_, err = d.WithNewGroup(addedGroup(MaxGroups))
	require.ErrorContains(t, err, fmt.Sprintf("at most %d", MaxGroups))
	_, err = New(1, groupsOf(2*MaxGroups))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestAGroupMayHaveMaxVoters(t *testing.T) {
	gs := []Group{{MIdx: 1}}
	for i := range MaxVoters {
		gs[0].Voters = append(gs[0].Voters, Member{ID: dial.IDFromName(fmt.Sprintf("x%d", i))})
	}
	d, err := New(1, gs)
	require.NoError(t, err)
	require.Len(t, d.Group(0).Voters, MaxVoters)
	gs[0].Voters = append(gs[0].Voters, Member{ID: dial.IDFromName("one-more")})
	_, err = New(1, gs)
	require.ErrorContains(t, err, "65 voters (at most 64)")
}

func TestNewRefusesWhatTheTableCannotDescribe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		epoch  uint64
		groups []Group
		want   string
	}{
		{"epoch zero", 0, groupsOf(2), "epoch 0"},
		{"no groups", 1, nil, "0 groups"},
		{"three groups", 1, groupsOf(3), "3 groups"},
		{"a node in two groups", 1, func() []Group {
			gs := groupsOf(2)
			gs[1].Voters[2] = gs[0].Voters[0]
			return gs
		}(), "voter of groups 0 and 1"},
		{"a node twice in one group", 1, func() []Group {
			gs := groupsOf(2)
			gs[1].Voters[2] = gs[1].Voters[0]
			return gs
		}(), "voter of groups 1 and 1"},
		{"a voter without an id", 1, func() []Group {
			gs := groupsOf(2)
			gs[0].Voters[1].ID = 0
			return gs
		}(), "voter 1 has no id"},
		{"a group without voters", 1, func() []Group {
			gs := groupsOf(2)
			gs[1] = Group{MIdx: 3}
			return gs
		}(), "group 1 has no voters"},
		{"voters at index 0", 1, func() []Group {
			gs := groupsOf(2)
			gs[1].MIdx = 0
			return gs
		}(), "membership index 0"},
		{"too many voters", 1, func() []Group {
			gs := groupsOf(1)
			for i := range MaxVoters {
				gs[0].Voters = append(gs[0].Voters, Member{ID: dial.IDFromName(fmt.Sprintf("x%d", i))})
			}
			return gs
		}(), "voters (at most 64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.epoch, tc.groups)
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// At its first epoch a directory places every key where the table does
// (partition.GroupOf), which is plain modulo of the key's hash.
func TestResolveFollowsTheTable(t *testing.T) {
	for _, g := range []int{1, 2, 4, 8} {
		d, err := New(3, groupsOf(g))
		require.NoError(t, err)
		for i := range 2000 {
			key := ring.ImposterKey(4545, fmt.Sprintf("flow-%d", i))
			r := d.Resolve(key)
			require.Equal(t, int(xxhash.Sum64String(key)%uint64(g)), r.Group, key)
			require.Equal(t, uint64(3), r.Epoch)
			require.Equal(t, uint64(10+r.Group), r.MIdx)
			voters := groupsOf(g)[r.Group].Voters
			ids := make([]dial.NodeID, len(voters))
			for j, m := range voters {
				ids[j] = m.ID
			}
			want, _ := ring.New(ids).Owner(ring.ClassOf(key), key)
			require.Equal(t, want, r.Owner, "the owner is the group's own ring's")
			g2, m, ok := d.Member(r.Owner)
			require.True(t, ok, "the owner is a voter the directory names")
			require.Equal(t, r.Group, g2)
			require.Equal(t, r.Owner, m.ID)
			require.True(t, d.Holds(r.Group, key))
			require.NoError(t, d.Admit(r.Group, key, r.Epoch))
		}
	}
}

// Member names no node the directory does not.
func TestMemberOfNoGroup(t *testing.T) {
	d, err := New(1, groupsOf(2))
	require.NoError(t, err)
	_, _, ok := d.Member(dial.NodeID(1 << 62))
	require.False(t, ok)
}

// Admit's three refusals, and that a move fences only its own partition.
func TestAdmitFencesOnlyWhatMoved(t *testing.T) {
	d1, err := New(1, groupsOf(2))
	require.NoError(t, err)
	var moved, still string
	for i := 0; moved == "" || still == ""; i++ {
		key := fmt.Sprintf("k%d", i)
		switch {
		case moved == "" && partition.Of(key) == 6:
			moved = key
		case still == "" && partition.Of(key) != 6:
			still = key
		}
	}
	f2, err := d1.Fence([]partition.Partition{6}, 1) // partition 6 was group 0's
	require.NoError(t, err)
	from, to, fe, ok := f2.Moving(6)
	require.True(t, ok)
	require.Equal(t, []any{0, 1, uint64(2)}, []any{from, to, fe})
	require.ErrorIs(t, f2.Admit(0, moved, 1), ErrMoving, "no group serves it while it moves")
	require.ErrorIs(t, f2.Admit(1, moved, 2), ErrMoving)
	require.False(t, f2.Holds(0, moved))
	require.False(t, f2.Holds(1, moved))
	require.Equal(t, uint64(2), f2.EraOf(moved), "a moving partition's era is its fence's")
	require.Equal(t, uint64(0), f2.EraOf(still), "a partition never moved writes in era 0")
	_, err = f2.Fence([]partition.Partition{6}, 0)
	require.ErrorIs(t, err, ErrInvalid, "already moving")
	_, err = d1.Publish([]partition.Partition{6})
	require.ErrorIs(t, err, ErrInvalid, "not moving")

	d2, err := f2.Publish([]partition.Partition{6})
	require.NoError(t, err)
	require.Equal(t, uint64(3), d2.Epoch())
	g, e := d2.Holder(6)
	require.Equal(t, 1, g)
	require.Equal(t, uint64(3), e)
	require.Equal(t, uint64(3), d2.EraOf(moved))
	g, e = d1.Holder(6)
	require.Equal(t, 0, g, "a move leaves the old directory alone")
	require.Equal(t, uint64(1), e)

	// A caller with d1 routes moved to group 0 at epoch 1.
	r := d1.Resolve(moved)
	require.Equal(t, 0, r.Group)
	require.ErrorIs(t, d2.Admit(0, moved, r.Epoch), ErrElsewhere, "group 0 no longer holds it")
	require.ErrorIs(t, d2.Admit(1, moved, 1), ErrStaleEpoch, "routed before the assignment")
	require.ErrorIs(t, d1.Admit(1, moved, 3), ErrElsewhere)
	// A receiver that holds it since an earlier epoch than the caller
	// routed with: the caller is ahead.
	back, err := d2.Fence([]partition.Partition{6}, 0)
	require.NoError(t, err)
	d5, err := back.Publish([]partition.Partition{6})
	require.NoError(t, err)
	require.ErrorIs(t, d1.Admit(0, moved, 5), ErrAhead)
	require.NoError(t, d5.Admit(0, moved, 5))
	require.NoError(t, d2.Admit(1, moved, 3))
	require.Equal(t, uint64(5), d5.EraOf(moved), "each holding is a later era")

	// The key that did not move is admitted with either directory's epoch.
	rs := d1.Resolve(still)
	require.NoError(t, d2.Admit(rs.Group, still, rs.Epoch))
	require.Equal(t, rs, d2.Resolve(still))
}

func TestWithGroupMovesNoPartition(t *testing.T) {
	d1, err := New(5, groupsOf(2))
	require.NoError(t, err)
	gr := d1.Group(1)
	gr.MIdx = 40
	gr.Voters = gr.Voters[:2]
	d2, err := d1.WithGroup(1, gr)
	require.NoError(t, err)
	require.Equal(t, uint64(6), d2.Epoch())
	require.Equal(t, uint64(11), d1.Group(1).MIdx, "the old directory is unchanged")
	require.Len(t, d1.Group(1).Voters, 3)
	for p := range partition.Count {
		g1, e1 := d1.Holder(partition.Partition(p))
		g2, e2 := d2.Holder(partition.Partition(p))
		require.Equal(t, g1, g2)
		require.Equal(t, e1, e2, "a membership change fences no partition")
	}
	for i := range 300 {
		key := fmt.Sprintf("k%d", i)
		r := d2.Resolve(key)
		if r.Group == 1 {
			require.Equal(t, uint64(40), r.MIdx)
			require.Contains(t, []dial.NodeID{gr.Voters[0].ID, gr.Voters[1].ID}, r.Owner)
		}
	}

	_, err = d2.WithGroup(1, Group{MIdx: 39, Voters: gr.Voters})
	require.ErrorContains(t, err, "does not advance (40, then 39)")
	_, err = d2.WithGroup(1, Group{MIdx: 40, Voters: gr.Voters})
	require.ErrorContains(t, err, "does not advance (40, then 40)")
	_, err = d2.WithGroup(2, gr)
	require.ErrorContains(t, err, "no group 2")
	bad := d2.Group(0)
	_, err = d2.WithGroup(1, Group{MIdx: 41, Voters: bad.Voters})
	require.ErrorContains(t, err, "voter of groups 0 and 1")
	_, err = d2.Fence([]partition.Partition{1}, 2)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = d2.Fence([]partition.Partition{partition.Count}, 0)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = d2.Fence([]partition.Partition{1}, partition.Partition(1).Group(2))
	require.ErrorContains(t, err, "already")
}

// A resize names the target; Misplaced gives its moves one batch at a
// time, each from one group to one group, and none once every partition
// is where the table puts it for the target.
func TestResizeMovesByBatch(t *testing.T) {
	d, err := New(1, groupsOf(2))
	require.NoError(t, err)
	ps, _, _ := d.Misplaced(16)
	require.Empty(t, ps, "founded where the table puts every partition")
	_, err = d.WithTarget(3)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = d.WithTarget(4)
	require.ErrorContains(t, err, "the fleet has 2")
	d, err = d.WithTarget(1)
	require.NoError(t, err)
	require.Equal(t, 1, d.Target())
	moves := 0
	for {
		ps, from, to := d.Misplaced(512)
		if len(ps) == 0 {
			break
		}
		require.LessOrEqual(t, len(ps), 512)
		require.Equal(t, []int{1, 0}, []int{from, to})
		moves += len(ps)
		d, err = d.Fence(ps, to)
		require.NoError(t, err)
		again, _, _ := d.Misplaced(512)
		require.NotEqual(t, ps, again, "a moving partition is not misplaced again")
		d, err = d.Publish(ps)
		require.NoError(t, err)
	}
	require.Equal(t, partition.Count/2, moves)
	for p := range partition.Count {
		g, _ := d.Holder(partition.Partition(p))
		require.Equal(t, 0, g)
	}
}

// Whatever sequence of moves and membership changes a directory goes
// through: its epoch grows by one per change; every partition's epoch is
// at most the directory's and is the epoch of its last move (or the
// first); and a key is admitted at exactly one (group, epoch): the one
// Resolve names.
func TestDirectoryHistoryProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		groups := rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "groups")
		d, err := New(1, groupsOf(groups))
		require.NoError(t, err)
		last := map[partition.Partition]uint64{}
		steps := rapid.IntRange(0, 12).Draw(t, "steps")
		for i := range steps {
			before := d.Epoch()
			if p, ok := drawMove(t, d, i); ok {
				if _, _, _, moving := d.Moving(p); moving {
					d, err = d.Publish([]partition.Partition{p})
				} else {
					d, err = d.Fence([]partition.Partition{p}, drawOther(t, d, p, i))
				}
				last[p] = d.Epoch()
			} else if d.Groups() < 8 && rapid.Bool().Draw(t, fmt.Sprintf("add%d", i)) {
				d, err = d.WithNewGroup(addedGroup(d.Groups()))
			} else {
				g := rapid.IntRange(0, d.Groups()-1).Draw(t, fmt.Sprintf("m%d", i))
				gr := d.Group(g)
				gr.MIdx++
				d, err = d.WithGroup(g, gr)
			}
			require.NoError(t, err)
			require.Equal(t, before+1, d.Epoch())
		}
		key := rapid.StringN(1, 40, -1).Draw(t, "key")
		p := partition.Of(key)
		g, e := d.Holder(p)
		want, moved := last[p]
		if !moved {
			want = 1
			require.Equal(t, p.Group(groups), g)
		}
		require.Equal(t, want, e)
		_, _, _, moving := d.Moving(p)
		r := d.Resolve(key)
		require.Equal(t, g, r.Group)
		require.Equal(t, e, r.Epoch)
		for gg := range d.Groups() {
			for _, ee := range []uint64{e - 1, e, e + 1} {
				err := d.Admit(gg, key, ee)
				if moving {
					require.ErrorIs(t, err, ErrMoving)
				} else if gg == g && ee == e {
					require.NoError(t, err)
				} else {
					require.Error(t, err)
					require.True(t, errors.Is(err, ErrElsewhere) || errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrAhead))
				}
			}
		}
	})
}

// drawMove draws, in a fleet of more than one group, whether step i
// moves a partition (fences it, or publishes it if it is moving), and
// which: one of the first 8, so that fences meet publications.
func drawMove(t *rapid.T, d *Directory, i int) (partition.Partition, bool) {
	if d.Groups() < 2 || !rapid.Bool().Draw(t, fmt.Sprintf("move%d", i)) {
		return 0, false
	}
	return partition.Partition(rapid.IntRange(0, 7).Draw(t, fmt.Sprintf("p%d", i))), true
}

// drawOther draws a group other than the one holding p.
func drawOther(t *rapid.T, d *Directory, p partition.Partition, i int) int {
	g, _ := d.Holder(p)
	return (g + rapid.IntRange(1, d.Groups()-1).Draw(t, fmt.Sprintf("g%d", i))) % d.Groups()
}
