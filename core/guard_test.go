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
	vs, err := guard.Check(os.DirFS(".."), "core", imp, guard.CorePolicy)
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

// TestImportGraph holds the whole module's import graph, as `go list -deps`
// reports it, to guard.CorePolicy: every package under core/, and every
// package of the module it reaches (the seams), imports only what the
// policy allows, so a core package cannot reach the simulator or a checker
// even through a seam; and the simulated world (sim, netsim) and the real
// one (realnet) never reach each other. guard's own tests pin that the
// check fails on each kind of violation.
func TestImportGraph(t *testing.T) {
	pkgs := moduleGraph(t)
	var inCore int
	for _, p := range pkgs {
		if strings.HasPrefix(p.Path, guard.CorePolicy.Module+"/core/") {
			inCore++
		}
	}
	if inCore < 5 {
		t.Fatalf("go list found %d packages under core/: the graph is not the module's", inCore)
	}
	for _, v := range guard.CheckGraph(pkgs, "core", guard.CorePolicy) {
		t.Errorf("%s: %s", v.File, v.Detail)
	}
}

// moduleGraph is the import graph of every package of the module and
// their dependencies (non-test imports), from `go list -deps`.
func moduleGraph(t *testing.T) []guard.Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Imports,Error", guard.CorePolicy.Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []guard.Package
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list: decoding its output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, guard.Package{Path: p.ImportPath, Imports: p.Imports})
	}
	return pkgs
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
