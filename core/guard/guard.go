// Package guard checks Go source against the one rule of core/: a node's
// code is a pure, single-threaded state machine. It never starts a
// goroutine, never blocks in a select, never reads the wall clock, never
// reaches the operating system, the network or shared-memory
// synchronisation, never draws randomness it was not handed, and never lets
// Go's randomized map iteration order reach an output.
//
// The rule is what makes a simulated run a function of its seed: the
// simulator replays a seed and compares trace hashes, and one stray
// time.Now or unsorted map range makes two runs of the same seed diverge
// for reasons no fault schedule explains. No runtime assertion can catch
// such a line, and a rule nobody checks decays, so core/guard_test.go runs
// Check over the whole of core/ on every `go test`.
//
// The package lives under core/ and is itself checked, so it keeps to the
// rule: it reads source through an fs.FS handed in by the caller and never
// imports os.
package guard

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Rule names. They appear in every report and in tests; keep them stable.
const (
	// RuleGoroutine: a go statement. Concurrency belongs to the drivers
	// (sim's single event loop, realnet's mailbox goroutine), never to a node.
	RuleGoroutine = "no-goroutine"
	// RuleSelect: a select statement, which waits on channels; a node
	// never waits.
	RuleSelect = "no-select"
	// RuleWallClock: a use of a time function that reads the wall clock or
	// waits on it. Time enters through clock.Clock or as an argument.
	RuleWallClock = "no-wall-clock"
	// RuleImport: an import the policy does not allow (see Policy): the
	// OS, the network, unseeded randomness, shared-memory
	// synchronisation, the simulator, a checker, or anything else not on
	// core's allow list.
	RuleImport = "import-not-allowed"
	// RuleMapOrder: a range over a map, or over a maps.Keys/Values/All
	// iterator, whose random order may reach an output.
	RuleMapOrder = "map-order"
	// RuleBadException: an exception comment with no reason, one that
	// excuses nothing, or an unknown //fenceline: directive.
	RuleBadException = "bad-exception"
)

// ExceptionDirective marks a map range whose order provably cannot reach an
// output. It goes on the line of the for statement or on the line directly
// above it, followed by the reason, for example
//
//	//fenceline:unordered order does not reach output: summing counts
//
// The reason is mandatory so a reviewer can check the claim.
const ExceptionDirective = "//fenceline:unordered"

// directivePrefix is the namespace of fenceline directives; a comment in it
// that is not a known directive is reported, so a misspelt exception fails
// loudly instead of silently excusing nothing.
const directivePrefix = "//fenceline:"

// NoMutateDirective, in a file's header with a reason, keeps the file out
// of the mutation campaign (cmd/mutate): code no promise rests on, such as
// a test double other packages' tests share.
const NoMutateDirective = "//fenceline:nomutate"

// Violation is one breach of the rule.
type Violation struct {
	File   string // slash-separated path inside the fs.FS given to Check
	Line   int    // 1-based
	Rule   string // one of the Rule constants
	Detail string // what was found, for a person
}

// String formats v as "file:line: rule: detail", the form editors and
// `go vet` use, so a failing test line is clickable.
func (v Violation) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", v.File, v.Line, v.Rule, v.Detail)
}

// wallClock holds the package-level functions of "time" that read the wall
// clock or wait on it. Durations, time.Time arithmetic and formatting stay
// allowed: they are pure.
var wallClock = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "AfterFunc": true,
	"NewTimer": true, "NewTicker": true, "Tick": true, "Since": true,
	"Until": true,
}

// sortFuncs are the functions that, called on the slice a collect loop
// filled, make the loop's order irrelevant.
var sortFuncs = map[string]map[string]bool{
	"sort":   {"Strings": true, "Ints": true, "Float64s": true, "Slice": true, "SliceStable": true, "Sort": true, "Stable": true},
	"slices": {"Sort": true, "SortFunc": true, "SortStableFunc": true},
}

// randomIterators are the maps functions whose iterators yield in map
// order. slices.Sorted(maps.Keys(m)) is fine: the range is then over a
// sorted slice, not over the iterator.
var randomIterators = map[string]bool{"Keys": true, "Values": true, "All": true}

