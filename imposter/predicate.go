package imposter

import (
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A predicate decides whether a stub matches a request. Its semantics are
// mountebank's (src/models/predicates.js), which users' suites depend on
// in their corners, so this file follows that logic step for step:
//
//   - Both sides are normalized: keys lower-cased unless keyCaseSensitive
//     (which defaults to caseSensitive), string values lower-cased unless
//     caseSensitive, the except pattern removed from string values, arrays
//     sorted. The request side then applies the jsonpath or xpath selector.
//   - A request field that is a string but compared to an object is
//     parsed as JSON (bodies), with the same transforms.
//   - Objects match as subsets: every expected key must be satisfied; an
//     expected scalar against an array of actual values needs one match;
//     an expected array against an actual array needs every expected
//     value matched by some actual value.
//   - deepEquals turns every value into a string and compares canonical
//     JSON (sorted keys), so extra keys fail it.
//
// A predicate is compiled once, when its stub is created: the expected
// side normalized, regexes and selectors compiled. Evaluating it builds
// only the request fields it names.

// Predicate is a compiled predicate.
type Predicate struct {
	op       string
	expected any     // the normalized operand (an *Object for field operators)
	general  *Object // expected, less what Matches tests directly; see generalPart
	params
	subs []*Predicate // not (one), or, and
	src  string       // inject: the function
}

type params struct {
	caseSensitive bool // string values keep their case
	lowerKeys     bool // keys are lower-cased
	except        *regexp.Regexp
	jsonpath      *JSONPath
	xpath         *XPath
}

// operators are the predicate operators, in mountebank's lookup order: a
// predicate object names exactly one.
var operators = []string{"equals", "deepEquals", "contains", "startsWith", "endsWith", "matches", "exists", "not", "or", "and", "inject"}

// predicateOperator is the operator a predicate object names ("" for
// none).
func predicateOperator(o *Object) string {
	for _, name := range operators {
		if _, ok := o.Get(name); ok {
			return name
		}
	}
	return ""
}

// CompilePredicate compiles one predicate object.
func CompilePredicate(v any) (*Predicate, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, badData("each predicate must be an object", v)
	}
	op := predicateOperator(o)
	switch op {
	case "":
		return nil, badData("missing predicate", v)
	case "inject":
		src, ok := o.Get("inject")
		s, isStr := src.(string)
		if !ok || !isStr {
			return nil, badData("inject predicate must be a string, representing a JavaScript function", v)
		}
		return &Predicate{op: op, src: s}, nil
	}
	operand, _ := o.Get(op)
	p := &Predicate{op: op}
	switch op {
	case "not":
		sub, err := CompilePredicate(operand)
		if err != nil {
			return nil, err
		}
		p.subs = []*Predicate{sub}
		return p, nil
	case "or", "and":
		list, ok := operand.([]any)
		if !ok {
			return nil, badData(op+" predicate must be an array of predicates", v)
		}
		for _, x := range list {
			sub, err := CompilePredicate(x)
			if err != nil {
				return nil, err
			}
			p.subs = append(p.subs, sub)
		}
		return p, nil
	}
	if _, ok := operand.(*Object); !ok {
		return nil, badData(op+" predicate must be an object naming request fields", v)
	}
	var err error
	if p.params, err = compileParams(o, op); err != nil {
		return nil, err
	}
	switch op {
	case "matches":
		// Expected regexes keep their case (\W is not \w) and their
		// except; keys follow caseSensitive.
		p.expected, err = compileRegexes(lowerKeys(Clone(operand), p.lowerKeys), !p.lowerKeys)
		if err != nil {
			return nil, err
		}
	case "deepEquals":
		p.expected = p.normalize(forceStrings(operand))
	default:
		p.expected = p.normalize(Clone(operand))
	}
	if op != "deepEquals" {
		p.general = p.generalPart()
	}
	return p, nil
}

