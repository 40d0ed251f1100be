package scenarios

import (
	"strings"
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

	for _, bad := range []string{"faults", "faults:", "faults:0", "faults:x", "faults:5-3", "ops:5-40", "ops:/5", "bogus:1", "ops:f1/x"} {
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
// else the schedule drew. Every other partition and clock fault comes at
// the same instant, with the same ordinal and shape (crashes may differ:
// whether one lands depends on which nodes are down).
func TestSkippedFaultKeepsTheSchedule(t *testing.T) {
	full, err := Execute("flow-ops", Options{Seed: 3})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(full.Faults), 4, "the seed injects faults")
	skip := full.Faults[1].Ord
	part, err := Execute("flow-ops", Options{Seed: 3, Skip: Skip{Faults: Ordinals{{skip, skip}}}})
	require.NoError(t, err)
	kept := map[int]FaultRecord{}
	for _, f := range part.Faults {
		require.NotEqual(t, skip, f.Ord, "the skipped fault was injected")
		kept[f.Ord] = f
	}
	compared := 0
	for _, f := range full.Faults {
		if f.Ord == skip || strings.HasPrefix(f.What, "crash") {
			continue
		}
		require.Equal(t, f, kept[f.Ord], "fault #%d moved or changed", f.Ord)
		compared++
	}
	require.Positive(t, compared)
	require.NotEqual(t, full.Trace, part.Trace, "the run did change")
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
