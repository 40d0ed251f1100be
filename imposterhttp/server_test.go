package imposterhttp

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/imposter"
)

// admin starts the admin API on a real loopback listener and returns its
// base URL; imposters get ports the OS assigns.
func admin(t *testing.T) (string, *Server) {
	t.Helper()
	s := New("127.0.0.1", slog.New(slog.NewTextHandler(io.Discard, nil)), NewMemoryConfig())
	s.UseMemberKey(testMemberKey)
	mux := http.NewServeMux()
	s.Register(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); s.Close() })
	return "http://" + ln.Addr().String(), s
}

// testMemberKey stands for the key a node derives from its cluster's
// control key.
var testMemberKey = []byte("0123456789abcdef0123456789abcdef")

type answer struct {
	close  bool // the server said Connection: close
	code   int
	header http.Header
	body   string
	json   map[string]any
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}} //nolint:gosec // self-signed test imposters

func do(t *testing.T, method, url, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{close: resp.Close, code: resp.StatusCode, header: resp.Header, body: string(b)}
	_ = json.Unmarshal(b, &a.json)
	return a
}

// create posts an imposter and returns its port.
func create(t *testing.T, base, body string) int {
	t.Helper()
	a := do(t, "POST", base+"/imposters", body)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	return int(a.json["port"].(float64))
}