func compileParams(o *Object, op string) (params, error) {
	var pr params
	cs := false
	if v, ok := o.Get("caseSensitive"); ok {
		cs = truthy(v)
	}
	kcs := cs // keyCaseSensitive defaults to caseSensitive
	if v, ok := o.Get("keyCaseSensitive"); ok {
		kcs = truthy(v)
	}
	if op == "matches" {
		// Values keep their case (the regex carries the i flag instead);
		// keys follow caseSensitive alone.
		kcs, cs = cs, true
	}
	pr.caseSensitive = cs
	// Keys are lower-cased when keyCaseSensitive is false or when values
	// are (mountebank's keyCaseSensitive cannot keep keys' case alone).
	pr.lowerKeys = !cs || !kcs
	if v, ok := o.Get("except"); ok && truthy(v) {
		s, ok := v.(string)
		if !ok {
			return pr, badData("except must be a string (a regular expression)", o)
		}
		re, err := compileJSRegex(s, !cs)
		if err != nil {
			return pr, dryRunError(CodeBadData, fmt.Sprintf("invalid except regular expression %q: %v", s, err))
		}
		pr.except = re
	}
	if v, ok := o.Get("jsonpath"); ok {
		sel, err := selectorOf(v, "jsonpath", o)
		if err != nil {
			return pr, err
		}
		if pr.jsonpath, err = compileJSONPathParam(sel, !kcs, "jsonpath predicate", o); err != nil {
			return pr, err
		}
	}
	if v, ok := o.Get("xpath"); ok {
		sel, err := selectorOf(v, "xpath", o)
		if err != nil {
			return pr, err
		}
		// The XML is lower-cased with everything else unless
		// caseSensitive, so the selector and namespaces are too.
		ns, _ := v.(*Object).Get("ns")
		if pr.xpath, err = compileXPathParam(sel, ns, !pr.caseSensitive, "xpath predicate", o); err != nil {
			return pr, err
		}
	}
	return pr, nil
}

// compileJSONPathParam compiles a jsonpath parameter's selector,
// lower-cased when the document's keys are.
func compileJSONPathParam(sel string, lower bool, what string, src any) (*JSONPath, error) {
	if lower {
		sel = strings.ToLower(sel)
	}
	p, err := CompileJSONPath(sel)
	if err != nil {
		return nil, badData(fmt.Sprintf("malformed %s selector %q: %v", what, sel, err), src)
	}
	return p, nil
}

// compileXPathParam compiles an xpath parameter's selector with its
// namespaces (ns: an object of prefix to URI, or absent), both lower-cased
// when the document is.
func compileXPathParam(sel string, ns any, lower bool, what string, src any) (*XPath, error) {
	uris := map[string]string{}
	if ns != nil {
		nso, ok := ns.(*Object)
		if !ok {
			return nil, badData(what+": ns must be an object of prefix to namespace URI", src)
		}
		for i := range nso.Len() {
			k, u := nso.At(i)
			us, ok := u.(string)
			if !ok {
				return nil, badData(what+": ns must be an object of prefix to namespace URI", src)
			}
			if lower {
				us = strings.ToLower(us)
			}
			uris[k] = us
		}
	}
	if lower {
		sel = strings.ToLower(sel)
	}
	x, err := CompileXPath(sel, uris)
	if err != nil {
		return nil, badData(fmt.Sprintf("malformed %s selector %q: %v", what, sel, err), src)
	}
	return x, nil
}

func selectorOf(v any, name string, src any) (string, error) {
	o, ok := v.(*Object)
	if !ok {
		return "", badData(name+" must be an object with a selector", src)
	}
	s, _ := o.Get("selector")
	sel, ok := s.(string)
	if !ok || sel == "" {
		return "", badData(name+" must be an object with a selector", src)
	}
	return sel, nil
}

// compileRegexes replaces every string (or number) leaf of a matches
// operand with its compiled regex.
func compileRegexes(v any, caseSensitive bool) (any, error) {
	switch t := v.(type) {
	case *Object:
		for i := range t.vals {
			x, err := compileRegexes(t.vals[i], caseSensitive)
			if err != nil {
				return nil, err
			}
			t.vals[i] = x
		}
		return t, nil
	case []any:
		for i := range t {
			x, err := compileRegexes(t[i], caseSensitive)
			if err != nil {
				return nil, err
			}
			t[i] = x
		}
		return t, nil
	case nil:
		return t, nil
	}
	s := ToString(v)
	re, err := compileJSRegex(s, !caseSensitive)
	if err != nil {
		return nil, dryRunError(CodeBadData, fmt.Sprintf("invalid regular expression %q in matches predicate: %v", s, err))
	}
	return newJSRegex(re, s, !caseSensitive), nil
}

