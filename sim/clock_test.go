package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func idleNode(k *Kernel, name string) *Machine { return idleNodeCfg(k, name, DefaultDiskConfig) }

func idleNodeCfg(k *Kernel, name string, disk DiskConfig) *Machine {
	n := k.AddMachine(name, func(*Env) dial.Handler {
		return dial.HandlerFunc(func(dial.NodeID, []byte) {})
	}, nopNet{}, disk)
	n.Start()
	return n
}

func TestStepMovesNowButNotPendingTimers(t *testing.T) {
	k := New(1)
	n := idleNode(k, "a")
	c := n.Clock()
	var firedAt time.Duration
	n.Exec(func() { c.AfterFunc(10*time.Second, func() { firedAt = k.Now() }) })
	require.NoError(t, k.RunUntil(time.Second))
	c.Step(-time.Hour)
	require.Equal(t, Epoch.Add(time.Second-time.Hour), c.Now(), "a step moves the wall reading")
	require.NoError(t, k.RunUntil(time.Minute))
	require.Equal(t, 10*time.Second, firedAt, "a step must not move a pending timer")
}

func TestDriftChangesBothNowAndTimers(t *testing.T) {
	k := New(1)
	n := idleNode(k, "a")
	c := n.Clock()
	c.SetDrift(100_000) // +10%: this clock runs fast
	var firedAt time.Duration
	n.Exec(func() { c.AfterFunc(11*time.Second, func() { firedAt = k.Now() }) })
	require.NoError(t, k.RunUntil(time.Minute))
	require.Equal(t, 10*time.Second, firedAt, "11s on a clock 10% fast is 10s of true time")
	require.Equal(t, Epoch.Add(66*time.Second), c.Now())
	require.Equal(t, 6*time.Second, c.Offset())
	require.Panics(t, func() { c.SetDrift(-1_000_000) })
}

func TestTimerStop(t *testing.T) {
	k := New(1)
	n := idleNode(k, "a")
	fired := false
	var tm interface{ Stop() bool }
	n.Exec(func() { tm = n.Clock().AfterFunc(time.Second, func() { fired = true }) })
	require.True(t, tm.Stop())
	require.False(t, tm.Stop())
	require.NoError(t, k.RunUntil(time.Minute))
	require.False(t, fired)
	var tm2 interface{ Stop() bool }
	n.Exec(func() { tm2 = n.Clock().AfterFunc(time.Second, func() {}) })
	require.NoError(t, k.RunUntil(2*time.Minute))
	require.False(t, tm2.Stop(), "Stop after the timer ran reports false")
}

func TestClockRecordsItsOffsets(t *testing.T) {
	k := New(1)
	c := idleNode(k, "n1").Clock()
	c.Step(100 * time.Millisecond)
	c.SetDrift(1000) // 1ms per second
	k.At(2*time.Second, EvFault, 0, func() { c.Step(-500 * time.Millisecond) })
	k.At(3*time.Second, EvFault, 0, func() { c.SetDrift(0) })
	require.NoError(t, k.RunUntil(4*time.Second))

	require.Equal(t, 100*time.Millisecond, c.OffsetAt(0))
	require.Equal(t, 101*time.Millisecond, c.OffsetAt(time.Second))
	require.Equal(t, 102*time.Millisecond-500*time.Millisecond, c.OffsetAt(2*time.Second))
	require.Equal(t, c.Offset(), c.OffsetAt(4*time.Second), "the record agrees with the clock")
	lo, hi := c.OffsetRange(time.Second, 2500*time.Millisecond)
	require.Equal(t, 102*time.Millisecond, hi, "just before the step back")
	require.Equal(t, -398*time.Millisecond, lo, "just after it")
	lo, hi = c.OffsetRange(3500*time.Millisecond, 4*time.Second)
	require.Equal(t, lo, hi, "no drift after 3s: the offset holds")
}
