package imposterhttp

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Finding 9 of issue 26: a costly predicate held its imposter's lock, and
// stalled the imposter's other requests and GET /imposters meanwhile.
// Matching now runs outside the lock: while one request's predicate
// works through 8 MiB, the same imposter answers another request and the
// admin API lists it, both before the costly one is answered.
func TestACostlyPredicateHoldsUpNobodyElse(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"matches":{"body":"^(a|b|ab|ba)*c"}}],"responses":[{"is":{"body":"costly"}}]},
		{"responses":[{"is":{"body":"cheap"}}]}]}`)
	var costlyDone atomic.Bool
	done := make(chan string, 1)
	go func() {
		// Not do: a failure here must not end this goroutine unheard.
		c := &http.Client{Timeout: 5 * time.Minute}
		resp, err := c.Post(at(port, "/"), "text/plain", strings.NewReader(strings.Repeat("ab", 4<<20)))
		costlyDone.Store(true)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	// Wait until the costly request is being matched (its body is in).
	time.Sleep(300 * time.Millisecond)
	cheap := do(t, "GET", at(port, "/"), "")
	listed := do(t, "GET", base+"/imposters", "")
	stillMatching := !costlyDone.Load()
	require.Equal(t, "cheap", cheap.body)
	require.Equal(t, http.StatusOK, listed.code)
	require.Equal(t, "cheap", <-done, "the costly predicate does not match: the next stub answers")
	require.True(t, stillMatching, "the other calls were answered while the costly match ran")
}

// The configuration's bounds (finding 11): at MaxImposters a new
// imposter is refused, a replacement of one there is not; past
// MaxConfigBytes a change that grows it is refused, one that shrinks it
// is not; an imposter of more than MaxStubs stubs is refused.
func TestTheConfigurationIsBounded(t *testing.T) {
	defs := make([]Definition, MaxImposters)
	for i := range defs {
		defs[i] = Definition{Port: 10000 + i, JSON: []byte(`{}`)}
	}
	err := checkBounds(defs, Change{Put: []Definition{{Port: 9999, JSON: []byte(`{}`)}}})
	require.ErrorContains(t, err, "the most it takes")
	require.NoError(t, checkBounds(defs, Change{Put: []Definition{{Port: 10000, JSON: []byte(`{"a":1}`)}}}), "a replacement")
	require.NoError(t, checkBounds(defs, Change{Delete: []int{10001}, Put: []Definition{{Port: 9999, JSON: []byte(`{}`)}}}), "one out, one in")

	huge := make([]byte, MaxConfigBytes/2)
	two := []Definition{{Port: 1, JSON: huge}, {Port: 2, JSON: huge}}
	require.ErrorContains(t, checkBounds(two, Change{Put: []Definition{{Port: 3, JSON: []byte(`{}`)}}}), "over the cluster's bound")
	require.NoError(t, checkBounds(two, Change{Put: []Definition{{Port: 2, JSON: []byte(`{}`)}}}), "shrinking is never refused")

	base, _ := admin(t)
	stubs := strings.Repeat(`{"responses":[{"is":{}}]},`, MaxStubs) + `{"responses":[{"is":{}}]}`
	a := do(t, "POST", base+"/imposters", `{"protocol":"http","stubs":[`+stubs+`]}`)
	require.Equal(t, http.StatusBadRequest, a.code, a.body)
	require.Contains(t, a.body, "stubs; at most")
	a = do(t, "GET", base+"/imposters", "")
	require.Empty(t, a.json["imposters"], "nothing was created")
}

// Finding 3 of issue 26: a definition that reached the configuration
// without the admin API's checks (written by another version, or by hand
// before the raw KV refused the server's keys) never takes the node
// down: it is skipped with a log line, shown with why, and every other
// imposter is served.
func TestADefinitionThatWillNotCompileIsSkipped(t *testing.T) {
	base, s := admin(t)
	good := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"fine"}}]}]}`)
	cfg := s.cfg.(*MemoryConfig)
	for i, bad := range []string{`{"creation":{"protocol":"http","stubs":[{"predicates":[{"nope":{}}]}]}}`, `not json`, `{"creation":7}`} {
		_, err := cfg.Apply(context.Background(), Change{Put: []Definition{{Port: 4700 + i, JSON: []byte(bad)}}})
		require.NoError(t, err)
	}
	require.NoError(t, s.reconcile(context.Background()))
	for i := range 3 {
		a := do(t, "GET", base+"/imposters/"+strconv.Itoa(4700+i), "")
		require.Equal(t, http.StatusOK, a.code, a.body)
		require.Contains(t, a.json["bindError"], "does not compile on this node")
	}
	require.Equal(t, "fine", do(t, "GET", at(good, "/"), "").body)
	require.Contains(t, do(t, "GET", base+"/logs", "").body, "does not compile on this node")
}

