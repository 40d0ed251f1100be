package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// This file: the mutator. It finds, in a package's non-test Go files, every
// place one of a fixed set of operators applies, in a fixed order (files
// by name, then the syntax tree's walk), and writes the file with one of
// them applied. Nothing else in the command knows Go syntax.

// An Op is a mutation operator.
type Op string

// The operators: mechanical changes a reviewer could miss and a checker
// should not.
const (
	OpBoundary  Op = "boundary"   // < ↔ <=, > ↔ >=: off by one
	OpNegate    Op = "negate"     // == ↔ !=
	OpFlipLogic Op = "flip-logic" // && ↔ ||
	OpNotIf     Op = "not-if"     // if c → if !(c)
	OpDropGuard Op = "drop-guard" // an if whose body ends in a return, dropped
	OpDropCall  Op = "drop-call"  // a call statement, dropped
	OpNudge     Op = "nudge"      // an integer constant n → n+1
)

// A Mutant is one operator at one place.
type Mutant struct {
	File string // path relative to the repository root
	Line int
	Col  int
	Op   Op
	// Index is the site's position among the file's sites: with File it
	// names the mutant, and Apply finds it by it.
	Index int
	What  string // the code before, shortened
	Func  string // the function it is in ("" at package level)
}

// ID names the mutant uniquely and stably while the file does not change.
func (m Mutant) ID() string {
	return fmt.Sprintf("%s:%d:%d:%s#%d", m.File, m.Line, m.Col, m.Op, m.Index)
}

// site is one place an operator applies; apply changes the tree in place.
type site struct {
	pos   token.Pos
	op    Op
	what  string
	apply func()
}

// sites walks a parsed file and returns its mutation sites in walk order.
func sites(fset *token.FileSet, f *ast.File) []site {
	var out []site
	src := func(n ast.Node) string {
		var b bytes.Buffer
		_ = format.Node(&b, fset, n)
		s := strings.Join(strings.Fields(b.String()), " ")
		if len(s) > 60 {
			s = s[:57] + "..."
		}
		return s
	}
	skip := skipped(f)
	ast.Inspect(f, func(n ast.Node) bool {
		if n != nil && skip(n.Pos()) {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Body == nil {
				return false
			}
		case *ast.GenDecl:
			// Constants and variables at package level: their values are
			// bounds and defaults, nudged through their uses' literals
			// only where they appear in code.
			return n.Tok != token.CONST && n.Tok != token.IMPORT
		case *ast.BinaryExpr:
			switch n.Op {
			case token.LSS, token.LEQ, token.GTR, token.GEQ:
				to := map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}[n.Op]
				out = append(out, site{n.OpPos, OpBoundary, src(n), func() { n.Op = to }})
			case token.EQL, token.NEQ:
				to := token.NEQ
				if n.Op == token.NEQ {
					to = token.EQL
				}
				out = append(out, site{n.OpPos, OpNegate, src(n), func() { n.Op = to }})
			case token.LAND, token.LOR:
				to := token.LOR
				if n.Op == token.LOR {
					to = token.LAND
				}
				out = append(out, site{n.OpPos, OpFlipLogic, src(n), func() { n.Op = to }})
			}
		case *ast.IfStmt:
			cond := n.Cond
			out = append(out, site{n.If, OpNotIf, "if " + src(cond), func() {
				n.Cond = &ast.UnaryExpr{Op: token.NOT, X: &ast.ParenExpr{X: cond}}
			}})
			// Dropping a guard that only a planted bug opens removes code
			// that runs only with the bug on: no defence, no mutant.
			if k := len(n.Body.List); k > 0 && n.Else == nil && !bugOnly(cond) {
				if _, ok := n.Body.List[k-1].(*ast.ReturnStmt); ok {
					out = append(out, site{n.If, OpDropGuard, "if " + src(cond) + " { ... return }", func() {
						n.Cond = ast.NewIdent("false")
					}})
				}
			}
		case *ast.BlockStmt:
			for i, st := range n.List {
				es, ok := st.(*ast.ExprStmt)
				if !ok {
					continue
				}
				if _, ok := es.X.(*ast.CallExpr); !ok {
					continue
				}
				i := i
				out = append(out, site{es.Pos(), OpDropCall, src(es), func() {
					n.List[i] = &ast.EmptyStmt{Semicolon: es.Pos(), Implicit: true}
				}})
			}
		case *ast.BasicLit:
			if n.Kind != token.INT {
				break
			}
			v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
			if err != nil {
				break
			}
			out = append(out, site{n.ValuePos, OpNudge, n.Value, func() { n.Value = strconv.FormatInt(v+1, 10) }})
		}
		return true
	})
	return out
}

