package imposter

// Fuzz targets for the parsers of what strangers write (issue 26): the
// JSON reader, an imposter's creation request, a stored definition,
// predicates and their selectors. scripts/fuzz runs each for a fixed time.

import (
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzCreations are creation requests as mountebank's users write them,
// for the seed corpora.
var fuzzCreations = []string{
	`{"protocol":"http"}`,
	`{"protocol":"http","port":4545,"name":"orders","recordRequests":true,"allowCORS":true,
	  "defaultResponse":{"statusCode":404,"body":"none","headers":{"X-Default":"1"}},
	  "stubs":[
	    {"predicates":[{"equals":{"method":"GET","path":"/orders/7","query":{"expand":"items"}}}],
	     "responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"application/json"},"body":{"id":7,"items":[{"sku":"A1"}]}}},
	                  {"is":{"statusCode":500},"repeat":2}]},
	    {"predicates":[{"and":[{"startsWith":{"path":"/customers"}},{"not":{"exists":{"headers":{"Authorization":true}}}}]}],
	     "responses":[{"is":{"statusCode":401}}]},
	    {"predicates":[{"matches":{"body":"^\\d+$"},"caseSensitive":true,"except":"\\s"}],
	     "responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
	    {"predicates":[{"deepEquals":{"query":{"a":["1","2"]}}}],"responses":[{"is":{"body":"deep"}}]},
	    {"predicates":[{"equals":{"body":"Go"},"xpath":{"selector":"//b:title","ns":{"b":"http://example.com/books"}}}],
	     "responses":[{"is":{"body":"<ok/>"},"behaviors":[{"wait":10}]}]},
	    {"predicates":[{"equals":{"body":"A1"},"jsonpath":{"selector":"$.order.items[0].sku"}}],
	     "responses":[{"is":{"body":"${TOKEN}"},"behaviors":[{"copy":{"from":"path","into":"${TOKEN}","using":{"method":"regex","selector":"\\d+"}}}]}]},
	    {"responses":[{"is":{"body":"old"},"_behaviors":{"wait":5,"repeat":2}}]},
	    {"responses":[{"proxy":{"to":"http://localhost:9000","mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true,"query":true}}]}}]}
	  ]}`,
	`{"protocol":"https","port":"8443","key":"-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----","mutualAuth":true}`,
	`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow","ttlSeconds":60,"durability":"sync","contextScope":"tenant","tenant":"t1"}},
	  "stubs":[{"scenarioName":"login","requiredScenarioState":"Started","newScenarioState":"in",
	            "responses":[{"is":{"statusCode":200}}]}]}`,
	`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"x"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"/(\\w+)$"},"index":1},"fromDataSource":{"csv":{"path":"data.csv","keyColumn":"name"}},"into":"${row}"}}]}]}]}`,
	`{"protocol":"http","stubs":[{"responses":[{"inject":"function () {}"}]}]}`,
	`{"protocol":"tcp","mode":"text"}`,
	`{"protocol":"http","stubs":[{"responses":[]}]}`,
	`{"protocol":"http","stubs":[{"predicates":[{"equals":{"path":"/"},"jsonpath":{"selector":"$..["}}],"responses":[{"is":{}}]}]}`,
	`{"protocol":"http","endOfRequestResolver":{"inject":"x"}}`,
	`[]`,
}

// FuzzParse reads arbitrary text as JSON. Parse never panics; it fails
// with ErrSyntax exactly where encoding/json finds the text invalid (up
// to Parse's tighter nesting bound), and reads the values encoding/json
// reads; and what it accepts prints (Marshal) to text that parses again to
// a value that prints the same.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzCreations {
		f.Add(s)
	}
	for _, s := range []string{
		``, `{"a":1,"a":2,"b":3}`, `{"b":1,"2":2,"10":3,"1":4,"01":5}`, `[1.0,-0,1e400,-1e-400,123456789012345680000]`,
		`"\ud800\udc00\u00e9\"\\\/\b\f\n\r\t"`, `"\ud800"`, "\"\xff\xfe\"", `[[[[[]]]]]`, ` {"x" : [ true , false , null ] } `,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k3":"again","k17":17}`,
		`{"a":1,}`, `01`, `1.`, `-`, `"\x01"`, `tru`, `{"a":1} x`, `NaN`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		valid := json.Valid([]byte(s)) && depthOf(s) <= maxDepth
		if err != nil {
			require.ErrorIs(t, err, ErrSyntax)
			require.False(t, valid, "encoding/json reads it: %v", err)
			return
		}
		require.True(t, valid, "encoding/json does not read it")
		var plain any
		if json.Unmarshal([]byte(s), &plain) == nil { // not for numbers out of float64's range
			require.Equal(t, plain, toPlain(v), "a key set twice keeps its last value")
		}
		out := Marshal(v, 0)
		w, err := Parse(string(out))
		require.NoError(t, err, "Marshal wrote %q", out)
		require.Equal(t, string(out), string(Marshal(w, 0)))
		pretty := Marshal(v, 2)
		w, err = Parse(string(pretty))
		require.NoError(t, err, "Marshal wrote %q", pretty)
		require.Equal(t, string(out), string(Marshal(w, 0)))
	})
}