// Check walks root in fsys recursively and reports every violation in the
// non-test Go files it finds, sorted by file and line.
//
// It skips what the go tool skips: _test.go files (tests may use the real
// clock and goroutines), and directories named testdata or starting with
// "." or "_" below root.
//
// Finding map ranges needs types, so each package is type-checked from
// source; imp resolves its imports (nil means importer.Default(), which
// finds only the standard library). Type errors do not stop the check: a
// range whose operand's type is unknown is reported as map-order, so a
// guard that cannot see a type fails closed instead of passing silently.
// Check returns an error if a file does not parse or root holds no Go files
// at all (a mistyped root must not look like a clean tree).
func Check(fsys fs.FS, root string, imp types.Importer, policy Policy) ([]Violation, error) {
	if imp == nil {
		imp = importer.Default()
	}
	byDir := map[string][]string{}
	var dirs []string
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		dir := path.Dir(p)
		if byDir[dir] == nil {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("guard: walking %s: %w", root, err)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("guard: no Go files under %s", root)
	}

	fset := token.NewFileSet()
	var out []Violation
	for _, dir := range dirs { // WalkDir order: lexical, so deterministic
		vs, err := checkDir(fset, fsys, dir, byDir[dir], imp, policy)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(
			strings.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			strings.Compare(a.Rule, b.Rule),
			strings.Compare(a.Detail, b.Detail),
		)
	})
	return out, nil
}

// checkDir parses the files of one directory, type-checks them per package
// clause (a directory may hold a stray package main behind a build tag),
// and checks each file.
func checkDir(fset *token.FileSet, fsys fs.FS, dir string, names []string, imp types.Importer, policy Policy) ([]Violation, error) {
	var pkgNames []string
	byPkg := map[string][]*ast.File{}
	for _, name := range names {
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("guard: %w", err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("guard: %w", err)
		}
		pkg := f.Name.Name
		if byPkg[pkg] == nil {
			pkgNames = append(pkgNames, pkg)
		}
		byPkg[pkg] = append(byPkg[pkg], f)
	}

	var out []Violation
	for _, pkg := range pkgNames {
		files := byPkg[pkg]
		info := &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{},
			Defs:  map[*ast.Ident]types.Object{},
			Uses:  map[*ast.Ident]types.Object{},
		}
		var typeErr error
		conf := types.Config{
			Importer: imp,
			// Keep going past errors: a package that does not compile
			// still gets its syntactic checks, and its unknown types
			// fail closed (see Check).
			Error: func(err error) {
				if typeErr == nil {
					typeErr = err
				}
			},
		}
		// The error is the first one already kept by conf.Error.
		_, _ = conf.Check(dir, fset, files, info)
		for _, f := range files {
			c := &fileChecker{fset: fset, file: f, info: info, typeErr: typeErr, policy: policy}
			out = append(out, c.check()...)
		}
	}
	return out, nil
}

// exception is one //fenceline:unordered comment.
type exception struct {
	reason string
	used   bool // it excused a map range
}

// fileChecker checks one parsed and type-checked file.
type fileChecker struct {
	fset    *token.FileSet
	file    *ast.File
	info    *types.Info
	typeErr error // first type error of the package, if any
	policy  Policy

	exceptions map[int]*exception // by line
	out        []Violation
}

func (c *fileChecker) report(pos token.Pos, rule, format string, args ...any) {
	p := c.fset.Position(pos)
	c.out = append(c.out, Violation{File: p.Filename, Line: p.Line, Rule: rule, Detail: fmt.Sprintf(format, args...)})
}

func (c *fileChecker) check() []Violation {
	c.readDirectives()
	for _, spec := range c.file.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue // cannot happen in a file that parsed
		}
		if ok, why := c.policy.allowed(path.Dir(c.fset.Position(c.file.Pos()).Filename), p); !ok {
			c.report(spec.Pos(), RuleImport, "import of %q: %s", p, why)
		}
	}

	// stack holds the ancestors of the node being visited; the collect-
	// then-sort check needs the statement list around a range, and the
	// wall-clock check needs to know whether a reference is called.
	var stack []ast.Node
	ast.Inspect(c.file, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		c.visit(n, stack)
		stack = append(stack, n)
		return true
	})

	for _, line := range slices.Sorted(maps.Keys(c.exceptions)) {
		e := c.exceptions[line]
		switch {
		case e.reason == "":
			c.report(c.lineStart(line), RuleBadException, "%s needs a reason: say why the order cannot reach an output", ExceptionDirective)
		case !e.used:
			c.report(c.lineStart(line), RuleBadException, "%s excuses nothing: no map range on this line or the next", ExceptionDirective)
		}
	}
	return c.out
}

