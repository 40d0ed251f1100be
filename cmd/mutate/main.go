// Command mutate runs a mutation campaign over the core's defences: it
// makes mutants of a package's source mechanically (mutant.go's
// operators), builds the simulator with each one in place of the real
// file (go build -overlay: the tree is never touched), sweeps the
// scenarios that run that package, and then the package's unit tests,
// and records who caught it.
//
//	mutate -list -pkgs core/shard                 every mutant, in order
//	mutate -pkgs core/shard -sample 20 -seed 1    20 of them, drawn by the seed
//	mutate -pkgs core/shard -sample 20 -shard 2/4 the second quarter of those
//	mutate -report                                what the results file holds, per package
//	mutate -expect scenarios/mutants-ci.txt       CI: each pinned mutant must fail a scenario
//
// Results go to -results (one line per mutant: id, verdict, detail) and a
// run skips the mutants already there, so a stopped campaign resumes.
// Verdicts: sim (a scenario failed: which, the seed, the checkers), tests
// (the package's tests failed), both, survived, nobuild (the mutant does
// not compile: not counted). Exit status 0 unless the tool itself failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// defaultPkgs are the packages that defend the promises (issue 29).
var defaultPkgs = []string{"core/flow", "core/consensus", "core/kv", "core/journal", "core/shard", "core/recfile",
	"core/proxyonce", "core/transport", "core/routing", "core/ring", "core/partition", "core/fleet",
	// core/node's fleet: the control group's replica, the directory a
	// node reads and the turns that found and publish it.
	"core/node/fleet.go",
	// imposter/'s stateful path: the rest of the package is the engine
	// mountebank's suites and the unit tests judge.
	"imposter/stateful.go", "imposter/flowstate.go", "imposter/scripted.go", "imposter/records.go"}

// scenariosFor names the scenarios that run a package's code where its
// defences matter; a package not listed gets every scenario.
var scenariosFor = map[string][]string{
	"core/flow":  {"flow-ops", "fleet-routing", "owner-handoff", "durability-restart", "isolated-owner", "ownership-returns", "replica-repair", "ttl-evict", "ttl-restart", "imposter-scenarios", "shrink-to-one", "fleet-resize"},
	"core/shard": {"durability-restart", "ttl-evict", "ttl-restart", "flow-ops", "owner-handoff", "replica-repair"},
	// owner-handoff: membership changes under flow load, a leader's disk
	// stalled as it sends or applies one (conf_stalls): what reaches a
	// node behind a committed change, and a snapshot held back.
	"core/consensus": {"raft-partitions", "election-crash", "journal-crash", "learner-join", "lease-clock-jump", "shrink-to-one", "flow-ops", "owner-handoff"},
	"core/journal":   {"journal-crash", "election-crash", "raft-partitions", "learner-join"},
	"core/kv":        {"raft-partitions", "lease-clock-jump", "election-crash", "learner-join", "journal-crash"}, // the last two restore snapshots
	"core/recfile":   {"journal-crash", "durability-restart", "kernel-selftest"},
	"core/proxyonce": {"proxyonce-crash", "proxyonce-race"},
	// fleet-grow: the attestations of a fleet's admin acts, checked on
	// the node (core/node's Resize and AddGroup).
	"core/transport": {"transport-adversary", "fleet-grow"},
	"core/routing":   {"imposter-scenarios", "one-server", "flow-ops"},
	"core/ring":      {"flow-ops", "owner-handoff", "imposter-scenarios", "proxyonce-race", "shrink-to-one", "one-server"},
	// A fleet's founding table places each partition by Group, and
	// Compatible refuses a founding or a resize to a count that does not
	// divide the table (fleet-grow's adversary asks for such resizes).
	"core/partition": {"fleet-routing", "fleet-resize", "fleet-grow", "imposter-scenarios", "one-server"},
	// The directory routes a fleet's flows (fleet-routing); its moves,
	// the receiver's epoch checks (Admit) and added groups are judged by
	// the two scenarios that resize a fleet. The control group carries
	// it (core/node).
	"core/fleet": {"fleet-routing", "fleet-resize", "fleet-grow"},
	// A node's admin acts outside a fleet too: ownership-returns joins
	// and removes through Node.Join and Remove.
	"core/node": {"fleet-routing", "fleet-resize", "fleet-grow", "ownership-returns"},
	"imposter":  {"imposter-scenarios", "one-server", "injected-counter"},
}

