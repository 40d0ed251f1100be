package imposter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// selPathological are the selections the issue 26 fuzzing pass found to
// take seconds to minutes (and gigabytes) of a request; the admin chooses
// the selector, a stranger the document.
var selPathological = []struct {
	kind, sel, doc string
	was            string // what one took before the budget
}{
	{"xpath", "//a//a", strings.Repeat("<a>", 1300) + strings.Repeat("</a>", 1300), "3.9 s"},
	{"xpath", "count(//a//a//a)", strings.Repeat("<a>", 1300) + strings.Repeat("</a>", 1300), "3 min 47 s, 22 GB"},
	{"xpath", "//a[count(//a) > 0]", "<r>" + strings.Repeat("<a/>", 4000) + "</r>", "16.5 s"},
	{"jsonpath", "$..*..*..*", strings.Repeat("[", 500) + strings.Repeat("]", 500), "7 s, 1.9 GB"},
	{"jsonpath", "$[?count($..*) > 0]", "[" + strings.TrimSuffix(strings.Repeat("[],", 5000), ",") + "]", "3 s, 1.5 GB"},
}

// Each stops at its budget, in a bounded time and memory (tens of ms and
// MB here), with an error naming the selector and the budget.
func TestSelectorBudgetStopsPathologicalSelections(t *testing.T) {
	for _, tc := range selPathological {
		start := time.Now()
		_, alloc, err := allocated(func() (any, error) {
			if tc.kind == "xpath" {
				x, err := CompileXPath(tc.sel, nil)
				require.NoError(t, err)
				return x.Select(tc.doc)
			}
			p, err := CompileJSONPath(tc.sel)
			require.NoError(t, err)
			return p.Select(toPlain(mustParse(t, tc.doc)))
		})
		took := time.Since(start)
		require.ErrorIs(t, err, ErrSelectorBudget, "%s %s (was %s)", tc.kind, tc.sel, tc.was)
		require.Contains(t, err.Error(), strconv.Quote(tc.sel))
		require.Contains(t, err.Error(), "plus 32 steps and 4 values for each node of the documents selected from")
		require.Less(t, took, 5*time.Second, "%s %s (was %s)", tc.kind, tc.sel, tc.was)
		require.Less(t, alloc, uint64(256<<20), "bytes allocated by %s %s (was %s)", tc.kind, tc.sel, tc.was)
	}
}

// Realistic selectors on large realistic documents answer, with room in
// the budget: a 4 MB JSON array of objects, an XML document of 50,000
// elements. (The same selectors on 16 MiB documents, the largest body an
// imposter takes, use 5-25% of their budget.)
func TestSelectorBudgetFitsRealisticDocuments(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("[")
	n := 0
	for ; sb.Len() < 4<<20; n++ {
		if n > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":%d,"name":"customer %d","email":"c%d@example.com","tags":["a","b"],"address":{"city":"Paris","zip":"75001"},"price":%d}`, n, n, n, n%20)
	}
	sb.WriteString("]")
	doc := toPlain(mustParse(t, sb.String()))
	for _, tc := range []struct {
		sel  string
		want int
	}{{"$..id", n}, {"$[?(@.price < 10)].id", (n + 10) / 20 * 10}, {"$..*", -1}, {"$..address.city", n}, {"$[?@.tags[?@ == 'b']].id", n}} {
		p, err := CompileJSONPath(tc.sel)
		require.NoError(t, err)
		b := newSelBudget()
		out, err := p.selectIn(doc, b)
		require.NoError(t, err, tc.sel)
		if tc.want >= 0 {
			require.Equal(t, tc.want, len(out), tc.sel)
		}
		b.grow() // the whole budget, its per-node part counted
		require.Less(t, b.steps, b.maxSteps/2, "%s: %d steps of %d", tc.sel, b.steps, b.maxSteps)
		if tc.sel == "$..id" {
			require.Equal(t, 0.0, out[0])
			require.Equal(t, float64(n-1), out[n-1])
		}
	}

	sb.Reset()
	sb.WriteString("<catalog>")
	const items = 10_000 // 50,000 elements
	for i := range items {
		fmt.Fprintf(&sb, `<item id="%d"><name>item %d</name><price>%d</price><tags><tag>a</tag></tags></item>`, i, i, i%20)
	}
	sb.WriteString("</catalog>")
	for _, tc := range []struct {
		sel  string
		want int
	}{{"//item/name", items}, {"/catalog/item[price < 10]/name", items / 2}, {"count(//item)", 1}, {"//*//tag", items}, {"//item[@id='5']/name", 1}} {
		x, err := CompileXPath(tc.sel, nil)
		require.NoError(t, err)
		b := newSelBudget()
		out, err := x.selectIn(sb.String(), b)
		require.NoError(t, err, tc.sel)
		require.Equal(t, tc.want, len(out), tc.sel)
		b.grow()
		require.Less(t, b.steps, b.maxSteps/2, "%s: %d steps of %d", tc.sel, b.steps, b.maxSteps)
		switch tc.sel {
		case "//item/name":
			require.Equal(t, "item 0", out[0])
			require.Equal(t, "item 9999", out[items-1])
		case "count(//item)":
			require.Equal(t, "10000", out[0])
		}
	}
}

