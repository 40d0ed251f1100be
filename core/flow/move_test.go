package flow

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// moveFleet is a store's fleet for these tests: what the test sets.
type moveFleet struct {
	group  int
	dir    *fleet.Directory
	fences fleet.Fences
}

func (f *moveFleet) Group() int                  { return f.group }
func (f *moveFleet) Directory() *fleet.Directory { return f.dir }
func (f *moveFleet) Fences() fleet.Fences        { return f.fences }

// twoGroups is a directory of two groups: a, b, c (group 0) and x, y, z
// (group 1).
func twoGroups(t *testing.T) *fleet.Directory {
	var gs [2]fleet.Group
	for g, names := range [][]string{{"a", "b", "c"}, {"x", "y", "z"}} {
		gs[g].MIdx = 1
		for _, n := range names {
			gs[g].Voters = append(gs[g].Voters, fleet.Member{ID: dial.IDFromName(n), Name: n})
		}
	}
	d, err := fleet.New(1, gs[:])
	require.NoError(t, err)
	return d
}

func newFleetStore(t *testing.T, id dial.NodeID, voters []dial.NodeID, fl *moveFleet) (*Store, *clock.Manual, *sent) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	net := &sent{}
	s, err := New(Config{}, Env{ID: id, Epoch: 1, Clock: clk, Net: net, Ctl: &ctl{m: 1, voters: voters}, Rand: rand.New(rand.NewPCG(1, 2)), Fleet: fl})
	require.NoError(t, err)
	return s, clk, net
}

// A flow of group 1's, and its partition.
func groupOneFlow(t *testing.T, d *fleet.Directory) (string, partition.Partition) {
	for i := range 1000 {
		f := "i8080:m" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if g, _ := d.HolderOf(f); g == 1 {
			return f, partition.Of(f)
		}
	}
	t.Fatal("no flow of group 1")
	return "", 0
}

// An old voter gives its copy only once its group's log has fenced the
// batch, and only at the membership the driver names; its owner refuses
// the partition from the fence on, whatever its directory says.
func TestMoveSourceWaitsForItsLogsFence(t *testing.T) {
	d := twoGroups(t)
	fl := &moveFleet{group: 1, dir: d}
	x, y, z := dial.IDFromName("x"), dial.IDFromName("y"), dial.IDFromName("z")
	s, _, net := newFleetStore(t, x, []dial.NodeID{x, y, z}, fl)
	f, p := groupOneFlow(t, d)
	v := Value{Data: []byte("7"), Tuple: Tuple{MIdx: 1, V: 1<<32 + 3, Origin: x}}
	s.merge(f, map[string]Value{"k": v}, shard.Async)

	ask := msg{Kind: FrameMoveAsk, ID: 9, M: 2, Their: 1, Session: 1, Digests: partsOf([]partition.Partition{p})}
	s.HandleFrame(idA, frame(ask))
	require.Len(t, net.frames, 1)
	require.Equal(t, "not fenced yet", net.frames[0].m.Err)
	require.Empty(t, net.frames[0].m.Flows)

	fl.fences = fl.fences.With([]partition.Partition{p}, 2)
	net.frames = nil
	s.HandleFrame(idA, frame(msg{Kind: FrameMoveAsk, ID: 9, M: 2, Their: 5, Session: 1, Digests: partsOf([]partition.Partition{p})}))
	require.Equal(t, "membership 1", net.frames[0].m.Err, "the driver's directory names another membership of this group")
	net.frames = nil
	s.HandleFrame(idA, frame(ask))
	got := net.frames[0].m
	require.Empty(t, got.Err)
	require.Equal(t, map[string]map[string]Value{f: {"k": v}}, got.Flows)
	require.Equal(t, uint64(1), got.Served, "the only page")
	require.Equal(t, f, got.Flow)

	// The fence holds at the owner though its directory still gives the
	// partition to its group.
	require.ErrorIs(t, s.holds(f), fleet.ErrMoving)
	fl.fences = fleet.Fences{}
	require.NoError(t, s.holds(f))
}

// A new voter takes a page only while its directory moves the batch to
// its group at the move's epoch, keeps the copies' tuples, and
// acknowledges once they are on disk.
func TestIngestTakesOnlyWhatMovesHere(t *testing.T) {
	d := twoGroups(t)
	fl := &moveFleet{group: 0, dir: d}
	s, _, net := newFleetStore(t, idA, []dial.NodeID{idA, idB, idC}, fl)
	f, p := groupOneFlow(t, d)
	v := Value{Data: []byte("7"), Tuple: Tuple{MIdx: 4, V: 1<<32 + 3, Origin: dial.IDFromName("x")}}
	page := msg{Kind: FrameIngest, ID: 3, M: 2, Their: 1, Session: 1, Served: 77, Flows: map[string]map[string]Value{f: {"k": v}},
		Digests: partsOf([]partition.Partition{p})}
	s.HandleFrame(dial.IDFromName("x"), frame(page))
	require.Contains(t, net.frames[0].m.Err, "is not moving here")
	require.Empty(t, s.Copy(f))

	moving, err := d.Fence([]partition.Partition{p}, 0)
	require.NoError(t, err)
	fl.dir = moving
	net.frames = nil
	s.HandleFrame(dial.IDFromName("x"), frame(page))
	ack := net.frames[0].m
	require.Equal(t, FrameIngestAck, ack.Kind)
	require.Empty(t, ack.Err)
	require.Equal(t, uint64(77), ack.Served, "names the source whose page it was")
	require.Equal(t, v, s.Copy(f)["k"], "the copy keeps its tuple")

	// Once published here, a late page is refused: the owners serve it.
	published, err := moving.Publish([]partition.Partition{p})
	require.NoError(t, err)
	fl.dir = published
	net.frames = nil
	s.HandleFrame(dial.IDFromName("x"), frame(page))
	require.NotEmpty(t, net.frames[0].m.Err)
	// And the group writes it in the era of its publication, above the
	// copy whatever the old group's membership index was.
	require.Equal(t, published.Epoch(), s.era(f))
	next := s.nextTuple(s.era(f), v.Tuple)
	require.True(t, v.Tuple.Less(next))
}

// A page naming a flow outside the batch is refused whole.
func TestIngestRefusesAFlowOutsideTheBatch(t *testing.T) {
	d := twoGroups(t)
	s, _, net := newFleetStore(t, idA, []dial.NodeID{idA, idB, idC}, &moveFleet{group: 0, dir: d})
	f, p := groupOneFlow(t, d)
	s.HandleFrame(idB, frame(msg{Kind: FrameIngest, ID: 3, M: 2, Their: 1, Session: 1, Flows: map[string]map[string]Value{f: {"k": {Data: []byte("1")}}},
		Digests: partsOf([]partition.Partition{(p + 1) % partition.Count})}))
	require.Empty(t, net.frames)
	require.Equal(t, uint64(1), s.BadFrames)
}
