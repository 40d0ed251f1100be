package imposter

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// selTestDoc is decoded as mountebank's users' bodies are: encoding/json
// into an any, numbers as float64. Its key order is deliberately not the
// order Select reports.
const selTestDoc = `{
	"y": {"title": "yt"},
	"name": "n",
	"a": {"b": 2, "c d": 3},
	"key with space": "ks",
	"user-id": "u1",
	"10": "ten", "9": "nine", "0": "zero",
	"books": [{"title": "t0", "price": 5}, {"title": "t1", "price": 15, "isbn": "x"}],
	"store": {"book": [{"title": "b0", "price": 8}, {"title": "b1", "price": 12}]},
	"flags": {"z": {"on": true}, "m": {"on": false}, "c": {"on": true}},
	"snowman": "☃𝄞"
}`

// selectJSON and selectXML select, within the budget.
func selectJSON(t *testing.T, p *JSONPath, doc any) []any {
	t.Helper()
	out, err := p.Select(doc)
	require.NoError(t, err, p.String())
	return out
}

func selectXML(t *testing.T, x *XPath, doc string) []string {
	t.Helper()
	out, err := x.Select(doc)
	require.NoError(t, err, x.String())
	return out
}

func selDecode(t *testing.T, s string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

func TestSelectorsJSONPath(t *testing.T) {
	doc := selDecode(t, selTestDoc)
	for _, tc := range []struct {
		name, sel string
		want      []any
	}{
		{"member", "$.name", []any{"n"}},
		{"nested member", "$.a.b", []any{2.0}},
		{"descendant", "$..title", []any{"t0", "t1", "b0", "b1", "yt"}},
		{"index", "$.books[0].title", []any{"t0"}},
		{"negative index (RFC 9535; jsonpath-plus selects nothing)", "$.books[-1].title", []any{"t1"}},
		{"slice", "$.books[-1:].title", []any{"t1"}},
		{"wildcard on array", "$.books[*].title", []any{"t0", "t1"}},
		{"jsonpath-plus filter", "$..book[?(@.price<10)].title", []any{"b0"}},
		{"RFC 9535 filter", "$..book[?@.price<10].title", []any{"b0"}},
		{"filter or", "$.books[?(@.price>10 || @.price<6)].title", []any{"t0", "t1"}},
		{"filter and string", `$.books[?(@.title == "t0" && @.price == 5.0)].price`, []any{5.0}},
		{"filter ===", "$..book[?(@.price===8)].title", []any{"b0"}},
		{"filter !==", "$..book[?(@.price!==8)].title", []any{"b1"}},
		{"filter '=== ' in a string stays", `$.books[?(@.title != "a===b")].title`, []any{"t0", "t1"}},
		{"filter existence", "$.books[?(@.isbn)].title", []any{"t1"}},
		{"filter nonexistence", "$.books[?(!@.isbn)].title", []any{"t0"}},
		{"filter on an object, key order", "$.flags[?(@.on == true)]", []any{map[string]any{"on": true}, map[string]any{"on": true}}},
		{"filter function", "$.books[?match(@.title, 't.')].price", []any{5.0, 15.0}},
		{"bracket key with space", "$['key with space']", []any{"ks"}},
		{"bracket double quotes", `$["a"]["b"]`, []any{2.0}},
		{"dot before bracket", "$.['a'].b", []any{2.0}},
		{"no $", "name", []any{"n"}},
		{"no $, deeper", "books[0].title", []any{"t0"}},
		{"dot name with hyphen", "$.user-id", []any{"u1"}},
		{"dot name with space", "$.a.c d", []any{3.0}},
		{"dot name digits on object", "$.0", []any{"zero"}},
		{"dot name digits on array", "$.books.1.title", []any{"t1"}},
		{"descendant name with hyphen", "$..user-id", []any{"u1"}},
		{"array length", "$.books.length", []any{2.0}},
		{"string length in UTF-16", "$.snowman.length", []any{3.0}},
		{"union", "$.books[1,0].title", []any{"t1", "t0"}},
		{"root", "$", []any{doc}},
		{"wildcard on object: integer keys, then byte order", "$.*", []any{
			"zero", "nine", "ten",
			map[string]any{"b": 2.0, "c d": 3.0},
			doc.(map[string]any)["books"],
			doc.(map[string]any)["flags"],
			"ks", "n", "☃𝄞",
			doc.(map[string]any)["store"],
			"u1",
			map[string]any{"title": "yt"},
		}},
		{"descendant wildcard", "$.a..*", []any{2.0, 3.0}},
		{"no match", "$.nope", nil},
		{"no match deeper", "$.a.b.c", nil},
		{"no match descendant", "$..nope", nil},
		{"index out of range", "$.books[5]", nil},
		{"filter matches nothing", "$.books[?(@.price > 100)]", nil},
		{"name on a number", "$.a.b.length", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompileJSONPath(tc.sel)
			require.NoError(t, err)
			require.Equal(t, tc.sel, p.String())
			got := selectJSON(t, p, doc)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestSelectorsJSONPathScalarDocuments(t *testing.T) {
	for _, tc := range []struct {
		name, doc, sel string
		want           []any
	}{
		{"string root", `"s"`, "$", []any{"s"}},
		{"null root", `null`, "$", []any{nil}},
		{"member of a string", `"s"`, "$.a", nil},
		{"array root", `[1, [2, {"k": 3}]]`, "$..k", []any{3.0}},
		{"array root wildcard", `[1, "x", null, true]`, "$[*]", []any{1.0, "x", nil, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompileJSONPath(tc.sel)
			require.NoError(t, err)
			got := selectJSON(t, p, selDecode(t, tc.doc))
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestSelectorsJSONPathDeterministic: the order of what a wildcard, a
// descendant segment or a filter takes from an object is a function of the
// document, not of Go's map iteration order.
func TestSelectorsJSONPathDeterministic(t *testing.T) {
	doc := selDecode(t, `{"k": {"p": 1, "q": 2, "r": 3, "s": 4, "t": 5, "u": 6, "v": 7, "w": 8},
		"l": [{"p": 9, "q": 10}, {"r": 11}], "m": {"x": {"p": 12}, "y": {"p": 13}, "z": {"p": 14}}}`)
	for _, sel := range []string{"$..*", "$.k.*", "$..p", "$.m[?@.p > 0]", "$.*.*"} {
		p, err := CompileJSONPath(sel)
		require.NoError(t, err)
		first := selectJSON(t, p, doc)
		require.NotEmpty(t, first)
		for range 50 {
			require.Equal(t, first, selectJSON(t, p, doc), sel)
		}
	}
	p, err := CompileJSONPath("$..p")
	require.NoError(t, err)
	require.Equal(t, []any{1.0, 9.0, 12.0, 13.0, 14.0}, selectJSON(t, p, doc))
}

func TestSelectorsJSONPathBad(t *testing.T) {
	for _, sel := range []string{
		"",
		"$[",
		"$.books[",
		"$.books[?(@.title.startsWith('t'))]", // JavaScript in a filter
		"$.books[(@.length-1)]",               // jsonpath-plus script expression
		"$..*~",                               // jsonpath-plus property names
		"$.a^",                                // jsonpath-plus parent
		"$.books[?(@.title =~ /t/)]",
		"$.books[?(@.price < )]",
	} {
		t.Run(sel, func(t *testing.T) {
			p, err := CompileJSONPath(sel)
			require.ErrorIs(t, err, ErrBadSelector)
			require.Contains(t, err.Error(), "jsonpath")
			require.Contains(t, err.Error(), sel)
			require.Nil(t, p)
		})
	}
}

func TestSelectorsJSONPathRewrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"$.name", "$.name"},
		{"name", "$.name"},
		{"$.user-id", "$['user-id']"},
		{"$..user-id", "$..['user-id']"},
		{"$.0", "$['0']"},
		{"$.it's", "$.it's"}, // quote: left for the parser
		{"$.a\\b", `$['a\\b']`},
		{"$.a\tb", `$['a\u0009b']`},
		{"$.['a']", "$['a']"},
		{"$.é_1", "$.é_1"},
		{"$[?(@.a===1 && @['x-y']!==\"p===q\")]", "$[?(@.a==1 && @['x-y']!=\"p===q\")]"},
		{`$[?(@.a=='it\'s===')]`, `$[?(@.a=='it\'s===')]`},
		{"$.a[0].b-c[1]", "$.a[0]['b-c'][1]"},
	} {
		require.Equal(t, tc.want, selRewriteJSONPath(tc.in), tc.in)
	}
}

func TestSelectorsXPath(t *testing.T) {
	for _, tc := range []struct {
		name, sel string
		ns        map[string]string
		xml       string
		want      []string
	}{
		{"element text", "//a", nil, "<r><a>text</a></r>", []string{"text"}},
		{"several elements", "//a", nil, "<r><a>x</a><b/><a>y</a></r>", []string{"x", "y"}},
		{"absolute path", "/r/a", nil, "<r><a>x</a></r>", []string{"x"}},
		{"with declaration", "//a", nil, `<?xml version="1.0"?><r><a>x</a></r>`, []string{"x"}},
		{"empty element", "//a", nil, "<r><a/></r>", []string{""}},
		{"empty element, two tags", "//a", nil, "<r><a></a></r>", []string{""}},
		{"first child an element", "//a", nil, "<r><a><b>x</b></a></r>", []string{""}},
		{"first child text before an element", "//a", nil, "<r><a>t1<b>x</b>t2</a></r>", []string{"t1"}},
		{"first child whitespace", "//a", nil, "<r><a>\n <b>x</b></a></r>", []string{"\n "}},
		{"nested element selected", "//a/b", nil, "<r><a><b>x</b></a></r>", []string{"x"}},
		{"descendant of nested", "/r//c", nil, "<r><a><b><c>deep</c></b></a></r>", []string{"deep"}},
		{"text nodes", "//a/text()", nil, "<r><a>t1<b>x</b>t2</a></r>", []string{"t1", "t2"}},
		{"CDATA", "//a", nil, "<r><a><![CDATA[<cd>]]></a></r>", []string{"<cd>"}},
		{"comment first", "//a", nil, "<r><a><!--c-->t</a></r>", []string{"c"}},
		{"comment selected", "//comment()", nil, "<r><!--hi--></r>", []string{"hi"}},
		{"entities", "//a", nil, "<r><a>&amp;x&lt;&#65;</a></r>", []string{"&x<A"}},
		{"unknown entity kept as written", "//a", nil, "<r><a>&nbsp;</a></r>", []string{"&nbsp;"}},
		{"predicate", "//a[@id='2']", nil, `<r><a id="1">x</a><a id="2">y</a></r>`, []string{"y"}},
		{"attribute", "//a/@id", nil, `<r><a id="1"/><a id="2">t</a></r>`, []string{"1", "2"}},
		{"empty attribute", "//a/@id", nil, `<r><a id=""/></r>`, []string{""}},
		{"count", "count(//a)", nil, "<r><a/><a/></r>", []string{"2"}},
		{"count of nothing", "count(//b)", nil, "<r><a/></r>", []string{"0"}},
		{"division", "count(//a) div 3", nil, "<r><a/><a/></r>", []string{"0.6666666666666666"}},
		{"sum", "sum(//a)", nil, "<r><a>1</a><a>2.5</a></r>", []string{"3.5"}},
		{"NaN", "number(//a)", nil, "<r><a>x</a></r>", []string{"NaN"}},
		{"boolean", "count(//a) > 1", nil, "<r><a/><a/></r>", []string{"true"}},
		{"boolean false", "boolean(//b)", nil, "<r><a/></r>", []string{"false"}},
		{"string", "string(//a)", nil, "<r><a>x<b>y</b></a></r>", []string{"xy"}},
		{"namespace by URI", "//ns:title", map[string]string{"ns": "http://example.com/ns"},
			`<root xmlns:x="http://example.com/ns"><x:title>T</x:title></root>`, []string{"T"}},
		{"namespace, same prefix", "//x:title", map[string]string{"x": "http://example.com/ns"},
			`<root xmlns:x="http://example.com/ns"><x:title>T</x:title></root>`, []string{"T"}},
		{"namespace default in document", "//ns:title", map[string]string{"ns": "http://example.com/ns"},
			`<root xmlns="http://example.com/ns"><title>T</title></root>`, []string{"T"}},
		{"namespace other URI", "//ns:title", map[string]string{"ns": "http://other"},
			`<root xmlns:x="http://example.com/ns"><x:title>T</x:title></root>`, nil},
		{"unprefixed name, prefixed element", "//title", nil,
			`<root xmlns:x="http://example.com/ns"><x:title>T</x:title></root>`, nil},
		{"namespaced attribute", "//a/@ns:id", map[string]string{"ns": "urn:n"},
			`<r xmlns:p="urn:n"><a p:id="7" id="8"/></r>`, []string{"7"}},
		{"unprefixed name, default namespace", "//title", nil,
			`<root xmlns="http://example.com/ns"><title>T</title></root>`, nil},
		{"unprefixed name, namespace undeclared below", "//root/title", nil,
			`<root><title>T</title><x xmlns="urn:d"><title>U</title></x></root>`, []string{"T"}},
		{"unprefixed names in predicates and functions", "count(//a[b and @c='1']) + count(child::r)", nil,
			`<r><a c="1"><b/></a><a c="1" xmlns="urn:d"><b/></a></r>`, []string{"2"}},
		{"operator names stay operators", "//a[position() mod 2 = 1]", nil, "<r><a>1</a><a>2</a><a>3</a></r>", []string{"1", "3"}},
		{"local-name", "//*[local-name()='title']", nil,
			`<root xmlns="http://example.com/ns"><title>T</title></root>`, []string{"T"}},
		{"declared encoding ignored", "//a", nil,
			`<?xml version="1.0" encoding="ISO-8859-1"?><r><a>é</a></r>`, []string{"é"}},
		{"union in document order", "//b | //a", nil, "<r><a>1</a><b>2</b><a>3</a></r>", []string{"1", "2", "3"}},
		{"union of overlapping sets", "//a | //a[2] | //r/a", nil, "<r><a>1</a><a>2</a></r>", []string{"1", "2"}},
		{"reverse axis in document order", "//c/ancestor::*", nil, "<r>r<x>x<c/></x></r>", []string{"r", "x"}},
		{"attributes after their element", "//@* | //b", nil, `<r a="1"><b c="2" d="3">b</b></r>`, []string{"1", "b", "2", "3"}},
		{"grouped and indexed", "(//a)[2]", nil, "<r><x><a>1</a></x><a>2</a></r>", []string{"2"}},
		{"last", "//a[last()]", nil, "<r><a>1</a><b>2</b><a>3</a></r>", []string{"3"}},
		{"parenthesis in a string", `//a[contains(., ")")]`, nil, "<r><a>1)</a><a>3</a></r>", []string{"1)"}},
		{"bracket in a string", `//a[@id="]"]`, nil, `<r><a id="]">1</a><a>3</a></r>`, []string{"1"}},
		{"negative number", "-1", nil, "<r/>", []string{"-1"}},
		{"concat", `concat("a", 'b')`, nil, "<r/>", []string{"ab"}},
		{"no match", "//b", nil, "<r><a>x</a></r>", nil},
		{"not XML", "//a", nil, "not xml", nil},
		{"empty document", "//a", nil, "", nil},
		{"unclosed", "//a", nil, "<r><a>x</a>", nil},
		{"JSON", "//a", nil, `{"a": 1}`, nil},
		{"count on unparseable", "count(//a)", nil, "<r>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := CompileXPath(tc.sel, tc.ns)
			require.NoError(t, err)
			require.Equal(t, tc.sel, x.String())
			got := selectXML(t, x, tc.xml)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestSelectorsXPathReuse: a compiled selector keeps no state from one
// Select to the next.
func TestSelectorsXPathReuse(t *testing.T) {
	docs := []string{"<r><a>1</a><a>2</a></r>", "<r><a>3</a></r>", "bad", "<r/>", "<r><a>4</a><a>5</a><a>6</a></r>"}
	for _, tc := range []struct {
		sel  string
		want [][]string
	}{
		{"//a", [][]string{{"1", "2"}, {"3"}, nil, nil, {"4", "5", "6"}}},
		{"count(//a)", [][]string{{"2"}, {"1"}, nil, {"0"}, {"3"}}},
		{"//a[last()]", [][]string{{"2"}, {"3"}, nil, nil, {"6"}}},
		{"count(//a) > 1", [][]string{{"true"}, {"false"}, nil, {"false"}, {"true"}}},
	} {
		x, err := CompileXPath(tc.sel, nil)
		require.NoError(t, err)
		for round := range 3 {
			for i, d := range docs {
				require.Equal(t, tc.want[i], selectXML(t, x, d), "%s on %q, round %d", tc.sel, d, round)
			}
		}
	}
}

func TestSelectorsXPathBad(t *testing.T) {
	for _, tc := range []struct {
		sel string
		ns  map[string]string
	}{
		{"", nil},
		{"//a[", nil},
		{"count(", nil},
		{"//a]", nil},
		{"//a b", nil},
		{"//a)", nil},
		{"//a)(", nil},
		{"//a[@id='x]", nil},
		{"count(//a) 1", nil},
		{"///", nil},
		{"//ns:a", nil}, // unbound prefix
		{"//ns:a", map[string]string{"x": "urn:x"}}, // unbound prefix
		{"nosuchfunction(//a)", nil},
	} {
		t.Run(tc.sel, func(t *testing.T) {
			x, err := CompileXPath(tc.sel, tc.ns)
			require.ErrorIs(t, err, ErrBadSelector)
			require.Contains(t, err.Error(), "xpath")
			require.Contains(t, err.Error(), tc.sel)
			require.Nil(t, x)
		})
	}
}

func TestSelectorsJSNumber(t *testing.T) {
	// Variables, so that the sum is float64 arithmetic, not exact constant
	// arithmetic.
	selPointOne, selPointTwo := 0.1, 0.2
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{2, "2"},
		{-2.5, "-2.5"},
		{selPointOne + selPointTwo, "0.30000000000000004"},
		{123456789012345680000, "123456789012345680000"},
		{1e21, "1e+21"},
		{-1.5e300, "-1.5e+300"},
		{0.000001, "0.000001"},
		{1.5e-7, "1.5e-7"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
	} {
		require.Equal(t, tc.want, selJSNumber(tc.f), "%v", tc.f)
	}
}
