package guard_test

import (
	"errors"
	"fmt"
	"go/types"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fenceline/fenceline/core/guard"
)

// TestFixture runs the guard over testdata/, where every rule has planted
// violations beside the allowed forms they resemble, and pins the exact set
// reported. A guard that silently stopped seeing something (a refactor that
// lost type information, a walk that skipped a directory) fails here, not in
// a simulator run that replays differently months later.
func TestFixture(t *testing.T) {
	vs, err := guard.Check(os.DirFS("testdata"), ".", nil, fixturePolicy())
	if err != nil {
		t.Fatal(err)
	}

	want := []string{
		"exception.go:13: bad-exception", // no reason
		"exception.go:14: map-order",     // so it excuses nothing
		"exception.go:18: bad-exception", // a blank line away from the range
		"exception.go:20: map-order",
		"exception.go:24: bad-exception", // misspelt directive
		"exception.go:25: map-order",

		"goroutine.go:7: no-goroutine",
		"goroutine.go:8: no-goroutine",

		"imports.go:4: import-not-allowed",  // crypto/rand
		"imports.go:5: import-not-allowed",  // porcupine
		"imports.go:9: import-not-allowed",  // linearizability
		"imports.go:10: import-not-allowed", // sim
		"imports.go:11: import-not-allowed", // sim/simtest: a test helper
		"imports.go:12: import-not-allowed", // bbolt
		"imports.go:13: import-not-allowed", // bbolt subpackage
		"imports.go:14: import-not-allowed", // raft outside sub
		"imports.go:15: import-not-allowed", // log
		"imports.go:16: import-not-allowed", // math/rand
		"imports.go:17: import-not-allowed", // math/rand/v2
		"imports.go:18: import-not-allowed", // net
		"imports.go:19: import-not-allowed", // net/http
		"imports.go:21: import-not-allowed", // os
		"imports.go:22: import-not-allowed", // os/exec
		"imports.go:23: import-not-allowed", // runtime
		"imports.go:25: import-not-allowed", // sync
		"imports.go:26: import-not-allowed", // sync/atomic
		"imports.go:27: import-not-allowed", // syscall

		"maporder.go:13: map-order",  // collected, never sorted
		"maporder.go:16: map-order",  // named map type
		"maporder.go:21: map-order",  // maps.Keys
		"maporder.go:24: map-order",  // maps.All
		"maporder.go:28: map-order",  // sorted only in a nested block
		"maporder.go:35: map-order",  // another slice sorted
		"maporder.go:43: map-order",  // type parameter
		"maporder.go:106: map-order", // filter reads the slice it fills
		"maporder.go:114: map-order", // filter calls a method
		"maporder.go:122: map-order", // if with an else

		"select.go:4: no-select",

		"sub/renamed.go:9: no-wall-clock", // import renamed to clk

		"wallclock.go:11: no-wall-clock", // Now
		"wallclock.go:12: no-wall-clock", // Sleep
		"wallclock.go:13: no-wall-clock", // After
		"wallclock.go:14: no-wall-clock", // AfterFunc
		"wallclock.go:16: no-wall-clock", // NewTimer
		"wallclock.go:17: no-wall-clock", // NewTicker
		"wallclock.go:18: no-wall-clock", // Tick
		"wallclock.go:19: no-wall-clock", // Since
		"wallclock.go:20: no-wall-clock", // Until
		"wallclock.go:21: no-wall-clock", // time.Now as a value

		"wallclock_dot.go:6: no-wall-clock", // dot import
	}
	var got []string
	for _, v := range vs {
		got = append(got, fmt.Sprintf("%s:%d: %s", v.File, v.Line, v.Rule))
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		for _, v := range vs {
			t.Log(v)
		}
	}

	// The details must name what was found, so a report can be acted on
	// without opening the guard.
	details := map[string]string{
		"sub/renamed.go:9":   "call to time.Now",
		"wallclock.go:21":    "reference to time.Now",
		"wallclock_dot.go:6": "call to time.Now",
		"imports.go:13":      `import of "go.etcd.io/bbolt/errors"`,
		"imports.go:23":      "the runtime is the driver's business",
		"imports.go:10":      "sim is outside core, clock, dial",
		"imports.go:14":      "only sub may import it",
		"maporder.go:21":     "range over maps.Keys",
		"maporder.go:16":     "range over map r (fixture.registry)",
		"exception.go:13":    "needs a reason",
		"exception.go:18":    "excuses nothing",
		"exception.go:24":    "unknown directive //fenceline:unorderd",
	}
	for _, v := range vs {
		at := fmt.Sprintf("%s:%d", v.File, v.Line)
		if sub, ok := details[at]; ok && !strings.Contains(v.Detail, sub) {
			t.Errorf("%s: detail %q does not contain %q", at, v.Detail, sub)
		}
	}
}

// fixturePolicy is core's policy with etcd raft reserved for the
// fixture's sub directory instead of core/consensus.
func fixturePolicy() guard.Policy {
	p := guard.CorePolicy
	p.Only = []guard.Only{{Tree: "go.etcd.io/raft/v3", For: "sub", Why: "fixture"}}
	return p
}