// testsFor names the packages besides a package's own whose unit tests
// judge it: imposter/'s contract with clients is tested over real
// sockets in imposterhttp, and injection's in script too.
var testsFor = map[string][]string{
	"imposter": {"imposterhttp", "script"},
}

type config struct {
	root, results string
	pkgs          []string
	list, report  bool
	sample        int
	seed          uint64
	shardI        int
	shardN        int
	seeds         int
	tests         bool
	scenarios     []string
	expect        string
	equivalent    string
	// first is swept before the others: the scenario that caught a
	// pinned mutant when it was pinned (-expect's optional last field).
	first string
}

func run(args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pkgs := fs.String("pkgs", strings.Join(defaultPkgs, ","), "packages to mutate, comma-separated, relative to the repository root")
	fs.StringVar(&c.root, "root", ".", "the repository root")
	fs.StringVar(&c.results, "results", "mutate-results.txt", "the results file: appended to, and read to skip mutants already run")
	fs.BoolVar(&c.list, "list", false, "list the mutants and stop")
	fs.BoolVar(&c.report, "report", false, "summarize the results file per package and stop")
	fs.StringVar(&c.equivalent, "equivalent", "scenarios/mutants-equivalent.txt", "the mutants triaged as equivalent (no behaviour tells them apart), each with its argument: -report leaves them out of the score")
	fs.IntVar(&c.sample, "sample", 0, "run this many mutants, drawn by -seed (0: all)")
	fs.Uint64Var(&c.seed, "seed", 1, "draws the sample")
	shard := fs.String("shard", "1/1", "i/n: run the i-th of n disjoint slices of the mutants")
	fs.IntVar(&c.seeds, "seeds", 30, "seeds 1..N of each scenario per mutant")
	fs.BoolVar(&c.tests, "tests", true, "also run the package's unit tests on each mutant")
	scen := fs.String("scenarios", "", "scenarios to sweep, comma-separated (default: the package's own list)")
	fs.StringVar(&c.expect, "expect", "", "a file of pinned mutants (file, function, operator, nth, code, tab-separated) each of which a scenario must catch: exit 1 if one survives")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.pkgs = strings.Split(*pkgs, ",")
	if *scen != "" {
		c.scenarios = strings.Split(*scen, ",")
	}
	if _, err := fmt.Sscanf(*shard, "%d/%d", &c.shardI, &c.shardN); err != nil || c.shardN < 1 || c.shardI < 1 || c.shardI > c.shardN || c.seeds < 1 {
		fmt.Fprintln(stderr, "mutate: -shard is i/n with 1 <= i <= n, and -seeds is at least 1")
		return 2
	}
	if c.report {
		return report(c, stdout, stderr)
	}
	if c.expect != "" {
		return expect(c, stdout, stderr)
	}
	ms, err := List(c.root, c.pkgs)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	if c.list {
		for _, m := range ms {
			fmt.Fprintf(stdout, "%s\t%s\t%s\n", m.ID(), m.Func, m.What)
		}
		fmt.Fprintf(stdout, "%d mutants\n", len(ms))
		return 0
	}
	ms = pick(ms, c.sample, c.seed, c.shardI, c.shardN)
	done, err := readResults(c.results)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	out, err := os.OpenFile(c.results, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	defer out.Close()
	work, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	defer os.RemoveAll(work)
	start := time.Now()
	for i, m := range ms {
		if _, ok := done[m.ID()]; ok {
			continue
		}
		verdict, detail, err := runOne(c, work, m)
		if err != nil {
			fmt.Fprintln(stderr, "mutate:", m.ID(), err)
			return 1
		}
		fmt.Fprintf(out, "%s\t%s\t%s\n", m.ID(), verdict, detail)
		fmt.Fprintf(stdout, "[%d/%d %s] %s %s %s (%s)\n", i+1, len(ms), time.Since(start).Round(time.Second), m.ID(), verdict, detail, m.What)
	}
	return 0
}

// pick draws n mutants by seed (all of them if n is 0), in a fixed order,
// and keeps the shard's slice.
func pick(ms []Mutant, n int, seed uint64, i, k int) []Mutant {
	idx := make([]int, len(ms))
	for j := range idx {
		idx[j] = j
	}
	if n > 0 && n < len(ms) {
		r := rand.New(rand.NewPCG(seed, 0x6d7574617465))
		r.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		idx = idx[:n]
		sort.Ints(idx)
	}
	var out []Mutant
	for j, x := range idx {
		if j%k == i-1 {
			out = append(out, ms[x])
		}
	}
	return out
}

// readResults returns the ids already in the results file.
func readResults(path string) (map[string][2]string, error) {
	done := map[string][2]string{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), "\t", 3)
		if len(parts) == 3 {
			done[parts[0]] = [2]string{parts[1], parts[2]}
		}
	}
	return done, sc.Err()
}