// A predicate whose selector stops does not match, nor does its stub,
// even under a not; the imposter's log gets one line naming the selector
// and the budget; the next stub answers.
func TestSelectorBudgetPassesTheStubOver(t *testing.T) {
	for _, tc := range selPathological {
		for i, pred := range []string{
			fmt.Sprintf(`{"equals":{"body":"x"},%q:{"selector":%q}}`, tc.kind, tc.sel),
			fmt.Sprintf(`{"not":{"exists":{"body":true},%q:{"selector":%q}}}`, tc.kind, tc.sel),
			fmt.Sprintf(`{"or":[{"deepEquals":{"body":"x"},%q:{"selector":%q}},{"equals":{"path":"/"}}]}`, tc.kind, tc.sel),
		} {
			p, err := CompilePredicate(mustParse(t, pred))
			require.NoError(t, err)
			r := req("POST", "/", "", tc.doc)
			ok, err := p.Evaluate(r)
			require.False(t, ok, pred)
			require.ErrorIs(t, err, ErrSelectorBudget, pred)
			if i > 0 {
				continue
			}

			imp, err := New(mustParse(t, `{"protocol":"http","stubs":[
				{"predicates":[`+pred+`],"responses":[{"is":{"body":"selected"}}]},
				{"responses":[{"is":{"body":"next"}}]}]}`).(*Object), 4545)
			require.NoError(t, err)
			var lines []string
			imp.UseLog(func(msg string) { lines = append(lines, msg) })
			out, _, err := imp.Respond(r)
			require.NoError(t, err)
			require.Equal(t, "next", string(out.Body), pred)
			require.Len(t, lines, 1, pred)
			require.Contains(t, lines[0], strconv.Quote(tc.sel))
			require.Contains(t, lines[0], "the stub is passed over")
			require.Equal(t, 1, imp.Candidates().Find(r), pred)
			require.Len(t, lines, 2)
		}
	}
}

// The stubs a request is matched against share one budget: its base once,
// and each selection its document's part, so that many stubs of costly
// selectors cost a request a bounded multiple of reading its body.
func TestSelectorBudgetIsPerRequest(t *testing.T) {
	tc := selPathological[2]
	stub := fmt.Sprintf(`{"predicates":[{"equals":{"body":"x"},"xpath":{"selector":%q}}],"responses":[{"is":{}}]}`, tc.sel)
	imp, err := New(mustParse(t, `{"protocol":"http","stubs":[`+strings.TrimSuffix(strings.Repeat(stub+",", 20), ",")+`]}`).(*Object), 4545)
	require.NoError(t, err)
	r := req("POST", "/", "", tc.doc)
	b := newSelBudget()
	logged := 0
	for _, st := range imp.stubs {
		require.False(t, st.matches(r, func(string) { logged++ }, b))
	}
	require.Equal(t, 20, logged)
	nodes := b.n / 20 // the document's (4,004, as xmlquery parses it)
	require.Equal(t, 20*nodes, b.n, "each selection adds its document")
	require.InDelta(t, 4000, nodes, 10)
	require.LessOrEqual(t, b.steps, selBaseSteps+20*selStepsPerNode*nodes+64, "not 20 bases")
	var lines []string
	imp.UseLog(func(msg string) { lines = append(lines, msg) })
	out, _, err := imp.Respond(r)
	require.NoError(t, err)
	require.Equal(t, 200, out.StatusCode)
	require.Len(t, lines, 20)
}

