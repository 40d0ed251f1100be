package imposter

// The work budget of selections. An admin chooses a selector, a stranger
// the document it runs on, and XPath and JSONPath make it easy to ask for
// work that grows as a power of the document: found by the issue 26
// fuzzing pass, XPath //a//a on 9 KB of 1,300 nested <a> took 3.9 s,
// count(//a//a//a) 3 min 47 s and 22 GB, //a[count(//a) > 0] on 4,000
// sibling <a/> 16.5 s; JSONPath $..*..*..* on 500 nested arrays 7 s and
// 1.9 GB, $[?count($..*) > 0] on 5,000 × [] 3 s and 1.5 GB.
//
// So selections count their work in steps: a node visited (each move of
// the XPath library's navigator, each value the JSONPath evaluator looks
// at), a navigator copied, a value selected, a string's bytes read (one
// step per 64); a JSONPath filter's own queries, which the jsonpath
// library evaluates out of sight, are run first to count them (selFilter).
// The selections one request makes while it is matched against the stubs
// share one budget (as do those of one copy or lookup behavior): it is
// selBaseSteps, plus selStepsPerNode for each node of each document
// selected from (elements, attributes and text nodes; JSON values), those
// counted only once the base runs out. So a request's selections cost at
// most a constant times the work of reading what they read, and a
// realistic selector on the largest body an imposter takes (16 MiB) uses
// 2-14 steps per node: 32 leaves room (selbudget_test.go checks a 4 MB
// document). The values a selection keeps are bounded alike
// (selBaseResults plus selResultsPerNode per node), and so, for JSONPath,
// is their size: what a predicate does with them next (convert, sort,
// compare) is linear in it.
//
// Past either bound the selection stops and is an error wrapping
// ErrSelectorBudget naming the selector and the budget. mountebank has no
// such bound. A predicate whose selector stops does not match (its stub
// is passed over, even under a not), and the imposter's log says why
// (Imposter.UseLog: there is no error path from matching to the answer);
// a copy or lookup behavior's makes the response an error in mountebank's
// shape (behaviors have one).
//
// The xpath library evaluates some selectors in time quadratic in a
// node's siblings (unions, reverse axes such as ancestor::, positions on
// a // step: it numbers a node by walking its preceding siblings): on a
// document of tens of thousands of siblings those stop at the budget too,
// where they took tens of seconds before.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

const (
	selBaseSteps      = 1 << 20
	selStepsPerNode   = 32
	selBaseResults    = 1 << 16
	selResultsPerNode = 4
	// selBytesPerStep is how many bytes of a string one step reads.
	selBytesPerStep = 64
)

// ErrSelectorBudget is wrapped by the error of a selection that went past
// its work budget.
var ErrSelectorBudget = errors.New("selector stopped at its work budget")

// selBudget counts the work of the selections one request makes: those of
// one stub's match, of one copy or lookup behavior, or a lone Select. The
// base is counted once; each document selected from adds its part
// (counted when the budget would otherwise run out).
type selBudget struct {
	steps, maxSteps int
	maxResults      int
	pending         []func() int // the nodes of documents not yet counted
	n               int          // the nodes of the documents counted
}

// selOver is what a selection panics with at its budget; Select recovers
// it. The evaluators (ours and the xpath library's) are deep recursions
// that have no error path, so stopping is a panic.
type selOver struct{}

func newSelBudget() *selBudget {
	return &selBudget{maxSteps: selBaseSteps, maxResults: selBaseResults}
}

// add adds a document's part: nodes counts it.
func (b *selBudget) add(nodes func() int) { b.pending = append(b.pending, nodes) }

// step counts n steps.
func (b *selBudget) step(n int) {
	b.steps += n
	if b.steps > b.maxSteps {
		b.grow()
		if b.steps > b.maxSteps {
			panic(selOver{})
		}
	}
}

// results checks a list of n selected values.
func (b *selBudget) results(n int) {
	if n > b.maxResults {
		b.grow()
		if n > b.maxResults {
			panic(selOver{})
		}
	}
}

// grow counts the documents not yet counted into the budget.
func (b *selBudget) grow() {
	for _, nodes := range b.pending {
		b.n += nodes()
	}
	b.pending = nil
	b.maxSteps = selBaseSteps + selStepsPerNode*b.n
	b.maxResults = selBaseResults + selResultsPerNode*b.n
}

// stopped turns a recovered panic into the selection's error (re-panicking
// anything but selOver).
func (b *selBudget) stopped(r any, kind, src string) error {
	if _, ok := r.(selOver); !ok {
		panic(r)
	}
	return fmt.Errorf("%w: %s selector %q went past %d steps or %d values (the budget: %d steps and %d values, plus %d steps and %d values for each node of the documents selected from, here %d)",
		ErrSelectorBudget, kind, src, b.maxSteps, b.maxResults, selBaseSteps, selBaseResults, selStepsPerNode, selResultsPerNode, b.n)
}

