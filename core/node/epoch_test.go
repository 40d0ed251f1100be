package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
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