// A copy behavior's selector that stops makes the response an error in
// mountebank's shape, naming the behavior and the selector.
func TestSelectorBudgetFailsTheBehavior(t *testing.T) {
	tc := selPathological[2]
	imp, err := New(mustParse(t, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"${v}"},
		"behaviors":[{"copy":{"from":"body","into":"${v}","using":{"method":"xpath","selector":%q}}}]}]}]}`, tc.sel)).(*Object), 4545)
	require.NoError(t, err)
	_, _, err = imp.Respond(req("POST", "/", "", tc.doc))
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeBadData, e.Code)
	require.Contains(t, e.Message, "copy behavior: selector stopped at its work budget: xpath selector "+strconv.Quote(tc.sel))
}

// The queries inside a filter are read back from the library's text of
// it, whatever its strings hold, and nested filters too; their work is
// charged.
func TestSelectorFilterQueries(t *testing.T) {
	for _, tc := range []struct {
		sel     string
		queries int
		sized   bool
	}{
		{`$[?count($..*) > 0]`, 1, true},
		{`$..book[?(@.price<10)].title`, 1, true},
		{`$[?@.isbn]`, 1, false},
		{`$[?!@.isbn && @['a]b'] == "x]'\"$@"]`, 2, true},
		{"$[?@[\"a\\u0001\\\\\"] == 'a\\u0001\\'$']", 1, true},
		{`$[?@.a[?@.b > $.c[0]]]`, 1, false},
		{`$[?match(@.title, 't.') || search(@.t, '[$@]')]`, 2, true},
		{`$[?length(@.tags) > 1 && value(@..x) == 'q']`, 2, true},
		{`$[?@.price < 10 || @.price >= 1e3]`, 2, true},
	} {
		p, err := CompileJSONPath(tc.sel)
		require.NoError(t, err, tc.sel)
		require.NotEmpty(t, p.filters, tc.sel)
		var top *selFilter // the outermost: the longest
		longest := 0
		for f, sf := range p.filters {
			require.False(t, sf.opaque, "%s: %s", tc.sel, f)
			if len(f.String()) > longest {
				top, longest = sf, len(f.String())
			}
		}
		require.Len(t, top.queries, tc.queries, tc.sel)
		require.Equal(t, tc.sized, top.sized, tc.sel)
	}
	// A nested filter's queries are charged for each candidate.
	p, err := CompileJSONPath(`$[?@[?count($..*) > 0]]`)
	require.NoError(t, err)
	require.Len(t, p.filters, 2)
	_, err = p.Select(toPlain(mustParse(t, "["+strings.TrimSuffix(strings.Repeat("[1],", 2000), ",")+"]")))
	require.ErrorIs(t, err, ErrSelectorBudget)
}

// An XPath is selected by any number of requests at once (predicates are
// matched outside the imposter's lock): each selection has its own copy
// of the expression, whose iteration state the xpath library keeps inside
// it. (Run with -race; the shared expression raced.)
func TestXPathConcurrentSelections(t *testing.T) {
	for _, sel := range []string{"//a", "//a[count(b) > 0]", "//a | //b", "count(//a)", "string(//a[2])"} {
		x, err := CompileXPath(sel, nil)
		require.NoError(t, err)
		doc := "<r><a><b/></a><a>x</a><a/><b/></r>"
		want, err := x.Select(doc)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					got, err := x.Select(doc)
					if err == nil && !slicesEqual(got, want) {
						err = errors.New(sel + ": " + strings.Join(got, ",") + " != " + strings.Join(want, ","))
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
