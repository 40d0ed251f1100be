package script

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const req = `{"requestFrom":"127.0.0.1:5000","method":"GET","path":"/hello","query":{"q":"1"},"headers":{"Host":"x"},"body":"","ip":"127.0.0.1"}`

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) log(level, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, level+" "+msg)
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func newEngine(t *testing.T, h Host) (*Engine, *logLines) {
	t.Helper()
	ll := &logLines{}
	if h.Log == nil {
		h.Log = ll.log
	}
	e := New(h)
	t.Cleanup(e.Close)
	return e, ll
}

func respond(t *testing.T, e *Engine, src string) map[string]any {
	t.Helper()
	out, err := e.Respond(context.Background(), src, []byte(req))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m
}

// Each injection point gets its arguments in mountebank's documented
// order, new style (config) and legacy (positional) alike.
func TestInjectionPointsContract(t *testing.T) {
	e, ll := newEngine(t, Host{Scope: "[http:4545] "})
	ctx := context.Background()

	ok, err := e.Predicate(`function (config, logger, state) { logger.info('saw %s', config.request.path); return config.request.path === '/hello' && config.path === '/hello' && config.state === state; }`, []byte(req))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Contains(t, ll.all(), "info [http:4545] saw /hello")

	ok, err = e.Predicate(`request => request.query.q === '2'`, []byte(req))
	require.NoError(t, err)
	assert.False(t, ok, "legacy: the request's fields are on config")

	m := respond(t, e, `function (config, injectState, logger, callback, imposterState) {
		return { statusCode: 201, body: JSON.stringify({ keys: Object.keys(config), same: config.state === imposterState, other: injectState !== imposterState }) };
	}`)
	assert.EqualValues(t, 201, m["statusCode"])
	assert.Equal(t, `{"keys":["request","state","logger","callback","requestFrom","method","path","query","headers","body","ip"],"same":true,"other":true}`, m["body"])

	out, err := e.Decorate(ctx, `(config, response, logger) => { response.body = config.request.path + response.body; }`, []byte(req), []byte(`{"statusCode":200,"body":"!"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"statusCode":200,"body":"/hello!"}`, string(out))
	out, err = e.Decorate(ctx, `config => ({ statusCode: 202 })`, []byte(req), []byte(`{"statusCode":200,"body":"!"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"statusCode":202}`, string(out), "a returned object replaces the response")

	ms, err := e.Wait(`function () { return 7 * 6; }`)
	require.NoError(t, err)
	assert.EqualValues(t, 42, ms)

	gen, err := e.Generate(`config => [{ equals: { path: config.request.path } }]`, []byte(req))
	require.NoError(t, err)
	assert.JSONEq(t, `[{"equals":{"path":"/hello"}}]`, string(gen))

	end, err := e.EndOfRequest(`(data, logger) => data.length >= 4 && data.readInt32BE(0) === 1`, []byte{0, 0, 0, 1}, false)
	require.NoError(t, err)
	assert.True(t, end)
	end, err = e.EndOfRequest(`data => data.indexOf('\n') >= 0`, []byte("abc"), true)
	require.NoError(t, err)
	assert.False(t, end)
}

// State is one object per engine, seen by every function, and carried
// as JSON to and from the cluster.
func TestState(t *testing.T) {
	e, _ := newEngine(t, Host{})
	for i := 1; i <= 3; i++ {
		ok, err := e.Predicate(`config => { config.state.n = (config.state.n || 0) + 1; return true; }`, []byte(req))
		require.NoError(t, err)
		require.True(t, ok)
	}
	m := respond(t, e, `(config) => ({ body: String(config.state.n) })`)
	assert.Equal(t, "3", m["body"])
	text, err := e.State()
	require.NoError(t, err)
	assert.Equal(t, `{"n":3}`, text)

	// The same text keeps the live object, functions and all.
	_, err = e.Predicate(`config => { config.state.f = () => 9; return true; }`, []byte(req))
	require.NoError(t, err)
	require.NoError(t, e.SetState(`{"n":3}`))
	m = respond(t, e, `(config) => ({ body: String(config.state.f()) })`)
	assert.Equal(t, "9", m["body"])
	// Another text replaces it.
	require.NoError(t, e.SetState(`{"n":10}`))
	m = respond(t, e, `(config) => ({ body: String(config.state.n) + typeof config.state.f })`)
	assert.Equal(t, "10undefined", m["body"])
}

func TestAsyncAnswers(t *testing.T) {
	e, _ := newEngine(t, Host{})
	m := respond(t, e, `(config) => { setTimeout(() => config.callback({ body: 'later' }), 20); }`)
	assert.Equal(t, "later", m["body"])
	m = respond(t, e, `async (config) => { await new Promise(r => setTimeout(r, 5)); return { body: 'awaited' }; }`)
	assert.Equal(t, "awaited", m["body"])
	m = respond(t, e, `(config) => { config.callback({ body: 'first' }); return { body: 'second' }; }`)
	assert.Equal(t, "first", m["body"], "the first answer wins")
	out, err := e.Decorate(context.Background(), `async config => { config.response.body = 'async'; }`, []byte(req), []byte(`{"body":"x"}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"body":"async"}`, string(out))
}

// A function that throws, never answers, or loops forever fails its
// call with an error naming the injection point; the engine goes on.
func TestFailuresAndBudget(t *testing.T) {
	e, ll := newEngine(t, Host{Budget: 200 * time.Millisecond})
	_, err := e.Respond(context.Background(), `function (config) { throw new Error("boom"); }`, []byte(req))
	var se *Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "invalid response injection", se.Point)
	assert.Equal(t, "boom", se.Data)
	assert.Contains(t, ll.all(), "injection X=> boom")

	_, err = e.Predicate(`syntax error here`, []byte(req))
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "invalid predicate injection", se.Point)

	start := time.Now()
	_, err = e.Predicate(`() => { for (;;) {} }`, []byte(req))
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Data, "time budget of 200ms")
	assert.Less(t, time.Since(start), 2*time.Second)

	_, err = e.Respond(context.Background(), `config => {}`, []byte(req))
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Data, "no answer within the time budget")

	_, err = e.Respond(context.Background(), `config => null`, []byte(req))
	require.ErrorAs(t, err, &se)

	// A timer that loops forever is stopped too, and logged.
	m := respond(t, e, `config => { setTimeout(() => { for (;;) {} }, 1); return { body: 'ok' }; }`)
	assert.Equal(t, "ok", m["body"])
	require.Eventually(t, func() bool { return strings.Contains(ll.all(), "in a timer") }, 3*time.Second, 10*time.Millisecond)

	// and the engine still answers
	m = respond(t, e, `config => ({ body: 'still here' })`)
	assert.Equal(t, "still here", m["body"])

	// The bound on a result, judged on its own engine: building and
	// stringifying 9 MiB can take longer than the 200 ms budget above on
	// a slow machine, and then the budget, not the bound, stops it.
	big, _ := newEngine(t, Host{Budget: 20 * time.Second})
	_, err = big.Respond(context.Background(), `config => ({ body: 'x'.repeat(9 << 20) })`, []byte(req))
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Data, "more than")
}

