package guard

import (
	"fmt"
	"slices"
	"strings"
)

// Policy is an allow list of imports: what code under the checked tree may
// import, directly and through every package it reaches. An allow list,
// not a deny list: a deny list passes the import nobody thought to ban
// (log, runtime, syscall, the simulator itself), and the one rule is about
// what core may touch, which is short to write down.
type Policy struct {
	// Module is the module's path; its packages are named relative to it
	// (core/kv, clock, sim).
	Module string
	// Std lists the standard-library packages any checked code may import.
	Std []string
	// Local lists the module's own package trees checked code may import
	// and reach (core, clock, dial): a tree is a package and everything
	// below it.
	Local []string
	// Third lists third-party package trees any checked code may import.
	Third []string
	// Only lists import trees that exactly one of the module's package
	// trees may import (etcd raft, inside core/consensus alone), each with
	// why.
	Only []Only
	// Apart lists pairs of the module's package trees that must never
	// reach each other, in either direction: the simulated world (sim,
	// netsim) and the real one (realnet) share the core and nothing else.
	Apart [][2]string
}

// Only is an import tree reserved for one of the module's package trees.
type Only struct {
	Tree, For, Why string
}

// CorePolicy is the policy of core/: the standard library's pure packages,
// the seams (clock, dial), other core packages, xxhash, etcd raft inside
// core/consensus, and the type checker inside core/guard (which reads
// source, and decides nothing a node does).
var CorePolicy = Policy{
	Module: "github.com/fenceline/fenceline",
	Std: []string{
		"bufio", "bytes", "cmp", "container/heap", "container/list", "crypto/aes", "crypto/cipher",
		"crypto/hkdf", "crypto/hmac", "crypto/sha256", "crypto/subtle", "encoding/base64", "encoding/binary",
		"encoding/hex", "encoding/json", "errors", "fmt", "hash", "hash/crc32", "io", "iter", "maps", "math",
		"math/bits", "net/netip", "slices", "sort", "strconv", "strings", "time", "unicode", "unicode/utf8",
	},
	Local: []string{"core", "clock", "dial"},
	Third: []string{"github.com/cespare/xxhash/v2"},
	Only: []Only{
		{Tree: "go.etcd.io/raft/v3", For: "core/consensus", Why: "nothing outside core/consensus names an etcd raft type, so a raft upgrade is one package's work"},
		{Tree: "go/ast", For: "core/guard", Why: "the guard reads source; nothing else parses Go"},
		{Tree: "go/importer", For: "core/guard", Why: "the guard reads source; nothing else parses Go"},
		{Tree: "go/parser", For: "core/guard", Why: "the guard reads source; nothing else parses Go"},
		{Tree: "go/token", For: "core/guard", Why: "the guard reads source; nothing else parses Go"},
		{Tree: "go/types", For: "core/guard", Why: "the guard reads source; nothing else parses Go"},
		{Tree: "io/fs", For: "core/guard", Why: "the guard reads source through an fs.FS it is handed"},
		{Tree: "path", For: "core/guard", Why: "the guard reads source through an fs.FS it is handed"},
	},
	Apart: [][2]string{{"sim", "realnet"}, {"netsim", "realnet"}},
}

// hints say why a few imports people reach for are not on the list.
var hints = []struct{ tree, why string }{
	{"math/rand", "unseeded randomness; use the source the node was handed"},
	{"crypto/rand", "unseeded randomness; use the source the node was handed"},
	{"os", "operating system access; go through a storage seam"},
	{"net", "network access; go through dial"},
	{"sync", "shared-memory concurrency; core is single-threaded"},
	{"log", "a second output channel; report through the caller"},
	{"runtime", "the runtime is the driver's business"},
	{"syscall", "operating system access; go through a storage seam"},
	{"go.etcd.io/bbolt", "storage engine; core sees the Backend seam"},
	{"github.com/anishathalye/porcupine", "checker code; it stands outside the nodes"},
}

func under(p, tree string) bool { return p == tree || strings.HasPrefix(p, tree+"/") }

