package scenarios

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestSkipParsesAndPrints(t *testing.T) {
	s, err := ParseSkip("faults:22-30,3,17,40-,25 ops:f1/5-40,7,kv2/1-")
	require.NoError(t, err)
	require.Equal(t, "faults:3,17,22-30,40- ops:f1/5-40,kv2/1-", s.String(), "normalized: sorted, merged; f1's 7 is inside 5-40")
	for _, n := range []int{3, 17, 22, 30, 40, 1 << 20} {
		require.True(t, s.Faults.Has(n), "%d", n)
	}
	for _, n := range []int{1, 2, 4, 21, 31, 39} {
		require.False(t, s.Faults.Has(n), "%d", n)
	}
	require.True(t, s.Ops["kv2"].Has(999))
	require.False(t, s.Ops["f1"].Has(4))
	require.False(t, s.Ops["f9"].Has(1), "a client the skip does not name sends everything")

	a, err := ParseSkip("aimed:2,4- faults:1")
	require.NoError(t, err)
	require.Equal(t, "faults:1 aimed:2,4-", a.String())
	require.True(t, a.Aimed.Has(9))
	require.False(t, a.Faults.Has(2))

	for _, bad := range []string{"faults", "faults:", "faults:0", "faults:x", "faults:5-3", "ops:5-40", "ops:/5", "bogus:1", "ops:f1/x", "faults:+3", "faults:3-+4", "ops:f'1/3", "ops:f-1/3"} {
		_, err := ParseSkip(bad)
		require.Error(t, err, bad)
	}
}

// TestOrdinalsRoundTrip: any set of ordinals prints as ranges that parse
// back to the same set, and its complement holds exactly what it does
// not.
func TestOrdinalsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ns := rapid.SliceOf(rapid.IntRange(1, 60)).Draw(t, "ns")
		s := OrdinalsOf(ns)
		back, err := parseOrdinals(s.String())
		if len(ns) == 0 {
			require.Empty(t, s.String())
			return
		}
		require.NoError(t, err)
		require.Equal(t, s, back)
		in := map[int]bool{}
		for _, n := range ns {
			in[n] = true
		}
		c := s.Complement()
		for n := 1; n <= 80; n++ {
			require.Equal(t, in[n], s.Has(n), "%d", n)
			require.Equal(t, !in[n], c.Has(n), "complement at %d", n)
		}
		require.Equal(t, len(in), s.Count())
	})
}

// TestSkippedFaultKeepsTheSchedule: leaving one fault out changes nothing
// else the schedule drew. Every other fault that lands in both runs has
// the same name, instant and words (its node, shape, length, downtime):
// a skipped fault drew what it would have drawn. Whether a fault lands
// may differ (a crash of a node that is now up), so only faults of both
// runs are compared; and a skipped aimed fault moves no fault of the
// schedule. The scenarios here name their faults by draws alone (the
// ones that aim at "the leader" cannot: who leads is the run's doing).
func TestSkippedFaultKeepsTheSchedule(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		seed     uint64
	}{
		{"flow-ops", 3}, {"raft-partitions", 5}, {"journal-crash", 1}, {"journal-crash", 2},
		{"durability-restart", 2}, {"ttl-restart", 1}, {"proxyonce-crash", 1}, {"kernel-selftest", 4},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.scenario, tc.seed), func(t *testing.T) {
			full, err := Execute(tc.scenario, Options{Seed: tc.seed})
			require.NoError(t, err)
			var sched, aimed []FaultID
			for _, f := range full.Faults {
				if f.ID.Aimed {
					aimed = append(aimed, f.ID)
				} else {
					sched = append(sched, f.ID)
				}
			}
			require.GreaterOrEqual(t, len(sched), 3, "the seed injects faults")
			skips := []FaultID{sched[0], sched[len(sched)/2]}
			if len(aimed) > 0 {
				skips = append(skips, aimed[0])
			}
			for _, skip := range skips {
				sk := Skip{Faults: Ordinals{{skip.N, skip.N}}}
				if skip.Aimed {
					sk = Skip{Aimed: Ordinals{{skip.N, skip.N}}}
				}
				part, err := Execute(tc.scenario, Options{Seed: tc.seed, Skip: sk})
				require.NoError(t, err)
				kept := map[FaultID]FaultRecord{}
				for _, f := range part.Faults {
					require.NotEqual(t, skip, f.ID, "the skipped fault was injected")
					kept[f.ID] = f
				}
				compared := 0
				for _, f := range full.Faults {
					g, ok := kept[f.ID]
					if f.ID == skip || !ok || f.ID.Aimed {
						continue
					}
					require.Equal(t, f, g, "skipping %s moved or changed fault %s", skip, f.ID)
					compared++
				}
				require.Positive(t, compared, "skipping %s", skip)
				require.NotEqual(t, full.Trace, part.Trace, "the run did change")
			}
		})
	}
}

// TestSkippedOperationsAreNeverSent: a client whose operations are all
// skipped sends none, and the others still send theirs.
func TestSkippedOperationsAreNeverSent(t *testing.T) {
	full, err := Execute("flow-ops", Options{Seed: 3})
	require.NoError(t, err)
	require.NotEmpty(t, full.Ops["f0"])
	require.NotEmpty(t, full.Ops["f1"])
	part, err := Execute("flow-ops", Options{Seed: 3, Skip: Skip{Ops: map[string]Ordinals{"f0": {{1, 0}}, "f1": {{2, 3}}}}})
	require.NoError(t, err)
	require.Empty(t, part.Ops["f0"])
	require.Equal(t, []int{1, 4, 5}, part.Ops["f1"][:3])
	require.Contains(t, part.UndecidedCheckers(), "run", "a run that left things out is not a whole run")
}