// What a function can reach: the modules fenceline offers, nothing else.
func TestNodeSurface(t *testing.T) {
	e, ll := newEngine(t, Host{Env: map[string]string{"GREETING": "hi"}})
	m := respond(t, e, `(config) => {
		const util = require('util');
		const b = Buffer.from('AAEC/w==', 'base64');
		return { body: util.format('%s-%d-%j', process.env.GREETING, b[3], {a: 1}) + ' ' + b.toString('hex') + ' ' + Buffer.from('héllo').length + ' ' + Buffer.isBuffer(b) };
	}`)
	assert.Equal(t, `hi-255-{"a":1} 000102ff 6 true`, m["body"])
	for _, mod := range []string{"fs", "child_process", "net", "os"} {
		_, err := e.Respond(context.Background(), `config => { require('`+mod+`'); return {}; }`, []byte(req))
		var se *Error
		require.ErrorAs(t, err, &se, mod)
		assert.Contains(t, se.Data, "Cannot find module '"+mod+"'")
	}
	_, err := e.Respond(context.Background(), `config => { console.log('hello %s', 'there'); return {}; }`, []byte(req))
	require.NoError(t, err)
	assert.Contains(t, ll.all(), "info hello there")
}

// The documented asynchronous example: http.request through the host.
func TestOutboundHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Up", "1")
		_, _ = w.Write([]byte("upstream " + r.Method + " " + r.URL.Path))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port

	var asked []HTTPRequest
	h := Host{HTTP: func(ctx context.Context, r HTTPRequest) (HTTPResponse, error) {
		asked = append(asked, r)
		if r.Host != "127.0.0.1" {
			return HTTPResponse{}, errors.New("the egress policy refuses " + r.Host)
		}
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.Port) + r.Path)
		if err != nil {
			return HTTPResponse{}, err
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 512)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return HTTPResponse{Status: resp.StatusCode, Headers: [][2]string{{"X-Up", resp.Header.Get("X-Up")}}, Body: []byte(b.String())}, nil
	}}
	e, _ := newEngine(t, h)
	src := `function (config) {
		var http = require('http'), options = { method: 'GET', hostname: '127.0.0.1', port: ` + strconv.Itoa(port) + `, path: '/there' },
			httpRequest = http.request(options, response => {
				var body = '';
				response.setEncoding('utf8');
				response.on('data', chunk => { body += chunk; });
				response.on('end', () => { config.callback({ statusCode: response.statusCode, body: body + ' ' + response.headers['x-up'] }); });
			});
		httpRequest.end();
	}`
	m := respond(t, e, src)
	assert.Equal(t, "upstream GET /there 1", m["body"])
	require.Len(t, asked, 1)

	m = respond(t, e, `function (config) {
		require('http').get('http://10.1.2.3/x', r => config.callback({ body: 'reached' })).on('error', err => config.callback({ statusCode: 502, body: err.message }));
	}`)
	assert.EqualValues(t, 502, m["statusCode"])
	assert.Equal(t, "the egress policy refuses 10.1.2.3", m["body"])
}