// depthOf is the deepest nesting of brackets outside strings (for valid
// JSON, the depth Parse counts, plus one).
func depthOf(s string) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most - 1
}

// FuzzNew compiles arbitrary JSON as a creation request, as POST
// /imposters does, and answers one request with what compiled. Nothing
// panics; every error New returns is a *Error (its documented promise),
// as is every error Respond returns; and compiling allocates a bounded
// multiple of the definition's size.
func FuzzNew(f *testing.F) {
	for _, s := range fuzzCreations {
		f.Add(s)
	}
	r := &Request{Method: "POST", Path: "/orders/7", Query: ParseQuery("expand=items&a=1&a=2"), Headers: NewObject(),
		Body: `{"order":{"items":[{"sku":"A1"}]}}`, RequestFrom: "127.0.0.1:5000", IP: "127.0.0.1", Arrived: time.Unix(1, 0)}
	AddHeader(r.Headers, "Content-Type", "application/json")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		creation, ok := v.(*Object)
		if !ok {
			return
		}
		imp, alloc, err := allocated(func() (*Imposter, error) { return New(creation, 4545) })
		// Regular expressions are compiled with their creation, and Go's
		// regexp allocates ~110 KB compiling the 7 bytes "a{1000}": per
		// byte of pattern this is bounded (repeat counts are), and in all
		// by MaxRegexInsts and MaxImposterRegexInsts (regexsize.go).
		require.LessOrEqual(t, alloc, uint64(1<<20+32<<10*len(s)), "bytes allocated compiling %d bytes", len(s))
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "New's error %T %v is no *Error", err, err)
			require.NotEmpty(t, e.Code)
			_ = Marshal(e.Value(), 0)
			return
		}
		_ = Marshal(imp.Value(PrintOptions{BaseURL: "http://localhost:2525"}), 2)
		req := *r
		req.Query, req.Headers = Clone(r.Query).(*Object), Clone(r.Headers).(*Object)
		for range 3 {
			if _, _, err := imp.Respond(&req); err != nil {
				var e *Error
				require.True(t, errors.As(err, &e), "Respond's error %T %v is no *Error", err, err)
			}
		}
	})
}

// allocated runs fn and returns the bytes it allocated.
func allocated[T any](fn func() (T, error)) (T, uint64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v, err := fn()
	runtime.ReadMemStats(&after)
	return v, after.TotalAlloc - before.TotalAlloc, err
}