var failLine = regexp.MustCompile(`^FAIL seed=(\d+):.* checkers=(\S+)`)

var divergedLine = regexp.MustCompile(`^NONDETERMINISTIC seed=(\d+):`)

// nondeterministic is the first seed simrun -check-determinism saw replay
// differently, or "".
func nondeterministic(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if m := divergedLine.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
	return ""
}

// runOne builds the simulator with m in place, sweeps its scenarios until
// one fails (replaying the first twice if none does), and runs the
// package's tests.
func runOne(c config, work string, m Mutant) (verdict, detail string, err error) {
	src, err := Apply(c.root, m)
	if err != nil {
		return "", "", err
	}
	mut := filepath.Join(work, "mutant.go")
	if err := os.WriteFile(mut, src, 0o644); err != nil {
		return "", "", err
	}
	abs, err := filepath.Abs(filepath.Join(c.root, m.File))
	if err != nil {
		return "", "", err
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: mut}})
	overlay := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return "", "", err
	}
	bin := filepath.Join(work, "simrun")
	build := exec.Command("go", "build", "-overlay", overlay, "-o", bin, "./cmd/simrun")
	build.Dir = c.root
	if b, err := build.CombinedOutput(); err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if strings.HasPrefix(first, "#") {
			_, first, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
			first, _, _ = strings.Cut(first, "\n")
		}
		return "nobuild", first, nil
	}
	pkg := filepath.ToSlash(filepath.Dir(m.File))
	scens := c.scenarios
	if len(scens) == 0 {
		scens = scenariosFor[pkg]
	}
	if len(scens) == 0 {
		scens = allScenarios(bin)
	}
	if c.first != "" {
		scens = append([]string{c.first}, slices.DeleteFunc(slices.Clone(scens), func(s string) bool { return s == c.first })...)
	}
	var simDetail string
	for _, s := range scens {
		out, hung := simulate(c, bin, "-scenario", s, "-seeds", "1.."+strconv.Itoa(c.seeds), "-j", "2", "-fail-fast")
		if hung {
			// A node's loop that never returns (a livelock inside one
			// event, which the kernel's event budget cannot see) hangs
			// the sweep: a failure of the run, so a catch.
			simDetail = s + " hang: no verdict within " + sweepTimeout.String()
			break
		}
		if first := firstFail(out); first != "" {
			simDetail = s + " " + first
			break
		}
	}
	if simDetail == "" && len(scens) > 0 {
		// Determinism is a promise too: a mutant that lets map order or
		// another unseeded choice reach a node's output passes every
		// checker and replays differently. The first scenario's first
		// two seeds, each twice, in separate processes.
		out, hung := simulate(c, bin, "-scenario", scens[0], "-seeds", "1..2", "-check-determinism", "-j", "2")
		switch seed := nondeterministic(out); {
		case hung:
			simDetail = scens[0] + " hang: no verdict within " + sweepTimeout.String()
		case seed != "":
			simDetail = scens[0] + " nondeterministic seed=" + seed
		}
	}
	testDetail := ""
	if c.tests {
		args := []string{"test", "-overlay", overlay, "-count=1", "-timeout", testTimeout.String(), "./" + pkg}
		for _, more := range testsFor[pkg] {
			args = append(args, "./"+more)
		}
		t := bounded("go", args...)
		t.Dir = c.root
		// A mutant fails property tests by design: rapid must not leave
		// a fail file in the tree for each (testdata/rapid/...).
		t.Env = append(os.Environ(), "RAPID_NOFAILFILE=true")
		if b, err := t.CombinedOutput(); err != nil {
			testDetail = firstTestFail(string(b))
		}
	}
	switch {
	case simDetail != "" && testDetail != "":
		return "both", simDetail + "; tests " + testDetail, nil
	case simDetail != "":
		return "sim", simDetail, nil
	case testDetail != "":
		return "tests", testDetail, nil
	}
	return "survived", strings.Join(scens, ",") + " seeds 1.." + strconv.Itoa(c.seeds), nil
}