// jsRegex is a compiled matches regex. When the pattern starts with ^
// and an ASCII literal, a case-insensitive match checks that prefix
// first: Go's regexp cannot use a literal prefix to skip work under (?i),
// and a stub set of many such patterns (one per path) would otherwise run
// every one of them in full.
type jsRegex struct {
	re     *regexp.Regexp
	prefix string // "" when there is no anchored ASCII literal prefix
}

func newJSRegex(re *regexp.Regexp, src string, ignoreCase bool) *jsRegex {
	j := &jsRegex{re: re}
	if !ignoreCase {
		return j // the regexp engine uses the literal prefix itself
	}
	tree, err := syntax.Parse(src, syntax.Perl)
	if err != nil || tree.Op != syntax.OpConcat || len(tree.Sub) < 2 || tree.Sub[0].Op != syntax.OpBeginText || tree.Sub[1].Op != syntax.OpLiteral {
		return j
	}
	lit := string(tree.Sub[1].Rune)
	for i := 0; i < len(lit); i++ {
		if lit[i] >= utf8.RuneSelf {
			return j // non-ASCII case folding may change lengths
		}
	}
	j.prefix = lit
	return j
}

func (j *jsRegex) match(s string) bool {
	if j.prefix != "" && (len(s) < len(j.prefix) || !strings.EqualFold(s[:len(j.prefix)], j.prefix)) {
		return false
	}
	return j.re.MatchString(s)
}

// compileJSRegex compiles a JavaScript regular expression source. Go's
// RE2 syntax covers what predicates use; lookarounds and backreferences
// are refused here, at creation, rather than failing per request, and so
// is a pattern whose program is past MaxRegexInsts (before compiling it).
func compileJSRegex(src string, ignoreCase bool) (*regexp.Regexp, error) {
	if ignoreCase {
		src = "(?i)" + src
	}
	if err := checkRegexSize(src); err != nil {
		return nil, err
	}
	return regexp.Compile(src)
}

func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case float64:
		return t != 0
	case string:
		return t != ""
	}
	return true
}

// --- normalizing

// normalize transforms the expected side: keys, strings (case, except),
// arrays sorted.
func (p *Predicate) normalize(v any) any {
	switch t := v.(type) {
	case *Object:
		out := NewObjectCap(len(t.keys))
		for i, k := range t.keys {
			if p.lowerKeys {
				k = strings.ToLower(k)
			}
			out.Set(k, p.normalize(t.vals[i]))
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = p.normalize(x)
		}
		sortValues(out)
		return out
	case string:
		return p.transformString(t)
	}
	return v
}

func (p *Predicate) transformString(s string) string {
	if !p.caseSensitive {
		s = strings.ToLower(s)
	}
	if p.except != nil {
		s = p.except.ReplaceAllLiteralString(s, "")
	}
	return s
}

// actual normalizes one request field: like the expected side, then the
// selector on each string. It reports false for a value the selector
// found nothing in (undefined), and for one whose selection stopped at its
// work budget, which it records in ev.
func (p *Predicate) actual(v any, force bool, ev *evaluation) (any, bool) {
	if ev.err != nil {
		return nil, false // stopped: select nothing more
	}
	switch t := v.(type) {
	case *Object:
		out := NewObjectCap(len(t.keys))
		for i, k := range t.keys {
			if p.lowerKeys {
				k = strings.ToLower(k)
			}
			if x, ok := p.actual(t.vals[i], force, ev); ok {
				out.Set(k, x)
			}
		}
		return out, true
	case []any:
		out := make([]any, 0, len(t))
		for _, x := range t {
			if y, ok := p.actual(x, force, ev); ok {
				out = append(out, y)
			}
		}
		sortValues(out)
		return out, true
	case string:
		s := p.transformString(t)
		switch {
		case p.jsonpath != nil:
			doc := p.tryJSON(s)
			if force {
				doc = forceStrings(doc)
			}
			found, err := p.jsonpath.selectIn(toPlain(doc), ev.budget)
			if err != nil {
				ev.fail(err)
				return nil, false
			}
			return selected(anySlice(found))
		case p.xpath != nil:
			found, err := p.xpath.selectIn(s, ev.budget)
			if err != nil {
				ev.fail(err)
				return nil, false
			}
			return selected(stringsAsAny(found))
		}
		return s, true
	}
	return v, true
}