// proxyOnce recordings are bounded per imposter (finding 11): at
// MaxOnceRecordings a request no recording answers is a 503 that calls
// nobody (recording it would pass the bound, and not recording it could
// call upstream twice for one signature); the recordings made still
// answer; deleting them makes room.
func TestProxyOnceRecordingsAreBounded(t *testing.T) {
	base, _ := admin(t)
	var calls atomic.Int64
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.WriteString(w, r.URL.Path)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = upstream.Serve(ln) }()
	t.Cleanup(func() { _ = upstream.Close() })
	port := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://`+ln.Addr().String()+`","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`)
	for i := range MaxOnceRecordings {
		require.Equal(t, "/"+strconv.Itoa(i), do(t, "GET", at(port, "/"+strconv.Itoa(i)), "").body)
	}
	a := do(t, "GET", at(port, "/one-more"), "")
	require.Equal(t, http.StatusServiceUnavailable, a.code, a.body)
	require.Contains(t, a.body, "the most kept")
	require.Equal(t, int64(MaxOnceRecordings), calls.Load(), "the one over the bound called nobody")
	require.Equal(t, "/7", do(t, "GET", at(port, "/7"), "").body, "a recording still answers")
	require.Equal(t, int64(MaxOnceRecordings), calls.Load())
	require.Equal(t, http.StatusOK, do(t, "DELETE", base+"/imposters/"+strconv.Itoa(port)+"/savedProxyResponses", "").code)
	require.Equal(t, "/one-more", do(t, "GET", at(port, "/one-more"), "").body)
}

// A request's header lines are read into at most maxHeaderLines, as
// node's server keeps 2,000 for mountebank: the rest are left out, and
// thousands of distinct names cost what two thousand do.
func TestHeaderLinesAreBounded(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","recordRequests":true}`)
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	defer c.Close()
	var b strings.Builder
	b.WriteString("GET / HTTP/1.1\r\nHost: x\r\n")
	for i := range 3000 {
		b.WriteString("X-" + strconv.Itoa(i) + ": v\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	reply, _ := io.ReadAll(c)
	require.Contains(t, string(reply), "200 OK")
	a := do(t, "GET", base+"/imposters/"+strconv.Itoa(port), "")
	headers := a.json["requests"].([]any)[0].(map[string]any)["headers"].(map[string]any)
	require.Len(t, headers, maxHeaderLines)
	require.Contains(t, headers, "X-1998")
	require.NotContains(t, headers, "X-1999")
}

// An exposed node's GET /config leaves out where it runs on its machine
// (finding 12); a node on loopback shows it, as mountebank does.
func TestAnExposedConfigShowsNoPaths(t *testing.T) {
	base, s := admin(t)
	cwd := func() any {
		return do(t, "GET", base+"/config", "").json["process"].(map[string]any)["cwd"]
	}
	require.NotEmpty(t, cwd())
	s.Exposed()
	require.Equal(t, "", cwd())
}
