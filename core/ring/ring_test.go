package ring

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// Score is voter id's rendezvous score for key in class, by the path
// Owner and Placement take (message.init and score): the tests hold it to
// the spec's layout (specScore) and rank with it. It panics on an
// unknown class, as they do.
func Score(id dial.NodeID, class Class, key string) uint64 {
	mustBeKnown(class)
	var m message
	m.init(class, key)
	return m.score(id)
}

// specScore builds the hashed bytes by hand, straight from the contract
// (le64(id) ‖ class tag ‖ key, xxh64 seed 0), without touching the package's
// own buffer code, so the tests compare the implementation with the spec
// rather than with itself.
func specScore(id dial.NodeID, class Class, key string) uint64 {
	b := make([]byte, 8, 9+len(key))
	binary.LittleEndian.PutUint64(b, uint64(id))
	b = append(b, byte(class))
	b = append(b, key...)
	return xxhash.Sum64(b)
}

// The golden cluster. Ids are derived the way a node derives its own.
var goldenNames = []string{"node-a", "node-b", "node-c", "node-d", "node-e"}

func goldenIDs() map[string]dial.NodeID {
	ids := make(map[string]dial.NodeID, len(goldenNames))
	for _, n := range goldenNames {
		ids[n] = dial.IDFromName(n)
	}
	return ids
}

func TestGoldenNodeIDs(t *testing.T) {
	// Pinned so that a change in dial.IDFromName shows up here as well: it
	// would move every key in the table below.
	want := map[string]dial.NodeID{
		"node-a": 0x05378e2c8885d70b,
		"node-b": 0xfd9b0ba757e60a14,
		"node-c": 0x57151a6ba003982a,
		"node-d": 0x05b0140d6b239ff1,
		"node-e": 0x48adb8393db854ea,
	}
	require.Equal(t, want, goldenIDs())
}

// TestGoldenScores pins the byte layout of the score. The values were
// computed with the spec layout and checked against the C xxHash library; a
// change of endianness, field order, tag width or seed breaks every row.
func TestGoldenScores(t *testing.T) {
	ids := goldenIDs()
	long := "t" + strings.Repeat("x", 300) + ":1" // longer than the stack buffer
	for _, tc := range []struct {
		node  string
		class Class
		key   string
		want  uint64
	}{
		{"node-a", ClassFlow, "i8080:8080", 0xb47accbf60d1e6b8},
		{"node-c", ClassSequence, "i8080:abc", 0xb8db49e14033753d},
		{"node-e", ClassProxy, "f:shared", 0x0589c93256ca48a2},
		{"node-b", ClassFlow, long, 0x077a48bba9015fa1},
		{"node-d", ClassFlow, "", 0xc6ffedbe023f199d},
	} {
		id := ids[tc.node]
		name := fmt.Sprintf("%s/%v/%.12q", tc.node, tc.class, tc.key)
		require.Equalf(t, tc.want, specScore(id, tc.class, tc.key), "%s: the spec layout no longer gives the pinned score", name)
		require.Equalf(t, tc.want, Score(id, tc.class, tc.key), "%s: Score departs from the spec layout", name)
	}
}

// TestGoldenLayoutIsSensitive shows that the pinned scores would catch the
// plausible slips: big-endian ids, the tag after the key, a missing tag, a
// non-zero seed.
func TestGoldenLayoutIsSensitive(t *testing.T) {
	id, key := goldenIDs()["node-a"], "i8080:8080"
	const pinned = 0xb47accbf60d1e6b8
	be := binary.BigEndian.AppendUint64(nil, uint64(id))
	le := binary.LittleEndian.AppendUint64(nil, uint64(id))
	seeded := xxhash.NewWithSeed(1)
	seeded.Write(append(append(le[:8:8], byte(ClassFlow)), key...))
	for name, got := range map[string]uint64{
		"big-endian id":  xxhash.Sum64(append(append(be, byte(ClassFlow)), key...)),
		"tag after key":  xxhash.Sum64(append(append(le[:8:8], key...), byte(ClassFlow))),
		"no tag":         xxhash.Sum64(append(le[:8:8], key...)),
		"seed 1":         seeded.Sum64(),
		"wrong class":    Score(id, ClassSequence, key),
		"id as a string": xxhash.Sum64String(id.String() + "\x01" + key),
	} {
		require.NotEqualf(t, uint64(pinned), got, "%s", name)
	}
}

