package sim

import (
	cryptorand "crypto/rand"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func TestEventsRunInTimeThenScheduleOrder(t *testing.T) {
	k := New(1)
	var got []string
	k.At(20, EvClient, 0, func() { got = append(got, "c@20") })
	k.At(10, EvClient, 0, func() { got = append(got, "a@10") })
	k.At(10, EvClient, 0, func() { got = append(got, "b@10") })
	h := k.At(15, EvClient, 0, func() { got = append(got, "cancelled") })
	require.True(t, h.Cancel())
	require.False(t, h.Cancel(), "a second cancel reports false")
	require.NoError(t, k.RunUntil(time.Second))
	require.Equal(t, []string{"a@10", "b@10", "c@20"}, got)
	require.Equal(t, uint64(3), k.Events(), "a cancelled event is not counted")
	require.Equal(t, time.Second, k.Now())
}

func TestPastEventsRunNow(t *testing.T) {
	k := New(1)
	require.NoError(t, k.RunUntil(time.Second))
	var at time.Duration
	k.At(0, EvClient, 0, func() { at = k.Now() })
	k.Step()
	require.Equal(t, time.Second, at, "an event scheduled in the past runs at now, never before it")
}

func TestEventBudgetStopsALivelock(t *testing.T) {
	k := New(1)
	k.SetMaxEvents(100)
	var spin func()
	spin = func() { k.After(0, EvTimer, 0, spin) }
	k.After(0, EvTimer, 0, spin)
	require.ErrorIs(t, k.RunUntil(time.Second), ErrEventBudget)
	require.Equal(t, uint64(100), k.Events())
}

// TestEventRateStopsAStorm: frames that each send two more grow without
// bound; the run ends within the virtual second the rate bound is passed,
// long before the event budget, with an error naming that second.
func TestEventRateStopsAStorm(t *testing.T) {
	k := New(1)
	k.SetMaxEventRate(1000)
	var frame func()
	frame = func() {
		k.After(time.Millisecond, EvTimer, 0, frame)
		k.After(time.Millisecond, EvTimer, 0, frame)
	}
	k.After(1500*time.Millisecond, EvTimer, 0, frame)
	err := k.RunUntil(10 * time.Second)
	require.ErrorIs(t, err, ErrEventRate)
	require.ErrorContains(t, err, "1000 events in the virtual second from 1s")
	require.Equal(t, time.Second, k.Now().Truncate(time.Second), "stopped in the second the bound was passed")

	// A steady 990 a second, for ten seconds, is within the bound.
	k = New(1)
	k.SetMaxEventRate(1000)
	var tick func()
	tick = func() { k.After(time.Second/990, EvTimer, 0, tick) }
	k.After(0, EvTimer, 0, tick)
	require.NoError(t, k.RunUntil(10*time.Second))
	require.Greater(t, k.Events(), uint64(9000))
}

func TestTraceHashIsAFunctionOfTheEvents(t *testing.T) {
	run := func(seed uint64, extra bool) uint64 {
		k := New(seed)
		k.At(5, EvClient, 42, func() {})
		if extra {
			k.At(6, EvClient, 1, func() {})
		}
		require.NoError(t, k.RunUntil(time.Second))
		return k.Trace()
	}
	require.Equal(t, run(1, false), run(1, false))
	require.NotEqual(t, run(1, false), run(2, false), "the seed is part of the trace")
	require.NotEqual(t, run(1, false), run(1, true), "every event is part of the trace")
}

func TestStreamsAreIndependentByLabel(t *testing.T) {
	a := Stream(7, "net")
	first := a.Uint64()
	// Drawing from another stream does not shift this one.
	b := Stream(7, "faults")
	for i := 0; i < 100; i++ {
		b.Uint64()
	}
	require.Equal(t, first, Stream(7, "net").Uint64())
	require.NotEqual(t, first, Stream(7, "faults").Uint64())
	require.NotEqual(t, first, Stream(8, "net").Uint64())
}

type nopNet struct{}

func (nopNet) Sender(dial.NodeID) dial.Sender { return nil }

func TestCrashDropsTimersOfTheOldIncarnation(t *testing.T) {
	k := New(1)
	fired := 0
	n := k.AddMachine("a", func(env *Env) dial.Handler {
		env.Clock.AfterFunc(time.Second, func() { fired++ })
		return dial.HandlerFunc(func(dial.NodeID, []byte) {})
	}, nopNet{}, DefaultDiskConfig)
	n.Start()
	require.Equal(t, uint64(1), n.Incarnation())
	k.At(500*time.Millisecond, EvFault, 0, n.Crash)
	k.At(600*time.Millisecond, EvFault, 0, n.Start)
	require.NoError(t, k.RunUntil(10*time.Second))
	require.Equal(t, 1, fired, "the first incarnation's timer must not fire; the second's must")
	require.Equal(t, uint64(3), n.Incarnation())
	require.Panics(t, n.Start, "starting a running node is a bug")
}

func TestCryptoRandFollowsTheSteppedNode(t *testing.T) {
	draw := func(order []string) map[string]int64 {
		k := New(3)
		restore := k.InstallCryptoRand()
		defer restore()
		got := map[string]int64{}
		nodes := map[string]*Machine{}
		for _, name := range []string{"a", "b"} {
			name := name
			nodes[name] = k.AddMachine(name, func(env *Env) dial.Handler {
				return dial.HandlerFunc(func(dial.NodeID, []byte) {})
			}, nopNet{}, DefaultDiskConfig)
			nodes[name].Start()
		}
		for _, name := range order {
			n := nodes[name]
			n.Exec(func() {
				v, err := cryptorand.Int(cryptorand.Reader, big.NewInt(1<<40))
				require.NoError(t, err)
				got[name] = v.Int64()
			})
		}
		return got
	}
	// Each node's draw depends on its own stream only, not on who ran first.
	require.Equal(t, draw([]string{"a", "b"}), draw([]string{"b", "a"}))
	ab := draw([]string{"a", "b"})
	require.NotEqual(t, ab["a"], ab["b"])
	// And the real reader is back afterwards.
	buf := make([]byte, 16)
	_, err := cryptorand.Read(buf)
	require.NoError(t, err)
}

type dialHandler = dial.Handler

type nopHandler struct{}

func (nopHandler) HandleFrame(dial.NodeID, []byte) {}

// checkedNode breaks its bookkeeping at its fifth step.
type checkedNode struct{ steps int }

func (c *checkedNode) HandleFrame(dial.NodeID, []byte) {}

func (c *checkedNode) CheckInvariants() error {
	if c.steps >= 5 {
		return fmt.Errorf("broken at step %d", c.steps)
	}
	return nil
}

// A node's invariants are checked every checkEvery steps: one broken is
// the node's panic, within checkEvery steps of the step that broke it.
func TestBrokenInvariantsAreTheNodesPanic(t *testing.T) {
	k := New(1)
	var panics []string
	k.OnNodePanic(func(n *Machine, v any) { panics = append(panics, fmt.Sprint(v)) })
	c := &checkedNode{}
	n := k.AddMachine("a", func(env *Env) dial.Handler { return c }, nopNet{}, DefaultDiskConfig)
	n.Start()
	for i := 1; i <= 40; i++ {
		k.At(time.Duration(i)*time.Millisecond, EvClient, 0, func() { n.Exec(func() { c.steps++ }) })
	}
	require.NoError(t, k.RunUntil(time.Second))
	require.Equal(t, []string{"invariant broken after a step: broken at step 15"}, panics,
		"the boot is step 1; the 16th step is the first checked, and the node is down after it")
	require.False(t, n.Up())
}

// TestStepCostQueuesANodesWork: with a step cost, a node takes calls that
// all come at once one after another, each d after the one before, and
// the timer it sets in a step counts from that step's end; a crash does
// not give the machine a free core; another node's work does not wait.
func TestStepCostQueuesANodesWork(t *testing.T) {
	k := New(1)
	a := k.AddMachine("a", func(*Env) dialHandler { return nopHandler{} }, nopNet{}, DefaultDiskConfig)
	b := k.AddMachine("b", func(*Env) dialHandler { return nopHandler{} }, nopNet{}, DefaultDiskConfig)
	a.Start()
	b.Start()
	a.SetStepCost(time.Millisecond)
	var took []time.Duration
	var timer time.Duration
	for i := range 4 {
		k.At(10*time.Millisecond, EvClient, 0, func() {
			a.Exec(func() {
				took = append(took, k.Now())
				if i == 3 {
					a.Clock().AfterFunc(5*time.Millisecond, func() { timer = k.Now() })
				}
			})
		})
	}
	var bTook time.Duration
	k.At(10*time.Millisecond, EvClient, 0, func() { b.Exec(func() { bTook = k.Now() }) })
	require.NoError(t, k.RunUntil(time.Second))
	ms := time.Millisecond
	require.Equal(t, []time.Duration{10 * ms, 11 * ms, 12 * ms, 13 * ms}, took, "each call waits for the ones before it")
	require.Equal(t, 13*ms+5*ms, timer, "a timer counts from the instant the step set it")
	require.Equal(t, 10*ms, bTook, "a node without a cost takes its call at once")

	a.Crash()
	a.Start()
	var after []time.Duration
	for range 2 {
		k.At(2*time.Second, EvClient, 0, func() { a.Exec(func() { after = append(after, k.Now()) }) })
	}
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Equal(t, []time.Duration{2 * time.Second, 2*time.Second + ms}, after, "the cost outlives a crash")
}