// simulate runs the mutant's simulator with args in the checkout, bounded
// by sweepTimeout: its output, and whether it was killed at the bound.
func simulate(c config, bin string, args ...string) (out string, hung bool) {
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	cmd := boundedContext(ctx, bin, args...)
	cmd.Dir = c.root
	b, _ := cmd.CombinedOutput()
	return string(b), ctx.Err() != nil
}

// A mutant's judges run bounded: the unit tests for testTimeout and each
// scenario's sweep for sweepTimeout (a hang is a failure, so a catch: a
// sweep of twenty seeds takes seconds to a minute here), and every
// judge's processes within memLimit of
// address space each, so a mutant whose queues grow without bound fails
// its judge (the runtime runs out of memory) instead of taking the
// machine: one dropped call in consensus grew a test binary past 17 GiB.
const (
	testTimeout  = 3 * time.Minute
	sweepTimeout = 5 * time.Minute
	memLimitKiB  = 8 << 20 // 8 GiB
)

// bounded is exec.Command under ulimit -v memLimitKiB.
func bounded(name string, args ...string) *exec.Cmd {
	return exec.Command("sh", ulimited(name, args)...)
}

// ulimited is sh's arguments to run name with args under ulimit -v
// memLimitKiB.
func ulimited(name string, args []string) []string {
	return append([]string{"-c", `ulimit -v "$0" && exec "$@"`, strconv.Itoa(memLimitKiB), name}, args...)
}

// boundedContext is bounded, killed with its whole process group (simrun
// and its worker processes) once ctx is done.
func boundedContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", ulimited(name, args)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// firstFail finds the lowest failing seed of a sweep's output, as
// "seed=N checkers=X"; "" if none failed. A worker that crashed (a
// panic in the mutant) counts as a catch.
func firstFail(out string) string {
	best, found := 0, ""
	for _, line := range strings.Split(out, "\n") {
		if m := failLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			if found == "" || n < best {
				best, found = n, "seed="+m[1]+" checkers="+m[2]
			}
		}
	}
	if found == "" && strings.Contains(out, "verdict=FAIL") {
		return "verdict=FAIL"
	}
	return found
}

// firstTestFail names the first failing test in go test's output.
func firstTestFail(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "--- FAIL: ") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "--- FAIL: "), " ")
			return name
		}
		if strings.HasPrefix(line, "panic:") {
			return "panic"
		}
	}
	return "failed"
}

// allScenarios asks simrun for its scenarios.
func allScenarios(bin string) []string {
	b, _ := exec.Command(bin, "-list").Output()
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, " ") {
			name, _, _ := strings.Cut(line, " ")
			out = append(out, name)
		}
	}
	return out
}

