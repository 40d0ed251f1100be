package imposter

// Selectors: the jsonpath and xpath selectors of mountebank predicates
// (`"jsonpath": {"selector": ...}`, `"xpath": {"selector": ..., "ns": ...}`)
// and of the copy and lookup behaviors. mountebank 2.9 evaluates them with
// jsonpath-plus 10 and with the npm xpath and @xmldom/xmldom packages; here
// JSONPath is RFC 9535 (github.com/theory/jsonpath) with the jsonpath-plus
// spellings users write rewritten into it, and XPath 1.0 is
// github.com/antchfx/xpath over github.com/antchfx/xmlquery.
//
// Both are compiled once, when the imposter is created, and selected many
// times, once per request, by any number of requests at once (predicates
// are matched outside the imposter's lock). A JSONPath keeps no state
// between selections. The xpath library keeps iteration state inside a
// compiled expression, so each selection takes an XPath's expression for
// itself (and compiles another copy if a concurrent one has it).
//
// Every selection has a work budget (selbudget.go): past it, Select stops
// with an error wrapping ErrSelectorBudget.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// ErrBadSelector is wrapped by the error of a jsonpath or xpath selector
// that does not compile; the message names the selector.
var ErrBadSelector = errors.New("imposter: bad selector")

// JSONPath is a compiled JSONPath selector.
type JSONPath struct {
	src  string
	segs []*spec.Segment
	// filters are the queries inside each filter selector, which a
	// selection runs to charge their work to its budget (selFilter).
	filters map[*spec.FilterSelector]*selFilter
}

// CompileJSONPath compiles a JSONPath selector as mountebank users write it
// for jsonpath-plus. RFC 9535 syntax is accepted as is, and so are these
// jsonpath-plus spellings the RFC rejects:
//
//   - a selector without the leading $: "name" is "$.name";
//   - dot member names the RFC's shorthand does not allow: "$.user-id",
//     "$.0", "$.a.c d" are "$['user-id']", "$['0']", "$.a['c d']";
//   - a dot before a bracket: "$.['a']" is "$['a']";
//   - JavaScript's === and !== inside filters, which are == and !=.
//
// Filters in jsonpath-plus's parenthesised form, [?(@.price<10)], are RFC
// 9535 already. A selector that still does not parse is an error wrapping
// ErrBadSelector.
func CompileJSONPath(selector string) (*JSONPath, error) {
	p, err := jsonpath.Parse(selRewriteJSONPath(selector))
	if err != nil {
		return nil, fmt.Errorf("%w: jsonpath %q: %v", ErrBadSelector, selector, err)
	}
	jp := &JSONPath{src: selector, segs: p.Query().Segments(), filters: map[*spec.FilterSelector]*selFilter{}}
	selCompileFilters(jp.segs, jp.filters)
	return jp, nil
}

// String returns the selector as it was written.
func (p *JSONPath) String() string { return p.src }

// Select applies p to doc, a JSON document as encoding/json decodes it into
// an any (nil, bool, float64, string, []any, map[string]any), and returns
// the selected values, which are doc's own (not copies); no match is nil.
// A selection past its work budget stops with an error wrapping
// ErrSelectorBudget.
//
// Results come in document order for arrays. A decoded object has no
// member order, so where a wildcard, a descendant segment or a filter
// visits an object's members it visits them in JavaScript's order for an
// object whose other keys were inserted sorted: integer keys ("0", "10")
// ascending by value first, then the rest in byte order. The order is
// therefore a function of the document, never of Go's map iteration.
//
// As in jsonpath-plus, a member name applied to an array selects by index
// when it is one ("$.books.0") and "length" gives the length of an array or
// (in UTF-16 code units) of a string.
func (p *JSONPath) Select(doc any) ([]any, error) {
	return p.selectIn(doc, newSelBudget())
}

// selectIn is Select within budget b, which doc's part is added to.
func (p *JSONPath) selectIn(doc any, b *selBudget) (out []any, err error) {
	b.add(func() int { return selJSONNodes(doc) })
	e := selJSONEval{root: doc, filters: p.filters, b: b}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, e.b.stopped(r, "jsonpath", p.src)
		}
	}()
	out = e.run(p.segs, doc, false)
	for _, v := range out {
		e.weigh(v) // what the caller does with them is linear in their size
	}
	return out, nil
}