// --- JSONPath

// selJSONNodes counts the values of a decoded JSON document.
func selJSONNodes(v any) int {
	n := 1
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			n += selJSONNodes(x)
		}
	case map[string]any:
		for _, x := range t { //fenceline:unordered counting
			n += selJSONNodes(x)
		}
	}
	return n
}

// weigh counts a step for each value in v and for each selBytesPerStep
// bytes of its strings: what copying, printing or comparing it costs.
func (e *selJSONEval) weigh(v any) {
	e.b.step(1)
	switch t := v.(type) {
	case string:
		e.b.step(len(t) / selBytesPerStep)
	case []any:
		for _, x := range t {
			e.weigh(x)
		}
	case map[string]any:
		for k, x := range t { //fenceline:unordered counting
			e.b.step(len(k) / selBytesPerStep)
			e.weigh(x)
		}
	}
}

// selFilter is what evaluating a filter selector costs beyond visiting
// its candidates: the queries inside its expression (@.price, $..*,
// count(@.items[*])), which the jsonpath library evaluates for each
// candidate, out of sight of the budget. Before the library evaluates the
// filter on a candidate, the evaluator runs each of them itself, charging
// the budget (selJSONEval.charge), and, if the filter compares or passes
// values to functions (sized), weighs what they select.
type selFilter struct {
	queries []selQuery
	sized   bool
	// opaque marks a filter whose queries could not be read back (never
	// expected; FuzzSelectors checks it): each evaluation is charged as
	// many steps as the document has nodes.
	opaque bool
}

// selQuery is a query inside a filter: from the candidate (@) or the root.
type selQuery struct {
	relative bool
	segs     []*spec.Segment
}

// selCompileFilters reads the queries inside each filter selector of
// segs, and of the filters inside those, into filters.
func selCompileFilters(segs []*spec.Segment, filters map[*spec.FilterSelector]*selFilter) {
	for _, seg := range segs {
		for _, sel := range seg.Selectors() {
			f, ok := sel.(*spec.FilterSelector)
			if !ok || filters[f] != nil {
				continue
			}
			sf := &selFilter{}
			filters[f] = sf
			queries, sized, ok := selFilterQueries(f.String())
			sf.sized = sized
			if !ok {
				sf.opaque = true
				continue
			}
			for _, q := range queries {
				p, err := jsonpath.Parse("$" + q[1:])
				if err != nil {
					sf.opaque = true
					sf.queries = nil
					break
				}
				segs := p.Query().Segments()
				sf.queries = append(sf.queries, selQuery{relative: q[0] == '@', segs: segs})
				selCompileFilters(segs, filters)
			}
		}
	}
}

// selFilterQueries finds the queries inside a filter selector as the
// jsonpath library writes it (spec.FilterSelector.String: every segment
// bracketed, names and string literals quoted as Go quotes them), each
// rewritten for jsonpath.Parse (its strings quoted as JSON); and reports
// whether the filter compares values or calls a function (sized). ok is
// false for text it cannot read.
func selFilterQueries(text string) (queries []string, sized, ok bool) {
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, ok := selSkipString(text, i)
			if !ok {
				return nil, false, false
			}
			i = end
		case c == '@' || c == '$':
			end, ok := selQueryEnd(text, i+1)
			if !ok {
				return nil, false, false
			}
			q, ok := selRequote(text[i:end])
			if !ok {
				return nil, false, false
			}
			queries = append(queries, q)
			i = end
		case c == '=' || c == '<' || c == '>':
			sized = true
			i++
		case c == '(' && i > 0 && (text[i-1] == '_' || text[i-1] >= 'a' && text[i-1] <= 'z' || text[i-1] >= 'A' && text[i-1] <= 'Z' || text[i-1] >= '0' && text[i-1] <= '9'):
			sized = true // a function call
			i++
		default:
			i++
		}
	}
	return queries, sized, true
}

// selSkipString returns the end of the quoted string starting at text[i].
func selSkipString(text string, i int) (int, bool) {
	q := text[i]
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j + 1, true
		}
	}
	return 0, false
}

// selQueryEnd returns the end of the query whose segments start at
// text[i]: each "[...]" or "..[...]", brackets balanced outside strings.
func selQueryEnd(text string, i int) (int, bool) {
	for {
		j := i
		if strings.HasPrefix(text[j:], "..") {
			j += 2
		}
		if j >= len(text) || text[j] != '[' {
			return i, true
		}
		depth := 0
		for {
			if j >= len(text) {
				return 0, false
			}
			switch c := text[j]; c {
			case '"', '\'', '`':
				end, ok := selSkipString(text, j)
				if !ok {
					return 0, false
				}
				j = end
				continue
			case '[':
				depth++
			case ']':
				depth--
			}
			j++
			if depth == 0 {
				break
			}
		}
		i = j
	}
}

