package imposterhttp

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/imposter"
)

// scripting is an admin API whose server allows injection, each call
// bounded by budget.
func scripting(t *testing.T, budget time.Duration) (string, *Server) {
	t.Helper()
	base, s := admin(t)
	s.AllowInjection(budget)
	return base, s
}

// Every injection point over HTTP, with one state shared by the
// predicate, response and decorate functions of an imposter, as
// mountebank's docs describe it.
func TestInjectionOverHTTP(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"inject":"(config) => { config.state.seen = (config.state.seen || 0) + 1; return config.request.path === '/count'; }"}],
		 "responses":[{"inject":"(config) => ({ statusCode: 200, headers: {'X-Seen': String(config.state.seen)}, body: { seen: config.state.seen } })",
		              "behaviors":[{"decorate":"(config) => { config.response.headers['X-Decorated'] = config.request.method; }"}]}]},
		{"predicates":[{"equals":{"path":"/legacy"}}],
		 "responses":[{"inject":"function (request, state, logger, callback) { logger.info('legacy %s', request.path); return { body: request.method + ' ' + request.path }; }"}]},
		{"predicates":[{"equals":{"path":"/wait"}}],
		 "responses":[{"is":{"body":"waited"},"behaviors":[{"wait":"function () { return 150; }"}]}]},
		{"predicates":[{"equals":{"path":"/async"}}],
		 "responses":[{"inject":"(config) => { setTimeout(() => config.callback({ statusCode: 202, body: 'later' }), 10); }"}]},
		{"predicates":[{"equals":{"path":"/throw"}}],
		 "responses":[{"inject":"function (config) { throw new Error(\"boom\"); }"}]},
		{"predicates":[{"equals":{"path":"/forever"}}],
		 "responses":[{"inject":"function (config) { for (;;) {} }"}]},
		{"predicates":[{"equals":{"path":"/string"}}],
		 "responses":[{"inject":"(config) => 'hello'"}]},
		{"predicates":[{"equals":{"path":"/keys"}}],
		 "responses":[{"inject":"(config) => ({ body: Object.keys(config.request).join(',') })"}]}
	]}`)
	for i := 1; i <= 3; i++ {
		a := do(t, "GET", at(port, "/count"), "")
		require.Equal(t, 200, a.code, a.body)
		assert.Equal(t, fmt.Sprint(i), a.header.Get("X-Seen"))
		assert.Equal(t, "GET", a.header.Get("X-Decorated"))
		assert.JSONEq(t, fmt.Sprintf(`{"seen": %d}`, i), a.body)
	}
	a := do(t, "POST", at(port, "/legacy"), "")
	assert.Equal(t, "POST /legacy", a.body)
	a = do(t, "GET", at(port, "/keys"), "")
	assert.Equal(t, "requestFrom,method,path,query,headers,body,ip", a.body, "the request as mountebank hands it to functions: no timestamp")
	a = do(t, "GET", at(port, "/string"), "")
	assert.Equal(t, 200, a.code, "a result that is no object answers with the defaults, as mountebank's")
	assert.Empty(t, a.body)

	start := time.Now()
	a = do(t, "GET", at(port, "/wait"), "")
	assert.Equal(t, "waited", a.body)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	a = do(t, "GET", at(port, "/async"), "")
	assert.Equal(t, 202, a.code)
	assert.Equal(t, "later", a.body)

	a = do(t, "GET", at(port, "/throw"), "")
	require.Equal(t, 500, a.code)
	e := a.json["errors"].([]any)[0].(map[string]any)
	assert.Equal(t, "invalid injection", e["code"])
	assert.Equal(t, "invalid response injection", e["message"])
	assert.Equal(t, `(function (config) { throw new Error("boom"); })(config, injectState, logger, done, imposterState);`, e["source"])
	assert.Equal(t, "boom", e["data"])

	start = time.Now()
	a = do(t, "GET", at(port, "/forever"), "")
	require.Equal(t, 500, a.code)
	assert.Contains(t, a.body, "time budget of 2s")
	assert.Less(t, time.Since(start), 5*time.Second)

	// The predicate ran for every request above (it is the first stub):
	// the state counted them all, and changing the stubs keeps it.
	seen := do(t, "GET", at(port, "/count"), "").header.Get("X-Seen")
	assert.Equal(t, "11", seen)
	a = do(t, "PUT", fmt.Sprintf("%s/imposters/%d/stubs", base, port), `{"stubs":[{"responses":[{"inject":"(config) => ({ body: String(config.state.seen) })"}]}]}`)
	require.Equal(t, 200, a.code, a.body)
	assert.Equal(t, "11", do(t, "GET", at(port, "/"), "").body)
	// A new creation starts with an empty state.
	do(t, "DELETE", fmt.Sprintf("%s/imposters/%d", base, port), "")
	create(t, base, fmt.Sprintf(`{"protocol":"http","port":%d,"stubs":[{"responses":[{"inject":"(config) => ({ body: String(config.state.seen) })"}]}]}`, port))
	assert.Equal(t, "undefined", do(t, "GET", at(port, "/"), "").body)
}

// The state lives in the flow store: what another member wrote is what
// the next request sees, and a change that lost to another member's is a
// 503 that says so, its answer withheld.
func TestInjectionStateInTheStore(t *testing.T) {
	base, s := scripting(t, 2*time.Second)
	var bump sync.Once
	var stateFlow string
	up := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Another member changes the state while the function waits.
		bump.Do(func() {
			_, _ = s.flows.Do(context.Background(), flow.Request{Flow: stateFlow, Op: flow.OpSet, Key: "state", Value: []byte("0\n{\"n\":100}")})
		})
		_, _ = w.Write([]byte("ok"))
	})}
	upBase := serveOn(t, &up)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/slow"}}],
		 "responses":[{"inject":"(config) => { config.state.n = (config.state.n || 0) + 1; require('http').get('`+upBase+`/', () => config.callback({ body: String(config.state.n) })); }"}]},
		{"responses":[{"inject":"(config) => { config.state.n = (config.state.n || 0) + 1; return { body: String(config.state.n) }; }"}]}
	]}`)
	s.mu.Lock()
	stateFlow = s.imposters[port].imp.ScriptStateFlow()
	s.mu.Unlock()
	assert.Equal(t, "1", do(t, "GET", at(port, "/"), "").body)
	_, err := s.flows.Do(context.Background(), flow.Request{Flow: stateFlow, Op: flow.OpSet, Key: "state", Value: []byte("0\n{\"n\":41}")})
	require.NoError(t, err)
	assert.Equal(t, "42", do(t, "GET", at(port, "/"), "").body, "the state another member wrote")

	a := do(t, "GET", at(port, "/slow"), "")
	require.Equal(t, 503, a.code, a.body)
	assert.Equal(t, "injection_state_conflict", a.header.Get(UnavailableHeader))
	assert.Equal(t, "101", do(t, "GET", at(port, "/"), "").body, "the lost change was dropped; the winner's stands")
}

