package scenarios

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

// The seeds whose faults left their cluster too little healthy time
// before calm to meet a work floor (found by CI's first sweep of seeds
// past 300): the clients' hold past calm judges them on enough work.
func TestHoldMeetsTheFloorsOfHarshSeeds(t *testing.T) {
	for _, c := range []struct {
		scenario string
		seed     uint64
	}{{"replica-repair", 565}, {"transport-adversary", 363}, {"imposter-scenarios", 424}, {"isolated-owner", 324}} {
		res, err := Execute(c.scenario, Options{Seed: c.seed})
		require.NoError(t, err)
		require.True(t, res.OK(), "%s seed %d: %v", c.scenario, c.seed, res.Findings)
		s, _ := Lookup(c.scenario)
		for _, f := range s.Floors {
			require.GreaterOrEqual(t, res.Work[f.Work], f.Least, "%s seed %d: %s", c.scenario, c.seed, f.Work)
		}
	}
}

// The hold keeps a client only while the run is short of its floor, only
// the clients stopping at calm, and never at or past its limit; each
// operation it lets in pushes the quiet the convergence check waits for.
func TestHoldStopsAtItsLimit(t *testing.T) {
	k := sim.New(1)
	h := &flowHarness{raftCluster: &raftCluster{k: k}, flowHist: linearizability.NewHistory(0), deadline: time.Second, aeEvery: 2 * time.Second}
	h.run = &Run{Kernel: k, Duration: 40 * time.Second, floors: []Floor{{"flow-ops-ok", 1}}}
	calm := 22 * time.Second
	h.holdForFlowOps(calm)
	// 40s - 4.5 rounds of 2s - (1s deadline + 2s) - 1s of margin.
	require.Equal(t, 27*time.Second, h.hold.limit)

	at := func(when time.Duration, f func()) {
		k.At(when, sim.EvClient, 0, f)
		require.NoError(t, k.RunUntil(when))
	}
	var kept []bool
	for _, when := range []time.Duration{calm, 26 * time.Second} {
		at(when, func() { kept = append(kept, h.hold.keeps(h, calm)) })
	}
	// Within the limit and short of the floor, but stopping at another time.
	at(26*time.Second+500*time.Millisecond, func() {
		require.False(t, h.hold.keeps(h, 10*time.Second), "a client with another stop time is not held")
	})
	for _, when := range []time.Duration{27 * time.Second, 30 * time.Second} {
		at(when, func() { kept = append(kept, h.hold.keeps(h, calm)) })
	}
	require.Equal(t, []bool{true, true, false, false}, kept, "short of the floor: kept until the limit")
	require.Equal(t, 26*time.Second+3*time.Second, h.hold.quietFrom, "the last kept operation settles by its deadline")

	// A run that met its floor is not held at all.
	op := h.flowHist.Call(0, "f", linearizability.FlowInput{Op: linearizability.FlowGet}, k.Now())
	h.flowHist.Return(op, linearizability.FlowOutput{}, k.Now())
	h.hold.limit = time.Hour
	at(32*time.Second, func() { require.False(t, h.hold.keeps(h, calm), "floor met: not held") })

	// A run too short for a hold that leaves the convergence check its quiet gets none.
	short := &flowHarness{raftCluster: &raftCluster{k: k}, flowHist: linearizability.NewHistory(0), deadline: time.Second, aeEvery: 2 * time.Second}
	short.run = &Run{Kernel: k, Duration: 30 * time.Second, floors: []Floor{{"flow-ops-ok", 1}}}
	short.holdForFlowOps(calm)
	require.Nil(t, short.hold.short)
}