// local returns p relative to the module, or "" if p is not the module's.
func (p Policy) local(path string) (string, bool) {
	if path == p.Module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, p.Module+"/")
	return rel, ok
}

// allowed says whether code in the module's package (or directory) from,
// relative to the module, may import path; if not, why.
func (p Policy) allowed(from, path string) (bool, string) {
	for _, o := range p.Only {
		if under(path, o.Tree) {
			if under(from, o.For) {
				return true, ""
			}
			return false, fmt.Sprintf("only %s may import it: %s", o.For, o.Why)
		}
	}
	if rel, ok := p.local(path); ok {
		for _, t := range p.Local {
			if under(rel, t) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s is outside %s, the only trees of this module core may reach", rel, strings.Join(p.Local, ", "))
	}
	if slices.Contains(p.Std, path) {
		return true, ""
	}
	for _, t := range p.Third {
		if under(path, t) {
			return true, ""
		}
	}
	for _, h := range hints {
		if under(path, h.tree) {
			return false, "not on core's allow list: " + h.why
		}
	}
	return false, "not on core's allow list (guard.CorePolicy); add it there, with the reason it is pure, or keep it out of core"
}

// Package is one node of an import graph: a package and its direct,
// non-test imports, as `go list -deps` reports them.
type Package struct {
	Path    string
	Imports []string
}

// RuleReach: a package under the checked tree reaches, through the
// module's own packages, an import the policy does not allow; or two
// trees the policy keeps apart reach each other.
const RuleReach = "reach"

// CheckGraph checks an import graph against p. Every package of the
// module under root, and every module package they reach through the
// module's own packages (clock and dial, say), must import only what p
// allows; a reached package the policy does not list is reported with
// the path that reached it. Trees in p.Apart must not reach each other,
// wherever they are (root does not limit that rule).
// Violations name the package (File is its path relative to the module)
// and have Line 0.
func CheckGraph(pkgs []Package, root string, p Policy) []Violation {
	byPath := map[string]Package{}
	var paths []string
	for _, pk := range pkgs {
		byPath[pk.Path] = pk
		paths = append(paths, pk.Path)
	}
	slices.Sort(paths)
	var out []Violation
	report := func(from, detail string) {
		out = append(out, Violation{File: from, Rule: RuleReach, Detail: detail})
	}
	// via[q] is how q was first reached from a root package.
	for _, start := range paths {
		rel, ok := p.local(start)
		if !ok || !under(rel, root) {
			continue
		}
		via := map[string]string{start: rel}
		queue := []string{start}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			curRel, _ := p.local(cur)
			for _, imp := range byPath[cur].Imports {
				if ok, why := p.allowed(curRel, imp); !ok {
					report(rel, fmt.Sprintf("reaches %s through %s: %s", imp, via[cur], why))
					continue
				}
				if _, isLocal := p.local(imp); isLocal {
					if _, seen := via[imp]; !seen {
						impRel, _ := p.local(imp)
						via[imp] = via[cur] + " -> " + impRel
						queue = append(queue, imp)
					}
				}
			}
		}
	}
	for _, pair := range p.Apart {
		for _, dir := range [][2]string{{pair[0], pair[1]}, {pair[1], pair[0]}} {
			for _, start := range paths {
				rel, ok := p.local(start)
				if !ok || !under(rel, dir[0]) {
					continue
				}
				if chain := reaches(byPath, p, start, dir[1]); chain != "" {
					report(rel, fmt.Sprintf("reaches %s (%s): the simulated and the real world share the core and nothing else", dir[1], chain))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	return slices.Compact(out)
}

// reaches returns the chain by which start reaches a package of the
// module under tree, or "".
func reaches(byPath map[string]Package, p Policy, start, tree string) string {
	startRel, _ := p.local(start)
	via := map[string]string{start: startRel}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range byPath[cur].Imports {
			rel, ok := p.local(imp)
			if !ok {
				continue
			}
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = via[cur] + " -> " + rel
			if under(rel, tree) {
				return via[imp]
			}
			queue = append(queue, imp)
		}
	}
	return ""
}