// Without -allowInjection every injection point is refused at creation,
// nested predicates too (mountebank checks only top-level ones), with
// mountebank's errors, the stubs listed last first.
func TestInjectionRefused(t *testing.T) {
	base, _ := admin(t)
	a := do(t, "POST", base+"/imposters", `{"protocol":"http","stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"5"}]}]}]}`)
	require.Equal(t, 400, a.code, "a wait given as a string, even of digits, is injection to mountebank: %s", a.body)
	a = do(t, "POST", base+"/imposters", `{"protocol":"http","stubs":[
		{"predicates":[{"not":{"inject":"c => false"}}],"responses":[{"is":{}}]},
		{"responses":[{"inject":"c => ({})","behaviors":[{"shellTransform":"cat"}]}]}]}`)
	require.Equal(t, 400, a.code, a.body)
	errs := a.json["errors"].([]any)
	require.Len(t, errs, 3)
	msgs := []string{}
	for _, e := range errs {
		m := e.(map[string]any)
		assert.Equal(t, "invalid injection", m["code"])
		msgs = append(msgs, m["message"].(string))
	}
	assert.Equal(t, []string{
		"JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag",
		"Shell execution is not allowed unless fenceline is run with the -allowInjection flag",
		"JavaScript injection is not allowed unless fenceline is run with the -allowInjection flag",
	}, msgs)
	port := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{}}]}]}`)
	a = do(t, "POST", fmt.Sprintf("%s/imposters/%d/stubs", base, port), `{"stub":{"responses":[{"is":{},"behaviors":[{"decorate":"c => {}"}]}]}}`)
	require.Equal(t, 400, a.code, a.body)
	assert.Contains(t, a.body, "-allowInjection")
}

// A script tries what injection must not give it: files, processes, the
// network past the egress policy.
func TestInjectionReach(t *testing.T) {
	base, s := scripting(t, 2*time.Second)
	eg, err := ExposedEgress(nil)
	require.NoError(t, err)
	s.UseEgress(eg) // loopback denied, as on an exposed node
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/fs"}}],"responses":[{"inject":"c => ({ body: require('fs').readFileSync('/etc/passwd', 'utf8') })"}]},
		{"predicates":[{"equals":{"path":"/proc"}}],"responses":[{"inject":"c => ({ body: String(require('child_process').execSync('id')) })"}]},
		{"predicates":[{"equals":{"path":"/net"}}],"responses":[{"inject":"c => { require('http').get('`+base+`/imposters', r => c.callback({ body: 'reached' })).on('error', e => c.callback({ statusCode: 502, body: e.message })); }"}]}
	]}`)
	for _, p := range []string{"/fs", "/proc"} {
		a := do(t, "GET", at(port, p), "")
		require.Equal(t, 500, a.code, p)
		assert.Contains(t, a.body, "Cannot find module", p)
	}
	a := do(t, "GET", at(port, "/net"), "")
	assert.Equal(t, 502, a.code)
	assert.Contains(t, a.body, "egress policy refuses")
}

