package scenarios

import (
	"time"

	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests install the simulator's crypto/rand reader for each run, so
// none of them may call t.Parallel.

func TestEveryScenarioPassesItsFirstSeeds(t *testing.T) {
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			for seed := uint64(1); seed <= 10; seed++ {
				res, err := Execute(s.Name, Options{Seed: seed})
				require.NoError(t, err)
				require.True(t, res.OK(), "seed %d: %v\nreplay: go run ./cmd/simrun -scenario %s -seed %d", seed, res.Findings, s.Name, seed)
				require.Positive(t, res.Events)
				require.Equal(t, s.Duration, res.Virtual)
			}
		})
	}
}

func TestSameSeedSameTrace(t *testing.T) {
	for _, s := range All() {
		a, err := Execute(s.Name, Options{Seed: 42})
		require.NoError(t, err)
		b, err := Execute(s.Name, Options{Seed: 42})
		require.NoError(t, err)
		c, err := Execute(s.Name, Options{Seed: 43})
		require.NoError(t, err)
		require.Equal(t, a.Trace, b.Trace, "%s: seed 42 replayed differently", s.Name)
		require.Equal(t, a.Events, b.Events)
		require.NotEqual(t, a.Trace, c.Trace, "%s: seeds 42 and 43 gave one trace", s.Name)
	}
}

// TestPlantedBugsAreCaught holds every scenario to its claim: with a
// planted bug switched on, some seed in 1..CaughtWithin fails.
func TestPlantedBugsAreCaught(t *testing.T) {
	for _, s := range All() {
		for _, b := range s.Bugs {
			t.Run(s.Name+"/"+b.Name, func(t *testing.T) {
				require.Positive(t, b.CaughtWithin, "a bug must state within how many seeds it is caught")
				for seed := uint64(1); seed <= uint64(b.CaughtWithin); seed++ {
					res, err := Execute(s.Name, Options{Seed: seed, Bugs: []string{b.Name}})
					require.NoError(t, err)
					if !res.OK() {
						t.Logf("caught at seed %d by %s", seed, strings.Join(res.Checkers(), ","))
						return
					}
				}
				t.Fatalf("planted bug %s survived seeds 1..%d of %s: its checker proves nothing", b.Name, b.CaughtWithin, s.Name)
			})
		}
	}
}

func TestUsageErrors(t *testing.T) {
	_, err := Execute("nonsense", Options{Seed: 1})
	require.ErrorIs(t, err, ErrUnknownScenario)
	require.Contains(t, err.Error(), "kernel-selftest", "the error lists the valid names")
	_, err = Execute("kernel-selftest", Options{Seed: 1, Bugs: []string{"no-such-bug"}})
	require.ErrorIs(t, err, ErrUnknownBug)
	require.Contains(t, err.Error(), bugSelftestAckBeforeSync)
}

func TestSummaryLine(t *testing.T) {
	res, err := Execute("kernel-selftest", Options{Seed: 7})
	require.NoError(t, err)
	line := res.Summary()
	for _, key := range []string{"seed=7 ", "scenario=kernel-selftest ", "verdict=ok ", "trace=", "events=", "virtual=30s", "wall="} {
		require.Contains(t, line, key)
	}
	require.Contains(t, line, fmt.Sprintf("trace=%016x", res.Trace))
}

func TestDefaultIsTheRichest(t *testing.T) {
	best := All()[0]
	for _, s := range All() {
		if s.Richness > best.Richness {
			best = s
		}
	}
	require.Equal(t, best.Name, Default())
}

func TestSelftestRecordCodec(t *testing.T) {
	r := toyRecord{ID: "w0001", Value: "v1", WallMs: -5}
	b := encodeToy(r)
	got, n, err := decodeToy(b, false)
	require.NoError(t, err)
	require.Equal(t, r, got)
	require.Equal(t, len(b), n)
	for cut := 0; cut < len(b); cut++ {
		_, _, err := decodeToy(b[:cut], false)
		require.Error(t, err, "a record cut at %d bytes must not decode", cut)
	}
	b[len(b)-1] ^= 1
	_, _, err = decodeToy(b, false)
	require.Error(t, err, "a flipped bit must not decode")
}

// TestShortRunsDoNotFail: -duration shortens a run; checkers must then
// judge only what had time to happen (no liveness failure because the
// run ended before the calm phase did).
func TestShortRunsDoNotFail(t *testing.T) {
	for _, s := range All() {
		for _, d := range []time.Duration{time.Second, 3 * time.Second} {
			for seed := uint64(1); seed <= 3; seed++ {
				res, err := Execute(s.Name, Options{Seed: seed, Duration: d})
				require.NoError(t, err)
				require.True(t, res.OK(), "%s seed %d duration %v: %v", s.Name, seed, d, res.Findings)
			}
		}
	}
}