// skipped returns what the mutator leaves alone in a file, as a test of
// a position: code that runs only while a planted bug is on (the body of
// an if on a bug's flag, or of a case of a switch with no tag, the rest
// of an && after one), which is no
// defence, and a make's capacity, a hint that no behaviour sees. The
// length of a slice's make is mutated: it is not a hint.
func skipped(f *ast.File) func(token.Pos) bool {
	var spans [][2]token.Pos
	hide := func(n ast.Node) { spans = append(spans, [2]token.Pos{n.Pos(), n.End()}) }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if bugOnly(n.Cond) {
				hide(n.Body)
			}
		case *ast.SwitchStmt:
			// A case of a switch with no tag is an if on its
			// conditions: one that can hold only with a bug planted
			// runs only then.
			if n.Tag != nil {
				break
			}
			for _, c := range n.Body.List {
				if c, ok := c.(*ast.CaseClause); ok && len(c.List) > 0 && len(c.Body) > 0 && allBugOnly(c.List) {
					spans = append(spans, [2]token.Pos{c.Body[0].Pos(), c.Body[len(c.Body)-1].End()})
				}
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND {
				switch {
				case bugFlag(n.X):
					hide(n.Y)
				case bugFlag(n.Y):
					hide(n.X)
				}
			}
		case *ast.CallExpr:
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "make" && len(n.Args) > 1 {
				switch n.Args[0].(type) {
				case *ast.ArrayType:
					if len(n.Args) == 3 {
						hide(n.Args[2])
					}
				case *ast.MapType:
					hide(n.Args[1])
				}
			}
		}
		return true
	})
	return func(p token.Pos) bool {
		for _, sp := range spans {
			if p >= sp[0] && p < sp[1] {
				return true
			}
		}
		return false
	}
}

// bugFlag reports whether e reads a planted bug's switch, as
// cfg.Bugs.Name (or a bug set kept as bugs.Name) does: true only while
// that bug is planted.
func bugFlag(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.SelectorExpr); ok && (id.Sel.Name == "Bugs" || id.Sel.Name == "bugs") {
				return true
			}
			if id, ok := x.X.(*ast.Ident); ok && (id.Name == "Bugs" || id.Name == "bugs") {
				return true
			}
			return false
		default:
			return false
		}
	}
}

// allBugOnly reports whether every one of es can be true only while a
// bug is planted.
func allBugOnly(es []ast.Expr) bool {
	for _, e := range es {
		if !bugOnly(e) {
			return false
		}
	}
	return true
}

// bugOnly reports whether e can be true only while a bug is planted.
func bugOnly(e ast.Expr) bool {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.LAND {
		return bugOnly(b.X) || bugOnly(b.Y)
	}
	if p, ok := e.(*ast.ParenExpr); ok {
		return bugOnly(p.X)
	}
	return bugFlag(e)
}