func at(port int, path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", port, path) }

func errorOf(t *testing.T, a answer) (code, message string) {
	t.Helper()
	errs, ok := a.json["errors"].([]any)
	require.True(t, ok, a.body)
	e := errs[0].(map[string]any)
	c, _ := e["code"].(string)
	m, _ := e["message"].(string)
	return c, m
}

// The admin API's routes, bodies and status codes, as mountebank 2.9
// answers them (the shapes were recorded from it side by side).
func TestAdminAPI(t *testing.T) {
	base, _ := admin(t)
	home := do(t, "GET", base+"/", "")
	require.Equal(t, 200, home.code)
	require.Equal(t, base+"/imposters", home.json["_links"].(map[string]any)["imposters"].(map[string]any)["href"])
	require.Equal(t, "Accept", home.header.Get("Vary"))
	require.Equal(t, "application/json; charset=utf-8", home.header.Get("Content-Type"))
	require.False(t, strings.HasSuffix(home.body, "\n"), "no trailing newline")
	require.Contains(t, home.body, "\n  \"_links\": {", "two-space indentation")

	nf := do(t, "GET", base+"/nonexistent", "")
	require.Equal(t, 404, nf.code)
	require.Contains(t, nf.body, "<pre>Cannot GET /nonexistent</pre>")

	cfg := do(t, "GET", base+"/config", "")
	require.Equal(t, 200, cfg.code)
	require.Equal(t, Version, cfg.json["version"])

	a := do(t, "POST", base+"/imposters", `{"protocol":"http","name":"orders","recordRequests":true,"stubs":[{"responses":[{"is":{"body":"hi"}}],"extra":1}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	port := int(a.json["port"].(float64))
	require.NotZero(t, port, "a port is assigned when omitted")
	self := fmt.Sprintf("%s/imposters/%d", base, port)
	require.Equal(t, self, a.header.Get("Location"))
	require.Equal(t, []string{"protocol", "port", "name", "numberOfRequests", "recordRequests", "requests", "stubs", "_links"}, keysInOrder(t, a.body))
	stub := a.json["stubs"].([]any)[0].(map[string]any)
	require.Equal(t, float64(1), stub["extra"], "unknown stub fields are kept")
	require.Equal(t, self+"/stubs/0", stub["_links"].(map[string]any)["self"].(map[string]any)["href"])

	list := do(t, "GET", base+"/imposters", "")
	require.Equal(t, 200, list.code)
	require.Equal(t, list.body, do(t, "GET", base+"/imposters/", "").body, "a trailing slash is the same route")
	item := list.json["imposters"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"protocol": "http", "port": float64(port), "name": "orders", "numberOfRequests": float64(0),
		"_links": map[string]any{"self": map[string]any{"href": self}, "stubs": map[string]any{"href": self + "/stubs"}}}, item)

	replay := do(t, "GET", base+"/imposters?replayable=true", "")
	item = replay.json["imposters"].([]any)[0].(map[string]any)
	require.NotContains(t, item, "_links")
	require.NotContains(t, item, "requests")
	require.Contains(t, item, "stubs")

	// Stubs: insert, replace, delete, errors.
	a = do(t, "POST", self+"/stubs", `{"index":0,"stub":{"predicates":[{"equals":{"path":"/zero"}}],"responses":[{"is":{"body":"zero"}}]}}`)
	require.Equal(t, 200, a.code, a.body)
	require.Len(t, a.json["stubs"], 2)
	require.Equal(t, "zero", do(t, "GET", at(port, "/zero"), "").body)
	require.Equal(t, "hi", do(t, "GET", at(port, "/other"), "").body)
	a = do(t, "PUT", self+"/stubs/1", `{"responses":[{"is":{"body":"replaced"}}]}`)
	require.Equal(t, 200, a.code, a.body)
	require.Equal(t, "replaced", do(t, "GET", at(port, "/other"), "").body)
	g := do(t, "GET", self+"/stubs/1", "")
	require.Equal(t, 200, g.code)
	require.Equal(t, self+"/stubs/1", g.json["_links"].(map[string]any)["self"].(map[string]any)["href"])
	for _, bad := range []string{"9", "abc", "01"} {
		a = do(t, "DELETE", self+"/stubs/"+bad, "")
		require.Equal(t, 404, a.code, bad)
		c, m := errorOf(t, a)
		require.Equal(t, "bad data", c)
		require.Contains(t, m, "'stubIndex' must be a valid integer")
	}
	a = do(t, "POST", self+"/stubs", `{"index":9}`)
	require.Equal(t, 400, a.code)
	require.Len(t, a.json["errors"], 2, "both the index and the missing stub are reported")
	a = do(t, "PUT", self+"/stubs", `{}`)
	require.Equal(t, 400, a.code)
	_, m := errorOf(t, a)
	require.Equal(t, "'stubs' is a required field", m)
	a = do(t, "PUT", self+"/stubs", `{"stubs":[{"responses":[]}]}`)
	require.Equal(t, 400, a.code)
	_, m = errorOf(t, a)
	require.Equal(t, "'responses' must be a non-empty array", m)
	a = do(t, "DELETE", self+"/stubs/0", "")
	require.Equal(t, 200, a.code)
	require.Len(t, a.json["stubs"], 1)

	// Recorded requests, and resetting them.
	got := do(t, "GET", self, "")
	require.Equal(t, float64(3), got.json["numberOfRequests"])
	require.Len(t, got.json["requests"], 3)
	a = do(t, "DELETE", self+"/savedRequests", "")
	require.Equal(t, 200, a.code)
	require.Equal(t, float64(0), a.json["numberOfRequests"])
	require.Empty(t, a.json["requests"])

	// Deleting.
	require.Equal(t, "{}", do(t, "DELETE", base+"/imposters/9999", "").body, "deleting nothing is 200 {}")
	a = do(t, "GET", base+"/imposters/9999", "")
	require.Equal(t, 404, a.code)
	c, m := errorOf(t, a)
	require.Equal(t, "no such resource", c)
	require.Equal(t, "Try POSTing to /imposters first?", m)
	a = do(t, "DELETE", self, "")
	require.Equal(t, 200, a.code)
	require.Contains(t, a.json, "_links", "the full view by default")
	_, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	require.Error(t, err, "the deleted imposter stopped listening")

	// PUT /imposters replaces all; DELETE /imposters answers replayable.
	a = do(t, "PUT", base+"/imposters", `{"imposters":[{"protocol":"http","stubs":[{"responses":[{"is":{"body":"a"}}]}]},{"protocol":"http"}]}`)
	require.Equal(t, 200, a.code, a.body)
	require.Len(t, a.json["imposters"], 2)
	before := do(t, "GET", base+"/imposters", "").body
	a = do(t, "PUT", base+"/imposters", `{"imposters":[{"protocol":"http"},{"port":4}]}`)
	require.Equal(t, 400, a.code)
	require.Equal(t, before, do(t, "GET", base+"/imposters", "").body, "a bad replacement changes nothing")
	a = do(t, "DELETE", base+"/imposters", "")
	require.Equal(t, 200, a.code)
	require.NotContains(t, a.json["imposters"].([]any)[0], "_links")
	require.Equal(t, "{\n  \"imposters\": []\n}", do(t, "GET", base+"/imposters", "").body)
}

func keysInOrder(t *testing.T, body string) []string {
	t.Helper()
	v, err := imposter.Parse(body)
	require.NoError(t, err)
	return v.(*imposter.Object).Keys()
}

// Bad input: a 400 (or 404) in mountebank's shape, and nothing changes.
func TestAdminErrors(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http"}`)
	for _, tc := range []struct {
		name, body, code, message string
		count                     int
	}{
		{"bad JSON", `{"protocol":"http",`, "invalid JSON", "Unable to parse body as JSON", 1},
		{"no protocol", `{"port":4620}`, "bad data", "'protocol' is a required field", 1},
		{"not an object", `[]`, "bad data", "'protocol' is a required field", 1},
		{"unknown protocol", `{"protocol":"foo"}`, "bad data", "the foo protocol is not yet supported", 1},
		{"tcp mode", `{"protocol":"tcp","mode":"hex"}`, "bad data", "'mode' must be one of ['text', 'binary']", 1},
		{"bad port and protocol", `{"protocol":"foo","port":-1}`, "bad data", "invalid value for 'port'", 2},
		{"port in use", fmt.Sprintf(`{"protocol":"http","port":%d}`, port), "resource conflict", fmt.Sprintf("Port %d is already in use", port), 1},
		{"port too big", `{"protocol":"http","port":70000}`, "bad data", "invalid value for 'port'", 1},
		{"unknown operator", `{"protocol":"http","stubs":[{"predicates":[{"foo":{"path":"/"}}],"responses":[{"is":{}}]}]}`, "bad data", "missing predicate", 1},
		{"bad regex", `{"protocol":"http","stubs":[{"predicates":[{"matches":{"path":"(["}}],"responses":[{"is":{}}]}]}`, "bad data", "invalid regular expression", 1},
		{"two response types", `{"protocol":"http","stubs":[{"responses":[{"is":{},"proxy":{"to":"http://127.0.0.1:1"}}]}]}`, "bad data", "each response object must have only one response type", 1},
		{"unrecognized response", `{"protocol":"http","stubs":[{"responses":[{}]}]}`, "bad data", "unrecognized response type", 1},
		{"proxy with a path", `{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:1/path"}}]}]}`, "bad data", "proxy.to must not contain a path '/path'", 1},
		{"proxy without to", `{"protocol":"http","stubs":[{"responses":[{"proxy":{}}]}]}`, "bad data", "Missing to", 1},
		{"bad repeat", `{"protocol":"http","stubs":[{"responses":[{"is":{},"repeat":0}]}]}`, "bad data", `"repeat" field must be an integer greater than 0`, 1},
		{"negative wait", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"wait":-5}]}]}]}`, "bad data", `wait behavior "wait" field must be an integer greater than or equal to 0`, 1},
		{"unknown behavior", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"foo":1}]}]}]}`, "bad data", `Unrecognized behavior: "foo"`, 1},
		{"lookup delimiter", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":".*"}},"fromDataSource":{"csv":{"path":"x.csv","keyColumn":"id","delimiter":"\n"}},"into":"${R}"}}]}]}]}`, "bad data", "delimiter", 1},
		{"proxy verifyTLS", `{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"https://127.0.0.1:1","verifyTLS":"no"}}]}]}`, "bad data", "proxy.verifyTLS must be true or false", 1},
		{"inject response", `{"protocol":"http","stubs":[{"responses":[{"inject":"(config) => ({})"}]}]}`, "invalid injection", "JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag", 1},
		{"inject predicate", `{"protocol":"http","stubs":[{"predicates":[{"inject":"() => true"}],"responses":[{"is":{}}]}]}`, "invalid injection", "JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag", 1},
		{"decorate", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"decorate":"() => {}"}]}]}]}`, "invalid injection", "JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag", 1},
		{"function wait", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"() => 5"}]}]}]}`, "invalid injection", "JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag", 1},
		{"shellTransform", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"shellTransform":"ls"}]}]}]}`, "invalid injection", "Shell execution is not allowed unless fenceline is run with the -allowInjection flag", 1},
	} {
		before := do(t, "GET", base+"/imposters?replayable=true", "").body
		a := do(t, "POST", base+"/imposters", tc.body)
		require.Equal(t, 400, a.code, tc.name+": "+a.body)
		require.Len(t, a.json["errors"], tc.count, tc.name)
		c, m := errorOf(t, a)
		require.Equal(t, tc.code, c, tc.name)
		require.Contains(t, m, tc.message, tc.name)
		require.Equal(t, before, do(t, "GET", base+"/imposters?replayable=true", "").body, "%s changed the imposters", tc.name)
	}
	a := do(t, "POST", base+"/imposters", strings.Repeat(" ", MaxBodyBytes+1))
	require.Equal(t, 400, a.code, "an oversized admin body")
	a = do(t, "POST", at(port, "/"), strings.Repeat("x", MaxBodyBytes+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, a.code, "an oversized imposter body")
}

// Responses: status, headers (repeated, in the stub's case), JSON bodies
// as mountebank writes them, binary, default response, CORS, cycling.
func TestImposterResponses(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","allowCORS":true,"defaultResponse":{"statusCode":404,"headers":{"X-Default":"yes"},"body":"nope"},"stubs":[
		{"predicates":[{"equals":{"path":"/json"}}],"responses":[{"is":{"body":{"a":1,"b":[1,2],"c":{"d":"e"}}}}]},
		{"predicates":[{"equals":{"path":"/headers"}}],"responses":[{"is":{"statusCode":"201","headers":{"Set-Cookie":["a=1","b=2"],"content-type":"text/plain","Content-Length":999},"body":"h"}}]},
		{"predicates":[{"equals":{"path":"/binary"}}],"responses":[{"is":{"statusCode":200,"_mode":"binary","body":"AAEC\nAw=="}}]},
		{"predicates":[{"equals":{"path":"/cycle"}}],"responses":[{"is":{"statusCode":200,"body":"A"},"repeat":2},{"is":{"statusCode":201,"body":"B"}}]},
		{"predicates":[{"equals":{"path":"/stub"}}],"responses":[{"is":{"body":"stub"}}]}
	]}`)
	a := do(t, "GET", at(port, "/json"), "")
	require.Equal(t, 404, a.code, "the default response's status")
	require.Equal(t, "{\n    \"a\": 1,\n    \"b\": [\n        1,\n        2\n    ],\n    \"c\": {\n        \"d\": \"e\"\n    }\n}", a.body)
	require.Equal(t, "yes", a.header.Get("X-Default"))
	require.Empty(t, a.header.Get("Content-Type"), "no content type is added")
	require.True(t, a.close, "Connection: close, as mountebank sends")

	a = do(t, "GET", at(port, "/headers"), "")
	require.Equal(t, 201, a.code)
	require.Equal(t, []string{"a=1", "b=2"}, a.header.Values("Set-Cookie"))
	require.Equal(t, "text/plain", a.header.Get("Content-Type"))
	require.Equal(t, "1", a.header.Get("Content-Length"), "a given Content-Length is corrected")
	require.Empty(t, a.header.Get("X-Default"), "the stub's headers replace the default's")

	a = do(t, "GET", at(port, "/binary"), "")
	require.Equal(t, "\x00\x01\x02\x03", a.body)

	var seen []string
	for range 5 {
		seen = append(seen, do(t, "GET", at(port, "/cycle"), "").body)
	}
	require.Equal(t, []string{"A", "A", "B", "A", "A"}, seen)

	a = do(t, "GET", at(port, "/none"), "")
	require.Equal(t, 404, a.code)
	require.Equal(t, "nope", a.body)

	a = do(t, "OPTIONS", at(port, "/stub"), "", "Origin", "http://example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "X-Foo")
	require.Equal(t, "stub", a.body, "a preflight still matches stubs")
	require.Equal(t, "http://example.com", a.header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "PUT", a.header.Get("Access-Control-Allow-Methods"))
	require.Equal(t, "X-Foo", a.header.Get("Access-Control-Allow-Headers"))
	a = do(t, "GET", at(port, "/stub"), "", "Origin", "http://example.com")
	require.Empty(t, a.header.Get("Access-Control-Allow-Origin"), "only a preflight gets CORS headers")
}