// selJSONEval is one evaluation of a JSONPath: the document's root, for
// filters that refer to $; a stack of object keys, each object's in
// sorted order above those of the objects enclosing it, so that sorting the
// keys of every object visited costs no allocation once the stack is as
// deep as the document; and the budget.
type selJSONEval struct {
	root    any
	keys    []string
	filters map[*spec.FilterSelector]*selFilter
	b       *selBudget
	// scratch is a list to reuse for what a filter's query selects when
	// run only to charge its work (nil while one such run has it).
	scratch []any
}

// run applies segs to start. Charging (running a filter's queries to
// count their work), a filter keeps every candidate.
func (e *selJSONEval) run(segs []*spec.Segment, start any, charging bool) []any {
	nodes := []any{start}
	for i, seg := range segs {
		var next []any
		if charging && i == len(segs)-1 {
			next, e.scratch = e.scratch[:0], nil // charge gives it back
		}
		for _, n := range nodes {
			if seg.IsDescendant() {
				next = e.descend(seg, n, next, charging)
			} else {
				next = e.apply(seg, n, next, charging)
			}
		}
		if len(next) == 0 {
			return nil
		}
		nodes = next
	}
	return nodes
}

// pushKeys pushes m's keys in the order selCompareKeys defines and returns
// where they start; the caller reads e.keys[start:start+len(m)], which what
// it calls in between leaves alone, and then pops them with
// e.keys = e.keys[:start].
func (e *selJSONEval) pushKeys(m map[string]any) int {
	e.b.step(len(m))
	start := len(e.keys)
	e.keys = slices.AppendSeq(e.keys, maps.Keys(m))
	slices.SortFunc(e.keys[start:], selCompareKeys)
	return start
}

// apply appends to out what seg's selectors select from cur.
func (e *selJSONEval) apply(seg *spec.Segment, cur any, out []any, charging bool) []any {
	before := len(out)
	e.b.step(1)
	for _, sel := range seg.Selectors() {
		switch s := sel.(type) {
		case spec.Name:
			out = selName(string(s), cur, out)
		case spec.Index:
			if a, ok := cur.([]any); ok {
				i := int(s)
				if i < 0 {
					i += len(a)
				}
				if i >= 0 && i < len(a) {
					out = append(out, a[i])
				}
			}
		case spec.WildcardSelector:
			switch v := cur.(type) {
			case []any:
				out = append(out, v...)
			case map[string]any:
				start := e.pushKeys(v)
				for _, k := range e.keys[start:] {
					out = append(out, v[k])
				}
				e.keys = e.keys[:start]
			}
		case *spec.FilterSelector:
			f := e.filters[s]
			keep := func(x any) bool {
				e.b.step(1)
				e.charge(f, x, charging)
				return charging || s.Eval(x, e.root)
			}
			switch v := cur.(type) {
			case []any:
				for _, x := range v {
					if keep(x) {
						out = append(out, x)
					}
				}
			case map[string]any:
				start := e.pushKeys(v)
				for _, k := range e.keys[start:] {
					if keep(v[k]) {
						out = append(out, v[k])
					}
				}
				e.keys = e.keys[:start]
			}
		default: // a slice: arrays only, in order
			out = append(out, sel.Select(cur, e.root)...)
		}
	}
	e.b.step(len(out) - before)
	e.b.results(len(out))
	return out
}

// descend appends what a descendant segment selects from cur and from
// every value below it, cur's own selection first, then its children's in
// order (RFC 9535 section 2.5.2.2).
func (e *selJSONEval) descend(seg *spec.Segment, cur any, out []any, charging bool) []any {
	out = e.apply(seg, cur, out, charging)
	switch v := cur.(type) {
	case []any:
		for _, c := range v {
			out = e.descend(seg, c, out, charging)
		}
	case map[string]any:
		start := e.pushKeys(v)
		for i := start; i < start+len(v); i++ {
			out = e.descend(seg, v[e.keys[i]], out, charging)
		}
		e.keys = e.keys[:start]
	}
	return out
}