// A function that allocates without end is stopped by the heap watchdog
// long before its time budget, and the engine goes on.
func TestHeapWatchdog(t *testing.T) {
	old := MaxHeapBytes
	MaxHeapBytes = 256 << 20
	t.Cleanup(func() { MaxHeapBytes = old })
	e, _ := newEngine(t, Host{Budget: time.Minute})
	start := time.Now()
	_, err := e.Respond(context.Background(), `config => { const a = []; for (;;) { a.push('x'.repeat(1 << 16) + a.length); } }`, []byte(req))
	var se *Error
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Data, "heap passed 256 MiB")
	assert.Less(t, time.Since(start), 30*time.Second)
	m := respond(t, e, `config => ({ body: 'after' })`)
	assert.Equal(t, "after", m["body"])
}

// Which functions may reach the state: what imposter.Scripted builds on.
func TestMayReachState(t *testing.T) {
	for _, tc := range []struct {
		src  string
		pos  int
		want bool
	}{
		{`(config) => ({ body: config.request.path })`, 1, false},
		{`function (request) { return { body: 'x' }; }`, 1, false},
		{`function (request, s) { s.n = 1; return {}; }`, 1, true}, // injectState, positionally
		{`(config, logger) => true`, 2, false},
		{`(config, logger, st) => st.x`, 2, true}, // imposterState, positionally
		{`(config) => config.state.n`, -1, true},
		{`(...args) => args[4]`, 1, true},
		{`function () { return arguments[4]; }`, 1, true},
		{`(config, response, logger) => {}`, -1, false},
		{`not javascript (`, 1, true},
	} {
		assert.Equal(t, tc.want, MayReachState(tc.src, tc.pos), tc.src)
	}
}

// injectState (old-style response functions' second argument) is kept
// with the imposter's state, apart from it.
func TestInjectStateTravels(t *testing.T) {
	e, _ := newEngine(t, Host{})
	respond(t, e, `function (request, injectState, logger, callback, imposterState) { injectState.a = 1; imposterState.b = 2; return {}; }`)
	text, err := e.State()
	require.NoError(t, err)
	other, _ := newEngine(t, Host{})
	require.NoError(t, other.SetState(text))
	m := respond(t, other, `function (request, injectState, logger, callback, imposterState) { return { body: injectState.a + ' ' + imposterState.b + ' ' + (injectState === imposterState) }; }`)
	assert.Equal(t, "1 2 false", m["body"])
}

// Base64 as node's Buffer.from(s, 'base64') reads it: both alphabets,
// padding optional, white space skipped, and what is valid up to the
// first character that is not.
func TestDecodeBase64(t *testing.T) {
	for in, want := range map[string]string{
		"aGVsbG8=":     "hello",
		"aGVsbG8":      "hello",
		"aGVs\nbG8=":   "hello",
		"_-8=":         "\xff\xef",
		"aGVsbG8!d29y": "hello",
		"aGVs=bG8=":    "hel",
		"aGVsbG8hZ":    "hello!",
		"":             "",
	} {
		assert.Equal(t, want, string(DecodeBase64(in)), in)
	}
}