// FuzzDecodeStored reads arbitrary bytes as a stored definition, as every
// member reads the cluster's configuration, and builds what decodes.
// Nothing panics; what decodes encodes to bytes that decode the same; a
// build's error is a *Error.
func FuzzDecodeStored(f *testing.F) {
	for i, s := range fuzzCreations {
		c, err := Parse(s)
		require.NoError(f, err)
		o, ok := c.(*Object)
		if !ok {
			continue
		}
		d := Stored{Incarnation: "inc" + strconv.Itoa(i), Creation: o, StubIDs: make([]string, len(StubConfigs(o))), Resets: i % 2, Recordings: i % 3}
		for j := range d.StubIDs {
			d.StubIDs[j] = d.Incarnation + "." + strconv.Itoa(j)
		}
		f.Add(d.Encode())
	}
	f.Add([]byte(`{"incarnation":"a","imposter":{"protocol":"http","stubs":[{"responses":[{"is":{}}]}]}}`))
	f.Add([]byte(`{"incarnation":"a","imposter":{"protocol":"http"},"stubIds":["x"]}`))
	f.Add([]byte(`{"incarnation":"a","imposter":{"protocol":"http"},"resets":1e300,"recordings":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeStored(b)
		if err != nil {
			return
		}
		again, err := DecodeStored(d.Encode())
		require.NoError(t, err, "%s", d.Encode())
		require.Equal(t, string(d.Encode()), string(again.Encode()))
		_ = d.Scope()
		if _, err := d.Build(4545, false); err != nil {
			// DecodeStored checked the ids against the stubs: only New
			// may fail, with a *Error.
			var e *Error
			require.True(t, errors.As(err, &e), "Build's error %T %v is no *Error", err, err)
		}
	})
}

// FuzzPredicate compiles an arbitrary predicate and evaluates it against a
// request with an arbitrary body and query. Nothing panics, a compile
// error is a *Error, and evaluating it twice answers the same (compiled
// predicates are shared, read only, by concurrent requests).
func FuzzPredicate(f *testing.F) {
	for _, tc := range []struct{ pred, body, query string }{
		{`{"equals":{"path":"/customers/123","query":{"q":"mountebank"}}}`, ``, `q=Mountebank&page=2`},
		{`{"deepEquals":{"body":{"order":{"id":"7"}}}}`, `{"order":{"id":7}}`, ``},
		{`{"contains":{"body":"rush"},"caseSensitive":false,"except":"[0-9]+"}`, `Order 77 RUSH`, ``},
		{`{"matches":{"body":"^\\w+\\s\\d{2,}$","path":"^/c"}}`, `hello 123`, ``},
		{`{"equals":{"body":"A1"},"jsonpath":{"selector":"$.order.items[?(@.qty>1)].sku"}}`, `{"order":{"items":[{"sku":"A1","qty":2},{"sku":"b2","qty":1}]}}`, ``},
		{`{"equals":{"body":"Go"},"xpath":{"selector":"//b:title[@lang='en']","ns":{"b":"http://example.com/books"}}}`, `<root xmlns:b="http://example.com/books"><b:title lang="en">Go</b:title></root>`, ``},
		{`{"exists":{"query":{"tag":true},"body":{"tags":true}}}`, `{"tags":["x","y"]}`, `tag=a&tag=b`},
		{`{"or":[{"startsWith":{"path":"/x"}},{"not":{"endsWith":{"body":"z"}}}]}`, `xyz`, ``},
		{`{"equals":{"form":{"user":"alice"}}}`, ``, ``},
		{`{"equals":{"body":{"A":{"B":1}}},"keyCaseSensitive":true}`, `{"a":{"b":1},"A":{"B":1}}`, ``},
		{`{"matches":{"body":"(?=x)"}}`, `x`, ``},
	} {
		f.Add(tc.pred, tc.body, tc.query)
	}
	f.Fuzz(func(t *testing.T, pred, body, query string) {
		v, err := Parse(pred)
		if err != nil {
			return
		}
		p, err := CompilePredicate(v)
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e), "CompilePredicate's error %T %v is no *Error", err, err)
			return
		}
		r := &Request{Method: "POST", Path: "/customers/123", Query: ParseQuery(query), Headers: NewObject(), Body: body,
			RequestFrom: "127.0.0.1:5000", IP: "127.0.0.1"}
		AddHeader(r.Headers, "Content-Type", "application/x-www-form-urlencoded")
		r.Form = ParseQuery(body)
		first := p.Matches(r)
		require.Equal(t, first, p.Matches(r), "a second evaluation answers differently")
	})
}

// FuzzSelectors compiles an arbitrary string as a JSONPath and as an
// XPath selector and applies each to an arbitrary body, as predicates and
// the copy and lookup behaviors do per request. Nothing panics, a compile
// error wraps ErrBadSelector, a selection fails only at its work budget
// (ErrSelectorBudget), every filter's queries are read for the budget,
// and an XPath selects the same on reuse (it keeps state between
// selections).
func FuzzSelectors(f *testing.F) {
	for _, tc := range []struct{ sel, doc string }{
		{"$.order.items[0].sku", `{"order":{"items":[{"sku":"A1"}]}}`},
		{"$..book[?(@.price<10)].title", `{"store":{"book":[{"title":"b0","price":8},{"title":"b1","price":12}]}}`},
		{"$.flags[?(@.on === true)]", `{"flags":{"z":{"on":true},"m":{"on":false}}}`},
		{"user-id", `{"user-id":"u1","10":"ten","9":"nine"}`},
		{"$.books.length", `{"books":[1,2,3]}`},
		{"$['key with space']", `{"key with space":"ks"}`},
		{"$.books[-1:].title", `{"books":[{"title":"t0"},{"title":"t1"}]}`},
		{"$.books[?match(@.title, 't.')].price", `{"books":[{"title":"t0","price":5}]}`},
		{"//title", `<root><title lang="en">Go</title><title>Raft</title></root>`},
		{"//b:title/@lang", `<root xmlns:b="urn:b"><b:title lang="en">Go</b:title></root>`},
		{"count(//item) > 1", `<r><item/><item/></r>`},
		{"string(/r/a[2])", `<r><a>1</a><a>2</a></r>`},
		{"//a | //b", `<r><b>2</b><a>1</a></r>`},
		{"//*[local-name()='x' and namespace-uri()='']/text()", `<r xmlns="urn:d"><x>1</x></r>`},
		{"/r/comment()", `<?xml version="1.0" encoding="ISO-8859-1"?><r><!--c--><![CDATA[d]]><?pi data?></r>`},
		{"//a]", `<a/>`},
		{"$..[", `{}`},
		// Past the work budget (selbudget.go).
		{"//a[count(//a) > 0]", "<r>" + strings.Repeat("<a/>", 4000) + "</r>"},
		{"$[?count($..*) > 0]", "[" + strings.TrimSuffix(strings.Repeat("[],", 5000), ",") + "]"},
	} {
		f.Add(tc.sel, tc.doc)
	}
	f.Fuzz(func(t *testing.T, sel, doc string) {
		if jp, err := CompileJSONPath(sel); err != nil {
			require.ErrorIs(t, err, ErrBadSelector)
		} else {
			require.Equal(t, sel, jp.String())
			parsed, err := Parse(doc)
			if err != nil {
				parsed = doc
			}
			found, err := jp.Select(toPlain(parsed))
			if err != nil {
				require.ErrorIs(t, err, ErrSelectorBudget)
			}
			_ = anySlice(found)
			for f, sf := range jp.filters {
				require.False(t, sf.opaque, "the queries of filter %s could not be read", f)
			}
		}
		ns := map[string]string{"b": "urn:b", "x": "http://example.com/x"}
		xp, err := CompileXPath(sel, ns)
		if err != nil {
			require.ErrorIs(t, err, ErrBadSelector)
			return
		}
		first, err := xp.Select(doc)
		if err != nil {
			require.ErrorIs(t, err, ErrSelectorBudget)
		}
		again, err2 := xp.Select(doc)
		require.Equal(t, first, again, "an XPath selects differently on reuse")
		require.Equal(t, err, err2)
		_, _ = xp.Select(strings.ToLower(doc))
	})
}
