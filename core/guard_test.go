package core_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceline/fenceline/core/guard"
)

// TestDeterminismGuard enforces the one rule (see the package doc) on every
// non-test Go file under core/. A failure lists each violation as
// file:line: rule: detail; fix the code, or, for a map range whose order
// provably cannot reach an output, add //fenceline:unordered <reason>.
func TestDeterminismGuard(t *testing.T) {
	imp := exportImporter(t)
	// Rooted at the module so reports read core/kv/kv.go, the path a
	// reader greps for, whichever directory the test runs from.
	vs, err := guard.Check(os.DirFS(".."), "core", imp)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) > 0 {
		var b strings.Builder
		for _, v := range vs {
			fmt.Fprintf(&b, "\n\t%s", v)
		}
		t.Errorf("%d determinism violations in core/ (see core/doc.go for the rule):%s", len(vs), b.String())
	}
}

// exportImporter returns an importer that reads compiler export data, found
// with one `go list -export -deps` run over core/. The guard needs types to
// tell a map range from a slice range, and importer.Default finds export
// data only for the standard library, not for clock, dial, other core
// packages or third-party modules. `go list -export` builds what the build
// cache lacks, so a warm run costs one go list process; type-checking from
// source instead ("source" importer) would re-check the whole standard
// library on every run.
//
// A package that does not compile has no export data. That is logged, not
// fatal: the guard still runs, and any range over a type it therefore cannot
// see is reported as a violation rather than assumed safe.
func exportImporter(t *testing.T) types.Importer {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Export,Error", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct {
			ImportPath string
			Export     string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list: decoding its output: %v", err)
		}
		switch {
		case p.Export != "":
			exports[p.ImportPath] = p.Export
		case p.Error != nil:
			t.Logf("go list: %s has no export data: %s", p.ImportPath, p.Error.Err)
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s (not a dependency of core, or it does not compile)", path)
		}
		return os.Open(f)
	})
}
