package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

type nopNet struct{}

func (nopNet) Sender(dial.NodeID) dial.Sender { return nil }

func TestEpochGrowsAcrossCrashesAtEveryStep(t *testing.T) {
	// Power fails before each of the update's disk steps in turn; the
	// epoch must never go back and never be lost once returned.
	for cut := 1; cut <= 6; cut++ {
		k := sim.New(uint64(cut))
		var got []uint64
		n := k.AddNode("a", func(env *sim.Env) dial.Handler {
			e, err := nextEpoch(env.Disk)
			require.NoError(t, err)
			got = append(got, e)
			return dial.HandlerFunc(func(dial.NodeID, []byte) {})
		}, nopNet{}, sim.DefaultDiskConfig)
		n.Start()
		n.Crash()
		n.Disk().CutPowerAfter(cut)
		n.Start() // may lose power mid-update: then the boot never returned
		if n.Up() {
			n.Crash()
		}
		n.Start()
		require.GreaterOrEqual(t, len(got), 2)
		for i := 1; i < len(got); i++ {
			require.Greater(t, got[i], got[i-1], "cut at step %d: epochs %v", cut, got)
		}
	}
}

func TestDamagedEpochIsAnError(t *testing.T) {
	k := sim.New(1)
	n := k.AddNode("a", nil, nopNet{}, sim.DefaultDiskConfig)
	d := n.Disk()
	f, err := d.Create(epochFile)
	require.NoError(t, err)
	_, _ = f.Write([]byte("garbage-bytes"))
	_, err = nextEpoch(d)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refusing to guess")
	var _ journal.FS = d
}

// A flow log damaged before its tail is moved aside, never read and never
// deleted, and the node boots with an empty shard; a clean log is opened
// in place.
func TestCorruptShardLogIsQuarantined(t *testing.T) {
	k := sim.New(1)
	n := k.AddNode("a", func(*sim.Env) dial.Handler { return dial.HandlerFunc(func(dial.NodeID, []byte) {}) }, nopNet{}, sim.DefaultDiskConfig)
	n.Start()
	fs := n.Disk()
	l, note, err := openShardLog(fs, 1)
	require.NoError(t, err)
	require.Empty(t, note)
	for i := 0; i < 3; i++ {
		require.NoError(t, l.Write([]shard.Mutation{{Flow: "f", Key: "k", Value: []byte("value")}}, true))
	}
	require.NoError(t, l.Close())

	// Flip a byte in the first record's body: damage a crash cannot leave.
	f, err := fs.Open(FlowLog)
	require.NoError(t, err)
	size, err := f.Size()
	require.NoError(t, err)
	buf := make([]byte, size)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	buf[24] ^= 0xff
	g, err := fs.Create(FlowLog)
	require.NoError(t, err)
	_, err = g.Write(buf)
	require.NoError(t, err)
	require.NoError(t, g.Sync())
	require.NoError(t, g.Close())

	l, note, err = openShardLog(fs, 7)
	require.NoError(t, err)
	require.Contains(t, note, "moved to flow.log.corrupt-7")
	names, err := fs.List()
	require.NoError(t, err)
	require.Contains(t, names, "flow.log.corrupt-7", "kept for the operator")
	n2 := 0
	require.NoError(t, l.Scan(func(shard.Mutation) error { n2++; return nil }))
	require.Zero(t, n2, "nothing of the damaged log is read as data")
}