// Predicates over HTTP: query, headers, JSON and gzip bodies, forms.
func TestImposterPredicatesOverHTTP(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"method":"POST","path":"/orders","body":{"customer":{"tier":"gold"}}}}],"responses":[{"is":{"body":"gold"}}]},
		{"predicates":[{"deepEquals":{"query":{"a":["1","2"]}}},{"exists":{"headers":{"X-Token":true}}}],"responses":[{"is":{"body":"query"}}]},
		{"predicates":[{"equals":{"form":{"user":"alice"}}}],"responses":[{"is":{"body":"form"}}]},
		{"predicates":[{"matches":{"path":"^/items/\\d+$"}}],"responses":[{"is":{"body":"item"}}]}
	]}`)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(`{"customer": {"id": 1, "tier": "Gold"}}`))
	_ = w.Close()
	require.Equal(t, "gold", do(t, "POST", at(port, "/orders"), gz.String(), "Content-Encoding", "gzip").body, "a gzip body is decoded")
	require.Equal(t, "query", do(t, "GET", at(port, "/q?a=2&a=1"), "", "X-Token", "t").body)
	require.Equal(t, "", do(t, "GET", at(port, "/q?a=2&a=1&b=3"), "", "X-Token", "t").body, "deepEquals: an extra key fails")
	require.Equal(t, "form", do(t, "POST", at(port, "/login"), "user=alice&pass=x", "Content-Type", "application/x-www-form-urlencoded").body)
	require.Equal(t, "item", do(t, "GET", at(port, "/ITEMS/42"), "").body)
	require.Equal(t, "", do(t, "GET", at(port, "/items/x"), "").body)
}

func TestBehaviorsOverHTTP(t *testing.T) {
	base, s := admin(t)
	csv := filepath.Join(t.TempDir(), "people.csv")
	require.NoError(t, s.UseDataRoot(filepath.Dir(csv)))
	require.NoError(t, os.WriteFile(csv, []byte("id,name,city\n123,Alice,Paris\n456,Bob,\"New York\"\n"), 0o600))
	port := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[
		{"predicates":[{"startsWith":{"path":"/copy"}}],"responses":[{"is":{"headers":{"X-Path":"${PATH}"},"body":"id=${PATH}[1] q=${Q} name=${NAME}[1] missing=${MISSING}"},
			"behaviors":[
				{"copy":{"from":"path","into":"${PATH}","using":{"method":"regex","selector":"/copy/(\\d+)"}}},
				{"copy":{"from":{"query":"q"},"into":"${Q}","using":{"method":"regex","selector":".*"}}},
				{"copy":{"from":"body","into":"${NAME}","using":{"method":"jsonpath","selector":"$..name"}}},
				{"copy":{"from":"body","into":"${MISSING}","using":{"method":"jsonpath","selector":"$.nothere"}}}]}]},
		{"predicates":[{"startsWith":{"path":"/lookup"}}],"responses":[{"is":{"body":"name=${ROW}[\"name\"] city=${ROW}['city'] none=${ROW}[\"zzz\"]"},
			"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"/lookup/(.*)$"},"index":1},"fromDataSource":{"csv":{"path":%q,"keyColumn":"id"}},"into":"${ROW}"}}]}]},
		{"predicates":[{"equals":{"path":"/wait"}}],"responses":[{"is":{"body":"waited"},"_behaviors":{"wait":150}}]}
	]}`, csv))
	a := do(t, "POST", at(port, "/copy/123?q=hello%20there"), `{"people":[{"name":"Ann"},{"name":"Ben"}]}`)
	require.Equal(t, "id=123 q=hello there name=Ben missing=${MISSING}", a.body)
	require.Equal(t, "/copy/123", a.header.Get("X-Path"))
	require.Equal(t, "name=Bob city=New York none=${ROW}[\"zzz\"]", do(t, "GET", at(port, "/lookup/456"), "").body)
	require.Equal(t, "name=${ROW}[\"name\"] city=${ROW}['city'] none=${ROW}[\"zzz\"]", do(t, "GET", at(port, "/lookup/999"), "").body)
	start := time.Now()
	require.Equal(t, "waited", do(t, "GET", at(port, "/wait"), "").body)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	stubs := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "").json["stubs"].([]any)
	resp := stubs[2].(map[string]any)["responses"].([]any)[0].(map[string]any)
	require.Equal(t, []any{map[string]any{"wait": float64(150)}}, resp["behaviors"], "the legacy _behaviors object is upcast")
	require.NotContains(t, resp, "_behaviors")

	// A statusCode a behavior fills in (mountebank's copy page): taken when
	// the stub is made, checked when the answer is. One left unfilled, or
	// no HTTP status, fails that request as node fails mountebank's.
	port = create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"startsWith":{"path":"/statusCode"}}],"responses":[{"is":{"statusCode":"${code}"},
			"behaviors":[{"copy":{"from":"path","into":"${code}","using":{"method":"regex","selector":"\\d+$"}}}]}]},
		{"predicates":[{"equals":{"path":"/bad"}}],"responses":[{"is":{"statusCode":99}}]}]}`)
	require.Equal(t, 418, do(t, "GET", at(port, "/statusCode/418"), "").code)
	for path, shown := range map[string]string{"/statusCode/x": "${code}", "/statusCode/1000": "1000", "/bad": "99"} {
		a := do(t, "GET", at(port, path), "")
		require.Equal(t, http.StatusInternalServerError, a.code, path)
		require.Equal(t, `{"errors":[{"code":"ERR_HTTP_INVALID_STATUS_CODE","message":"Invalid status code: `+shown+`"}]}`, a.body, path)
	}
	// The Connection header node gives: close if the request said so,
	// keep-alive otherwise.
	require.Contains(t, raw(t, port, "GET /bad HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), "\r\nConnection: close\r\n")
	require.Contains(t, raw(t, port, "GET /bad HTTP/1.1\r\nHost: x\r\n\r\n"), "\r\nConnection: keep-alive\r\n")
}

func TestFaults(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},
		{"predicates":[{"equals":{"path":"/random"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]},
		{"predicates":[{"equals":{"path":"/unknown"}}],"responses":[{"fault":"FOO"}]}]}`)
	// Read raw, as the faults are below HTTP: a reset is a TCP reset; the
	// random data is 32 bytes that are no HTTP response, then the close.
	raw := func(path string) ([]byte, error) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		return io.ReadAll(c)
	}
	_, err := raw("/reset")
	require.ErrorIs(t, err, syscall.ECONNRESET, "CONNECTION_RESET_BY_PEER")
	got, err := raw("/random")
	require.NoError(t, err, "RANDOM_DATA_THEN_CLOSE closes after its data")
	require.Len(t, got, 32)
	require.False(t, bytes.HasPrefix(got, []byte("HTTP/")), "no HTTP response: %q", got)
	a := do(t, "GET", at(port, "/unknown"), "")
	require.Equal(t, 200, a.code, "an unknown fault answers as an empty response")
	require.Equal(t, float64(3), do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "").json["numberOfRequests"])
}