// TestGoldenPlacements is the literal table of who owns what in the golden
// cluster, checked against the C xxHash library when it was written. If it
// fails, keys would land on different nodes than in the reference design:
// fix the code, not the table.
func TestGoldenPlacements(t *testing.T) {
	ids := goldenIDs()
	all := make([]dial.NodeID, 0, len(goldenNames))
	for _, n := range goldenNames {
		all = append(all, ids[n])
	}
	names := make(map[dial.NodeID]string, len(ids))
	for n, id := range ids {
		names[id] = n
	}
	named := func(p Placement) []string {
		var out []string
		for _, id := range p.Nodes() {
			out = append(out, names[id])
		}
		return out
	}

	five := New(all)
	for _, tc := range []struct {
		class Class
		key   string
		want  []string // owner, first successor, second successor
	}{
		{ClassFlow, "i8080:8080", []string{"node-e", "node-a", "node-c"}},
		{ClassFlow, "i8080:alice", []string{"node-c", "node-a", "node-b"}},
		{ClassFlow, "i8081:alice", []string{"node-b", "node-e", "node-d"}},
		{ClassFlow, "tacme:alice", []string{"node-b", "node-a", "node-c"}},
		{ClassFlow, "f:alice", []string{"node-c", "node-e", "node-a"}},
		{ClassFlow, "f:bob", []string{"node-c", "node-d", "node-a"}},
		{ClassFlow, "i9000:order-17", []string{"node-b", "node-c", "node-e"}},
		{ClassFlow, "", []string{"node-d", "node-e", "node-b"}},
		{ClassSequence, "i8080:8080", []string{"node-c", "node-b", "node-d"}},
		{ClassSequence, "i8080:alice", []string{"node-d", "node-a", "node-c"}},
		{ClassSequence, "f:alice", []string{"node-c", "node-b", "node-e"}},
		{ClassProxy, "i8080:8080", []string{"node-c", "node-b", "node-e"}},
		{ClassProxy, "i8080:alice", []string{"node-d", "node-a", "node-c"}},
		{ClassProxy, "f:alice", []string{"node-e", "node-b", "node-d"}},
	} {
		p := five.Placement(tc.class, tc.key)
		require.Equalf(t, tc.want, named(p), "%v %q", tc.class, tc.key)
		owner, ok := five.Owner(tc.class, tc.key)
		require.True(t, ok)
		require.Equalf(t, tc.want[0], names[owner], "Owner and Placement disagree for %v %q", tc.class, tc.key)
	}

	// Remove the owner of i8080:8080 (node-e; full rank e, a, c, d, b): its
	// first successor takes over, the second moves up, and the next voter in
	// rank order, node-d, becomes a replica.
	four := New([]dial.NodeID{ids["node-a"], ids["node-b"], ids["node-c"], ids["node-d"]})
	require.Equal(t, []string{"node-a", "node-c", "node-d"}, named(four.Placement(ClassFlow, "i8080:8080")))
	// A key node-e did not own keeps its owner.
	require.Equal(t, []string{"node-c", "node-a", "node-b"}, named(four.Placement(ClassFlow, "i8080:alice")))

	// Two voters: one successor. One voter: owner only. None: nothing.
	two := New([]dial.NodeID{ids["node-a"], ids["node-b"]})
	require.Equal(t, []string{"node-a", "node-b"}, named(two.Placement(ClassFlow, "i8080:8080")))
	require.Equal(t, []string{"node-a", "node-b"}, named(two.Placement(ClassFlow, "f:alice")))
	one := New([]dial.NodeID{ids["node-d"]})
	require.Equal(t, []string{"node-d"}, named(one.Placement(ClassFlow, "f:alice")))
	require.Empty(t, New(nil).Placement(ClassFlow, "f:alice").Nodes())
}