// TestGraph pins the transitive rules on a crafted import graph: a core
// package that reaches the simulator through a seam, one that imports a
// checker, raft outside core/consensus, and the simulated and real worlds
// reaching each other, each reported; a clean graph reports nothing.
func TestGraph(t *testing.T) {
	m := func(p string) string { return guard.CorePolicy.Module + "/" + p }
	clean := []guard.Package{
		{Path: m("core/kv"), Imports: []string{"fmt", "github.com/cespare/xxhash/v2", m("dial")}},
		{Path: m("core/consensus"), Imports: []string{m("core/kv"), "go.etcd.io/raft/v3", "go.etcd.io/raft/v3/raftpb"}},
		{Path: m("dial"), Imports: []string{"errors", "github.com/cespare/xxhash/v2"}},
		{Path: m("clock"), Imports: []string{"time", "sort"}},
		{Path: m("sim"), Imports: []string{m("core/kv"), "crypto/rand", "os"}},
		{Path: m("realnet"), Imports: []string{m("core/kv"), "os", "sync"}},
		{Path: "go.etcd.io/raft/v3", Imports: []string{"sync", "github.com/gogo/protobuf/proto"}},
	}
	if vs := guard.CheckGraph(clean, "core", guard.CorePolicy); len(vs) != 0 {
		t.Fatalf("clean graph reported %v", vs)
	}
	planted := []guard.Package{
		clean[0], clean[1], clean[2],
		{Path: m("clock"), Imports: []string{"time", m("sim")}},                     // a seam that reaches the simulator
		{Path: m("core/flow"), Imports: []string{m("clock"), m("linearizability")}}, // a checker
		{Path: m("core/ring"), Imports: []string{"go.etcd.io/raft/v3"}},             // raft outside consensus
		{Path: m("sim"), Imports: []string{m("core/kv")}},
		{Path: m("realnet"), Imports: []string{m("core/kv"), m("sim")}}, // the real world reaching the simulated one
		{Path: m("netsim"), Imports: []string{m("sim"), m("realnet")}},
	}
	var got []string
	for _, v := range guard.CheckGraph(planted, "core", guard.CorePolicy) {
		got = append(got, v.File+": "+v.Detail)
	}
	want := []string{
		"core/flow: reaches " + m("linearizability") + " through core/flow: linearizability is outside core, clock, dial, the only trees of this module core may reach",
		"core/flow: reaches " + m("sim") + " through core/flow -> clock: sim is outside core, clock, dial, the only trees of this module core may reach",
		"core/ring: reaches go.etcd.io/raft/v3 through core/ring: only core/consensus may import it: nothing outside core/consensus names an etcd raft type, so a raft upgrade is one package's work",
		"netsim: reaches realnet (netsim -> realnet): the simulated and the real world share the core and nothing else",
		"realnet: reaches sim (realnet -> sim): the simulated and the real world share the core and nothing else",
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// failingImporter resolves nothing, like a checker run where export data is
// missing.
type failingImporter struct{}

func (failingImporter) Import(path string) (*types.Package, error) {
	return nil, errors.New("no export data in this test")
}

// TestFailsClosedWithoutTypes pins what happens when imports cannot be
// resolved: the wall-clock check still sees time.Now, and a range over a
// value whose type is unknown is reported rather than assumed safe.
func TestFailsClosedWithoutTypes(t *testing.T) {
	fsys := fstest.MapFS{
		"p/p.go": {Data: []byte(`package p

import (
	"time"

	"example.com/dep"
)

func f() {
	_ = time.Now()
	for k := range dep.Table {
		_ = k
	}
	for _, x := range []int{1, 2} {
		_ = x
	}
}
`)},
	}
	policy := guard.CorePolicy
	policy.Third = append(policy.Third, "example.com/dep")
	vs, err := guard.Check(fsys, ".", failingImporter{}, policy)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	if len(vs) != 2 ||
		vs[0].Line != 10 || vs[0].Rule != guard.RuleWallClock ||
		vs[1].Line != 11 || vs[1].Rule != guard.RuleMapOrder || !strings.Contains(vs[1].Detail, "cannot tell whether dep.Table is a map") {
		t.Errorf("got:\n\t%s\nwant p/p.go:10 no-wall-clock and p/p.go:11 map-order (type unknown)", strings.Join(got, "\n\t"))
	}
}

// TestErrors: a file the guard cannot parse, or a root with nothing to
// check, is an error, never an empty (passing) report.
func TestErrors(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"unparsable": {"p/p.go": {Data: []byte("package p\nfunc {")}},
		"no go files": {
			"p/README":        {Data: []byte("nothing here")},
			"p/p_test.go":     {Data: []byte("package p")},
			"p/testdata/x.go": {Data: []byte("package x")},
		},
	} {
		if vs, err := guard.Check(fsys, "p", nil, guard.CorePolicy); err == nil {
			t.Errorf("%s: Check returned %v and no error", name, vs)
		}
	}
}

func TestViolationString(t *testing.T) {
	v := guard.Violation{File: "core/kv/kv.go", Line: 42, Rule: guard.RuleWallClock, Detail: "call to time.Now"}
	if got, want := v.String(), "core/kv/kv.go:42: no-wall-clock: call to time.Now"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