// noMutate reports a file whose header says //fenceline:nomutate and
// why: code no promise rests on (a test double the tests of other
// packages share). A directive without a reason is an error.
func noMutate(fset *token.FileSet, f *ast.File) (bool, error) {
	for _, cg := range f.Comments {
		if cg.Pos() >= f.Package {
			break
		}
		for _, c := range cg.List {
			if rest, ok := strings.CutPrefix(c.Text, "//fenceline:nomutate"); ok {
				if strings.TrimSpace(rest) == "" {
					return false, fmt.Errorf("%s: //fenceline:nomutate needs a reason", fset.Position(c.Pos()))
				}
				return true, nil
			}
		}
	}
	return false, nil
}

// funcAt names the function declaration that holds pos, with its
// receiver's type for a method ("T.m").
func funcAt(f *ast.File, pos token.Pos) string {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || pos < fd.Pos() || pos >= fd.End() {
			continue
		}
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			t := fd.Recv.List[0].Type
			if st, ok := t.(*ast.StarExpr); ok {
				t = st.X
			}
			if ix, ok := t.(*ast.IndexExpr); ok {
				t = ix.X
			}
			if id, ok := t.(*ast.Ident); ok {
				return id.Name + "." + fd.Name.Name
			}
		}
		return fd.Name.Name
	}
	return ""
}

// parse reads one file.
func parse(root, rel string) (*token.FileSet, *ast.File, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ParseComments)
	return fset, f, err
}

// goFiles lists a package directory's non-test Go files, by name.
func goFiles(root, pkg string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(root, pkg))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		out = append(out, filepath.ToSlash(filepath.Join(pkg, n)))
	}
	sort.Strings(out)
	return out, nil
}

// List returns every mutant of the packages, in a fixed order. An entry
// naming a .go file mutates that file alone (the stateful path of a
// package whose other files no scenario runs).
func List(root string, pkgs []string) ([]Mutant, error) {
	var out []Mutant
	for _, pkg := range pkgs {
		files := []string{pkg}
		if !strings.HasSuffix(pkg, ".go") {
			var err error
			if files, err = goFiles(root, pkg); err != nil {
				return nil, err
			}
		}
		for _, rel := range files {
			fset, f, err := parse(root, rel)
			if err != nil {
				return nil, err
			}
			if skip, err := noMutate(fset, f); err != nil || skip {
				if err != nil {
					return nil, err
				}
				continue
			}
			for i, s := range sites(fset, f) {
				p := fset.Position(s.pos)
				out = append(out, Mutant{File: rel, Line: p.Line, Col: p.Column, Op: s.op, Index: i, What: s.what, Func: funcAt(f, s.pos)})
			}
		}
	}
	return out, nil
}

// Apply returns m's file with m applied, formatted.
func Apply(root string, m Mutant) ([]byte, error) {
	fset, f, err := parse(root, m.File)
	if err != nil {
		return nil, err
	}
	ss := sites(fset, f)
	if m.Index >= len(ss) {
		return nil, fmt.Errorf("mutate: %s has %d sites, not %d: the file changed since the list", m.File, len(ss), m.Index+1)
	}
	s := ss[m.Index]
	if p := fset.Position(s.pos); s.op != m.Op || p.Line != m.Line || p.Column != m.Col {
		return nil, fmt.Errorf("mutate: site %d of %s is %s at %d:%d, not %s at %d:%d: the file changed since the list",
			m.Index, m.File, s.op, p.Line, p.Column, m.Op, m.Line, m.Col)
	}
	s.apply()
	var b bytes.Buffer
	if err := format.Node(&b, fset, f); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Find names the mutant of file, in function fn, with operator op at the
// code what (as -list prints them), the nth such (from 1): a name that
// edits elsewhere in the file leave standing. It fails if there is none.
func Find(root, file, fn string, op Op, what string, nth int) (Mutant, error) {
	ms, err := List(root, []string{file})
	if err != nil {
		return Mutant{}, err
	}
	k := 0
	for _, m := range ms {
		if m.File == file && m.Func == fn && m.Op == op && m.What == what {
			if k++; k == nth {
				return m, nil
			}
		}
	}
	return Mutant{}, fmt.Errorf("no %s mutant #%d at %q in %s's %s", op, nth, what, file, fn)
}
