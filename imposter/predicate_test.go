package imposter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func mustParse(t testing.TB, s string) any {
	t.Helper()
	v, err := Parse(s)
	require.NoError(t, err, s)
	return v
}

func req(method, path, query, body string, headers ...string) *Request {
	r := &Request{Method: method, Path: path, Query: ParseQuery(query), Headers: NewObject(), Body: body,
		RequestFrom: "127.0.0.1:5000", IP: "127.0.0.1"}
	for i := 0; i+1 < len(headers); i += 2 {
		AddHeader(r.Headers, headers[i], headers[i+1])
		if IsForm(headers[i+1]) {
			r.Form = ParseQuery(body)
		}
	}
	return r
}

// Every operator and parameter, on the examples mountebank's predicate
// documentation gives and on the corners its source defines.
func TestPredicates(t *testing.T) {
	get := req("GET", "/customers/123", "q=Mountebank&page=2&tag=a&tag=b", "", "Accept", "text/plain", "X-Repeated", "one", "X-Repeated", "two")
	jsonBody := req("POST", "/orders", "", `{"order": {"id": 7, "items": [{"sku": "A1", "qty": 2}, {"sku": "b2", "qty": 1}], "note": "Rush"}, "tags": ["x", "y"], "ok": true}`, "Content-Type", "application/json")
	xml := req("POST", "/soap", "", `<root xmlns:b="http://example.com/books"><b:title lang="en">Go</b:title><b:title>Raft</b:title><count>2</count></root>`)
	form := req("POST", "/login", "", "user=alice&pass=s3cret&pass=again", "Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	text := req("POST", "/text", "", "Hello World\nsecond line")
	for _, tc := range []struct {
		name, predicate string
		r               *Request
		want            bool
	}{
		// equals
		{"equals path", `{"equals": {"path": "/customers/123"}}`, get, true},
		{"equals path differs", `{"equals": {"path": "/customers/124"}}`, get, false},
		{"equals ignores case by default", `{"equals": {"method": "get", "path": "/CUSTOMERS/123"}}`, get, true},
		{"equals caseSensitive", `{"equals": {"path": "/CUSTOMERS/123"}, "caseSensitive": true}`, get, false},
		{"equals query subset", `{"equals": {"query": {"q": "mountebank"}}}`, get, true},
		{"equals query key case", `{"equals": {"query": {"Q": "mountebank"}}}`, get, true},
		{"equals query keyCaseSensitive false with caseSensitive", `{"equals": {"query": {"Q": "Mountebank"}}, "caseSensitive": true, "keyCaseSensitive": false}`, get, true},
		{"equals query caseSensitive keys", `{"equals": {"query": {"Q": "Mountebank"}}, "caseSensitive": true}`, get, false},
		{"equals repeated query, one value", `{"equals": {"query": {"tag": "b"}}}`, get, true},
		{"equals repeated query, both values", `{"equals": {"query": {"tag": ["b", "a"]}}}`, get, true},
		{"equals repeated query, a missing value", `{"equals": {"query": {"tag": ["a", "c"]}}}`, get, false},
		{"equals missing query key", `{"equals": {"query": {"nope": "x"}}}`, get, false},
		{"equals missing query key is empty", `{"equals": {"query": {"nope": ""}}}`, get, true},
		{"equals header any value", `{"equals": {"headers": {"x-repeated": "two"}}}`, get, true},
		{"equals number against string", `{"equals": {"query": {"page": 2}}}`, get, true},
		{"equals json body subset", `{"equals": {"body": {"order": {"id": 7}}}}`, jsonBody, true},
		{"equals json body value case", `{"equals": {"body": {"order": {"note": "rush"}}}}`, jsonBody, true},
		{"equals json body wrong", `{"equals": {"body": {"order": {"id": 8}}}}`, jsonBody, false},
		{"equals json array any element", `{"equals": {"body": {"tags": "y"}}}`, jsonBody, true},
		{"equals json array of objects", `{"equals": {"body": {"order": {"items": {"sku": "b2"}}}}}`, jsonBody, true},
		{"equals json array of objects, expected array", `{"equals": {"body": {"order": {"items": [{"sku": "a1"}]}}}}`, jsonBody, true},
		{"equals json boolean", `{"equals": {"body": {"ok": true}}}`, jsonBody, true},
		{"equals body string vs object", `{"equals": {"body": {"a": 1}}}`, text, false},
		{"equals except", `{"equals": {"path": "/customers/"}, "except": "\\d+"}`, get, true},
		{"equals form", `{"equals": {"form": {"user": "alice"}}}`, form, true},
		{"equals form repeated", `{"equals": {"form": {"pass": "again"}}}`, form, true},
		{"equals jsonpath", `{"equals": {"body": "a1"}, "jsonpath": {"selector": "$.order.items[0].sku"}}`, jsonBody, true},
		{"equals jsonpath several", `{"equals": {"body": "b2"}, "jsonpath": {"selector": "$..sku"}}`, jsonBody, true},
		{"equals jsonpath no match", `{"equals": {"body": "z"}, "jsonpath": {"selector": "$.nothing"}}`, jsonBody, false},
		{"equals jsonpath no match is empty", `{"equals": {"body": ""}, "jsonpath": {"selector": "$.nothing"}}`, jsonBody, true},
		{"equals xpath with namespace", `{"equals": {"body": "go"}, "xpath": {"selector": "//b:title[@lang='en']", "ns": {"b": "http://example.com/books"}}}`, xml, true},
		{"equals xpath any node", `{"equals": {"body": "raft"}, "xpath": {"selector": "//b:title", "ns": {"b": "http://example.com/books"}}}`, xml, true},
		{"equals xpath count", `{"equals": {"body": "2"}, "xpath": {"selector": "count(//b:title)", "ns": {"b": "http://example.com/books"}}}`, xml, true},
		// deepEquals
		{"deepEquals query exact", `{"deepEquals": {"query": {"q": "mountebank", "page": "2", "tag": ["a", "b"]}}}`, get, true},
		{"deepEquals query order-free arrays", `{"deepEquals": {"query": {"q": "mountebank", "page": "2", "tag": ["b", "a"]}}}`, get, true},
		{"deepEquals query extra key fails", `{"deepEquals": {"query": {"q": "mountebank"}}}`, get, false},
		{"deepEquals empty query", `{"deepEquals": {"query": {}}}`, text, true},
		{"deepEquals body string", `{"deepEquals": {"body": "hello world\nsecond line"}}`, text, true},
		{"deepEquals json body", `{"deepEquals": {"body": {"tags": ["x", "y"], "ok": true, "order": {"id": 7, "note": "rush", "items": [{"qty": 2, "sku": "a1"}, {"sku": "b2", "qty": 1}]}}}}`, jsonBody, true},
		{"deepEquals json body missing key", `{"deepEquals": {"body": {"ok": true}}}`, jsonBody, false},
		// contains, startsWith, endsWith
		{"contains body", `{"contains": {"body": "WORLD"}}`, text, true},
		{"contains caseSensitive", `{"contains": {"body": "WORLD"}, "caseSensitive": true}`, text, false},
		{"startsWith path", `{"startsWith": {"path": "/customers"}}`, get, true},
		{"startsWith not", `{"startsWith": {"path": "/orders"}}`, get, false},
		{"endsWith path", `{"endsWith": {"path": "/123"}}`, get, true},
		{"endsWith header", `{"endsWith": {"headers": {"accept": "/plain"}}}`, get, true},
		{"contains json field", `{"contains": {"body": {"order": {"note": "us"}}}}`, jsonBody, true},
		// matches
		{"matches path", `{"matches": {"path": "^/customers/\\d+$"}}`, get, true},
		{"matches keeps \\W", `{"matches": {"path": "^\\W"}}`, get, true},
		{"matches ignores case", `{"matches": {"body": "^HELLO"}}`, text, true},
		{"matches caseSensitive", `{"matches": {"body": "^HELLO"}, "caseSensitive": true}`, text, false},
		{"matches header key case", `{"matches": {"headers": {"ACCEPT": "text"}}}`, get, true},
		{"matches prefix ignoring case", `{"matches": {"path": "^/CUSTOMERS/\\d"}}`, get, true},
		{"matches prefix mismatch", `{"matches": {"path": "^/customerz"}}`, get, false},
		{"matches alternation is no prefix", `{"matches": {"path": "^/orders|customers"}}`, get, true},
		{"matches short input", `{"matches": {"method": "^GETTING"}}`, get, false},
		{"matches query array", `{"matches": {"query": {"tag": "^b$"}}}`, get, true},
		{"matches multiline text", `{"matches": {"body": "line$"}}`, text, true},
		{"matches jsonpath", `{"matches": {"body": "^A\\d$"}, "jsonpath": {"selector": "$.order.items[0].sku"}}`, jsonBody, true},
		// exists
		{"exists query", `{"exists": {"query": {"q": true}}}`, get, true},
		{"exists query missing", `{"exists": {"query": {"nope": true}}}`, get, false},
		{"exists false", `{"exists": {"query": {"nope": false}}}`, get, true},
		{"exists body", `{"exists": {"body": true}}`, text, true},
		{"exists empty body", `{"exists": {"body": true}}`, get, false},
		{"exists json field", `{"exists": {"body": {"order": {"note": true}}}}`, jsonBody, true},
		{"exists json field missing", `{"exists": {"body": {"order": {"zzz": true}}}}`, jsonBody, false},
		{"exists repeated header", `{"exists": {"headers": {"x-repeated": true}}}`, get, true},
		// not, or, and
		{"not", `{"not": {"equals": {"method": "POST"}}}`, get, true},
		{"or", `{"or": [{"equals": {"method": "POST"}}, {"startsWith": {"path": "/cust"}}]}`, get, true},
		{"or none", `{"or": [{"equals": {"method": "POST"}}, {"startsWith": {"path": "/x"}}]}`, get, false},
		{"and", `{"and": [{"equals": {"method": "GET"}}, {"contains": {"path": "123"}}]}`, get, true},
		{"and one fails", `{"and": [{"equals": {"method": "GET"}}, {"contains": {"path": "999"}}]}`, get, false},
		{"requestFrom", `{"startsWith": {"requestFrom": "127.0.0.1:"}}`, get, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompilePredicate(mustParse(t, tc.predicate))
			require.NoError(t, err)
			require.Equal(t, tc.want, p.Matches(tc.r))
		})
	}
}