// shellTransform runs the definition's command with the request in its
// environment, never through a line made of the request's data.
func TestShellTransform(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	script := filepath.Join(dir, "t.sh")
	// The body: the lines of MB_REQUEST and MB_RESPONSE (compact JSON:
	// none past the first), and the last argument's first byte.
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\nfor last; do :; done\nprintf '{\"statusCode\":201,\"body\":\"%s %s %.1s\"}' \"$(printf '%s' \"$MB_REQUEST\" | wc -l | tr -d ' ')\" \"$(printf '%s' \"$MB_RESPONSE\" | wc -l | tr -d ' ')\" \"$last\"\n"), 0o755))
	port := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"is":{"body":"x"},"behaviors":[{"shellTransform":%q}]}]}]}`, script))
	a := do(t, "GET", at(port, "/'; touch "+strings.ReplaceAll(marker, "/", "%2F")+"; '"), "")
	require.Equal(t, 201, a.code, a.body)
	assert.Equal(t, "0 0 {", a.body, "one-line JSON in the environment, and the response as the last argument")
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the request's data ran as a command")
}

// serveOn serves srv on a loopback port: its base URL.
func serveOn(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := netListen()
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// The state is bounded by what the cluster keeps in one value: a change
// past it fails its request with a clear error and is dropped.
func TestInjectionStateBound(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/big"}}],"responses":[{"inject":"(config) => { config.state.big = 'x'.repeat(20000); return { body: 'made' }; }"}]},
		{"responses":[{"inject":"(config) => { config.state.n = (config.state.n || 0) + 1; return { body: String(config.state.n) + ' ' + typeof config.state.big }; }"}]}]}`)
	assert.Equal(t, "1 undefined", do(t, "GET", at(port, "/"), "").body)
	a := do(t, "GET", at(port, "/big"), "")
	require.Equal(t, 500, a.code, a.body)
	e := a.json["errors"].([]any)[0].(map[string]any)
	assert.Equal(t, "invalid injection", e["code"])
	assert.Equal(t, "invalid state", e["message"])
	assert.Contains(t, e["data"], "more than the 16352 the cluster keeps")
	// At the bound exactly: kept.
	exact := fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"inject":"(config) => { for (const k of Object.keys(config.state)) { delete config.state[k]; } config.state.s = 'x'.repeat(%d); return { body: String(JSON.stringify(config.state).length) }; }"}]}]}`, imposter.MaxStateBytes-len(`{"s":""}`))
	at16 := create(t, base, exact)
	a = do(t, "GET", at(at16, "/"), "")
	require.Equal(t, 200, a.code, a.body)
	assert.Equal(t, fmt.Sprint(imposter.MaxStateBytes), a.body)
	assert.Equal(t, "2 undefined", do(t, "GET", at(port, "/"), "").body, "the big change was dropped")
}

// An imposter whose functions cannot reach the state touches no flow
// state: its requests run their JavaScript where they are met.
func TestInjectionWithoutState(t *testing.T) {
	base, s := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"inject":"(config) => config.request.path === '/p'"}],"responses":[{"inject":"(config) => ({ body: 'pure ' + config.request.method })"}]},
		{"responses":[{"is":{"body":"x"},"behaviors":[{"decorate":"(config) => { config.response.body = 'decorated'; }"}]}]}]}`)
	s.mu.Lock()
	imp := s.imposters[port].imp
	scripted, key := imp.Scripted(), imp.ScriptStateFlow()
	s.mu.Unlock()
	assert.False(t, scripted)
	assert.Equal(t, "pure GET", do(t, "GET", at(port, "/p"), "").body)
	assert.Equal(t, "decorated", do(t, "GET", at(port, "/q"), "").body)
	resp, err := s.flows.Do(context.Background(), flow.Request{Flow: key, Op: flow.OpGet, Key: "state"})
	require.NoError(t, err)
	assert.False(t, resp.Found, "no state was written")
}

