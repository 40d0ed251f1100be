package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fixture has one site of every operator; each mutant is a valid Go
// file that differs from the original exactly where its site is.
func TestEveryOperatorMakesAValidDistinctMutant(t *testing.T) {
	ms, err := List("testdata", []string{"fixture"})
	require.NoError(t, err)
	ops := map[Op]int{}
	for _, m := range ms {
		ops[m.Op]++
	}
	for _, op := range []Op{OpBoundary, OpNegate, OpFlipLogic, OpNotIf, OpDropGuard, OpDropCall, OpNudge} {
		require.NotZero(t, ops[op], "the fixture has a %s site", op)
	}
	orig, err := os.ReadFile(filepath.Join("testdata", "fixture", "fixture.go"))
	require.NoError(t, err)
	seen := map[string]string{}
	for _, m := range ms {
		src, err := Apply("testdata", m)
		require.NoError(t, err, m.ID())
		_, err = parser.ParseFile(token.NewFileSet(), "m.go", src, 0)
		require.NoError(t, err, "%s is not valid Go:\n%s", m.ID(), src)
		require.NotEqual(t, string(orig), string(src), "%s changed nothing", m.ID())
		if other, dup := seen[string(src)]; dup {
			t.Fatalf("%s and %s make the same file", m.ID(), other)
		}
		seen[string(src)] = m.ID()
	}
	// The list is the same every time (the mutants' names are stable).
	again, err := List("testdata", []string{"fixture"})
	require.NoError(t, err)
	require.Equal(t, ms, again)
}

// A mutant whose file changed since the list is refused, not applied
// somewhere else.
func TestApplyRefusesAStaleMutant(t *testing.T) {
	ms, err := List("testdata", []string{"fixture"})
	require.NoError(t, err)
	m := ms[0]
	m.Line++
	_, err = Apply("testdata", m)
	require.ErrorContains(t, err, "changed since the list")
}

// The sample is drawn by the seed alone, and the shards split it without
// overlap or loss.
func TestPickIsSeededAndShardsPartition(t *testing.T) {
	ms := make([]Mutant, 100)
	for i := range ms {
		ms[i] = Mutant{File: "f.go", Index: i}
	}
	a, b := pick(ms, 10, 3, 1, 1), pick(ms, 10, 3, 1, 1)
	require.Equal(t, a, b)
	require.Len(t, a, 10)
	require.NotEqual(t, a, pick(ms, 10, 4, 1, 1))
	var union []Mutant
	for i := 1; i <= 3; i++ {
		union = append(union, pick(ms, 10, 3, i, 3)...)
	}
	require.ElementsMatch(t, a, union)
}

// The first failing seed of a sweep is the catch; a sweep with none is not.
func TestFirstFail(t *testing.T) {
	out := strings.Join([]string{
		"FAIL seed=9: seed=9 scenario=x verdict=FAIL trace=1 checkers=durability",
		"FAIL seed=4: seed=4 scenario=x verdict=FAIL trace=2 checkers=liveness,votes",
		"seeds=1..10 scenario=x runs=10 ok=8 failed=2 verdict=FAIL",
	}, "\n")
	require.Equal(t, "seed=4 checkers=liveness,votes", firstFail(out))
	require.Empty(t, firstFail("seeds=1..10 scenario=x runs=10 ok=10 failed=0 verdict=ok"))

	require.Equal(t, "2", nondeterministic("NONDETERMINISTIC seed=2: trace 1a then 2b\n  replay: go run ./cmd/simrun -scenario x -seed 2"))
	require.Empty(t, nondeterministic("seeds=1..2 scenario=x runs=4 ok=2 failed=0 undecided=0 nondeterministic=0"))
}

// The report counts each verdict per package, scores the simulator over
// the mutants that built, and lists the survivors; a results file is read
// back as the set of mutants a resumed run skips.
func TestReportAndResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.txt")
	lines := "core/a/x.go:1:1:negate#0\tsim\tflow-ops seed=1 checkers=d17\n" +
		"core/a/x.go:2:1:nudge#1\tsurvived\tflow-ops seeds 1..20\n" +
		"core/a/x.go:3:1:drop-call#2\tnobuild\tunused\n" +
		"core/a/y.go:4:1:not-if#0\tboth\tx; tests TestY\n" +
		"core/b/z.go:5:1:boundary#0\ttests\tTestZ\n"
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o644))
	done, err := readResults(path)
	require.NoError(t, err)
	require.Len(t, done, 5)
	require.Equal(t, [2]string{"survived", "flow-ops seeds 1..20"}, done["core/a/x.go:2:1:nudge#1"])

	var out, errOut strings.Builder
	require.Equal(t, 0, report(config{results: path}, &out, &errOut), errOut.String())
	got := out.String()
	require.Regexp(t, `core/a\s+4\s+1\s+0\s+1\s+1\s+1\s+0\s+67%`, got, "two of the three that built were caught by the simulator")
	require.Regexp(t, `core/b\s+1\s+0\s+1\s+0\s+0\s+0\s+0\s+0%`, got)
	require.Contains(t, got, "survived core/a/x.go:2:1:nudge#1")
}