// report prints, per package, what the results file holds: mutants,
// caught by the simulator alone, by the tests alone, by both, survived,
// not built; the simulator's score over those that built; and every
// survivor.
func report(c config, stdout, stderr io.Writer) int {
	done, err := readResults(c.results)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	equiv, err := readEquivalents(c)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	type tally struct{ n, sim, tests, both, survived, nobuild, equivalent int }
	per := map[string]*tally{}
	var survivors []string
	for id, r := range done { //fenceline:unordered counted, then printed sorted
		file, _, _ := strings.Cut(id, ":")
		pkg := filepath.ToSlash(filepath.Dir(file))
		t := per[pkg]
		if t == nil {
			t = &tally{}
			per[pkg] = t
		}
		t.n++
		if _, ok := equiv[id]; ok && r[0] == "survived" {
			t.equivalent++
			continue
		}
		switch r[0] {
		case "sim":
			t.sim++
		case "tests":
			t.tests++
		case "both":
			t.both++
		case "survived":
			t.survived++
			survivors = append(survivors, id)
		case "nobuild":
			t.nobuild++
		}
	}
	pkgs := make([]string, 0, len(per))
	for p := range per {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	fmt.Fprintf(stdout, "%-16s %7s %5s %6s %5s %9s %8s %10s %10s\n", "package", "mutants", "sim", "tests", "both", "survived", "nobuild", "equivalent", "sim score")
	for _, p := range pkgs {
		t := per[p]
		built := t.n - t.nobuild - t.equivalent
		score := "-"
		if built > 0 {
			score = fmt.Sprintf("%.0f%%", 100*float64(t.sim+t.both)/float64(built))
		}
		fmt.Fprintf(stdout, "%-16s %7d %5d %6d %5d %9d %8d %10d %10s\n", p, t.n, t.sim, t.tests, t.both, t.survived, t.nobuild, t.equivalent, score)
	}
	slices.Sort(survivors)
	for _, s := range survivors {
		fmt.Fprintf(stdout, "survived %s\n", s)
	}
	return 0
}

// named is a mutant a file names (as -expect's and -equivalent's do),
// with the field after the name, if the file has one.
type named struct {
	m    Mutant
	note string // the equivalents' argument
	// first is a pinned mutant's optional last field: the scenario that
	// caught it when it was pinned, swept first.
	first string
}

// readNamed reads a file of named mutants: each line file, function,
// operator, nth (from 1), code, and with note one more field, which must
// not be empty; '#' lines and blank ones are skipped. again says what to
// do about a name whose code changed.
func readNamed(root, file, text string, note bool, again string) ([]named, error) {
	want, shape := 5, "file, function, operator, nth (from 1), code, tab-separated"
	if note {
		want, shape = 6, "file, function, operator, nth (from 1), code and the argument, tab-separated"
	}
	var out []named
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		nth := 0
		if len(parts) == want || (!note && len(parts) == want+1) {
			nth, _ = strconv.Atoi(parts[3])
		}
		if nth < 1 || strings.TrimSpace(parts[len(parts)-1]) == "" {
			return nil, fmt.Errorf("%s: %q is not %s", file, line, shape)
		}
		m, err := Find(root, parts[0], parts[1], Op(parts[2]), parts[4], nth)
		if err != nil {
			return nil, fmt.Errorf("%s: %v (%s)", file, err, again)
		}
		n := named{m: m}
		switch {
		case note:
			n.note = parts[5]
		case len(parts) == want+1:
			n.first = parts[5]
		}
		out = append(out, n)
	}
	return out, nil
}

// readEquivalents reads c.equivalent: each line a mutant as -expect's
// file names them (file, function, operator, nth, code), then the
// argument that no behaviour tells it apart, tab-separated. A mutant
// whose code changed is an error (its argument may no longer hold). A
// missing file is an empty one. The answer maps mutant ids to arguments.
func readEquivalents(c config) (map[string]string, error) {
	out := map[string]string{}
	if c.equivalent == "" {
		return out, nil
	}
	path := c.equivalent
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.root, path)
	}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	ns, err := readNamed(c.root, c.equivalent, string(b), true, "triage it again")
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		out[n.m.ID()] = n.note
	}
	return out, nil
}

// expect runs the pinned mutants of c.expect, the simulator only, and
// fails if a scenario no longer catches one: a checker that decays shows
// here. A pinned mutant is named by its file, function, operator, code
// (as -list prints them) and which of the same in that function it is,
// not by its line, so edits elsewhere leave it standing; one whose code
// changed is an error that says so.
func expect(c config, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(c.expect)
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	defer os.RemoveAll(work)
	c.tests = false
	var missed []string
	ns, err := readNamed(c.root, c.expect, string(b), false, "update the pinned mutant")
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return 1
	}
	n := 0
	for j, nm := range ns {
		if j%c.shardN != c.shardI-1 {
			continue // another shard's (-shard), as for a sample
		}
		m := nm.m
		n++
		c.first = nm.first
		verdict, detail, err := runOne(c, work, m)
		if err != nil {
			fmt.Fprintln(stderr, "mutate:", m.ID(), err)
			return 1
		}
		fmt.Fprintf(stdout, "%s %s %s (%s)\n", m.ID(), verdict, detail, m.What)
		if verdict != "sim" {
			missed = append(missed, m.ID()+" "+verdict)
		}
	}
	if len(missed) > 0 {
		fmt.Fprintf(stdout, "mutate: %d of %d pinned mutants no longer caught by a scenario: %s\n", len(missed), n, strings.Join(missed, "; "))
		return 1
	}
	fmt.Fprintf(stdout, "mutate: all %d pinned mutants caught by a scenario\n", n)
	return 0
}