func TestTiesGoToTheLargerID(t *testing.T) {
	// Real scores are 64-bit hashes and practically never tie, so the rule
	// is tested on the ranking itself with made-up scores.
	require.True(t, outranks(5, 1, 4, 9), "the higher score wins whatever the ids")
	require.True(t, outranks(5, 9, 5, 1), "an equal score goes to the larger id")
	require.False(t, outranks(5, 1, 5, 9))
	require.False(t, outranks(5, 7, 5, 7), "a voter does not outrank itself")

	for _, order := range [][]dial.NodeID{{1, 2, 3, 4}, {4, 3, 2, 1}, {2, 4, 1, 3}} {
		var tp top
		for _, id := range order {
			tp.offer(id, 100) // every voter scores the same
		}
		require.Equal(t, [Replicas]dial.NodeID{4, 3, 2}, tp.nodes, "offered in order %v", order)
	}
	var tp top
	for id, s := range []uint64{7, 9, 9, 1, 8} { // ids 0..4 for brevity
		tp.offer(dial.NodeID(id), s)
	}
	require.Equal(t, [Replicas]dial.NodeID{2, 1, 4}, tp.nodes)
	require.Equal(t, [Replicas]uint64{9, 9, 8}, tp.scores)
}

func TestUnknownClassPanics(t *testing.T) {
	r := New([]dial.NodeID{1, 2, 3})
	for _, c := range []Class{0, 4, 255} {
		require.PanicsWithValuef(t,
			fmt.Sprintf("ring: unknown class tag %d (0 is reserved; known: 1 flow, 2 sequence, 3 proxy)", c),
			func() { r.Owner(c, "k") }, "Owner, class %d", c)
		require.Panicsf(t, func() { r.Placement(c, "k") }, "Placement, class %d", c)
		require.Panicsf(t, func() { Score(1, c, "k") }, "Score, class %d", c)
		// An empty ring still rejects it: the bug is in the caller either way.
		require.Panicsf(t, func() { New(nil).Owner(c, "k") }, "empty ring, class %d", c)
	}
	require.Equal(t, "flow", ClassFlow.String())
	require.Equal(t, "Class(0)", Class(0).String())
}

func TestNew(t *testing.T) {
	r := New([]dial.NodeID{9, 3, 9, 5, 3})
	require.Equal(t, []dial.NodeID{3, 5, 9}, r.Voters())
	require.Equal(t, 3, r.Len())

	require.PanicsWithValue(t, "ring: node id 0 in voter list (ids are never zero)",
		func() { New([]dial.NodeID{4, 0, 2}) })

	var zero Ring
	require.Equal(t, New(nil), zero)
	require.Equal(t, New([]dial.NodeID{}), zero)
	require.Zero(t, zero.Len())
	require.Empty(t, zero.Voters())
	_, ok := zero.Owner(ClassFlow, "k")
	require.False(t, ok)
	p := zero.Placement(ClassFlow, "k")
	require.Zero(t, p.Len())
	_, ok = p.Owner()
	require.False(t, ok)
	require.Nil(t, p.Successors())
}

func TestRingIsImmutable(t *testing.T) {
	in := []dial.NodeID{3, 1, 2}
	r := New(in)
	before := r.Placement(ClassFlow, "f:x")
	in[0], in[1], in[2] = 7, 8, 9
	r.Voters()[0] = 42
	require.Equal(t, []dial.NodeID{1, 2, 3}, r.Voters())
	require.Equal(t, before, r.Placement(ClassFlow, "f:x"))
	before.Nodes()[0] = 42
	before.Successors()[0] = 42
	require.Equal(t, before, r.Placement(ClassFlow, "f:x"))
}

func TestPlacementAccessors(t *testing.T) {
	r := New([]dial.NodeID{1, 2, 3, 4})
	p := r.Placement(ClassFlow, "i8080:8080")
	nodes := p.Nodes()
	require.Len(t, nodes, Replicas)
	owner, ok := p.Owner()
	require.True(t, ok)
	require.Equal(t, nodes[0], owner)
	require.Equal(t, nodes[1:], p.Successors())
	for _, id := range r.Voters() {
		require.Equal(t, slices.Contains(nodes, id), p.Contains(id), "voter %v", id)
	}
	require.Equal(t, fmt.Sprint(nodes), p.String())
}

