package ring

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/dial"
)

// referencePlacement is the model Placement is checked against: score every
// voter with the hand-built spec bytes, sort by (score, id) descending, keep
// the first Replicas.
func referencePlacement(voters []dial.NodeID, class Class, key string) []dial.NodeID {
	ranked := slices.Clone(voters)
	slices.Sort(ranked)
	ranked = slices.Compact(ranked)
	slices.SortFunc(ranked, func(a, b dial.NodeID) int {
		sa, sb := specScore(a, class, key), specScore(b, class, key)
		switch {
		case outranks(sa, a, sb, b):
			return -1
		case outranks(sb, b, sa, a):
			return 1
		}
		return 0
	})
	return ranked[:min(len(ranked), Replicas)]
}

var (
	genClass = rapid.SampledFrom([]Class{ClassFlow, ClassSequence, ClassProxy})
	genID    = rapid.Custom(func(t *rapid.T) dial.NodeID { return dial.NodeID(rapid.Uint64Min(1).Draw(t, "id")) })
	// Keys are mostly short, as flow keys are, with some past the stack
	// buffer so the streamed path is exercised too.
	genKey  = rapid.OneOf(rapid.String(), rapid.StringN(240, 300, -1))
	genKeys = rapid.SliceOfN(genKey, 1, 40)
)

func genVoters(minLen, maxLen int) *rapid.Generator[[]dial.NodeID] {
	return rapid.SliceOfNDistinct(genID, minLen, maxLen, func(id dial.NodeID) dial.NodeID { return id })
}

func TestPropPlacementIsTheTopOfTheRanking(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		voters := genVoters(0, 12).Draw(t, "voters")
		class := genClass.Draw(t, "class")
		r := New(voters)
		for _, key := range genKeys.Draw(t, "keys") {
			p := r.Placement(class, key)
			nodes := p.Nodes()
			require.Equal(t, referencePlacement(voters, class, key), nodes)
			require.Equal(t, min(len(voters), Replicas), p.Len())

			// Members are distinct voters in strictly descending rank.
			for i, id := range nodes {
				require.True(t, slices.Contains(r.Voters(), id))
				if i > 0 {
					prev := nodes[i-1]
					require.True(t, outranks(Score(prev, class, key), prev, Score(id, class, key), id),
						"rank %d does not outrank rank %d", i-1, i)
				}
			}
			owner, ok := r.Owner(class, key)
			pOwner, pOK := p.Owner()
			require.Equal(t, len(voters) > 0, ok)
			require.Equal(t, pOwner, owner)
			require.Equal(t, pOK, ok)
		}
	})
}

func TestPropRemovingAVoterMovesOnlyItsKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		voters := genVoters(1, 12).Draw(t, "voters")
		gone := rapid.SampledFrom(voters).Draw(t, "removed")
		class := genClass.Draw(t, "class")
		before := New(voters)
		after := New(slices.DeleteFunc(slices.Clone(voters), func(id dial.NodeID) bool { return id == gone }))
		for _, key := range genKeys.Draw(t, "keys") {
			old := before.Placement(class, key)
			cur := after.Placement(class, key)
			oldOwner, _ := old.Owner()
			curOwner, ok := cur.Owner()
			if oldOwner != gone {
				require.Equal(t, oldOwner, curOwner, "key %q moved though its owner stayed", key)
			} else if ok {
				require.Equal(t, old.Nodes()[1], curOwner, "an orphaned key goes to its first successor")
			}
			if !old.Contains(gone) {
				require.Equal(t, old, cur, "key %q changed replicas though the removed voter held no copy", key)
			}
			// Survivors keep their relative order; nobody jumps the queue.
			survivors := slices.DeleteFunc(old.Nodes(), func(id dial.NodeID) bool { return id == gone })
			require.Equal(t, survivors, cur.Nodes()[:len(survivors)])
		}
	})
}

func TestPropAddingAVoterMovesOnlyTheKeysItWins(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		voters := genVoters(0, 12).Draw(t, "voters")
		added := genID.Filter(func(id dial.NodeID) bool { return !slices.Contains(voters, id) }).Draw(t, "added")
		class := genClass.Draw(t, "class")
		before := New(voters)
		after := New(append(slices.Clone(voters), added))
		for _, key := range genKeys.Draw(t, "keys") {
			oldOwner, hadOwner := before.Owner(class, key)
			curOwner, _ := after.Owner(class, key)
			wins := !hadOwner || outranks(Score(added, class, key), added, Score(oldOwner, class, key), oldOwner)
			if wins {
				require.Equal(t, added, curOwner, "key %q: the new voter outscores the old owner but did not take the key", key)
			} else {
				require.Equal(t, oldOwner, curOwner, "key %q moved to a voter other than the new one", key)
			}
			// Replicas: either unchanged, or the new voter slots in and the
			// others keep their order.
			old, cur := before.Placement(class, key), after.Placement(class, key)
			if cur.Contains(added) {
				rest := slices.DeleteFunc(cur.Nodes(), func(id dial.NodeID) bool { return id == added })
				require.Equal(t, old.Nodes()[:len(rest)], rest)
			} else {
				require.Equal(t, old, cur)
			}
		}
	})
}

func TestPropVoterOrderAndDuplicatesDoNotMatter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		voters := genVoters(0, 12).Draw(t, "voters")
		shuffled := rapid.Permutation(voters).Draw(t, "shuffled")
		if len(voters) > 0 {
			dups := rapid.SliceOfN(rapid.SampledFrom(voters), 0, 8).Draw(t, "duplicates")
			shuffled = rapid.Permutation(append(shuffled, dups...)).Draw(t, "shuffled with duplicates")
		}
		a, b := New(voters), New(shuffled)
		require.Equal(t, a.Voters(), b.Voters())
		require.Equal(t, a.Len(), b.Len())
		require.True(t, slices.IsSorted(a.Voters()))
		class := genClass.Draw(t, "class")
		for _, key := range genKeys.Draw(t, "keys") {
			require.Equal(t, a.Placement(class, key), b.Placement(class, key))
			ownerA, okA := a.Owner(class, key)
			ownerB, okB := b.Owner(class, key)
			require.Equal(t, ownerA, ownerB)
			require.Equal(t, okA, okB)
		}
	})
}