func TestPredicateErrors(t *testing.T) {
	for _, tc := range []struct{ predicate, code, msg string }{
		{`{"foo": {"path": "/"}}`, CodeBadData, "missing predicate"},
		{`"equals"`, CodeBadData, "must be an object"},
		{`{"equals": "x"}`, CodeBadData, "must be an object"},
		{`{"matches": {"path": "(unclosed"}}`, CodeBadData, "invalid regular expression"},
		{`{"matches": {"path": "(?=lookahead)"}}`, CodeBadData, "invalid regular expression"},
		{`{"equals": {"path": "/"}, "except": "["}`, CodeBadData, "invalid except"},
		{`{"equals": {"body": "x"}, "jsonpath": {"selector": "$[?("}}`, CodeBadData, "jsonpath"},
		{`{"equals": {"body": "x"}, "xpath": {"selector": "//["}}`, CodeBadData, "xpath"},
		{`{"equals": {"body": "x"}, "jsonpath": {}}`, CodeBadData, "selector"},
		{`{"or": {"equals": {}}}`, CodeBadData, "array"},
		{`{"inject": 5}`, CodeBadData, "must be a string"},
	} {
		_, err := CompilePredicate(mustParse(t, tc.predicate))
		var e *Error
		require.ErrorAs(t, err, &e, tc.predicate)
		require.Equal(t, tc.code, e.Code, tc.predicate)
		require.Contains(t, e.Message, tc.msg, tc.predicate)
	}
}