// selName selects member name of cur, with jsonpath-plus's reading of a
// name on an array (an index, or "length") and on a string ("length").
func selName(name string, cur any, out []any) []any {
	switch v := cur.(type) {
	case map[string]any:
		if x, ok := v[name]; ok {
			out = append(out, x)
		}
	case []any:
		if name == "length" {
			out = append(out, float64(len(v)))
		} else if i, ok := selArrayIndex(name); ok && i < len(v) {
			out = append(out, v[i])
		}
	case string:
		if name == "length" {
			out = append(out, float64(selUTF16Len(v)))
		}
	}
	return out
}

// selArrayIndex reads name as JavaScript reads an array index: a canonical
// non-negative decimal integer below 2^32-1.
func selArrayIndex(name string) (int, bool) {
	if name == "" || len(name) > 10 || (len(name) > 1 && name[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n >= math.MaxUint32 {
		return 0, false
	}
	return n, true
}

// selUTF16Len is the length of s as JavaScript counts it.
func selUTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// selCompareKeys orders object keys as JavaScript enumerates them: array
// index keys first, ascending by value; then the rest, which JavaScript
// gives in insertion order and a decoded map has lost, in byte order.
func selCompareKeys(a, b string) int {
	ia, aok := selArrayIndex(a)
	ib, bok := selArrayIndex(b)
	switch {
	case aok && bok:
		return cmp.Compare(ia, ib)
	case aok:
		return -1
	case bok:
		return 1
	}
	return strings.Compare(a, b)
}

// selRewriteJSONPath rewrites the jsonpath-plus spellings CompileJSONPath
// documents into RFC 9535 and leaves everything else as it is.
func selRewriteJSONPath(s string) string {
	if s != "" && !strings.ContainsRune("$.[@", rune(s[0])) {
		s = "$." + s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	depth := 0     // bracket depth
	var quote byte // open quote inside brackets, or 0
	for i := 0; i < len(s); {
		c := s[i]
		if depth > 0 {
			switch {
			case quote != 0:
				if c == '\\' && i+1 < len(s) {
					b.WriteString(s[i : i+2])
					i += 2
					continue
				}
				if c == quote {
					quote = 0
				}
			case c == '\'' || c == '"':
				quote = c
			case c == '[':
				depth++
			case c == ']':
				depth--
			case (c == '=' || c == '!') && strings.HasPrefix(s[i+1:], "=="):
				b.WriteByte(c)
				b.WriteByte('=')
				i += 3
				continue
			}
			b.WriteByte(c)
			i++
			continue
		}
		switch c {
		case '[':
			depth++
			b.WriteByte(c)
			i++
		case '.':
			dots := "."
			if strings.HasPrefix(s[i:], "..") {
				dots = ".."
			}
			i += len(dots)
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			name := s[i:j]
			i = j
			if name == "" && dots == "." && i < len(s) && s[i] == '[' {
				continue // "$.['a']" and "$.[0]": jsonpath-plus ignores the dot
			}
			if name == "" || name == "*" || selShorthand(name) || strings.ContainsAny(name, selPlusOperators) {
				b.WriteString(dots)
				b.WriteString(name)
				continue
			}
			if dots == ".." {
				b.WriteString(dots)
			}
			b.WriteString("['")
			selQuote(&b, name)
			b.WriteString("']")
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// selPlusOperators are the characters of jsonpath-plus's own syntax
// (property names ~, parent ^, @ and $ paths, script ( ), escapes `) and
// of quoting. A dot name holding one is left as written, for the parser to
// reject, rather than quoted into a member name nobody meant.
const selPlusOperators = "*~^@$()`'\"?]"

// selShorthand says whether name may follow a dot in RFC 9535:
// member-name-shorthand (section 2.5.1.1).
func selShorthand(name string) bool {
	for i, r := range name {
		switch {
		case r == utf8.RuneError:
			return false
		case r == '_', r >= 0x80, 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// selQuote writes name as the inside of an RFC 9535 single-quoted string.
func selQuote(b *strings.Builder, name string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
}

// XPath is a compiled XPath 1.0 selector with its namespace bindings.
type XPath struct {
	src string
	// expr is the compiled selector, nil while a selection has it: an
	// expression keeps its iteration state inside, so two requests
	// evaluating one at once would race. A selection that finds it taken
	// compiles its own copy (compile: the selector as compiled, its
	// namespaces bound; some microseconds).
	expr    atomic.Pointer[xpath.Expr]
	compile func() (*xpath.Expr, error)
	opts    xmlquery.ParserOptions
}

// CompileXPath compiles an XPath 1.0 selector. ns binds the prefixes the
// selector uses to namespace URIs (mountebank's "ns"); a prefixed name
// matches by URI, whatever prefix the document uses. A selector that does
// not compile, or that uses a prefix ns does not bind, is an error wrapping
// ErrBadSelector (mountebank rejects both as a malformed xpath selector).
func CompileXPath(selector string, ns map[string]string) (*XPath, error) {
	if ns == nil {
		// A nil map would make the xpath library match an unbound prefix
		// by the document's prefix; an empty one makes it an error.
		ns = map[string]string{}
	}
	rewritten := selXPathNoNamespace(selector)
	expr, err := xpath.CompileWithNS(rewritten, ns)
	if err == nil {
		err = selXPathComplete(selector, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: xpath %q: %v", ErrBadSelector, selector, err)
	}
	x := &XPath{
		src: selector,
		opts: xmlquery.ParserOptions{Decoder: &xmlquery.DecoderOptions{
			// xmldom recovers from what it can (an unknown entity such as
			// &nbsp; stays as written, a stray end tag is tolerated); a
			// non-strict decoder is the nearest Go has.
			Strict: false,
			// The document is already text: an encoding declaration names
			// the bytes it was once, not the string it is now, and xmldom
			// ignores it too.
			CharsetReader: selKeepCharset,
		}},
	}
	x.compile = func() (*xpath.Expr, error) { return xpath.CompileWithNS(rewritten, ns) }
	x.expr.Store(expr)
	return x, nil
}

// String returns the selector as it was written.
func (x *XPath) String() string { return x.src }

// selXPathNoNamespace rewrites each unprefixed element name test (item in
// //item, child::item, a[item]) as a test of local name and empty
// namespace:
//
//	*[local-name()='item' and namespace-uri()='']
//
// In XPath 1.0 an unprefixed name matches only an element in no
// namespace, so //item does not select <item> inside <root
// xmlns="urn:d">, as in mountebank; the xpath library matches it by local
// name and prefix, which a default namespace leaves empty. The name tests
// are told from function, axis, node type and operator names as XPath
// 1.0's lexical rules say (§3.7): a name followed by "(" or "::" is none,
// and one after a token that ends an operand is an operator. Attribute and
// namespace name tests, string literals and variables stay as written.
func selXPathNoNamespace(selector string) string {
	var b strings.Builder
	operand := false // the previous token ends an operand: a name now is an operator
	attr := false    // the previous token is @ or attribute:: (or namespace::)
	isName := func(c byte, first bool) bool {
		return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80 ||
			!first && (c == '-' || c == '.' || c >= '0' && c <= '9')
	}
	nextNonSpace := func(i int) int {
		for i < len(selector) && strings.IndexByte(" \t\r\n", selector[i]) >= 0 {
			i++
		}
		return i
	}
	for i := 0; i < len(selector); {
		c := selector[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(selector[i+1:], c)
			if end < 0 {
				b.WriteString(selector[i:])
				return b.String()
			}
			b.WriteString(selector[i : i+end+2])
			i += end + 2
			operand, attr = true, false
		case c == '$':
			j := i + 1
			for j < len(selector) && (isName(selector[j], false) || selector[j] == ':') {
				j++
			}
			b.WriteString(selector[i:j])
			i = j
			operand, attr = true, false
		case isName(c, true):
			j := i
			for j < len(selector) && isName(selector[j], j == i) {
				j++
			}
			if j+1 < len(selector) && selector[j] == ':' && selector[j+1] != ':' {
				j++ // a prefix: the local part (or *) follows
				for j < len(selector) && (isName(selector[j], false) || selector[j] == '*') {
					j++
				}
			}
			name := selector[i:j]
			k := nextNonSpace(j)
			switch {
			case operand: // and, or, div, mod
				b.WriteString(name)
				operand, attr = false, false
			case k < len(selector) && selector[k] == '(': // a function or node type
				b.WriteString(name)
				operand, attr = false, false
			case strings.HasPrefix(selector[k:], "::"): // an axis
				b.WriteString(name)
				operand, attr = false, name == "attribute" || name == "namespace"
			case attr || strings.Contains(name, ":"):
				b.WriteString(name)
				operand, attr = true, false
			default:
				b.WriteString("*[local-name()='" + name + "' and namespace-uri()='']")
				operand, attr = true, false
			}
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(selector) && selector[i+1] >= '0' && selector[i+1] <= '9':
			j := i
			for j < len(selector) && (selector[j] >= '0' && selector[j] <= '9' || selector[j] == '.') {
				j++
			}
			b.WriteString(selector[i:j])
			i = j
			operand, attr = true, false
		default:
			b.WriteByte(c)
			i++
			switch c {
			case ' ', '\t', '\r', '\n':
			case ')', ']', '.':
				operand, attr = true, false
			case '*':
				// After an operand it multiplies; otherwise it is a name
				// test, which ends one.
				operand, attr = !operand, false
			case '@':
				operand, attr = false, true
			default: // / | + - = ! < > , ( [ :
				operand, attr = false, c == ':' && attr
			}
		}
	}
	return b.String()
}

// selXPathComplete reports an error if the xpath library compiled only a
// prefix of selector: its parser stops at the first token that cannot
// continue an expression and ignores the rest, so "//a]" or "//a b" would
// compile as "//a". With brackets and parentheses properly nested (outside
// string literals), the only ")" at which the parse of "(" + selector + ")"
// can stop is the added one, so that compiles only if selector is whole.
func selXPathComplete(selector string, ns map[string]string) error {
	var stack []byte
	var quote byte
	for i := 0; i < len(selector); i++ {
		switch c := selector[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[':
			stack = append(stack, c)
		case c == ')' || c == ']':
			open := byte('(')
			if c == ']' {
				open = '['
			}
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unbalanced %q at offset %d", c, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || quote != 0 {
		return errors.New("unterminated bracket, parenthesis or string")
	}
	if _, err := xpath.CompileWithNS("("+selector+")", ns); err != nil {
		return fmt.Errorf("unexpected text after the expression: %v", err)
	}
	return nil
}

// Select parses doc and returns, as mountebank's nodeValue does, the
// string value of each selected node, in document order and without
// repeats: a text, CDATA or comment node gives its text, an attribute its
// value, a processing instruction its data, and an element (or the
// document) the text of its first child when that child is a text, CDATA,
// comment or processing instruction, otherwise "". A number, string or
// boolean result (count(//a), string(//a), count(//a) > 1) gives one string,
// a number formatted as JavaScript formats it. XML that does not parse
// gives nil, as does a node set that selects nothing. A selection past its
// work budget stops with an error wrapping ErrSelectorBudget.
func (x *XPath) Select(doc string) ([]string, error) {
	return x.selectIn(doc, newSelBudget())
}

// selectIn is Select within budget b, which doc's part is added to.
func (x *XPath) selectIn(doc string, b *selBudget) (out []string, err error) {
	root, perr := xmlquery.ParseWithOptions(strings.NewReader(doc), x.opts)
	if perr != nil {
		return nil, nil
	}
	expr := x.expr.Swap(nil)
	if expr == nil {
		if expr, err = x.compile(); err != nil {
			return nil, err // it compiled once: never
		}
	}
	b.add(func() int { return selXMLNodes(root) })
	defer func() {
		if r := recover(); r != nil {
			// The expression stopped halfway: it is dropped, not reused.
			out, err = nil, b.stopped(r, "xpath", x.src)
			return
		}
		x.expr.CompareAndSwap(nil, expr)
	}()
	switch v := expr.Evaluate(&selNav{NodeNavigator: xmlquery.CreateXPathNavigator(root), b: b}).(type) {
	case *xpath.NodeIterator:
		var hits []selHit
		for v.MoveNext() {
			if nav, ok := v.Current().(*selNav); ok {
				hits = append(hits, selHitOf(nav.NodeNavigator))
				b.step(1)
				b.results(len(hits))
			}
		}
		if len(hits) == 0 {
			return nil, nil
		}
		if len(hits) > 1 {
			hits = selDocumentOrder(root, hits)
		}
		out = make([]string, len(hits))
		for i, h := range hits {
			out[i] = h.val
		}
		return out, nil
	case float64:
		return []string{selJSNumber(v)}, nil
	case string:
		return []string{v}, nil
	case bool:
		return []string{strconv.FormatBool(v)}, nil
	}
	return nil, nil
}

// selHit is a selected node: an element, text, comment or other node, or
// (attr >= 0) the attr'th attribute of node; val is its string value.
type selHit struct {
	node *xmlquery.Node
	attr int
	val  string
}

func selHitOf(nav *xmlquery.NodeNavigator) selHit {
	h := selHit{node: nav.Current(), attr: -1, val: selNodeValue(nav)}
	if nav.NodeType() == xpath.AttributeNode {
		local, uri := nav.LocalName(), nav.NamespaceURL()
		for i, a := range h.node.Attr {
			if a.Name.Local == local && a.NamespaceURI == uri {
				h.attr = i
				break
			}
		}
	}
	return h
}

// selDocumentOrder sorts hits into document order and drops repeats, as
// the npm xpath package returns a node set: the xpath library gives a
// union, or a reverse axis, in the order it evaluated it. A node's
// attributes follow it, in the order written, and precede its children.
func selDocumentOrder(root *xmlquery.Node, hits []selHit) []selHit {
	pos := make(map[*xmlquery.Node]int, len(hits))
	for _, h := range hits {
		pos[h.node] = -1
	}
	// Number the hit nodes in a preorder walk of the tree.
	next, found := 0, 0
	for n := root; n != nil && found < len(pos); {
		if p, ok := pos[n]; ok && p < 0 {
			pos[n] = next
			found++
		}
		next++
		switch {
		case n.FirstChild != nil:
			n = n.FirstChild
		default:
			for n != nil && n != root && n.NextSibling == nil {
				n = n.Parent
			}
			if n == nil || n == root {
				n = nil
			} else {
				n = n.NextSibling
			}
		}
	}
	slices.SortStableFunc(hits, func(a, b selHit) int {
		return cmp.Or(cmp.Compare(pos[a.node], pos[b.node]), cmp.Compare(a.attr, b.attr))
	})
	return slices.CompactFunc(hits, func(a, b selHit) bool {
		return a.node == b.node && a.attr == b.attr
	})
}

// selNodeValue is mountebank's nodeValue.
func selNodeValue(nav *xmlquery.NodeNavigator) string {
	if nav.NodeType() == xpath.AttributeNode {
		return nav.Value()
	}
	n := nav.Current()
	switch n.Type {
	case xmlquery.TextNode, xmlquery.CharDataNode, xmlquery.CommentNode, xmlquery.ProcessingInstruction:
		return selNodeData(n)
	}
	if c := n.FirstChild; c != nil {
		switch c.Type {
		case xmlquery.TextNode, xmlquery.CharDataNode, xmlquery.CommentNode, xmlquery.ProcessingInstruction:
			return selNodeData(c)
		}
	}
	return ""
}

// selNodeData is the DOM data of a character-data node or a processing
// instruction.
func selNodeData(n *xmlquery.Node) string {
	if n.Type == xmlquery.ProcessingInstruction {
		if n.ProcInst != nil {
			return n.ProcInst.Inst
		}
		return ""
	}
	return n.Data
}

// selKeepCharset is an xml.Decoder CharsetReader that reads the input as
// it is, whatever encoding the document declares.
func selKeepCharset(_ string, r io.Reader) (io.Reader, error) { return r, nil }

// selJSNumber formats f as JavaScript's Number.prototype.toString does.
func selJSNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64) // 1.5e-07
		mant, exp, _ := strings.Cut(s, "e")
		sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
		return mant + "e" + sign + digits // 1.5e-7
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