func (c *fileChecker) lineStart(line int) token.Pos {
	return c.fset.File(c.file.Pos()).LineStart(line)
}

// readDirectives finds the exception comments, and reports fenceline
// directives it does not know.
func (c *fileChecker) readDirectives() {
	c.exceptions = map[int]*exception{}
	for _, group := range c.file.Comments {
		for _, com := range group.List {
			if !strings.HasPrefix(com.Text, directivePrefix) {
				continue
			}
			name, reason := com.Text, ""
			if i := strings.IndexAny(com.Text, " \t"); i >= 0 {
				name, reason = com.Text[:i], com.Text[i:]
			}
			if name == NoMutateDirective {
				continue // cmd/mutate's: it checks the reason
			}
			if name != ExceptionDirective {
				c.report(com.Pos(), RuleBadException, "unknown directive %s", name)
				continue
			}
			line := c.fset.Position(com.Pos()).Line
			c.exceptions[line] = &exception{reason: strings.TrimSpace(reason)}
		}
	}
}

func (c *fileChecker) visit(n ast.Node, stack []ast.Node) {
	switch n := n.(type) {
	case *ast.GoStmt:
		c.report(n.Pos(), RuleGoroutine, "go statement; a node never starts a goroutine")
	case *ast.SelectStmt:
		c.report(n.Pos(), RuleSelect, "select statement; a node never waits on channels")
	case *ast.SelectorExpr:
		// time.Now, clk.Now under a renamed import, and f := time.Now all
		// come through here. Resolving the package name through the type
		// checker also ignores a local variable that happens to be called
		// time.
		id, ok := n.X.(*ast.Ident)
		if !ok {
			return
		}
		pn, ok := c.info.Uses[id].(*types.PkgName)
		if ok && pn.Imported().Path() == "time" && wallClock[n.Sel.Name] {
			c.report(n.Pos(), RuleWallClock, "%s time.%s", useKind(n, stack), n.Sel.Name)
		}
	case *ast.Ident:
		// A dot import of time makes Now() a bare identifier.
		if len(stack) > 0 {
			if sel, ok := stack[len(stack)-1].(*ast.SelectorExpr); ok && sel.Sel == n {
				return // handled as a selector
			}
		}
		fn, ok := c.info.Uses[n].(*types.Func)
		if ok && fn.Pkg() != nil && fn.Pkg().Path() == "time" && fn.Signature().Recv() == nil && wallClock[fn.Name()] {
			c.report(n.Pos(), RuleWallClock, "%s time.%s", useKind(n, stack), fn.Name())
		}
	case *ast.RangeStmt:
		c.checkRange(n, stack)
	}
}

// useKind says whether expr, whose ancestors are stack, is called or only
// referenced (passed or stored as a function value, which is just as bad).
func useKind(expr ast.Expr, stack []ast.Node) string {
	if len(stack) > 0 {
		if call, ok := stack[len(stack)-1].(*ast.CallExpr); ok && call.Fun == expr {
			return "call to"
		}
	}
	return "reference to"
}

// checkRange reports a range whose iteration order is random, unless the
// body cannot observe the order, the loop is a collect-then-sort, or an
// exception with a reason excuses it.
func (c *fileChecker) checkRange(r *ast.RangeStmt, stack []ast.Node) {
	var detail string
	if name := c.randomIterator(r.X); name != "" {
		detail = fmt.Sprintf("range over %s: it yields in map order; range over slices.Sorted(%s(...)) instead", name, name)
	} else {
		t := c.info.TypeOf(r.X)
		switch {
		case t == nil || t == types.Typ[types.Invalid]:
			detail = fmt.Sprintf("cannot tell whether %s is a map: its type is unknown (first type error of the package: %v)", types.ExprString(r.X), c.typeErr)
		case isMap(t):
			detail = fmt.Sprintf("range over map %s (%s): sort the keys first", types.ExprString(r.X), types.TypeString(t, byName))
		default:
			return
		}
	}
	if isBlank(r.Key) && isBlank(r.Value) {
		return // every iteration is the same; order is unobservable
	}
	if c.collectThenSort(r, stack) {
		return
	}
	line := c.fset.Position(r.For).Line
	excused := false
	for _, l := range []int{line, line - 1} {
		if e := c.exceptions[l]; e != nil && e.reason != "" {
			e.used = true
			excused = true
		}
	}
	if !excused {
		c.report(r.For, RuleMapOrder, "%s", detail)
	}
}

