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
	vs, err := guard.Check(os.DirFS("testdata"), ".", nil)
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

		"imports.go:4: banned-import",  // crypto/rand
		"imports.go:5: banned-import",  // porcupine
		"imports.go:6: banned-import",  // bbolt
		"imports.go:7: banned-import",  // bbolt subpackage
		"imports.go:8: banned-import",  // math/rand
		"imports.go:9: banned-import",  // math/rand/v2
		"imports.go:10: banned-import", // net
		"imports.go:11: banned-import", // net/http
		"imports.go:13: banned-import", // os
		"imports.go:14: banned-import", // os/exec
		"imports.go:16: banned-import", // sync
		"imports.go:17: banned-import", // sync/atomic

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
		"imports.go:7":       `import of "go.etcd.io/bbolt/errors"`,
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
	vs, err := guard.Check(fsys, ".", failingImporter{})
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
		if vs, err := guard.Check(fsys, "p", nil); err == nil {
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