// A function waiting for its callback does not hold up the imposter's
// other requests, as mountebank's node does not.
func TestInjectionAsyncDoesNotBlock(t *testing.T) {
	base, _ := scripting(t, 3*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/slow"}}],"responses":[{"inject":"(config) => { setTimeout(() => config.callback({ body: 'slow' }), 1000); }"}]},
		{"responses":[{"is":{"body":"fast"}}]}]}`)
	slow := make(chan string, 1)
	go func() { slow <- do(t, "GET", at(port, "/slow"), "").body }()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	assert.Equal(t, "fast", do(t, "GET", at(port, "/fast"), "").body)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "the fast request waited for the slow one")
	assert.Equal(t, "slow", <-slow)
}

// The contract's corners, each as mountebank gives it: a wait function's
// error names the function as written; a predicateGenerator's inject adds
// its predicates to the recording, and its failure fails the call; an
// endOfRequestResolver given as null is none.
func TestInjectionCorners(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/wait"}}],"responses":[{"is":{},"behaviors":[{"wait":"function () { throw new Error('no wait'); }"}]}]}]}`)
	a := do(t, "GET", at(port, "/wait"), "")
	require.Equal(t, 500, a.code, a.body)
	e := a.json["errors"].([]any)[0].(map[string]any)
	assert.Equal(t, "invalid wait injection", e["message"])
	assert.Equal(t, "function () { throw new Error('no wait'); }", e["source"], "the function as written, not a call of it")
	assert.Equal(t, "no wait", e["data"])

	origin := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"origin"}}]}]}`)
	proxy := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:%d",
		"predicateGenerators":[{"inject":"(config) => [{ equals: { path: config.request.path } }]"}],
		"addDecorateBehavior":"(config) => { config.response.body = 'decorated ' + config.response.body; }"}}]}]}`, origin))
	assert.Equal(t, "origin", do(t, "GET", at(proxy, "/first"), "").body, "the live answer is not decorated")
	assert.Equal(t, "decorated origin", do(t, "GET", at(proxy, "/first"), "").body, "the recording is")
	saved := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, proxy), "").body
	assert.Contains(t, saved, `"path": "/first"`)

	failing := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:%d",
		"predicateGenerators":[{"inject":"(config) => { throw new Error('no predicates'); }"}]}}]}]}`, origin))
	a = do(t, "GET", at(failing, "/x"), "")
	require.Equal(t, 500, a.code, a.body)
	assert.Contains(t, a.body, "invalid predicateGenerator injection")
	assert.Contains(t, a.body, "no predicates")

	plain, _ := admin(t) // injection not allowed
	a = do(t, "POST", plain+"/imposters", `{"protocol":"tcp","endOfRequestResolver":null,"stubs":[{"responses":[{"is":{"data":"x"}}]}]}`)
	assert.Equal(t, 201, a.code, "a null endOfRequestResolver is none: %s", a.body)
}

// The stored state: written again when older than the refresh age even
// if unchanged (so that an idle state outlives the store's TTL), and a
// stored value that is no JSON fails the request that reads it, clearly.
func TestInjectionStoredState(t *testing.T) {
	base, s := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"inject":"(config) => ({ body: String(config.state.n) })"}]}]}`)
	s.mu.Lock()
	key := s.imposters[port].imp.ScriptStateFlow()
	s.mu.Unlock()
	get := func() string {
		resp, err := s.flows.Do(context.Background(), flow.Request{Flow: key, Op: flow.OpGet, Key: "state"})
		require.NoError(t, err)
		return string(resp.Value)
	}
	_, err := s.flows.Do(context.Background(), flow.Request{Flow: key, Op: flow.OpSet, Key: "state", Value: []byte("1000\n{\"n\":7}")})
	require.NoError(t, err)
	assert.Equal(t, "7", do(t, "GET", at(port, "/"), "").body)
	stamp, text, _ := strings.Cut(get(), "\n")
	assert.Equal(t, `{"n":7}`, text)
	assert.NotEqual(t, "1000", stamp, "an old state read unchanged is written again")
	before := get()
	assert.Equal(t, "7", do(t, "GET", at(port, "/"), "").body)
	assert.Equal(t, before, get(), "a fresh one is not")

	_, err = s.flows.Do(context.Background(), flow.Request{Flow: key, Op: flow.OpSet, Key: "state", Value: []byte("1000\n{not json")})
	require.NoError(t, err)
	a := do(t, "GET", at(port, "/"), "")
	require.Equal(t, 500, a.code, a.body)
	assert.Contains(t, a.body, `"message":"invalid state"`)
}

