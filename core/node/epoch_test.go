package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
	"github.com/fenceline/fenceline/sim/simtest"
)

func TestEpochGrowsAcrossCrashesAtEveryStep(t *testing.T) {
	// Power fails before each of the update's disk steps in turn; the
	// epoch must never go back and never be lost once returned.
	for cut := 1; cut <= 6; cut++ {
		k := sim.New(uint64(cut))
		var got []uint64
		n := k.AddMachine("a", func(env *sim.Env) dial.Handler {
			e, err := nextEpoch(env.Disk)
			require.NoError(t, err)
			got = append(got, e)
			return dial.HandlerFunc(func(dial.NodeID, []byte) {})
		}, simtest.NopNet{}, sim.DefaultDiskConfig)
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
	n := k.AddMachine("a", nil, simtest.NopNet{}, sim.DefaultDiskConfig)
	d := n.Disk()
	f, err := d.Create(epochFile)
	require.NoError(t, err)
	_, _ = f.Write([]byte("garbage-bytes"))
	_, err = nextEpoch(d)
	require.Error(t, err)
	require.Contains(t, err.Error(), "refusing to guess")
	var _ recfile.FS = d
}

// A flow log damaged before its tail is moved aside, never read and never
// deleted, and the node boots with an empty shard; a clean log is opened
// in place.
func TestCorruptShardLogIsQuarantined(t *testing.T) {
	m := simtest.NewMachine(t, 1, 0)
	l, note, err := openShardLog(m.Disk(), 1)
	require.NoError(t, err)
	require.Empty(t, note)
	for i := 0; i < 3; i++ {
		require.NoError(t, l.Write([]shard.Mutation{{Flow: "f", Key: "k", Value: []byte("value")}}, true))
	}
	require.NoError(t, l.Close())

	// Flip a byte in the first record's body: damage a crash cannot leave.
	buf := m.Raw(FlowLog)
	buf[24] ^= 0xff
	m.Put(FlowLog, buf)

	l, note, err = openShardLog(m.Disk(), 7)
	require.NoError(t, err)
	require.Contains(t, note, "moved to flow.log.corrupt-7")
	require.Contains(t, m.Names(), "flow.log.corrupt-7", "kept for the operator")
	n := 0
	require.NoError(t, l.Scan(func(shard.Mutation) error { n++; return nil }))
	require.Zero(t, n, "nothing of the damaged log is read as data")
}