// TestKeysAroundTheBufferEdge crosses from the one-shot hash to the streamed
// one: both must give the spec score.
func TestKeysAroundTheBufferEdge(t *testing.T) {
	r := New([]dial.NodeID{11, 22, 33, 44})
	edge := msgBufLen - prefixLen
	for n := edge - 2; n <= edge+2; n++ {
		key := strings.Repeat("k", n)
		for _, id := range r.Voters() {
			require.Equalf(t, specScore(id, ClassFlow, key), Score(id, ClassFlow, key), "key length %d", n)
		}
		require.Equal(t, referencePlacement(r.Voters(), ClassFlow, key), r.Placement(ClassFlow, key).Nodes())
	}
}

func TestLookupsDoNotAllocate(t *testing.T) {
	r := New(testIDs(33))
	for _, key := range []string{"i8080:8080", strings.Repeat("x", 1000)} {
		require.Zero(t, testing.AllocsPerRun(100, func() { r.Owner(ClassFlow, key) }), "Owner, key length %d", len(key))
		require.Zero(t, testing.AllocsPerRun(100, func() { r.Placement(ClassFlow, key) }), "Placement, key length %d", len(key))
		require.Zero(t, testing.AllocsPerRun(100, func() { Score(7, ClassFlow, key) }), "Score, key length %d", len(key))
		p := r.Placement(ClassFlow, key)
		require.Zero(t, testing.AllocsPerRun(100, func() { p.Owner(); p.Contains(7) }))
	}
}

// testIDs returns n distinct node ids derived from names, as a cluster's are.
func testIDs(n int) []dial.NodeID {
	ids := make([]dial.NodeID, n)
	for i := range ids {
		ids[i] = dial.IDFromName(fmt.Sprintf("node-%d", i+1))
	}
	return ids
}

// TestSpread checks that ownership is fair. For n voters and K fixed keys,
// each voter's owner count is Binomial(K, 1/n) if the scores behave like
// independent uniform draws, so it must sit within ±15% of K/n.
//
// Why the bound cannot flake: with K = 20,000 and n = 9 (the worst case here,
// mean μ = 2,222), the Chernoff bounds give P(X ≥ 1.15μ) ≤ exp(-0.15²μ/3) ≈
// 6e-8 and P(X ≤ 0.85μ) ≤ exp(-0.15²μ/2) ≈ 1e-11; smaller n only makes μ
// larger and the tail smaller. Over the 42 (n, voter) pairs per class and 3
// classes, a fair hash fails with probability below 1e-5 for any choice of
// names and keys. The keys and names are fixed besides, so the test is
// deterministic. The same bound applies to replica load: each voter holds a
// copy of a key with probability 3/n (μ ≥ 6,667).
func TestSpread(t *testing.T) {
	const keys = 20000
	const tolerance = 0.15
	for n := 3; n <= 9; n++ {
		r := New(testIDs(n))
		for _, class := range []Class{ClassFlow, ClassSequence, ClassProxy} {
			owned := make(map[dial.NodeID]int, n)
			held := make(map[dial.NodeID]int, n)
			for k := range keys {
				p := r.Placement(class, fmt.Sprintf("i8080:flow-%d", k))
				owner, _ := p.Owner()
				owned[owner]++
				for _, id := range p.Nodes() {
					held[id]++
				}
			}
			fairOwned := float64(keys) / float64(n)
			fairHeld := float64(keys) * Replicas / float64(n)
			worst := 0.0
			for _, id := range r.Voters() {
				dOwned := float64(owned[id])/fairOwned - 1
				dHeld := float64(held[id])/fairHeld - 1
				require.LessOrEqualf(t, abs(dOwned), tolerance, "n=%d %v: %v owns %d keys, fair share %.0f", n, class, id, owned[id], fairOwned)
				require.LessOrEqualf(t, abs(dHeld), tolerance, "n=%d %v: %v holds %d keys, fair share %.0f", n, class, id, held[id], fairHeld)
				worst = max(worst, abs(dOwned))
			}
			t.Logf("n=%d %-8v worst owner share off fair by %4.1f%%", n, class, 100*worst)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