// byName qualifies a type by its package name, as the source would: kv.Table,
// not github.com/fenceline/fenceline/core/kv.Table.
func byName(p *types.Package) string { return p.Name() }

// randomIterator returns "maps.Keys", "maps.Values" or "maps.All" if x is a
// call to one of them, whatever name the maps package was imported under.
func (c *fileChecker) randomIterator(x ast.Expr) string {
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return ""
	}
	fn := c.calledFunc(call)
	if fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "maps" && randomIterators[fn.Name()] {
		return "maps." + fn.Name()
	}
	return ""
}

// calledFunc returns the package-level function call calls, or nil.
func (c *fileChecker) calledFunc(call *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch fun := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = fun
	case *ast.SelectorExpr:
		id = fun.Sel
	case *ast.IndexExpr: // explicit instantiation: maps.Keys[M](m)
		return c.calledFunc(&ast.CallExpr{Fun: fun.X})
	case *ast.IndexListExpr:
		return c.calledFunc(&ast.CallExpr{Fun: fun.X})
	default:
		return nil
	}
	fn, ok := c.info.Uses[id].(*types.Func)
	if !ok || fn.Signature().Recv() != nil {
		return nil
	}
	return fn
}

// isMap reports whether ranging over a value of type t iterates a map. A
// type parameter counts if any type in its type set is a map.
func isMap(t types.Type) bool {
	if tp, ok := types.Unalias(t).(*types.TypeParam); ok {
		return typeSetHasMap(tp.Constraint())
	}
	_, ok := t.Underlying().(*types.Map)
	return ok
}

func typeSetHasMap(constraint types.Type) bool {
	iface, ok := constraint.Underlying().(*types.Interface)
	if !ok {
		return isMap(constraint)
	}
	for i := range iface.NumEmbeddeds() {
		switch e := iface.EmbeddedType(i).(type) {
		case *types.Union:
			for j := range e.Len() {
				if typeSetHasMap(e.Term(j).Type()) {
					return true
				}
			}
		default:
			if typeSetHasMap(e) {
				return true
			}
		}
	}
	return false
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return e == nil || ok && id.Name == "_"
}

// collectThenSort recognises
//
//	for k := range m {
//		keys = append(keys, k)
//	}
//	...
//	sort.Strings(keys)
//
// where the body is that single append of the key or the value, and a later
// statement of the same block sorts the same slice variable. Matching is by
// object, not by name, so a shadowed keys does not pass.
//
// The append may sit alone inside an if with no init and no else, when the
// condition cannot observe the order (see orderFree): a filter picks the
// same elements whatever order they come in, so after the sort the slice is
// the same.
func (c *fileChecker) collectThenSort(r *ast.RangeStmt, stack []ast.Node) bool {
	if len(r.Body.List) != 1 {
		return false
	}
	stmt := r.Body.List[0]
	var cond ast.Expr
	if ifs, ok := stmt.(*ast.IfStmt); ok {
		if ifs.Init != nil || ifs.Else != nil || len(ifs.Body.List) != 1 {
			return false
		}
		stmt, cond = ifs.Body.List[0], ifs.Cond
	}
	slice := c.appendedSlice(stmt, r)
	if slice == nil || cond != nil && !c.orderFree(cond, slice) {
		return false
	}

	list, i := enclosingList(r, stack)
	if i < 0 {
		return false
	}
	for _, s := range list[i+1:] {
		if c.sorts(s, slice) {
			return true
		}
	}
	return false
}

// appendedSlice returns the variable s if stmt is s = append(s, x) with x
// the key or value of r, and nil otherwise.
func (c *fileChecker) appendedSlice(stmt ast.Stmt, r *ast.RangeStmt) types.Object {
	as, ok := stmt.(*ast.AssignStmt)
	if !ok || as.Tok != token.ASSIGN || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
		return nil
	}
	dst, ok := as.Lhs[0].(*ast.Ident)
	if !ok {
		return nil
	}
	slice := c.info.ObjectOf(dst)
	call, ok := as.Rhs[0].(*ast.CallExpr)
	if slice == nil || !ok || len(call.Args) != 2 || call.Ellipsis.IsValid() {
		return nil
	}
	if fun, ok := ast.Unparen(call.Fun).(*ast.Ident); !ok || c.info.Uses[fun] != types.Universe.Lookup("append") {
		return nil
	}
	if !c.isObject(call.Args[0], slice) {
		return nil
	}
	elem, ok := call.Args[1].(*ast.Ident)
	if !ok {
		return nil
	}
	if obj := c.info.ObjectOf(elem); obj == nil || obj != c.identObject(r.Key) && obj != c.identObject(r.Value) {
		return nil
	}
	return slice
}

