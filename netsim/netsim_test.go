package netsim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

type inbox struct{ got []string }

func cluster(t *testing.T, cfg Config, names ...string) (*sim.Kernel, *Network, []*sim.Machine, map[string]*inbox) {
	t.Helper()
	k := sim.New(1)
	nw := New(k, cfg)
	boxes := map[string]*inbox{}
	var nodes []*sim.Machine
	for _, name := range names {
		box := &inbox{}
		boxes[name] = box
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			return dial.HandlerFunc(func(from dial.NodeID, frame []byte) {
				box.got = append(box.got, k.Machine(from).Name()+":"+string(frame))
			})
		}, nw, sim.DefaultDiskConfig)
		n.Start()
		nodes = append(nodes, n)
	}
	return k, nw, nodes, boxes
}

func send(t *testing.T, nw *Network, from, to *sim.Machine, msg string) error {
	t.Helper()
	return nw.Sender(from.ID()).Send(to.ID(), []byte(msg))
}

func TestDeliveryWithinLatency(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	require.NoError(t, send(t, nw, n[0], n[1], "hi"))
	require.NoError(t, k.RunUntil(DefaultConfig.LatencyMin-1))
	require.Empty(t, box["b"].got, "no frame arrives before the minimum latency")
	require.NoError(t, k.RunUntil(DefaultConfig.LatencyMax))
	require.Equal(t, []string{"a:hi"}, box["b"].got)
}

func TestOneWayPartition(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	nw.OneWay([]dial.NodeID{n[0].ID()}, []dial.NodeID{n[1].ID()})
	require.NoError(t, send(t, nw, n[0], n[1], "lost"), "a partition is silent to the sender")
	require.NoError(t, send(t, nw, n[1], n[0], "kept"))
	require.NoError(t, k.RunUntil(time.Second))
	require.Empty(t, box["b"].got)
	require.Equal(t, []string{"b:kept"}, box["a"].got)
}

func TestPartitionCutsFramesInFlight(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	require.NoError(t, send(t, nw, n[0], n[1], "in-flight"))
	nw.Split(k.Nodes(), []dial.NodeID{n[0].ID()}, []dial.NodeID{n[1].ID()})
	require.NoError(t, k.RunUntil(time.Second))
	require.Empty(t, box["b"].got)
	nw.Heal()
	require.NoError(t, send(t, nw, n[0], n[1], "after"))
	require.NoError(t, k.RunUntil(2*time.Second))
	require.Equal(t, []string{"a:after"}, box["b"].got)
}

func TestSendToADownNodeIsRefusedAtOnce(t *testing.T) {
	_, nw, n, _ := cluster(t, DefaultConfig, "a", "b")
	n[1].Crash()
	require.ErrorIs(t, send(t, nw, n[0], n[1], "x"), dial.ErrUnreachable)
}

// A node has no link to itself, as a real one has none (realnet knows
// no address for its own id): a frame to itself is refused at once and
// never delivered.
func TestSendToItselfIsRefused(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a")
	require.ErrorIs(t, send(t, nw, n[0], n[0], "x"), dial.ErrUnreachable)
	require.NoError(t, k.RunUntil(time.Second))
	require.Empty(t, box["a"].got)
}

func TestSlowNode(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	nw.Slow(n[1].ID(), 100*time.Millisecond)
	require.NoError(t, send(t, nw, n[0], n[1], "late"))
	require.NoError(t, k.RunUntil(100*time.Millisecond))
	require.Empty(t, box["b"].got)
	require.NoError(t, k.RunUntil(200*time.Millisecond))
	require.Equal(t, []string{"a:late"}, box["b"].got)
}

func TestDropIf(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	nw.DropIf(func(_, _ dial.NodeID, frame []byte) bool { return string(frame) == "drop" })
	require.NoError(t, send(t, nw, n[0], n[1], "drop"), "targeted loss is silent")
	require.NoError(t, send(t, nw, n[0], n[1], "keep"))
	require.NoError(t, k.RunUntil(time.Second))
	require.Equal(t, []string{"a:keep"}, box["b"].got)
}

func TestRewriteIfFirstWinsAndTheRecordKeepsWhatWasMeant(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	nw.RewriteIf(func(_, _ dial.NodeID, frame []byte) []byte {
		if string(frame) == "keep" {
			return nil
		}
		return []byte("first:" + string(frame))
	})
	nw.RewriteIf(func(_, _ dial.NodeID, frame []byte) []byte { return []byte("second:" + string(frame)) })
	var seen []string
	nw.Watch(func(s Sending) { seen = append(seen, fmt.Sprintf("%v %q meant %q", s.Fate, s.Frame, s.Meant)) })
	require.NoError(t, send(t, nw, n[0], n[1], "x"))
	require.NoError(t, send(t, nw, n[0], n[1], "keep"))
	require.NoError(t, k.RunUntil(time.Second))
	require.ElementsMatch(t, []string{"a:first:x", "a:second:keep"}, box["b"].got, "the first rewrite that answers wins; the next sees the frame it declined")
	require.Contains(t, seen, fmt.Sprintf("%v %q meant %q", Sent, "first:x", "x"))
	require.Contains(t, seen, fmt.Sprintf("%v %q meant %q", Delivered, "first:x", "x"))
}