// proxyOnce calls the real service once per signature, even when many
// requests with the same signature arrive together, and replays the
// recording after; proxyAlways records every call; proxyTransparent none.
func TestProxyModes(t *testing.T) {
	base, _ := admin(t)
	var calls atomic.Int64
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		time.Sleep(50 * time.Millisecond) // long enough for the others to arrive
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"path":%q,"call":%d}`, r.URL.Path, calls.Load())
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = upstream.Serve(ln) }()
	t.Cleanup(func() { _ = upstream.Close() })
	to := "http://" + ln.Addr().String()

	once := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, to))
	var wg sync.WaitGroup
	bodies := make([]string, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = do(t, "GET", at(once, "/same"), "").body
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), calls.Load(), "eight concurrent requests, one upstream call")
	for _, b := range bodies {
		require.JSONEq(t, `{"path":"/same","call":1}`, b)
	}
	require.Equal(t, "{\n    \"path\": \"/same\",\n    \"call\": 1\n}", bodies[0], "the recorded JSON body is re-written as mountebank does")
	do(t, "GET", at(once, "/other"), "")
	require.Equal(t, int64(2), calls.Load())
	self := fmt.Sprintf("%s/imposters/%d", base, once)
	stubs := do(t, "GET", self, "").json["stubs"].([]any)
	require.Len(t, stubs, 3, "two recordings before the proxy stub")
	first := stubs[0].(map[string]any)
	require.Equal(t, []any{map[string]any{"deepEquals": map[string]any{"path": "/same"}}}, first["predicates"])
	is := first["responses"].([]any)[0].(map[string]any)["is"].(map[string]any)
	require.Equal(t, float64(200), is["statusCode"])
	require.Equal(t, "text", is["_mode"])
	require.Contains(t, is, "_proxyResponseTime")
	require.NotContains(t, do(t, "GET", self+"?replayable=true", "").body, "_proxyResponseTime")
	removed := do(t, "GET", self+"?removeProxies=true", "").json["stubs"].([]any)
	require.Len(t, removed, 2, "removeProxies drops the proxy stub")
	a := do(t, "DELETE", self+"/savedProxyResponses", "")
	require.Len(t, a.json["stubs"], 1, "only the proxy stub is left")

	always := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, to))
	before := calls.Load()
	do(t, "GET", at(always, "/a"), "")
	do(t, "GET", at(always, "/a"), "")
	require.Equal(t, before+2, calls.Load(), "proxyAlways keeps calling")
	stubs = do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, always), "").json["stubs"].([]any)
	require.Len(t, stubs, 2, "the proxy stub first, then one recording")
	require.Len(t, stubs[1].(map[string]any)["responses"], 2, "the second call appended to the recording")

	transparent := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyTransparent"}}]}]}`, to))
	do(t, "GET", at(transparent, "/t"), "")
	require.Len(t, do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, transparent), "").json["stubs"], 1)

	dead := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:1"}}]}]}`)
	a = do(t, "GET", at(dead, "/x"), "")
	require.Equal(t, 500, a.code)
	c, _ := errorOf(t, a)
	require.Equal(t, "invalid proxy", c)
}