// pureFuncPkgs are standard packages whose functions compute from their
// arguments alone, so a filter may call them (strings.HasPrefix). A call
// that is handed a function value is still refused: the function could
// have effects.
var pureFuncPkgs = map[string]bool{
	"bytes": true, "cmp": true, "math": true, "strconv": true,
	"strings": true, "unicode": true, "unicode/utf8": true,
}

// pureBuiltins are the builtins a filter may call.
var pureBuiltins = map[string]bool{"len": true, "cap": true, "min": true, "max": true}

// orderFree reports whether evaluating cond once per element, in map
// order, cannot change which elements are kept: it has no effects (no
// calls except conversions, pure builtins and pureFuncPkgs functions; no
// receives; no function literals) and does not read the slice being
// filled (if len(keys) < 10 would keep whichever ten came first).
func (c *fileChecker) orderFree(cond ast.Expr, slice types.Object) bool {
	free := true
	ast.Inspect(cond, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			free = false
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				free = false
			}
		case *ast.Ident:
			if c.info.Uses[n] == slice {
				free = false
			}
		case *ast.CallExpr:
			if !c.pureCall(n) {
				free = false
			}
		}
		return free
	})
	return free
}

func (c *fileChecker) pureCall(call *ast.CallExpr) bool {
	if c.info.Types[call.Fun].IsType() {
		return true // a conversion
	}
	if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
		if b, ok := c.info.Uses[id].(*types.Builtin); ok {
			return pureBuiltins[b.Name()]
		}
	}
	fn := c.calledFunc(call)
	if fn == nil || fn.Pkg() == nil || !pureFuncPkgs[fn.Pkg().Path()] {
		return false
	}
	for _, arg := range call.Args {
		if t := c.info.TypeOf(arg); t == nil {
			return false
		} else if _, isFunc := t.Underlying().(*types.Signature); isFunc {
			return false
		}
	}
	return true
}

// enclosingList returns the statement list holding r (or the labeled
// statement around it) and its index there; nil if there is none.
func enclosingList(r *ast.RangeStmt, stack []ast.Node) ([]ast.Stmt, int) {
	var stmt ast.Stmt = r
	for i := len(stack) - 1; i >= 0; i-- {
		var list []ast.Stmt
		switch p := stack[i].(type) {
		case *ast.LabeledStmt:
			stmt = p
			continue
		case *ast.BlockStmt:
			list = p.List
		case *ast.CaseClause:
			list = p.Body
		case *ast.CommClause:
			list = p.Body
		default:
			return nil, -1
		}
		return list, slices.Index(list, stmt)
	}
	return nil, -1
}

// sorts reports whether s is a call of a sort function on slice (or on a
// conversion of it, as in sort.Sort(sort.StringSlice(keys))).
func (c *fileChecker) sorts(s ast.Stmt, slice types.Object) bool {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok || len(call.Args) == 0 {
		return false
	}
	fn := c.calledFunc(call)
	if fn == nil || fn.Pkg() == nil || !sortFuncs[fn.Pkg().Path()][fn.Name()] {
		return false
	}
	arg := ast.Unparen(call.Args[0])
	if conv, ok := arg.(*ast.CallExpr); ok && len(conv.Args) == 1 && c.info.Types[conv.Fun].IsType() {
		arg = conv.Args[0]
	}
	return c.isObject(arg, slice)
}

// isObject reports whether e is an identifier denoting obj.
func (c *fileChecker) isObject(e ast.Expr, obj types.Object) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && c.info.ObjectOf(id) == obj
}

// identObject returns the object a range key or value identifier denotes,
// or nil.
func (c *fileChecker) identObject(e ast.Expr) types.Object {
	id, ok := e.(*ast.Ident)
	if !ok || id.Name == "_" {
		return nil
	}
	return c.info.ObjectOf(id)
}