// selected is mountebank's select: one match is the value, several are
// a sorted array, none is undefined.
func selected(vs []any) (any, bool) {
	switch len(vs) {
	case 0:
		return nil, false
	case 1:
		return vs[0], true
	}
	sortValues(vs)
	return vs, true
}

func stringsAsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// tryJSON parses a string as JSON with the predicate's key and value
// transforms (but no array sorting: indexed selectors must see document
// order), or returns it unchanged.
func (p *Predicate) tryJSON(s string) any {
	if len(s) == 0 {
		return s
	}
	switch s[0] {
	case '{', '[', '"', 't', 'f', 'n', '-', ' ', '\t', '\n', '\r', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
	default:
		return s
	}
	v, err := Parse(s)
	if err != nil {
		return s
	}
	return p.jsonTransform(v)
}

func (p *Predicate) jsonTransform(v any) any {
	switch t := v.(type) {
	case *Object:
		for i := range t.vals {
			t.vals[i] = p.jsonTransform(t.vals[i])
		}
		if p.lowerKeys {
			t.renameKeys(strings.ToLower) // keys that became the same merge
		}
		return t
	case []any:
		for i := range t {
			t[i] = p.jsonTransform(t[i])
		}
		return t
	case string:
		return p.transformString(t)
	}
	return v
}

// --- evaluating

// evaluation is one evaluation of a predicate: the selectors' work budget
// (shared by the predicates of the stubs one request is matched against),
// and the error that stopped it, if any.
type evaluation struct {
	budget *selBudget
	err    error
}

func (ev *evaluation) fail(err error) {
	if ev.err == nil {
		ev.err = err
	}
}

// Matches evaluates the predicate against a request. A predicate whose
// evaluation stopped (Evaluate's error) does not match.
func (p *Predicate) Matches(r *Request) bool {
	ok, _ := p.Evaluate(r)
	return ok
}

// Evaluate evaluates the predicate against a request, and returns the
// error that stopped it: a jsonpath or xpath selector past its work budget
// (ErrSelectorBudget), anywhere in it, even under a not. The predicate
// then does not match, nor does its stub (mountebank has no such bound,
// and would answer after however long it took).
func (p *Predicate) Evaluate(r *Request) (bool, error) {
	return p.evaluateIn(r, newSelBudget())
}

// evaluateIn is Evaluate, its selectors working within budget b.
func (p *Predicate) evaluateIn(r *Request, b *selBudget) (bool, error) {
	ev := &evaluation{budget: b}
	ok := p.matches(r, ev)
	if ev.err != nil {
		return false, ev.err
	}
	return ok, nil
}

func (p *Predicate) matches(r *Request, ev *evaluation) bool {
	switch p.op {
	case "not":
		return !p.subs[0].matches(r, ev)
	case "or":
		for _, s := range p.subs {
			if s.matches(r, ev) {
				return true
			}
			if ev.err != nil {
				return false
			}
		}
		return false
	case "and":
		for _, s := range p.subs {
			if !s.matches(r, ev) {
				return false
			}
		}
		return true
	case "deepEquals":
		return p.deepEquals(r, ev)
	case "inject":
		return p.injected(r)
	}
	exp := p.expected.(*Object)
	var act *Object // the request fields that need the general path
	for i, f := range exp.keys {
		want := exp.vals[i]
		if s, ok := r.stringField(f); ok && p.jsonpath == nil && p.xpath == nil && isScalar(want) {
			// The common case, without building anything: a string field
			// against one expected value.
			if !p.leafString(want, p.transformString(s)) {
				return false
			}
			continue
		}
		if act == nil {
			act = &Object{}
		}
		if v, ok := r.field(f); ok {
			if x, ok := p.actual(v, false, ev); ok {
				act.Set(f, x)
			}
			if ev.err != nil {
				return false
			}
		}
	}
	if act == nil {
		return true
	}
	return p.satisfied(p.general, act)
}

