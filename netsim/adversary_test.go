package netsim

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

// The adversary makes every kind of attack from frames the network
// delivered, delivers them while saying so (Delivering), and never shows
// up in the network's record. Links with the keys refuse every one.
func TestAdversaryAttacksAndIsRefused(t *testing.T) {
	keys := transport.Keys{Control: bytes.Repeat([]byte{1}, 32), Data: bytes.Repeat([]byte{2}, 32)}
	k := sim.New(7)
	nw := New(k, Config{LatencyMin: time.Millisecond, LatencyMax: 3 * time.Millisecond, MaxInFlight: 1024})
	classify := func(f []byte) (transport.Kind, bool) {
		return transport.Kind{Class: transport.Data, Family: f[0], Reply: f[1] == 1}, len(f) >= 2 && f[0] < 8 && f[1] < 2
	}
	var adv *Adversary
	admitted, genuine := 0, 0
	links := map[dial.NodeID]*transport.Link{}
	var nodes []*sim.Machine
	for _, name := range []string{"n1", "n2", "n3"} {
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			var l *transport.Link
			inner := dial.HandlerFunc(func(from dial.NodeID, f []byte) {
				if _, ok := adv.Delivering(); ok {
					admitted++
					return
				}
				genuine++
				if f[0] > 0 && f[1] == 0 {
					_ = l.Send(from, []byte{f[0], 1, 'r'}) // answer every request
				}
			})
			l, err := transport.New(transport.Config{Self: env.ID, Epoch: 1, Keys: keys, Rand: rand.New(rand.NewPCG(uint64(env.ID), 1)),
				Classify: classify, Clock: clock.NewManual(time.Unix(0, 0))}, env.Net, inner)
			require.NoError(t, err)
			links[env.ID] = l
			return l
		}, nw, sim.DefaultDiskConfig)
		n.Start()
		nodes = append(nodes, n)
	}
	var watched int
	nw.Watch(func(s Sending) {
		if s.Fate == Delivered {
			watched++
		}
	})
	adv = nw.StartAdversary(AdversaryConfig{Every: 5 * time.Millisecond, Keep: 64}, 3*time.Second)
	var tick func()
	tick = func() {
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b {
					a.Exec(func() { _ = links[a.ID()].Send(b.ID(), []byte{1, 0, 'q'}) })
				}
			}
		}
		if k.Now() < 3*time.Second {
			k.After(20*time.Millisecond, sim.EvClient, 1, tick)
		}
	}
	k.After(0, sim.EvClient, 1, tick)
	require.NoError(t, k.RunUntil(4*time.Second))

	for _, attack := range attacks {
		require.Greater(t, adv.Made[attack], 20, attack)
	}
	require.Zero(t, admitted, "a frame the adversary made got through")
	require.Greater(t, genuine, 1000, "the genuine traffic flowed")
	require.Equal(t, int(nw.Delivered), watched, "the adversary is not in the network's record")
	_, delivering := adv.Delivering()
	require.False(t, delivering)
}