// Find names a mutant by its function, operator, code and which of the
// same it is, not by its line; one that is not there is an error.
func TestFindByFunctionAndCode(t *testing.T) {
	ms, err := List("testdata", []string{"fixture"})
	require.NoError(t, err)
	var want Mutant
	for _, m := range ms {
		if m.Op == OpNudge && m.What == "2" {
			want = m
		}
	}
	require.Equal(t, "Fixture", want.Func)
	got, err := Find("testdata", want.File, "Fixture", OpNudge, "2", 1)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = Find("testdata", want.File, "Fixture", OpNudge, "2", 2)
	require.ErrorContains(t, err, "no nudge mutant #2")
	_, err = Find("testdata", want.File, "log", OpNudge, "2", 1)
	require.Error(t, err)
}

// A survivor triaged as equivalent leaves the score; the triage names
// the mutant as -expect does, and one whose code changed is an error.
func TestEquivalentsLeaveTheScore(t *testing.T) {
	ms, err := List("testdata", []string{"fixture"})
	require.NoError(t, err)
	m := ms[0]
	nth := 0
	for _, o := range ms {
		if o.File == m.File && o.Func == m.Func && o.Op == m.Op && o.What == m.What {
			nth++
			if o == m {
				break
			}
		}
	}
	dir := t.TempDir()
	results := filepath.Join(dir, "results.txt")
	require.NoError(t, os.WriteFile(results, []byte(m.ID()+"\tsurvived\tx seeds 1..20\n"+
		"fixture/other.go:1:1:negate#0\tsim\tx seed=1 checkers=c\n"), 0o644))
	equiv := filepath.Join(dir, "equivalent.txt")
	line := strings.Join([]string{m.File, m.Func, string(m.Op), strconv.Itoa(nth), m.What, "no caller can tell: the value is never read"}, "\t")
	require.NoError(t, os.WriteFile(equiv, []byte("# triaged\n"+line+"\n"), 0o644))
	var out, errOut strings.Builder
	require.Equal(t, 0, report(config{root: "testdata", results: results, equivalent: equiv}, &out, &errOut), errOut.String())
	require.Regexp(t, `fixture\s+2\s+1\s+0\s+0\s+0\s+0\s+1\s+100%`, out.String(), "the equivalent survivor left the score")
	require.NotContains(t, out.String(), "survived "+m.ID())

	bad := strings.Replace(line, m.What, m.What+" changed", 1)
	require.NoError(t, os.WriteFile(equiv, []byte(bad+"\n"), 0o644))
	require.Equal(t, 1, report(config{root: "testdata", results: results, equivalent: equiv}, &out, &errOut))
	require.Contains(t, errOut.String(), "triage it again")
}

// The repository's own files of named mutants read: every pinned and
// every triaged mutant is still where its name says.
func TestTheNamedMutantFilesRead(t *testing.T) {
	for _, f := range []struct {
		path string
		note bool
	}{{"scenarios/mutants-ci.txt", false}, {"scenarios/mutants-equivalent.txt", true}} {
		b, err := os.ReadFile(filepath.Join("..", "..", f.path))
		require.NoError(t, err)
		ns, err := readNamed(filepath.Join("..", ".."), f.path, string(b), f.note, "again")
		require.NoError(t, err, f.path)
		require.NotEmpty(t, ns, f.path)
		for _, n := range ns {
			require.Equal(t, f.note, n.note != "", "%s: %s", f.path, n.m.ID())
		}
	}
}

// What the mutator leaves alone: code that runs only with a planted bug
// on (an if's body, a tagless switch's case), a make's capacity, and a
// file whose header says it is no defence.
// The rest of the same function is mutated, a bug's own condition too
// (not-if on a bug's flag plants the bug for good).
func TestTheMutatorSkipsBugBranchesCapacitiesAndMarkedFiles(t *testing.T) {
	ms, err := List("testdata", []string{"skips", "nomutate"})
	require.NoError(t, err)
	var whats []string
	for _, m := range ms {
		require.Equal(t, "skips/skips.go", m.File, "a marked file has no mutants")
		whats = append(whats, string(m.Op)+" "+m.What)
	}
	require.Equal(t, []string{
		"nudge 0", // a slice's length is no hint
		"not-if if cfg.Bugs.Early",
		"not-if if cfg.Bugs.Early && len(xs) == 0",
		"flip-logic cfg.Bugs.Early && len(xs) == 0",
		"not-if if !cfg.Bugs.Early && len(xs) > 2",
		"flip-logic !cfg.Bugs.Early && len(xs) > 2",
		"boundary len(xs) > 2",
		"nudge 2",
		"nudge 1",
		"not-if if cfg.Bugs.Early && len(xs) > 3",
		"flip-logic cfg.Bugs.Early && len(xs) > 3",
		"not-if if !seen[x]",
		"not-if if s.bugs.Early",
		"boundary n > 5", // a tagless switch's case on a bug's flag: its body skipped
		"nudge 5",
	}, whats)

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "p"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p", "p.go"), []byte("//fenceline:nomutate\n\npackage p\n"), 0o600))
	_, err = List(dir, []string{"p"})
	require.ErrorContains(t, err, "needs a reason")
}