// generalPart is the expected object without the keys Matches tests
// directly. It is computed when the predicate is compiled: a compiled
// predicate is read by any number of requests at once, and writes
// nothing.
func (p *Predicate) generalPart() *Object {
	exp := p.expected.(*Object)
	general := &Object{}
	for i, f := range exp.keys {
		if _, isString := (&Request{}).stringField(f); isString && p.jsonpath == nil && p.xpath == nil && isScalar(exp.vals[i]) {
			continue
		}
		general.Set(f, exp.vals[i])
	}
	return general
}

func isScalar(v any) bool {
	switch v.(type) {
	case *Object, []any:
		return false
	}
	return true
}

func (p *Predicate) deepEquals(r *Request, ev *evaluation) bool {
	exp := p.expected.(*Object)
	for i, f := range exp.keys {
		want := exp.vals[i]
		var got any
		v, ok := r.field(f)
		if ok {
			got, ok = p.actual(forceStrings(v), true, ev)
		}
		if ev.err != nil {
			return false
		}
		if _, isObj := want.(*Object); isObj && ok {
			if s, isStr := got.(string); isStr {
				got = p.normalize(forceStrings(p.tryJSON(s)))
			}
		}
		if !ok {
			return false // stringify(undefined) equals nothing the expected side can hold
		}
		if string(stableJSON(want, nil)) != string(stableJSON(got, nil)) {
			return false
		}
	}
	return true
}

func (p *Predicate) test(expected, actual any, defined bool) bool {
	if !defined {
		actual = ""
	}
	switch expected.(type) {
	case *Object, []any:
		return p.satisfied(expected, actual)
	}
	return p.leaf(expected, actual)
}

// leaf compares one expected value with one actual value, as a string
// (JavaScript's String(actual); equals keeps null apart from "null").
func (p *Predicate) leaf(expected, actual any) bool {
	if s, ok := actual.(string); ok {
		return p.leafString(expected, s)
	}
	if p.op == "equals" {
		return p.leafString(expected, jsString(actual))
	}
	return p.leafString(expected, ToString(actual))
}

// leafString is leaf for a string actual value, without boxing it.
func (p *Predicate) leafString(expected any, actual string) bool {
	switch p.op {
	case "equals":
		return jsString(expected) == actual
	case "contains":
		return strings.Contains(actual, ToString(expected))
	case "startsWith":
		return strings.HasPrefix(actual, ToString(expected))
	case "endsWith":
		return strings.HasSuffix(actual, ToString(expected))
	case "matches":
		re, ok := expected.(*jsRegex)
		return ok && re.match(actual)
	case "exists":
		if truthy(expected) {
			return actual != ""
		}
		return actual == ""
	}
	return false
}

// jsString is toString for equals: null stays distinct from "null".
func jsString(v any) string {
	if v == nil {
		return "\x00null"
	}
	return ToString(v)
}

// satisfied is mountebank's predicateSatisfied.
func (p *Predicate) satisfied(expected, actual any) bool {
	if !truthy(actual) {
		return false
	}
	if s, ok := actual.(string); ok {
		actual = p.tryJSON(s)
	}
	return eachKey(expected, func(key string, ev any) bool {
		av, def := member(actual, key)
		ea, expIsArr := ev.([]any)
		aa, actIsArr := av.([]any)
		switch {
		case expIsArr && actIsArr:
			for _, e := range ea {
				if !slices.ContainsFunc(aa, func(a any) bool { return p.test(e, a, true) }) {
					return false
				}
			}
			return true
		case actIsArr:
			if p.op == "exists" && truthy(ev) {
				return true
			}
			return slices.ContainsFunc(aa, func(a any) bool { return p.test(ev, a, true) })
		case !def && !expIsArr:
			if whole, ok := actual.([]any); ok {
				return slices.ContainsFunc(whole, func(a any) bool { return p.test(expected, a, true) })
			}
		}
		switch ev.(type) {
		case *Object, []any:
			return p.satisfied(ev, av)
		}
		return p.test(ev, av, def)
	})
}