// Requests queued for the script turn longer than their bound are
// answered 503 injection_busy, never left hanging.
func TestInjectionTurnBound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the turn's bound")
	}
	base, _ := scripting(t, 100*time.Millisecond)
	port := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"inject":"(config) => { config.state.seen = true; }"}]}]}`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for range 70 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := do(t, "GET", at(port, "/"), "")
			mu.Lock()
			codes[fmt.Sprint(a.code, " ", a.header.Get(UnavailableHeader))]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("answers: %v", codes)
	assert.Positive(t, codes["503 injection_busy"], "some waited past the bound")
	assert.Positive(t, codes["500 "], "the first ones ran out their budget")
}

// A state that cannot be written (here a cycle, which JSON cannot hold)
// fails its request, and the next request starts again from what the
// cluster holds.
func TestInjectionStateRecovers(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/cycle"}}],"responses":[{"inject":"(config) => { config.state.self = config.state; return { body: 'x' }; }"}]},
		{"responses":[{"inject":"(config) => { config.state.n = (config.state.n || 0) + 1; return { body: String(config.state.n) }; }"}]}]}`)
	assert.Equal(t, "1", do(t, "GET", at(port, "/"), "").body)
	a := do(t, "GET", at(port, "/cycle"), "")
	require.Equal(t, 500, a.code, a.body)
	assert.Contains(t, a.body, "invalid state")
	assert.Equal(t, "2", do(t, "GET", at(port, "/"), "").body, "back to the cluster's state, the cycle gone")
}