func TestHTTPS(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"https","stubs":[{"responses":[{"is":{"body":"secure"}}]}]}`)
	a := do(t, "GET", fmt.Sprintf("https://127.0.0.1:%d/", port), "")
	require.Equal(t, "secure", a.body)
	got := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	require.Contains(t, got.json["cert"], "BEGIN CERTIFICATE")
	require.Equal(t, false, got.json["mutualAuth"])
	a = do(t, "POST", base+"/imposters", `{"protocol":"https","key":"not a key","cert":"not a cert"}`)
	require.Equal(t, 400, a.code)

	// A proxy to an https imposter (its self-signed certificate not
	// checked on loopback, as mountebank checks none), twice: the second
	// call goes on the kept TLS connection.
	up := create(t, base, `{"protocol":"https","recordRequests":true,"stubs":[{"responses":[{"is":{"headers":{"Connection":"keep-alive"},"body":"secure"}}]}]}`)
	proxy := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"https://127.0.0.1:%d","mode":"proxyAlways"}}]}]}`, up))
	for range 2 { // kept alive: this package's test client would say close, which goes upstream
		got := raw(t, proxy, "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
		require.True(t, strings.HasSuffix(got, "\r\n\r\n6\r\nsecure\r\n0\r\n\r\n"), got)
	}
	reqs := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, up), "").json["requests"].([]any)
	require.Len(t, reqs, 2)
	require.Equal(t, reqs[0].(map[string]any)["requestFrom"], reqs[1].(map[string]any)["requestFrom"], "one TLS connection")
}