// eachKey runs fn over an object's keys or an array's indexes, as
// Object.keys enumerates them, while fn says true.
func eachKey(v any, fn func(string, any) bool) bool {
	switch t := v.(type) {
	case *Object:
		for _, i := range enumerationOrder(t) {
			if !fn(t.keys[i], t.vals[i]) {
				return false
			}
		}
	case []any:
		for i, x := range t {
			if !fn(strconv.Itoa(i), x) {
				return false
			}
		}
	}
	return true
}

// member is actual[key] for an object or an array.
func member(v any, key string) (any, bool) {
	switch t := v.(type) {
	case *Object:
		return t.Get(key)
	case []any:
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(t) {
			return t[i], true
		}
	}
	return nil, false
}

// forceStrings turns every scalar into its string, as deepEquals does.
func forceStrings(v any) any {
	switch t := v.(type) {
	case *Object:
		vals := make([]any, len(t.vals))
		for i, x := range t.vals {
			vals[i] = forceStrings(x)
		}
		return objectOf(slices.Clone(t.keys), vals)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = forceStrings(x)
		}
		return out
	case string:
		return t
	}
	return ToString(v)
}

func lowerKeys(v any, lower bool) any {
	if !lower {
		return v
	}
	switch t := v.(type) {
	case *Object:
		for i := range t.vals {
			t.vals[i] = lowerKeys(t.vals[i], lower)
		}
		t.renameKeys(strings.ToLower) // keys that became the same merge
		return t
	case []any:
		for i := range t {
			t[i] = lowerKeys(t[i], lower)
		}
	}
	return v
}

// sortValues sorts as mountebank's sortObjects does: objects by their
// canonical JSON, everything else by JavaScript's < (strings by UTF-16
// code units, numbers numerically).
func sortValues(vs []any) {
	slices.SortStableFunc(vs, func(a, b any) int {
		_, ao := a.(*Object)
		_, aa := a.([]any)
		_, bo := b.(*Object)
		_, ba := b.([]any)
		if (ao || aa) && (bo || ba) {
			return strings.Compare(string(stableJSON(a, nil)), string(stableJSON(b, nil)))
		}
		if af, ok := a.(float64); ok {
			if bf, ok := b.(float64); ok {
				switch {
				case af < bf:
					return -1
				case af > bf:
					return 1
				}
				return 0
			}
		}
		as, bs := ToString(a), ToString(b)
		if as < bs {
			return -1
		}
		return 1
	})
}

// stableJSON is compact JSON with every object's keys sorted, as
// safe-stable-stringify writes it.
func stableJSON(v any, b []byte) []byte {
	switch t := v.(type) {
	case *Object:
		idx := make([]int, len(t.keys))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(i, j int) int { return strings.Compare(t.keys[i], t.keys[j]) })
		b = append(b, '{')
		for n, i := range idx {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(b, t.keys[i])
			b = append(b, ':')
			b = stableJSON(t.vals[i], b)
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, x := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = stableJSON(x, b)
		}
		return append(b, ']')
	}
	return append(b, Marshal(v, 0)...)
}

// toPlain converts a value for the JSONPath library, which walks the
// types encoding/json produces.
func toPlain(v any) any {
	switch t := v.(type) {
	case *Object:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			m[k] = toPlain(t.vals[i])
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = toPlain(x)
		}
		return out
	}
	return v
}

// fromPlain converts back what the JSONPath library selected.
func fromPlain(v any) any {
	switch t := v.(type) {
	case map[string]any:
		o := &Object{}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			o.Set(k, fromPlain(t[k]))
		}
		return o
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = fromPlain(x)
		}
		return out
	}
	return v
}

func anySlice(vs []any) []any {
	for i, v := range vs {
		vs[i] = fromPlain(v)
	}
	return vs
}