// selRequote rewrites the Go-quoted strings of a query as JSON strings,
// which RFC 9535 reads (Go writes \x01 and \a, which it does not).
func selRequote(q string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(q); {
		c := q[i]
		if c != '"' && c != '\'' && c != '`' {
			b.WriteByte(c)
			i++
			continue
		}
		end, ok := selSkipString(q, i)
		if !ok {
			return "", false
		}
		lit := q[i:end]
		if c == '\'' {
			lit = `"` + strings.ReplaceAll(strings.ReplaceAll(lit[1:len(lit)-1], `\'`, `'`), `"`, `\"`) + `"`
		}
		s, err := strconv.Unquote(lit)
		if err != nil {
			return "", false
		}
		j, err := json.Marshal(s)
		if err != nil {
			return "", false
		}
		b.Write(j)
		i = end
	}
	return b.String(), true
}

// charge runs the queries inside filter f for candidate x, counting their
// work, and, unless it is itself charging (when the library evaluates
// nothing), counting it again for the library's evaluation of f on x that
// follows (which costs no more).
func (e *selJSONEval) charge(f *selFilter, x any, charging bool) {
	if f == nil || f.opaque {
		e.b.grow()
		e.b.step(e.b.n + 1)
		return
	}
	if !charging {
		before := e.b.steps
		defer func() { e.b.step(e.b.steps - before) }()
	}
	for _, q := range f.queries {
		start := e.root
		if q.relative {
			start = x
		}
		found := e.run(q.segs, start, true)
		if f.sized {
			for _, v := range found {
				e.weigh(v)
			}
		}
		if cap(found) > cap(e.scratch) {
			clear(found)
			e.scratch = found[:0]
		}
	}
}

// --- XPath

// selXMLNodes counts the nodes of a parsed XML document, attributes
// included.
func selXMLNodes(root *xmlquery.Node) int {
	n := 0
	for x := root; x != nil; x = selNext(root, x) {
		n += 1 + len(x.Attr)
	}
	return n
}

// selNext is the node after x in a preorder walk of root's tree, or nil.
func selNext(root, x *xmlquery.Node) *xmlquery.Node {
	if x.FirstChild != nil {
		return x.FirstChild
	}
	for x != root && x.NextSibling == nil {
		x = x.Parent
	}
	if x == root {
		return nil
	}
	return x.NextSibling
}

// selNav is xmlquery's navigator counting each move, copy and value read
// against a budget: all the xpath library's work goes through them.
type selNav struct {
	*xmlquery.NodeNavigator
	b *selBudget
}

func (n *selNav) Copy() xpath.NodeNavigator {
	n.b.step(1)
	return &selNav{NodeNavigator: n.NodeNavigator.Copy().(*xmlquery.NodeNavigator), b: n.b}
}

func (n *selNav) MoveToRoot() {
	n.b.step(1)
	n.NodeNavigator.MoveToRoot()
}

func (n *selNav) MoveToParent() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToParent()
}

func (n *selNav) MoveToNextAttribute() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToNextAttribute()
}

func (n *selNav) MoveToChild() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToChild()
}

func (n *selNav) MoveToFirst() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToFirst()
}

func (n *selNav) MoveToNext() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToNext()
}

func (n *selNav) MoveToPrevious() bool {
	n.b.step(1)
	return n.NodeNavigator.MoveToPrevious()
}

func (n *selNav) MoveTo(other xpath.NodeNavigator) bool {
	n.b.step(1)
	if o, ok := other.(*selNav); ok {
		other = o.NodeNavigator
	}
	return n.NodeNavigator.MoveTo(other)
}

// Value is xmlquery's, an element's text (xmlquery's InnerText: its text
// and CDATA below it, in document order) gathered here, where each node it
// walks counts.
func (n *selNav) Value() string {
	cur := n.Current()
	if cur.Type != xmlquery.ElementNode || n.NodeType() == xpath.AttributeNode {
		v := n.NodeNavigator.Value()
		n.b.step(1 + len(v)/selBytesPerStep)
		return v
	}
	var b strings.Builder
	for x := cur; x != nil; {
		n.b.step(1)
		switch x.Type {
		case xmlquery.TextNode, xmlquery.CharDataNode:
			b.WriteString(x.Data)
			n.b.step(len(x.Data) / selBytesPerStep)
		case xmlquery.CommentNode:
		default:
			if x.FirstChild != nil {
				x = x.FirstChild
				continue
			}
		}
		for x != cur && x.NextSibling == nil {
			x = x.Parent
		}
		if x == cur {
			break
		}
		x = x.NextSibling
	}
	return b.String()
}