func TestCrashDropsFramesInFlightToIt(t *testing.T) {
	k, nw, n, box := cluster(t, DefaultConfig, "a", "b")
	require.NoError(t, send(t, nw, n[0], n[1], "to-old-process"))
	n[1].Crash()
	n[1].Start()
	require.NoError(t, k.RunUntil(time.Second))
	require.Empty(t, box["b"].got, "a frame sent to the old process must not reach the new one")
	require.Zero(t, nw.InFlight(n[0].ID(), n[1].ID()))
}

func TestInFlightBound(t *testing.T) {
	cfg := DefaultConfig
	cfg.MaxInFlight = 3
	k, nw, n, box := cluster(t, cfg, "a", "b")
	for i := 0; i < 3; i++ {
		require.NoError(t, send(t, nw, n[0], n[1], "x"))
	}
	err := send(t, nw, n[0], n[1], "x")
	require.ErrorIs(t, err, dial.ErrUnreachable, "past the bound, Send refuses at once")
	require.NoError(t, send(t, nw, n[1], n[0], "y"), "the bound is per directed link")
	require.NoError(t, k.RunUntil(time.Second))
	require.Len(t, box["b"].got, 3)
	require.NoError(t, send(t, nw, n[0], n[1], "x"), "the bound frees as frames land")
}

func TestSendErrors(t *testing.T) {
	_, nw, n, _ := cluster(t, DefaultConfig, "a")
	require.ErrorIs(t, nw.Sender(n[0].ID()).Send(12345, []byte("x")), dial.ErrUnreachable)
	require.ErrorIs(t, nw.Sender(n[0].ID()).Send(n[0].ID(), make([]byte, dial.MaxFrame+1)), dial.ErrFrameTooLarge)
}

func TestLossDupReorderRates(t *testing.T) {
	cfg := DefaultConfig
	cfg.Loss, cfg.Dup, cfg.Reorder, cfg.ReorderMax = 0.2, 0.1, 0.5, 20*time.Millisecond
	k, nw, n, box := cluster(t, cfg, "a", "b")
	const total = 2000
	for i := 0; i < total; i++ {
		require.NoError(t, send(t, nw, n[0], n[1], string(rune('a'+i%26))))
	}
	require.NoError(t, k.RunUntil(time.Second))
	// Expected arrivals: 2000 * 0.8 * 1.1 = 1760; allow wide slack (the
	// stream is seeded, so this is deterministic, not flaky).
	require.InDelta(t, 1760, len(box["b"].got), 120)
	require.Equal(t, nw.Dropped, uint64(total)-(nw.Delivered-nw.Duplicated))
}

func TestRandomPartitionShapes(t *testing.T) {
	k, nw, _, _ := cluster(t, DefaultConfig, "a", "b", "c", "d", "e")
	ids := k.Nodes()
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		desc := nw.RandomPartition(r, ids)
		require.NotEmpty(t, desc)
		cut := 0
		for _, a := range ids {
			for _, b := range ids {
				if a != b && !nw.Reachable(a, b) {
					cut++
				}
			}
		}
		require.Positive(t, cut, "every shape cuts something: %s", desc)
		for _, s := range Shapes {
			if len(desc) >= len(s) && desc[:len(s)] == s {
				seen[s] = true
			}
		}
	}
	require.Len(t, seen, len(Shapes), "every shape is drawn")
	nw.Heal()
	for _, a := range ids {
		for _, b := range ids {
			require.True(t, nw.Reachable(a, b))
		}
	}
}

func TestRingAndBridge(t *testing.T) {
	k, nw, _, _ := cluster(t, DefaultConfig, "a", "b", "c", "d", "e")
	ids := k.Nodes()
	nw.Ring(ids)
	require.True(t, nw.Reachable(ids[0], ids[1]))
	require.True(t, nw.Reachable(ids[0], ids[4]), "the ring wraps")
	require.False(t, nw.Reachable(ids[0], ids[2]))
}

func TestDrawIsSane(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		c := Draw(sim.Stream(seed, "net-config"))
		require.LessOrEqual(t, c.LatencyMin, c.LatencyMax)
		require.LessOrEqual(t, c.Loss, 0.1)
		require.Positive(t, c.MaxInFlight)
		require.Contains(t, c.String(), "loss=")
	}
}

func TestCutDuringReadsThePartitionRecord(t *testing.T) {
	k := sim.New(1)
	nw := New(k, DefaultConfig)
	a, b := dial.NodeID(1), dial.NodeID(2)
	k.At(time.Second, sim.EvFault, 0, func() { nw.Block(a, b) })
	k.At(2*time.Second, sim.EvFault, 0, func() { nw.Heal() })
	k.At(3*time.Second, sim.EvFault, 0, func() { nw.Block(b, a); nw.Heal() }) // undone at once: no cut
	require.NoError(t, k.RunUntil(4*time.Second))
	require.False(t, nw.CutDuring(a, b, 0, 999*time.Millisecond))
	require.True(t, nw.CutDuring(a, b, 0, time.Second))
	require.True(t, nw.CutDuring(a, b, 1500*time.Millisecond, 1600*time.Millisecond), "blocked throughout")
	require.False(t, nw.CutDuring(a, b, 2001*time.Millisecond, 4*time.Second))
	require.False(t, nw.CutDuring(b, a, 0, 4*time.Second), "one way only; the instant block left no record")
}
