// Command mbdiff is a differential conformance harness: it runs the same
// sequences of admin-API and imposter calls against a real mountebank and
// against fenceline, and reports every difference in what a client sees.
//
//	go run ./scripts/mbdiff -mb http://127.0.0.1:3525 -fl http://127.0.0.1:3625
//
// Each case starts from DELETE /imposters on both servers. Imposter ports
// are written {{P0}}..{{P99}}: mountebank's are 4700+n, fenceline's 4800+n,
// and both are mapped back to <Pn> before comparing. See README.md.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ---------------------------------------------------------------------------
// Steps and cases

type hdr struct{ k, v string }

// expectRule marks a difference as expected (deliberate): kind "" matches
// any kind, a nil path any path.
type expectRule struct {
	kind   string
	path   *regexp.Regexp
	reason string
}

type step struct {
	admin      bool
	method     string
	path       string // request target, with {{placeholders}}
	port       string // imposter calls: the placeholder naming the imposter's port
	hdrs       []hdr
	body       []byte
	raw        bool   // body is bytes: no placeholder expansion
	capture    string // read "port" from the JSON answer into this placeholder
	tls        bool
	noBody     bool          // compare status and headers only
	minElapsed time.Duration // each server must take at least this long
	transform  func(any) any // applied to both normalized JSON bodies
	expects    []expectRule
	// proto: "tcp" sends body on a new connection and compares the bytes
	// that come back; "smtp" sends body as a mail message (from and to
	// its headers' addresses); "" is HTTP.
	proto string
}

// tcpCall sends data to a tcp imposter and compares what comes back.
func tcpCall(port string, data []byte) step {
	return step{proto: "tcp", method: "TCP", port: port, body: data, raw: true}
}

// smtpCall sends a message to an smtp imposter.
func smtpCall(port, message string) step {
	return step{proto: "smtp", method: "SMTP", port: port, body: []byte(message), raw: true}
}

type tcase struct {
	name  string
	steps []step
}

func adm(method, path, body string) step {
	return step{admin: true, method: method, path: path, body: []byte(body)}
}
func get(p string) step     { return adm("GET", p, "") }
func post(p, b string) step { return adm("POST", p, b) }
func put(p, b string) step  { return adm("PUT", p, b) }
func del(p string) step     { return adm("DELETE", p, "") }
func create(b string) step  { return post("/imposters", b) }
func call(m, port, p string) step {
	return step{method: m, port: port, path: p}
}

func (s step) H(k, v string) step {
	s.hdrs = append(slices.Clone(s.hdrs), hdr{k, v})
	return s
}
func (s step) B(b string) step { s.body = []byte(b); return s }

// JSON sends b with Content-Type application/json.
func (s step) JSON(b string) step { return s.H("Content-Type", "application/json").B(b) }
func (s step) Raw(b []byte) step  { s.body = b; s.raw = true; return s }
func (s step) Capture(n string) step {
	s.capture = n
	return s
}
func (s step) TLS() step                { s.tls = true; return s }
func (s step) NoBody() step             { s.noBody = true; return s }
func (s step) Min(d time.Duration) step { s.minElapsed = d; return s }
func (s step) TF(f func(any) any) step  { s.transform = f; return s }
func (s step) Expect(kind, path, reason string) step {
	r := expectRule{kind: kind, reason: reason}
	if path != "" {
		r.path = regexp.MustCompile(path)
	}
	s.expects = append(slices.Clone(s.expects), r)
	return s
}

func (s step) label(i int) string {
	if s.admin {
		return fmt.Sprintf("#%d %s %s", i+1, s.method, s.path)
	}
	return fmt.Sprintf("#%d call %s %s %s", i+1, s.port, s.method, s.path)
}

// ---------------------------------------------------------------------------
// Servers

type server struct {
	name      string
	host      string
	adminPort int
	base      int
	vars      map[string]string
	ports     map[int]string // port -> placeholder, for normalizing answers
	// rotate, if set, lists the hosts of a cluster's members: each call
	// goes to the next in turn, as behind a round-robin balancer, with
	// the Host header the client gave the balancer.
	rotate []string
	next   int
}

var csvPath = "/tmp/diff/lookup.csv"

func (s *server) reset() {
	s.vars = map[string]string{"ADMIN": strconv.Itoa(s.adminPort), "CSV": csvPath}
	s.ports = map[int]string{s.adminPort: "ADMIN"}
	for i := range 100 {
		s.vars[fmt.Sprintf("P%d", i)] = strconv.Itoa(s.base + i)
		s.ports[s.base+i] = fmt.Sprintf("P%d", i)
	}
}

var placeholder = regexp.MustCompile(`\{\{([A-Za-z0-9_]+)\}\}`)

func (s *server) expand(b []byte) []byte {
	return placeholder.ReplaceAllFunc(b, func(m []byte) []byte {
		if v, ok := s.vars[string(m[2:len(m)-2])]; ok {
			return []byte(v)
		}
		return m
	})
}

func (s *server) exec(st step) resp {
	target := string(s.expand([]byte(st.path)))
	body := st.body
	if !st.raw {
		body = s.expand(body)
	}
	var hs []hdr
	for _, h := range st.hdrs {
		hs = append(hs, hdr{h.k, string(s.expand([]byte(h.v)))})
	}
	port := strconv.Itoa(s.adminPort)
	if !st.admin {
		port = s.vars[st.port]
	}
	addr := net.JoinHostPort(s.host, port)
	dialTo := addr
	if len(s.rotate) > 0 {
		dialTo = net.JoinHostPort(s.rotate[s.next%len(s.rotate)], port)
		s.next++
	}
	var r resp
	switch st.proto {
	case "tcp":
		r = doTCP(dialTo, body)
	case "smtp":
		r = doSMTP(dialTo, string(body))
	default:
		r = doHTTPVia(dialTo, addr, st.tls, st.method, target, hs, body, 8*time.Second)
	}
	if st.capture != "" && r.outcome == "" {
		if v, err := parseJSON(r.body); err == nil {
			if o, ok := v.(*jobj); ok {
				if n, ok := o.vals["port"].(json.Number); ok {
					if p, err := strconv.Atoi(n.String()); err == nil {
						s.vars[st.capture] = strconv.Itoa(p)
						s.ports[p] = st.capture
					}
				}
			}
		}
	}
	return r
}

// doTCP sends data and reads what comes back until the server has been
// quiet for 300 ms (a tcp imposter keeps the connection open): status
// 200 and the bytes, or the outcome of a failure.
func doTCP(addr string, data []byte) resp {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return resp{outcome: classify(err)}
	}
	defer c.Close()
	if _, err := c.Write(data); err != nil {
		return resp{outcome: classify(err)}
	}
	var got []byte
	buf := make([]byte, 64<<10)
	wait := 2 * time.Second
	for {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		wait = 300 * time.Millisecond
	}
	return resp{status: 200, body: got, elapsed: time.Since(start)}
}

// doSMTP sends a message without STARTTLS (mountebank's server offers it
// with a certificate that has expired): status 250 once accepted.
func doSMTP(addr, message string) resp {
	msg := strings.ReplaceAll(strings.ReplaceAll(message, "\r\n", "\n"), "\n", "\r\n")
	m, err := mail.ReadMessage(strings.NewReader(msg))
	if err != nil {
		return resp{outcome: "bad message: " + err.Error()}
	}
	from, _ := mail.ParseAddress(m.Header.Get("From"))
	to, _ := mail.ParseAddressList(m.Header.Get("To"))
	c, err := smtp.Dial(addr)
	if err != nil {
		return resp{outcome: classify(err)}
	}
	defer c.Close()
	steps := []func() error{func() error { return c.Hello("localhost") }, func() error { return c.Mail(from.Address) }}
	for _, a := range to {
		steps = append(steps, func() error { return c.Rcpt(a.Address) })
	}
	steps = append(steps, func() error {
		w, err := c.Data()
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, msg); err != nil {
			return err
		}
		return w.Close()
	}, c.Quit)
	for _, f := range steps {
		if err := f(); err != nil {
			return resp{outcome: "smtp: " + err.Error()}
		}
	}
	return resp{status: 250}
}

// ---------------------------------------------------------------------------
// A raw HTTP/1.1 client: sends exactly the headers given (plus Host,
// Content-Length and curl-like defaults), keeps the response's raw header
// names and order, and classifies failures.

type rawHeader struct{ name, value string }

type resp struct {
	outcome string // "" for an HTTP response, else how the call failed
	status  int
	hdrs    []rawHeader
	body    []byte
	elapsed time.Duration
	framing string // chunked, length, none, close
}

func (r resp) header(name string) []string {
	var out []string
	for _, h := range r.hdrs {
		if strings.EqualFold(h.name, name) {
			out = append(out, h.value)
		}
	}
	return out
}

func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error: " + err.Error()
}

func doHTTP(addr string, useTLS bool, method, target string, hs []hdr, body []byte, timeout time.Duration) (r resp) {
	return doHTTPVia(addr, addr, useTLS, method, target, hs, body, timeout)
}

// doHTTPVia is doHTTP dialing dialTo, with the Host header (unless the
// step sets one) naming addr: a balancer's member answering the address
// the client called.
func doHTTPVia(dialTo, addr string, useTLS bool, method, target string, hs []hdr, body []byte, timeout time.Duration) (r resp) {
	start := time.Now()
	defer func() { r.elapsed = time.Since(start) }()
	c, err := net.DialTimeout("tcp", dialTo, 3*time.Second)
	if err != nil {
		return resp{outcome: "connect: " + classify(err)}
	}
	conn := c
	defer func() { conn.Close() }()
	conn.SetDeadline(time.Now().Add(timeout))
	if useTLS {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"})
		if err := tc.Handshake(); err != nil {
			return resp{outcome: "tls handshake: " + classify(err)}
		}
		conn = tc
	}
	has := func(n string) bool {
		for _, h := range hs {
			if strings.EqualFold(h.k, n) {
				return true
			}
		}
		return false
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	if !has("Host") {
		fmt.Fprintf(&b, "Host: %s\r\n", addr)
	}
	if !has("User-Agent") {
		b.WriteString("User-Agent: mbdiff/1\r\n")
	}
	if !has("Accept") {
		b.WriteString("Accept: */*\r\n")
	}
	for _, h := range hs {
		fmt.Fprintf(&b, "%s: %s\r\n", h.k, h.v)
	}
	if !has("Content-Length") && !has("Transfer-Encoding") && (len(body) > 0 || method == "POST" || method == "PUT" || method == "PATCH") {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return resp{outcome: "write: " + classify(err)}
	}
	br := bufio.NewReader(conn)
	var head bytes.Buffer
	line, err := br.ReadString('\n')
	if err != nil && line == "" {
		if c := classify(err); c == "closed" {
			return resp{outcome: "closed with no reply"}
		} else {
			return resp{outcome: c + " with no reply"}
		}
	}
	if !strings.HasPrefix(line, "HTTP/1.") {
		io.Copy(io.Discard, br)
		return resp{outcome: "non-HTTP bytes, then closed"}
	}
	head.WriteString(line)
	for {
		l, err := br.ReadString('\n')
		head.WriteString(l)
		if err != nil {
			return resp{outcome: "truncated header: " + classify(err)}
		}
		t := strings.TrimRight(l, "\r\n")
		if t == "" {
			break
		}
		if k, v, ok := strings.Cut(t, ":"); ok {
			r.hdrs = append(r.hdrs, rawHeader{k, strings.TrimSpace(v)})
		}
	}
	hr, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(head.Bytes()), br)), &http.Request{Method: method})
	if err != nil {
		return resp{outcome: "bad response: " + err.Error()}
	}
	r.status = hr.StatusCode
	r.body, err = io.ReadAll(hr.Body)
	if err != nil {
		return resp{outcome: "body: " + classify(err)}
	}
	switch {
	case slices.Contains(hr.TransferEncoding, "chunked"):
		r.framing = "chunked"
	case len(r.header("Content-Length")) > 0:
		r.framing = "length"
	case method == "HEAD" || r.status == 204 || r.status == 304:
		r.framing = "none"
	default:
		r.framing = "close"
	}
	return r
}

// ---------------------------------------------------------------------------
// Ordered JSON

type jobj struct {
	keys []string
	vals map[string]any
}

func newObj() *jobj { return &jobj{vals: map[string]any{}} }

func (o *jobj) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jobj) del(k string) {
	if _, ok := o.vals[k]; ok {
		delete(o.vals, k)
		o.keys = slices.DeleteFunc(o.keys, func(x string) bool { return x == k })
	}
}

func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return t, nil
	}
	switch d {
	case '{':
		o := newObj()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			o.set(kt.(string), v)
		}
		_, err := dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// jsQuote quotes as JSON.stringify does.
func jsQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// stringify writes v as JSON.stringify(v, null, indent) would (numbers
// keep their literal text).
func stringify(v any, indent string) string {
	var b strings.Builder
	writeJS(&b, v, indent, "")
	return b.String()
}

func writeJS(b *strings.Builder, v any, indent, cur string) {
	sep, colon := "", ":"
	if indent != "" {
		sep, colon = "\n", ": "
	}
	switch x := v.(type) {
	case *jobj:
		if len(x.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{" + sep)
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString("," + sep)
			}
			b.WriteString(cur + indent + jsQuote(k) + colon)
			writeJS(b, x.vals[k], indent, cur+indent)
		}
		b.WriteString(sep + cur + "}")
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[" + sep)
		for i, e := range x {
			if i > 0 {
				b.WriteString("," + sep)
			}
			b.WriteString(cur + indent)
			writeJS(b, e, indent, cur+indent)
		}
		b.WriteString(sep + cur + "]")
	case string:
		b.WriteString(jsQuote(x))
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	case absentT:
		b.WriteString("<absent>")
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

type absentT struct{}

var absent = absentT{}

// ---------------------------------------------------------------------------
// Normalization: what legitimately differs between the two servers.

var digits = regexp.MustCompile(`\d+`)
var ephemeral = regexp.MustCompile(`:\d+$`)

// text maps every port this server was given back to its placeholder.
func (s *server) text(t string) string {
	return digits.ReplaceAllStringFunc(t, func(d string) string {
		if n, err := strconv.Atoi(d); err == nil && len(d) < 6 {
			if name, ok := s.ports[n]; ok {
				return "<" + name + ">"
			}
		}
		return d
	})
}

func (s *server) norm(v any, key string) any {
	switch x := v.(type) {
	case string:
		switch key {
		case "timestamp":
			return "<timestamp>"
		case "requestFrom":
			return s.text(ephemeral.ReplaceAllString(x, ":<ephemeral>"))
		}
		return s.text(x)
	case json.Number:
		switch key {
		case "port":
			if n, err := strconv.Atoi(x.String()); err == nil {
				if name, ok := s.ports[n]; ok {
					return "<" + name + ">"
				}
			}
		case "_proxyResponseTime":
			return "<ms>"
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.norm(e, "")
		}
		return out
	case *jobj:
		o := newObj()
		for _, k := range x.keys {
			o.set(k, s.norm(x.vals[k], k))
		}
		// A recorded proxy response ({statusCode, headers, body, _mode,
		// [_proxyResponseTime]}): the upstream's Date and its framing
		// headers differ legitimately.
		if h, ok := o.vals["headers"].(*jobj); ok {
			if _, rec := o.vals["_mode"]; rec {
				for _, k := range slices.Clone(h.keys) {
					switch strings.ToLower(k) {
					case "date":
						h.vals[k] = "<date>"
					case "transfer-encoding", "content-length", "keep-alive":
						h.del(k)
					}
				}
			}
		}
		// addWaitBehavior records the proxy's response time as a wait.
		if is, ok := o.vals["is"].(*jobj); ok {
			if _, rec := is.vals["_mode"]; rec {
				if bs, ok := o.vals["behaviors"].([]any); ok {
					for _, b := range bs {
						if bo, ok := b.(*jobj); ok {
							if _, ok := bo.vals["wait"].(json.Number); ok {
								bo.vals["wait"] = "<ms>"
							}
						}
					}
				}
			}
		}
		return o
	}
	return v
}

// ---------------------------------------------------------------------------
// Comparison

type diff struct {
	cse, step, kind, path, mb, fl, reason string
}

type comparer struct {
	cse, step string
	expects   []expectRule
	out       []diff
}

const maxVal = 200

func trunc(s string) string {
	if len(s) > maxVal {
		return s[:maxVal] + "…"
	}
	return s
}

func render(v any) string { return stringify(v, "") }

func (c *comparer) add(kind, path, mb, fl string) {
	d := diff{cse: c.cse, step: c.step, kind: kind, path: path, mb: trunc(mb), fl: trunc(fl), reason: expectedCases[c.cse]}
	for _, r := range append(slices.Clone(globalExpects), c.expects...) {
		if d.reason != "" {
			break
		}
		if (r.kind == "" || r.kind == kind) && (r.path == nil || r.path.MatchString(path)) {
			d.reason = r.reason
			break
		}
	}
	c.out = append(c.out, d)
}

// globalExpects are the deliberate differences that hold everywhere.
var globalExpects = []expectRule{
	{kind: "header-case", path: regexp.MustCompile(`(?i)^(content-type|content-length|transfer-encoding|date|connection)$`),
		reason: "the headers the server itself reads go out in canonical case"},
}

// expectedCases are whole cases whose differences are deliberate.
var expectedCases = map[string]string{
	"post with a foreign Host":      "a node on loopback refuses an admin call whose Host names another machine (403: the guard against DNS rebinding, README \"Exposing a node\"); mb answers it",
	"internal errors":               "a null port, stubs as an object or a null body get a 400 in mountebank's error shape, not mb's 500 HTML page",
	"allowCORS default fallthrough": "mb's defaultResponse headers leak a preflight's CORS headers into later answers (a bug); fenceline does not copy it",
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// recordedHeaderPath names the header objects built from a request's raw
// headers: recorded requests, and predicates generated from them.
var recordedHeaderPath = regexp.MustCompile(`(^|\.)requests\[\d+\]\.headers$|\.predicates\[\d+\]\.(deepEquals|equals)\.headers$`)

func (c *comparer) json(path string, a, b any) {
	switch x := a.(type) {
	case *jobj:
		y, ok := b.(*jobj)
		if !ok {
			c.add("body", path, render(a), render(b))
			return
		}
		if recordedHeaderPath.MatchString(path) {
			cx, cy := canonHeaders(x), canonHeaders(y)
			if render(cx) != render(cy) {
				c.jsonPlain(path, cx, cy)
			} else if render(x) != render(y) {
				c.add("recorded-header-case", path, render(x), render(y))
			}
			return
		}
		c.jsonPlain(path, x, y)
	case []any:
		y, ok := b.([]any)
		if !ok {
			c.add("body", path, render(a), render(b))
			return
		}
		if len(x) != len(y) {
			c.add("body", path+fmt.Sprintf(" (length %d vs %d)", len(x), len(y)), render(a), render(b))
			return
		}
		for i := range x {
			c.json(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])
		}
	default:
		if render(a) != render(b) {
			c.add("body", path, render(a), render(b))
		}
	}
}

func (c *comparer) jsonPlain(path string, x, y *jobj) {
	for _, k := range x.keys {
		if _, ok := y.vals[k]; !ok {
			c.add("body", join(path, k), render(x.vals[k]), "<absent>")
		}
	}
	for _, k := range y.keys {
		if _, ok := x.vals[k]; !ok {
			c.add("body", join(path, k), "<absent>", render(y.vals[k]))
		}
	}
	var cx, cy []string
	for _, k := range x.keys {
		if _, ok := y.vals[k]; ok {
			cx = append(cx, k)
			c.json(join(path, k), x.vals[k], y.vals[k])
		}
	}
	for _, k := range y.keys {
		if _, ok := x.vals[k]; ok {
			cy = append(cy, k)
		}
	}
	if !slices.Equal(cx, cy) {
		c.add("key-order", path, strings.Join(x.keys, ","), strings.Join(y.keys, ","))
	}
}

// canonHeaders merges a header object's keys into Go's canonical case
// (repeats become arrays, in order) and sorts them.
func canonHeaders(o *jobj) *jobj {
	vals := map[string][]any{}
	for _, k := range o.keys {
		ck := http.CanonicalHeaderKey(k)
		switch v := o.vals[k].(type) {
		case []any:
			vals[ck] = append(vals[ck], v...)
		default:
			vals[ck] = append(vals[ck], v)
		}
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := newObj()
	for _, k := range keys {
		if len(vals[k]) == 1 {
			out.set(k, vals[k][0])
		} else {
			out.set(k, vals[k])
		}
	}
	return out
}

var adminHeaders = []string{"Content-Type", "Vary", "Location"}

func selectedImposterHeader(name string) bool {
	l := strings.ToLower(name)
	switch l {
	case "content-type", "connection", "set-cookie", "location", "content-encoding":
		return true
	}
	return strings.HasPrefix(l, "access-control-") || strings.HasPrefix(l, "x-")
}

func quote(b []byte) string { return strconv.Quote(string(b)) }

func compareStep(c *comparer, st step, rm, rf resp, sm, sf *server) {
	if rm.outcome != "" || rf.outcome != "" {
		if rm.outcome != rf.outcome {
			mo, fo := rm.outcome, rf.outcome
			if mo == "" {
				mo = fmt.Sprintf("HTTP %d %s", rm.status, quote(rm.body))
			}
			if fo == "" {
				fo = fmt.Sprintf("HTTP %d %s", rf.status, quote(rf.body))
			}
			c.add("outcome", "", mo, fo)
		}
		return
	}
	if rm.status != rf.status {
		c.add("status", "", strconv.Itoa(rm.status), strconv.Itoa(rf.status))
	}
	if st.admin {
		for _, h := range adminHeaders {
			mv := sm.text(strings.Join(rm.header(h), " | "))
			fv := sf.text(strings.Join(rf.header(h), " | "))
			if mv != fv {
				c.add("header", h, orAbsent(mv), orAbsent(fv))
			}
		}
		if st.noBody {
			return
		}
		compareAdminBody(c, st, rm, rf, sm, sf)
		return
	}
	compareImposterHeaders(c, rm, rf, sm, sf)
	if rm.framing != rf.framing {
		c.add("framing", "", rm.framing, rf.framing)
	}
	if st.minElapsed > 0 {
		for _, x := range []struct {
			r    resp
			name string
		}{{rm, "mb"}, {rf, "fl"}} {
			if x.r.elapsed < st.minElapsed {
				mv, fv := rm.elapsed.String(), rf.elapsed.String()
				c.add("timing", fmt.Sprintf("%s answered in under %v", x.name, st.minElapsed), mv, fv)
			}
		}
	}
	if st.noBody {
		return
	}
	mb, fb := sm.text(string(rm.body)), sf.text(string(rf.body))
	if mb != fb {
		c.add("body", "", strconv.Quote(mb), strconv.Quote(fb))
		ml, fl := strings.Join(rm.header("Content-Length"), ","), strings.Join(rf.header("Content-Length"), ",")
		if ml != fl && ml != "" && fl != "" {
			c.add("content-length", "", ml, fl)
		}
	}
}

func orAbsent(s string) string {
	if s == "" {
		return "<absent>"
	}
	return s
}

func compareImposterHeaders(c *comparer, rm, rf resp, sm, sf *server) {
	type hv struct {
		names  []string
		values []string
	}
	collect := func(r resp, s *server) (map[string]*hv, []string) {
		m := map[string]*hv{}
		var order []string
		for _, h := range r.hdrs {
			if !selectedImposterHeader(h.name) {
				continue
			}
			l := strings.ToLower(h.name)
			if m[l] == nil {
				m[l] = &hv{}
				order = append(order, l)
			}
			m[l].names = append(m[l].names, h.name)
			m[l].values = append(m[l].values, s.text(h.value))
		}
		return m, order
	}
	mm, mo := collect(rm, sm)
	fm, fo := collect(rf, sf)
	seen := map[string]bool{}
	for _, l := range append(mo, fo...) {
		if seen[l] {
			continue
		}
		seen[l] = true
		a, b := mm[l], fm[l]
		av, bv := "<absent>", "<absent>"
		if a != nil {
			av = strings.Join(a.values, " | ")
		}
		if b != nil {
			bv = strings.Join(b.values, " | ")
		}
		if av != bv {
			c.add("header", l, av, bv)
			continue
		}
		if a != nil && b != nil && !slices.Equal(a.names, b.names) {
			c.add("header-case", l, strings.Join(a.names, ","), strings.Join(b.names, ","))
		}
	}
}

func compareAdminBody(c *comparer, st step, rm, rf resp, sm, sf *server) {
	vm, em := parseJSON(rm.body)
	vf, ef := parseJSON(rf.body)
	if em != nil || ef != nil {
		if em == nil || ef == nil || sm.text(string(rm.body)) != sf.text(string(rf.body)) {
			c.add("body", "(raw)", strconv.Quote(sm.text(string(rm.body))), strconv.Quote(sf.text(string(rf.body))))
		}
		return
	}
	// Formatting: mountebank writes JSON.stringify(body, null, 2).
	okm := stringify(vm, "  ") == string(rm.body)
	if !okm {
		mbNotStringify++
	}
	okf := stringify(vf, "  ") == string(rf.body)
	if okm != okf {
		c.add("json-format", "", formatNote(rm.body, vm, okm), formatNote(rf.body, vf, okf))
	}
	nm, nf := sm.norm(vm, ""), sf.norm(vf, "")
	if st.transform != nil {
		nm, nf = st.transform(nm), st.transform(nf)
	}
	c.json("", nm, nf)
}

// mbNotStringify counts mountebank bodies the harness's JSON.stringify
// emulation does not reproduce: a harness self-check.
var mbNotStringify int

func formatNote(raw []byte, v any, ok bool) string {
	if ok {
		return "JSON.stringify(v, null, 2)"
	}
	want := stringify(v, "  ")
	i := 0
	for i < len(raw) && i < len(want) && raw[i] == want[i] {
		i++
	}
	lo := max(0, i-30)
	return fmt.Sprintf("differs from JSON.stringify(v,null,2) at byte %d: got %q want %q", i,
		string(raw[lo:min(len(raw), i+30)]), want[lo:min(len(want), i+30)])
}

// ---------------------------------------------------------------------------
// Transforms used by a few steps

func maskKeys(keys ...string) func(any) any {
	return func(v any) any {
		if o, ok := v.(*jobj); ok {
			for _, k := range keys {
				if _, ok := o.vals[k]; ok {
					o.vals[k] = "<masked>"
				}
			}
		}
		return v
	}
}

// logsShape keeps only the first log entry, with its values masked: the
// logs themselves differ, their shape should not. exact keeps the count.
func logsShape(exact bool) func(any) any {
	return func(v any) any { return logsShapeOf(v, exact) }
}

func logsShapeOf(v any, exact bool) any {
	o, ok := v.(*jobj)
	if !ok {
		return v
	}
	l, ok := o.vals["logs"].([]any)
	if !ok {
		return v
	}
	var out []any
	for i, e := range l {
		if i > 0 {
			break
		}
		if eo, ok := e.(*jobj); ok {
			m := newObj()
			for _, k := range eo.keys {
				m.set(k, "<masked>")
			}
			out = append(out, m)
		}
	}
	n := len(l)
	if !exact {
		n = min(n, 1)
	}
	o.vals["logs"] = append([]any{fmt.Sprintf("<%d entries>", n)}, out...)
	return v
}

// ---------------------------------------------------------------------------
// Cases

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// pr is one predicate row: replace the stubs of {{P0}} with one stub
// answering MATCH under predicate p, then make the call.
func pr(p string, c step) []step {
	return []step{put("/imposters/{{P0}}/stubs", `{"stubs":[{"predicates":[`+p+`],"responses":[{"is":{"body":"MATCH"}}]}]}`), c}
}

func predCase(name string, rows ...[]step) tcase {
	steps := []step{create(`{"protocol":"http","port":{{P0}}}`)}
	for _, r := range rows {
		steps = append(steps, r...)
	}
	return tcase{name, steps}
}

func cs(name string, steps ...step) tcase { return tcase{name, steps} }

const (
	reasonConflict  = "fenceline answers a port in use with 400 'resource conflict' (mb 2.9 leaks the raw EADDRINUSE error)"
	reasonRegex     = "fenceline answers an invalid regex with a proper code and message (mb gives only source)"
	reasonInjection = "fenceline's injection refusal message differs (same code)"
	reasonStubGet   = "fenceline supports GET /imposters/:id/stubs/:index (mb 404s it)"
	reasonHTTPS     = "fenceline's https metadata is its own generated certificate"
)

func injectionStep(body string) step {
	return create(body).Expect("body", `^errors\[\d+\]\.message$`, reasonInjection)
}

func postJSON(port, path, body string) step { return call("POST", port, path).JSON(body) }

const reasonStack = "fenceline's injection errors carry no JavaScript stack trace (mb's is V8's)"

// injectionCases run against servers that allow injection (-injection):
// every injection point, its config and legacy arguments, the state
// shared by an imposter's functions, asynchronous answers, and the error
// a throwing function gets.
func injectionCases() []tcase {
	counter := `{"protocol":"http","port":{{P0}},"stubs":[
		{"predicates":[{"inject":"(config) => { config.state.seen = (config.state.seen || 0) + 1; return config.request.path.startsWith('/count'); }"}],
		 "responses":[{"inject":"(config, injectState, logger, callback, imposterState) => ({ statusCode: 201, headers: { 'X-Seen': String(imposterState.seen) }, body: { seen: config.state.seen, same: config.state === imposterState, keys: Object.keys(config) } })"}]},
		{"predicates":[{"equals":{"path":"/legacy"}}],
		 "responses":[{"inject":"function (request, state, logger) { state.legacy = (state.legacy || 0) + 1; return { body: request.method + ' ' + request.path + ' ' + state.legacy }; }"}]},
		{"predicates":[{"equals":{"path":"/decorate"}}],
		 "responses":[{"is":{"body":"plain"},"behaviors":[{"decorate":"(config) => { config.response.body = config.response.body + ' ' + config.state.seen; config.response.headers = { 'X-Decorated': 'yes' }; }"}]}]},
		{"predicates":[{"equals":{"path":"/replace"}}],
		 "responses":[{"is":{"body":"plain"},"behaviors":[{"decorate":"(config) => ({ statusCode: 202 })"}]}]},
		{"predicates":[{"equals":{"path":"/wait"}}],
		 "responses":[{"is":{"body":"waited"},"behaviors":[{"wait":"function () { return 120; }"}]}]},
		{"predicates":[{"equals":{"path":"/async"}}],
		 "responses":[{"inject":"(config) => { setTimeout(() => config.callback({ statusCode: 203, body: 'later' }), 20); }"}]},
		{"predicates":[{"equals":{"path":"/promise"}}],
		 "responses":[{"inject":"async (config) => ({ body: 'awaited' })"}]},
		{"predicates":[{"equals":{"path":"/string"}}],
		 "responses":[{"inject":"(config) => 'hello'"}]},
		{"predicates":[{"equals":{"path":"/throw"}}],
		 "responses":[{"inject":"function (config) { throw new Error(\"boom\"); }"}]},
		{"predicates":[{"equals":{"path":"/buffer"}}],
		 "responses":[{"inject":"(config) => ({ body: Buffer.from('aGVsbG8=', 'base64').toString() + ' ' + require('util').format('%s=%d', 'n', 3) })"}]}
	]}`
	return []tcase{
		cs("injection: every point and the shared state",
			create(counter),
			call("GET", "P0", "/count"), call("GET", "P0", "/count/again"),
			call("POST", "P0", "/legacy"), call("GET", "P0", "/legacy"),
			call("GET", "P0", "/decorate"), call("GET", "P0", "/replace"),
			call("GET", "P0", "/wait").Min(120*time.Millisecond),
			call("GET", "P0", "/async"), call("GET", "P0", "/promise"), call("GET", "P0", "/string"),
			call("GET", "P0", "/throw").Expect("body", "", reasonStack), // code, message, source and data: imposterhttp's TestInjectionOverHTTP
			call("GET", "P0", "/buffer"),
			call("GET", "P0", "/count"),
			put("/imposters/{{P0}}/stubs", `{"stubs":[{"responses":[{"inject":"(config) => ({ body: 'kept ' + config.state.seen })"}]}]}`),
			call("GET", "P0", "/"),
		),
		cs("injection: predicateGenerators and addDecorateBehavior",
			create(`{"protocol":"http","port":{{P1}},"stubs":[{"responses":[{"is":{"body":"origin"}}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:{{P1}}",
				"predicateGenerators":[{"inject":"(config) => [{ equals: { path: config.request.path } }]"}],
				"addDecorateBehavior":"(config) => { config.response.body = 'decorated ' + config.response.body; }"}}]}]}`),
			call("GET", "P0", "/first"), call("GET", "P0", "/first"),
			get("/imposters/{{P0}}?replayable=true"),
		),
	}
}

func cases() []tcase {
	upstream := `{"protocol":"http","port":{{P0}},"recordRequests":true,"stubs":[{"responses":[` +
		`{"is":{"statusCode":200,"headers":{"Content-Type":"application/json","X-Upstream":"yes"},"body":{"from":"upstream","n":1}}},` +
		`{"is":{"statusCode":202,"headers":{"Content-Type":"text/plain"},"body":"second"}}]}]}`
	proxy := func(port, cfg string) step {
		return create(`{"protocol":"http","port":{{` + port + `}},"stubs":[{"responses":[{"proxy":` + cfg + `}]}]}`)
	}
	body := `{"a":1,"b":2}`
	xml := `<root xmlns:n="urn:n"><n:item>one</n:item><n:item>two</n:item><plain>p</plain></root>`
	people := `{"people":[{"name":"Ann"},{"name":"Ben"}]}`
	copyStub := `{"predicates":[{"startsWith":{"path":"/copy"}}],"responses":[{"is":{"statusCode":200,"headers":{"X-Path":"${PATH}","X-Q":"${Q}"},` +
		`"body":"path=${PATH} path0=${PATH}[0] path1=${PATH}[1] q=${Q} h=${H} name=${NAME} name2=${NAME}[1] missing=${MISSING}"},"behaviors":[` +
		`{"copy":{"from":"path","into":"${PATH}","using":{"method":"regex","selector":"/copy/(\\d+)"}}},` +
		`{"copy":{"from":{"query":"q"},"into":"${Q}","using":{"method":"regex","selector":".*"}}},` +
		`{"copy":{"from":{"headers":"x-token"},"into":"${H}","using":{"method":"regex","selector":"\\w+$"}}},` +
		`{"copy":{"from":"body","into":"${NAME}","using":{"method":"jsonpath","selector":"$..name"}}},` +
		`{"copy":{"from":"body","into":"${MISSING}","using":{"method":"jsonpath","selector":"$.nothere"}}}]}]}`

	return []tcase{
		// ---- home, config, logs, routing
		cs("home", get("/"), get("/").H("Host", "example.com:1234")),
		cs("config", get("/config").TF(maskKeys("options", "process"))),
		// The entries differ (mountebank logs every admin call); their shape
		// and the index arithmetic should not. An imposter first, so that
		// both servers have logged something.
		cs("logs",
			create(`{"protocol":"http","port":{{P0}}}`), call("GET", "P0", "/"), del("/imposters/{{P0}}"),
			get("/logs").TF(logsShape(false)), get("/logs?startIndex=0&endIndex=0").TF(logsShape(true)),
			get("/logs?startIndex=1&endIndex=2").TF(logsShape(true))),
		cs("content negotiation",
			get("/imposters").H("Accept", "text/html").NoBody(),
			get("/imposters").H("Accept", "text/plain"),
			get("/imposters").H("Accept", "application/json")),
		cs("unknown routes", get("/nonexistent"), post("/", ""), adm("PATCH", "/imposters", "{}")),

		// ---- POST /imposters
		cs("post minimal",
			create(`{"protocol":"http","port":{{P0}}}`),
			get("/imposters/{{P0}}"), get("/imposters"), call("GET", "P0", "/")),
		cs("post with a foreign Host",
			create(`{"protocol":"http","port":{{P1}}}`).H("Host", "myhost:9999").H("Content-Type", "text/plain"),
			get("/imposters/{{P1}}").H("Host", "myhost:9999")),
		cs("post without port",
			create(`{"protocol":"http"}`).Capture("A"),
			get("/imposters/{{A}}"), call("GET", "A", "/"), get("/imposters"), del("/imposters/{{A}}"), get("/imposters")),
		cs("post name and recordRequests",
			create(`{"protocol":"http","port":{{P0}},"name":"my imposter"}`),
			create(`{"protocol":"http","port":{{P1}},"recordRequests":true}`),
			call("GET", "P1", "/r"),
			get("/imposters"), get("/imposters/{{P1}}")),
		cs("post full",
			create(`{"protocol":"http","port":{{P0}},"name":"full","recordRequests":false,"defaultResponse":{"statusCode":404},"allowCORS":true,"stubs":[{"predicates":[{"equals":{"path":"/a"}}],"responses":[{"is":{"body":"x"}}]}]}`),
			get("/imposters/{{P0}}"), get("/imposters"), get("/imposters?replayable=true"), get("/imposters?removeProxies=true"),
			call("GET", "P0", "/a"), call("GET", "P0", "/b")),
		cs("post extra fields and string port",
			create(`{"protocol":"http","port":"{{P0}}","foo":"bar","host":"127.0.0.1","stubs":[{"responses":[{"is":{"body":"x"}}],"extra":1}]}`),
			get("/imposters/{{P0}}?replayable=true")),
		cs("post truthy flags",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":1,"allowCORS":"yes","name":""}`),
			get("/imposters/{{P0}}"), get("/imposters")),

		// ---- PUT / DELETE /imposters
		cs("put imposters",
			put("/imposters", `{"imposters":[{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]},{"protocol":"http","port":{{P1}},"name":"n1","recordRequests":true}]}`),
			get("/imposters"), call("GET", "P0", "/"),
			put("/imposters", `{"imposters":[{"protocol":"http","port":{{P2}}}]}`),
			get("/imposters"), call("GET", "P0", "/"),
			put("/imposters", `{}`),
			put("/imposters", `{"imposters":[{"protocol":"http","port":{{P3}}},{"port":{{P4}}}]}`),
			get("/imposters"),
			put("/imposters", `{"imposters":[]}`), get("/imposters")),
		cs("tcp imposters",
			create(`{"protocol":"tcp","port":{{P0}},"recordRequests":true,"stubs":[
				{"predicates":[{"contains":{"data":"sayHello"}}],"responses":[{"is":{"data":"hello, world!"}}]},
				{"predicates":[{"startsWith":{"data":"copy "}}],"responses":[{"is":{"data":"got ${x}"},"behaviors":[{"copy":{"from":"data","into":"${x}","using":{"method":"regex","selector":"\\w+$"}}}]}]}]}`),
			tcpCall("P0", []byte("please sayHello\n")), tcpCall("P0", []byte("copy there")), tcpCall("P0", []byte("nothing matches")),
			get("/imposters/{{P0}}"),
			create(`{"protocol":"tcp","port":{{P1}},"mode":"binary","stubs":[
				{"predicates":[{"contains":{"data":"AgM="}}],"responses":[{"is":{"data":"Zmlyc3Q="}}]}]}`),
			tcpCall("P1", []byte{1, 2, 3, 4}), tcpCall("P1", []byte{5, 6}),
			get("/imposters/{{P1}}?replayable=true")),
		cs("smtp imposters",
			create(`{"protocol":"smtp","port":{{P0}},"recordRequests":true}`),
			smtpCall("P0", "From: \"Customer Service\" <cs@company.com>\nTo: \"Customer\" <customer@domain.com>, other@domain.com\nCc: copy@domain.com\nSubject: Thank you\n\nHello,\nthanks.\n"),
			get("/imposters/{{P0}}")),
		cs("put imposters with tcp",
			put("/imposters", `{"imposters":[{"protocol":"http","port":{{P0}}},{"protocol":"tcp","port":{{P1}},"mode":"text"}]}`),
			get("/imposters")),
		cs("delete all",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]}`),
			create(`{"protocol":"http","port":{{P1}},"name":"n1","recordRequests":true}`),
			call("GET", "P1", "/hello?x=1"),
			del("/imposters?replayable=false"),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]}`),
			del("/imposters"), del("/imposters"), call("GET", "P0", "/")),
		cs("get imposter flags",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]},{"responses":[{"proxy":{"to":"http://127.0.0.1:{{P9}}"}}]}]}`),
			get("/imposters/{{P0}}?replayable=true"), get("/imposters/{{P0}}?replayable=TRUE"), get("/imposters/{{P0}}?replayable=1"),
			get("/imposters/{{P0}}?removeProxies=true"), get("/imposters/{{P0}}?replayable=true&removeProxies=true"),
			get("/imposters?replayable=false"), get("/imposters?replayable=true&removeProxies=true")),
		cs("missing imposter",
			get("/imposters/{{P9}}"), get("/imposters/abc"),
			del("/imposters/{{P9}}/savedRequests"), del("/imposters/{{P9}}/savedProxyResponses"), del("/imposters/{{P9}}/requests"),
			put("/imposters/{{P9}}/stubs", `{"stubs":[]}`), post("/imposters/{{P9}}/stubs", `{"stub":{"responses":[{"is":{}}]}}`),
			put("/imposters/{{P9}}/stubs/0", `{"responses":[{"is":{}}]}`), del("/imposters/{{P9}}/stubs/0")),
		cs("delete imposter",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]}`),
			create(`{"protocol":"http","port":{{P1}},"name":"my imposter"}`),
			call("GET", "P0", "/"),
			del("/imposters/{{P0}}"), del("/imposters/{{P1}}?replayable=true"), del("/imposters/{{P9}}"),
			get("/imposters"), call("GET", "P0", "/")),
		cs("savedRequests and requests alias",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":true}`),
			call("GET", "P0", "/one"), call("GET", "P0", "/two"),
			del("/imposters/{{P0}}/savedRequests"), call("GET", "P0", "/again"),
			del("/imposters/{{P0}}/requests"), del("/imposters/{{P0}}/savedProxyResponses"), get("/imposters/{{P0}}")),

		// ---- stubs API
		cs("stubs api",
			create(`{"protocol":"http","port":{{P0}}}`),
			put("/imposters/{{P0}}/stubs", `{"stubs":[{"predicates":[{"equals":{"path":"/one"}}],"responses":[{"is":{"body":"one"}}]},{"responses":[{"is":{"body":"two"}}]}]}`),
			post("/imposters/{{P0}}/stubs", `{"index":0,"stub":{"predicates":[{"equals":{"path":"/zero"}}],"responses":[{"is":{"body":"zero"}}]}}`),
			post("/imposters/{{P0}}/stubs", `{"stub":{"responses":[{"is":{"body":"last"}}]}}`),
			put("/imposters/{{P0}}/stubs/0", `{"predicates":[{"equals":{"path":"/zero"}}],"responses":[{"is":{"body":"replaced"}}]}`),
			del("/imposters/{{P0}}/stubs/3"),
			call("GET", "P0", "/zero"), call("GET", "P0", "/one"), call("GET", "P0", "/x"),
			post("/imposters/{{P0}}/stubs", `{"index":3,"stub":{"responses":[{"is":{"body":"at length"}}]}}`)),
		cs("stubs errors",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]}`),
			put("/imposters/{{P0}}/stubs/99", `{"responses":[{"is":{}}]}`),
			put("/imposters/{{P0}}/stubs/abc", `{"responses":[{"is":{}}]}`),
			put("/imposters/{{P0}}/stubs/01", `{"responses":[{"is":{}}]}`),
			del("/imposters/{{P0}}/stubs/99"), del("/imposters/{{P0}}/stubs/abc"), del("/imposters/{{P0}}/stubs/01"),
			del("/imposters/{{P0}}/stubs/-1"),
			post("/imposters/{{P0}}/stubs", `{"index":99,"stub":{"responses":[{"is":{}}]}}`),
			post("/imposters/{{P0}}/stubs", `{"index":"abc","stub":{"responses":[{"is":{}}]}}`),
			post("/imposters/{{P0}}/stubs", `{"index":"0","stub":{"responses":[{"is":{}}]}}`),
			post("/imposters/{{P0}}/stubs", `{"index":-1,"stub":{"responses":[{"is":{}}]}}`),
			post("/imposters/{{P0}}/stubs", `{"index":-1}`),
			post("/imposters/{{P0}}/stubs", `{"index":0,"stub":{}}`),
			put("/imposters/{{P0}}/stubs/0", `{}`),
			put("/imposters/{{P0}}/stubs", `{}`),
			put("/imposters/{{P0}}/stubs", `{"stubs":{}}`),
			put("/imposters/{{P0}}/stubs", `{"stubs":[{"responses":[]}]}`),
			put("/imposters/{{P0}}/stubs", `{"stubs":[`),
			put("/imposters/{{P0}}/stubs", ``),
			post("/imposters/{{P0}}/stubs", ``),
			get("/imposters/{{P0}}")),
		cs("stubs get routes",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"a"}}]}]}`),
			get("/imposters/{{P0}}/stubs"),
			get("/imposters/{{P0}}/stubs/0").Expect("", "", reasonStubGet)),

		// ---- creation errors
		cs("bad JSON",
			create(`{"protocol":"http",`), create(`not json`), put("/imposters", `x`)),
		cs("missing protocol",
			create(`{"port":{{P0}}}`), create(`{}`), create(``), create(`[]`), create(`"http"`)),
		cs("unknown protocol",
			create(`{"protocol":"foo","port":{{P0}}}`), create(`{"protocol":"foo","port":-1}`)),
		cs("bad port",
			create(`{"protocol":"http","port":-1}`), create(`{"protocol":"http","port":"abc"}`),
			create(`{"protocol":"http","port":70000}`), create(`{"protocol":"http","port":4621.5}`),
			create(`{"protocol":"http","port":0}`), create(`{"protocol":"http","port":""}`)),
		cs("internal errors",
			create(`{"protocol":"http","port":null}`), create(`{"protocol":"http","port":{{P0}},"stubs":{}}`), create(`null`)),
		cs("port in use",
			create(`{"protocol":"http","port":{{P0}}}`),
			create(`{"protocol":"http","port":{{P0}}}`).Expect("body", "", reasonConflict).Expect("key-order", "", reasonConflict),
			create(`{"protocol":"http","port":{{ADMIN}}}`).Expect("body", "", reasonConflict).Expect("key-order", "", reasonConflict),
			get("/imposters")),
		cs("unknown predicate",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"foo":{"path":"/"}}],"responses":[{"is":{}}]}]}`)),
		cs("invalid regex",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"matches":{"path":"(["}}],"responses":[{"is":{}}]}]}`).
				Expect("body", `^errors\[0\]\.(code|message)$`, reasonRegex).Expect("key-order", `^errors\[0\]$`, reasonRegex),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"equals":{"path":"/"},"except":"(["}],"responses":[{"is":{}}]}]}`).
				Expect("body", `^errors\[0\]\.(code|message)$`, reasonRegex).Expect("key-order", `^errors\[0\]$`, reasonRegex)),
		cs("two response types",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"proxy":{"to":"http://127.0.0.1:{{P1}}"}}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"fault":"CONNECTION_RESET_BY_PEER"}]}]}`)),
		cs("unrecognized response",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"foo":{}}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{}]}`)),
		cs("proxy errors",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:{{P1}}/path"}}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{}}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{"to":"not a url"}}]}]}`)),
		cs("bad repeat",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"repeat":0}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"repeat":-1}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"repeat":"x"}]}]}`)),
		cs("bad behaviors",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"wait":-5}]}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"copy":{"from":"path"}}]}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"foo":1}]}]}]}`),
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"lookup":{}}]}]}]}`)),
		cs("injection refused",
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"inject":"(config) => ({ body: \"hi\" })"}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"inject":"() => true"}],"responses":[{"is":{}}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"decorate":"(c) => {}"}]}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"() => 5"}]}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"wait":"5"}]}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{},"behaviors":[{"shellTransform":"echo"}]}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:{{P1}}","addDecorateBehavior":"(c) => {}"}}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:{{P1}}","predicateGenerators":[{"inject":"() => []"}]}}]}]}`),
			injectionStep(`{"protocol":"http","port":{{P0}},"endOfRequestResolver":{"inject":"() => true"}}`),
			get("/imposters")),

		// ---- recorded requests
		cs("recorded requests",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":true}`),
			create(`{"protocol":"http","port":{{P1}}}`),
			call("POST", "P0", "/x?a=1&a=2&b=3").H("X-Custom", "Value1").H("x-custom", "value2").JSON(`{"hello":"world"}`),
			call("POST", "P0", "/form?q=%20sp+ace&empty=&flag").H("Content-Type", "application/x-www-form-urlencoded").B(`f1=v1&f2=v%202&f1=v3`),
			call("GET", "P0", "/a%20b/c?x%5B0%5D=1").H("X-Dup", "one").H("X-Dup", "two"),
			call("POST", "P0", "/gz").H("Content-Encoding", "gzip").H("Content-Type", "application/json").Raw(gz(`{"zipped":true}`)),
			call("POST", "P0", "/curlform").H("Content-Type", "application/x-www-form-urlencoded").B(`{"z":1}`),
			call("DELETE", "P0", "/d"),
			call("GET", "P0", "/keepalive").H("Connection", "keep-alive"),
			call("POST", "P1", "/x").B("abc"),
			get("/imposters/{{P0}}"), get("/imposters/{{P1}}"), get("/imposters")),

		cs("request edge cases",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`),
			call("GET", "P0", "//double//slash"),
			call("GET", "P0", "/a/../b/./c"),
			call("GET", "P0", "/a%2Fb"),
			call("GET", "P0", "/q?a=1;b=2"),
			call("GET", "P0", "/q?bad=%ZZ&ok=1"),
			call("GET", "P0", "/q?z=1&a=2&m=3&e=%C3%A9"),
			call("GET", "P0", "/q?=v&k=&k2"),
			call("PURGE", "P0", "/custom-method"),
			call("POST", "P0", "/chunked").H("Transfer-Encoding", "chunked").Raw([]byte("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")),
			call("POST", "P0", "/binary").H("Content-Type", "application/octet-stream").Raw([]byte{0xff, 0xfe, 0x00, 'a', 0xc3}),
			call("GET", "P0", "/ws").H("X-Spaced", "  padded  ").H("X-Empty", ""),
			get("/imposters/{{P0}}")),
		cs("post null fields",
			create(`{"protocol":"http","port":{{P0}},"stubs":null,"name":null,"defaultResponse":null,"recordRequests":null,"allowCORS":null}`),
			get("/imposters/{{P0}}"), call("GET", "P0", "/")),
		cs("put imposters rebinding a port",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"old"}}]}]}`),
			put("/imposters", `{"imposters":[{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"new"}}]}]}]}`),
			call("GET", "P0", "/")),

		// ---- responses
		cs("no match and HEAD",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"equals":{"path":"/string"}}],"responses":[{"is":{"body":"hello"}}]},{"predicates":[{"equals":{"path":"/empty"}}],"responses":[{"is":{}}]}]}`),
			call("GET", "P0", "/nomatch"), call("GET", "P0", "/empty"),
			call("HEAD", "P0", "/string"), call("GET", "P0", "/string"), call("OPTIONS", "P0", "/string"), call("PATCH", "P0", "/string").B("x")),
		cs("falsy statusCode and body",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"statusCode":0,"body":0}}]}]}`),
			call("GET", "P0", "/zero"),
			create(`{"protocol":"http","port":{{P1}},"stubs":[{"responses":[{"is":{"statusCode":null,"body":""}}]}]}`),
			call("GET", "P1", "/null")),
		cs("json bodies",
			create(`{"protocol":"http","port":{{P0}},"stubs":[`+
				`{"predicates":[{"equals":{"path":"/json"}}],"responses":[{"is":{"body":{"a":1,"b":[1,2],"c":{"d":"e"},"s":"x"}}}]},`+
				`{"predicates":[{"equals":{"path":"/array"}}],"responses":[{"is":{"body":[1,{"a":2},[3,[4]],[]]}}]},`+
				`{"predicates":[{"equals":{"path":"/number"}}],"responses":[{"is":{"body":123}}]},`+
				`{"predicates":[{"equals":{"path":"/float"}}],"responses":[{"is":{"body":1.50}}]},`+
				`{"predicates":[{"equals":{"path":"/true"}}],"responses":[{"is":{"body":true}}]},`+
				`{"predicates":[{"equals":{"path":"/false"}}],"responses":[{"is":{"body":false}}]},`+
				`{"predicates":[{"equals":{"path":"/null"}}],"responses":[{"is":{"body":null}}]},`+
				`{"predicates":[{"equals":{"path":"/numbers"}}],"responses":[{"is":{"body":{"i":10,"neg":-3,"f":1.5,"e":1e21,"small":1e-7,"big":12345678901234567890,"t":true,"n":null,"z":0,"ff":2.0}}}]},`+
				`{"predicates":[{"equals":{"path":"/unicode"}}],"responses":[{"is":{"body":{"s":"héllo ✓ \u00e9 \u2028 <&> \"q\" \\ \t","emoji":"😀"}}}]},`+
				`{"predicates":[{"equals":{"path":"/ustring"}}],"responses":[{"is":{"body":"héllo ✓ 😀"}}]},`+
				`{"predicates":[{"equals":{"path":"/emptyobj"}}],"responses":[{"is":{"body":{}}}]},`+
				`{"predicates":[{"equals":{"path":"/emptyarr"}}],"responses":[{"is":{"body":[]}}]},`+
				`{"predicates":[{"equals":{"path":"/jsonct"}}],"responses":[{"is":{"headers":{"Content-Type":"application/json"},"body":{"k":"v"}}}]}]}`),
			get("/imposters/{{P0}}?replayable=true"),
			call("GET", "P0", "/json"), call("GET", "P0", "/array"), call("GET", "P0", "/number"), call("GET", "P0", "/float"),
			call("GET", "P0", "/true"), call("GET", "P0", "/false"), call("GET", "P0", "/null"),
			call("GET", "P0", "/numbers"), call("GET", "P0", "/unicode"), call("GET", "P0", "/ustring"),
			call("GET", "P0", "/emptyobj"), call("GET", "P0", "/emptyarr"), call("GET", "P0", "/jsonct")),
		cs("status and headers",
			create(`{"protocol":"http","port":{{P0}},"stubs":[`+
				`{"predicates":[{"equals":{"path":"/s201"}}],"responses":[{"is":{"statusCode":"201"}}]},`+
				`{"predicates":[{"equals":{"path":"/s599"}}],"responses":[{"is":{"statusCode":599,"headers":{"X-Num":5,"X-Bool":true}}}]},`+
				`{"predicates":[{"equals":{"path":"/s404"}}],"responses":[{"is":{"statusCode":404,"body":"nf"}}]},`+
				`{"predicates":[{"equals":{"path":"/s204"}}],"responses":[{"is":{"statusCode":204,"body":"ignored?"}}]},`+
				`{"predicates":[{"equals":{"path":"/arrays"}}],"responses":[{"is":{"headers":{"Set-Cookie":["a=1","b=2"],"X-Multi":["x","y"],"content-type":"text/plain"},"body":"h"}}]},`+
				`{"predicates":[{"equals":{"path":"/conn"}}],"responses":[{"is":{"headers":{"Connection":"keep-alive"},"body":"c"}}]},`+
				`{"predicates":[{"equals":{"path":"/cl"}}],"responses":[{"is":{"headers":{"content-length":999},"body":"ok"}}]},`+
				`{"predicates":[{"equals":{"path":"/ct"}}],"responses":[{"is":{"headers":{"Content-Type":"text/html; charset=utf-8","X-Lower":"v","x-lower2":"w"},"body":"<p>hi</p>"}}]},`+
				`{"predicates":[{"equals":{"path":"/loc"}}],"responses":[{"is":{"statusCode":302,"headers":{"Location":"http://example.com/x"}}}]}]}`),
			call("GET", "P0", "/s201"), call("GET", "P0", "/s599"), call("GET", "P0", "/s404"), call("GET", "P0", "/s204"),
			call("GET", "P0", "/arrays"), call("GET", "P0", "/conn"), call("GET", "P0", "/cl"), call("GET", "P0", "/ct"),
			call("GET", "P0", "/loc")),
		// Stubs as mountebank records them from a proxy: the upstream's raw
		// Connection, Date and Transfer-Encoding headers, in whatever case
		// the upstream used. Suites replay such saved imposters.
		cs("replaying recorded framing headers",
			create(`{"protocol":"http","port":{{P0}},"stubs":[`+
				`{"predicates":[{"equals":{"path":"/canon"}}],"responses":[{"is":{"statusCode":200,"headers":{"Content-Type":"application/json","Connection":"close","Date":"Mon, 01 Jan 2001 00:00:00 GMT","Transfer-Encoding":"chunked"},"body":{"a":1},"_mode":"text"}}]},`+
				`{"predicates":[{"equals":{"path":"/lower"}}],"responses":[{"is":{"statusCode":200,"headers":{"content-type":"application/json","connection":"close","date":"Mon, 01 Jan 2001 00:00:00 GMT","transfer-encoding":"chunked"},"body":{"a":1},"_mode":"text"}}]},`+
				`{"predicates":[{"equals":{"path":"/ka"}}],"responses":[{"is":{"headers":{"connection":"keep-alive","set-cookie":["a=1","b=2"]},"body":"x"}}]},`+
				`{"predicates":[{"equals":{"path":"/dup"}}],"responses":[{"is":{"headers":{"X-A":"1","x-a":"2","Server":"mine"},"body":"y"}}]}]}`),
			call("GET", "P0", "/canon"), call("GET", "P0", "/lower"), call("GET", "P0", "/ka"), call("GET", "P0", "/dup")),
		cs("binary mode",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"equals":{"path":"/bin"}}],"responses":[{"is":{"_mode":"binary","body":"AAEC\nAw=="}}]},{"predicates":[{"equals":{"path":"/bin2"}}],"responses":[{"is":{"_mode":"binary","headers":{"Content-Type":"application/octet-stream"},"body":"/+7dzLuqmYh3ZlVEMyIRAA=="}}]}]}`),
			call("GET", "P0", "/bin"), call("GET", "P0", "/bin2"), get("/imposters/{{P0}}")),
		cs("defaultResponse",
			create(`{"protocol":"http","port":{{P0}},"defaultResponse":{"statusCode":404,"headers":{"X-Default":"yes"},"body":"nope"},"stubs":[{"predicates":[{"equals":{"path":"/stub"}}],"responses":[{"is":{"body":"stub"}}]},{"predicates":[{"equals":{"path":"/stubh"}}],"responses":[{"is":{"headers":{"X-Stub":"1"}}}]},{"predicates":[{"equals":{"path":"/stubs"}}],"responses":[{"is":{"statusCode":201}}]}]}`),
			call("GET", "P0", "/none"), call("GET", "P0", "/stub"), call("GET", "P0", "/stubh"), call("GET", "P0", "/stubs"),
			create(`{"protocol":"http","port":{{P1}},"defaultResponse":{"_mode":"binary","body":"aGk="}}`),
			call("GET", "P1", "/"),
			get("/imposters")),
		cs("allowCORS",
			create(`{"protocol":"http","port":{{P0}},"allowCORS":true,"stubs":[{"responses":[{"is":{"body":"cors","headers":{"X-H":"1"}}}]}]}`),
			create(`{"protocol":"http","port":{{P1}},"stubs":[{"responses":[{"is":{"body":"nocors"}}]}]}`),
			call("OPTIONS", "P0", "/p").H("Origin", "http://example.com").H("Access-Control-Request-Method", "PUT").H("Access-Control-Request-Headers", "X-Foo, Content-Type"),
			call("OPTIONS", "P0", "/p").H("Origin", "http://example.com"),
			call("OPTIONS", "P0", "/p").H("Origin", "http://example.com").H("Access-Control-Request-Method", "PUT"),
			call("GET", "P0", "/p").H("Origin", "http://example.com"),
			call("OPTIONS", "P1", "/p").H("Origin", "http://example.com").H("Access-Control-Request-Method", "PUT").H("Access-Control-Request-Headers", "X-Foo")),
		cs("allowCORS default fallthrough",
			create(`{"protocol":"http","port":{{P0}},"allowCORS":true,"defaultResponse":{"headers":{"X-D":"d"}}}`),
			call("GET", "P0", "/a"),
			call("OPTIONS", "P0", "/a").H("Origin", "http://example.com").H("Access-Control-Request-Method", "PUT").H("Access-Control-Request-Headers", "X-Foo"),
			call("GET", "P0", "/a"), get("/imposters/{{P0}}")),
		cs("repeat cycling",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"statusCode":200,"body":"A"},"repeat":2},{"is":{"statusCode":201,"body":"B"}}]}]}`),
			call("GET", "P0", "/"), call("GET", "P0", "/"), call("GET", "P0", "/"), call("GET", "P0", "/"),
			call("GET", "P0", "/"), call("GET", "P0", "/"), get("/imposters/{{P0}}")),
		cs("faults",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"predicates":[{"equals":{"path":"/reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]},{"predicates":[{"equals":{"path":"/random"}}],"responses":[{"fault":"RANDOM_DATA_THEN_CLOSE"}]},{"predicates":[{"equals":{"path":"/ok"}}],"responses":[{"is":{"body":"ok"}}]}]}`),
			call("GET", "P0", "/reset").Expect("outcome", "", "CONNECTION_RESET_BY_PEER is a TCP reset in fenceline, as its name says (mb closes cleanly)"),
			call("GET", "P0", "/random"), call("GET", "P0", "/ok"), get("/imposters/{{P0}}")),
		cs("unknown fault",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"fault":"FOO"}]}]}`),
			call("GET", "P0", "/unknown")),

		// ---- behaviors
		cs("wait behavior",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"waited"},"behaviors":[{"wait":150}]}]}]}`),
			call("GET", "P0", "/wait").Min(150*time.Millisecond), get("/imposters/{{P0}}")),
		cs("copy regex from path, query, headers",
			create(`{"protocol":"http","port":{{P0}},"stubs":[`+copyStub+`]}`),
			call("POST", "P0", "/copy/123?q=hello%20there").H("X-Token", "Bearer abc123").JSON(people),
			call("GET", "P0", "/copy/xyz"),
			call("GET", "P0", "/copy/9?q=a&q=b").H("x-token", "lower"),
			call("POST", "P0", "/copy/1").JSON(`{"name":"solo"}`),
			get("/imposters/{{P0}}")),
		cs("copy xpath and object bodies",
			create(`{"protocol":"http","port":{{P0}},"stubs":[`+
				`{"predicates":[{"startsWith":{"path":"/xml"}}],"responses":[{"is":{"body":"x=${X} all=${X}[0],${X}[1]"},"behaviors":[{"copy":{"from":"body","into":"${X}","using":{"method":"xpath","selector":"//b:v","ns":{"b":"urn:b"}}}}]}]},`+
				`{"predicates":[{"startsWith":{"path":"/objcopy"}}],"responses":[{"is":{"headers":{"X-${ID}":"${ID}"},"body":{"id":"${ID}","${ID}":"key","n":[1,"${ID}"]}},"behaviors":[{"copy":{"from":"path","into":"${ID}","using":{"method":"regex","selector":"\\d+"}}}]}]}]}`),
			call("POST", "P0", "/xml").B(`<a xmlns:b="urn:b"><b:v>one</b:v><b:v>two</b:v></a>`),
			call("POST", "P0", "/xml").B(`not xml`),
			call("GET", "P0", "/objcopy/42")),
		cs("lookup csv",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"name=${ROW}[\"name\"] city=${ROW}['city'] id=${ROW}[id] none=${ROW}[\"zzz\"]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"/lookup/(.*)$"},"index":1},"fromDataSource":{"csv":{"path":"{{CSV}}","keyColumn":"id"}},"into":"${ROW}"}}]}]}]}`),
			call("GET", "P0", "/lookup/456"), call("GET", "P0", "/lookup/123"), call("GET", "P0", "/lookup/999"),
			create(`{"protocol":"http","port":{{P1}},"stubs":[{"responses":[{"is":{"body":"h=${ROW}[\"name\"]"},"behaviors":[{"lookup":{"key":{"from":{"headers":"X-Id"},"using":{"method":"regex","selector":".*"}},"fromDataSource":{"csv":{"path":"{{CSV}}","keyColumn":"id"}},"into":"${ROW}"}}]}]}]}`),
			call("GET", "P1", "/").H("X-Id", "123")),
		cs("lookup csv missing file",
			create(`{"protocol":"http","port":{{P2}},"stubs":[{"responses":[{"is":{"body":"m=${ROW}[\"name\"]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":".*"}},"fromDataSource":{"csv":{"path":"/tmp/diff/no-such-file.csv","keyColumn":"id"}},"into":"${ROW}"}}]}]}]}`),
			call("GET", "P2", "/123")),
		cs("legacy _behaviors",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"legacy ${P}"},"_behaviors":{"wait":10,"copy":[{"from":"path","into":"${P}","using":{"method":"regex","selector":"\\d+"}}],"repeat":2}},{"is":{"body":"second"}}]}]}`),
			get("/imposters/{{P0}}"),
			call("GET", "P0", "/legacy/77"), call("GET", "P0", "/legacy/78"), call("GET", "P0", "/legacy/79")),

		// ---- predicates
		predCase("pred equals query",
			pr(`{"equals":{"query":{"a":"1"}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"equals":{"query":{"a":"2"}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"equals":{"query":{"a":"3"}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"equals":{"query":{"a":["1","2"]}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"equals":{"query":{"a":["2"]}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"equals":{"query":{"a":["1","2"]}}}`, call("GET", "P0", "/?a=1")),
			pr(`{"equals":{"query":{}}}`, call("GET", "P0", "/?x=1")),
			pr(`{"equals":{"query":{"q":" sp ace"}}}`, call("GET", "P0", "/?q=%20sp+ace")),
			pr(`{"equals":{"query":{"x[0]":"1"}}}`, call("GET", "P0", "/?x%5B0%5D=1")),
			pr(`{"equals":{"query":{"flag":""}}}`, call("GET", "P0", "/?flag"))),
		predCase("pred deepEquals",
			pr(`{"deepEquals":{"query":{"a":["2","1"]}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"deepEquals":{"query":{"a":["1"]}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"deepEquals":{"query":{"a":"1"}}}`, call("GET", "P0", "/?a=1&a=2")),
			pr(`{"deepEquals":{"query":{"a":"1"}}}`, call("GET", "P0", "/?a=1")),
			pr(`{"deepEquals":{"query":{"a":"1"}}}`, call("GET", "P0", "/?a=1&b=2")),
			pr(`{"deepEquals":{"query":{}}}`, call("GET", "P0", "/")),
			pr(`{"deepEquals":{"path":"/x"}}`, call("GET", "P0", "/X")),
			pr(`{"deepEquals":{"body":""}}`, call("GET", "P0", "/"))),
		predCase("pred JSON body",
			pr(`{"equals":{"body":{"a":1}}}`, postJSON("P0", "/", body)),
			pr(`{"equals":{"body":{"a":"1"}}}`, postJSON("P0", "/", body)),
			pr(`{"equals":{"body":{"a":1,"c":3}}}`, postJSON("P0", "/", body)),
			pr(`{"deepEquals":{"body":{"a":1}}}`, postJSON("P0", "/", body)),
			pr(`{"deepEquals":{"body":{"b":2,"a":1}}}`, postJSON("P0", "/", body)),
			pr(`{"deepEquals":{"body":{"a":"1","b":"2"}}}`, postJSON("P0", "/", body)),
			pr(`{"equals":{"body":{"o":{"x":"y"}}}}`, postJSON("P0", "/", `{"o":{"x":"y","z":1}}`)),
			pr(`{"equals":{"body":"{\"a\":1}"}}`, postJSON("P0", "/", `{"a":1}`)),
			pr(`{"equals":{"body":"{\"a\":1}"}}`, postJSON("P0", "/", `{"a": 1}`)),
			pr(`{"equals":{"body":{"t":true,"n":null}}}`, postJSON("P0", "/", `{"t":true,"n":null}`)),
			pr(`{"equals":{"body":{"a":1}}}`, call("POST", "P0", "/").B(`not json`)),
			pr(`{"equals":{"body":""}}`, call("GET", "P0", "/"))),
		predCase("pred contains startsWith endsWith",
			pr(`{"contains":{"body":"\"a\":1"}}`, postJSON("P0", "/", `{"a":1}`)),
			pr(`{"contains":{"body":{"name":"li"}}}`, postJSON("P0", "/", `{"name":"Alice"}`)),
			pr(`{"contains":{"body":{"name":"LI"}}}`, postJSON("P0", "/", `{"name":"Alice"}`)),
			pr(`{"startsWith":{"path":"/ab"}}`, call("GET", "P0", "/abc")),
			pr(`{"endsWith":{"path":"bc"}}`, call("GET", "P0", "/abc")),
			pr(`{"endsWith":{"path":"ab"}}`, call("GET", "P0", "/abc")),
			pr(`{"startsWith":{"query":{"q":"he"}}}`, call("GET", "P0", "/?q=hello")),
			pr(`{"endsWith":{"headers":{"X-Foo":"AR"}}}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"contains":{"headers":{"x-foo":"a"}}}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"startsWith":{"body":"hel"}}`, call("POST", "P0", "/").B("hello world")),
			pr(`{"endsWith":{"body":"WORLD"}}`, call("POST", "P0", "/").B("hello world")),
			pr(`{"contains":{"query":{"a":"2"}}}`, call("GET", "P0", "/?a=1&a=22"))),
		predCase("pred JSON arrays",
			pr(`{"equals":{"body":{"arr":"b"}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"equals":{"body":{"arr":["b"]}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"equals":{"body":{"arr":["b","a"]}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"equals":{"body":{"arr":["c"]}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"deepEquals":{"body":{"arr":["b","a"]}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"deepEquals":{"body":{"arr":["a"]}}}`, postJSON("P0", "/", `{"arr":["a","b"]}`)),
			pr(`{"equals":{"body":{"items":{"k":"third"}}}}`, postJSON("P0", "/", `{"items":[{"k":"first"},{"k":"third"}]}`)),
			pr(`{"equals":{"body":{"items":[{"k":"third"}]}}}`, postJSON("P0", "/", `{"items":[{"k":"first"},{"k":"third"}]}`)),
			pr(`{"contains":{"body":{"items":{"k":"hir"}}}}`, postJSON("P0", "/", `{"items":[{"k":"first"},{"k":"third"}]}`)),
			pr(`{"deepEquals":{"body":{"m":[[1,2],[3]]}}}`, postJSON("P0", "/", `{"m":[[1,2],[3]]}`)),
			pr(`{"equals":{"body":{"m":[[3]]}}}`, postJSON("P0", "/", `{"m":[[1,2],[3]]}`)),
			pr(`{"equals":{"body":{"n":[1]}}}`, postJSON("P0", "/", `{"n":[1,2,3]}`))),
		predCase("pred exists",
			pr(`{"exists":{"headers":{"X-Foo":true}}}`, call("GET", "P0", "/").H("x-foo", "1")),
			pr(`{"exists":{"headers":{"X-Foo":true}}}`, call("GET", "P0", "/")),
			pr(`{"exists":{"headers":{"X-Foo":true}}}`, call("GET", "P0", "/").H("X-Foo", "")),
			pr(`{"exists":{"headers":{"X-Foo":false}}}`, call("GET", "P0", "/")),
			pr(`{"exists":{"query":{"q":true}}}`, call("GET", "P0", "/?q=")),
			pr(`{"exists":{"query":{"q":true}}}`, call("GET", "P0", "/?q=1")),
			pr(`{"exists":{"body":{"a":true}}}`, postJSON("P0", "/", `{"a":"x"}`)),
			pr(`{"exists":{"body":{"a":true}}}`, postJSON("P0", "/", `{"b":"x"}`)),
			pr(`{"exists":{"body":{"a":false}}}`, postJSON("P0", "/", `{"b":"x"}`)),
			pr(`{"exists":{"body":{"a":{"b":true}}}}`, postJSON("P0", "/", `{"a":{"b":1}}`)),
			pr(`{"exists":{"body":true}}`, call("POST", "P0", "/").B("x")),
			pr(`{"exists":{"body":true}}`, call("GET", "P0", "/")),
			pr(`{"exists":{"body":false}}`, call("GET", "P0", "/"))),
		predCase("pred caseSensitive",
			pr(`{"equals":{"path":"/ABC"}}`, call("GET", "P0", "/abc")),
			pr(`{"equals":{"path":"/ABC"},"caseSensitive":true}`, call("GET", "P0", "/abc")),
			pr(`{"equals":{"query":{"KEY":"VALUE"}}}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"query":{"KEY":"VALUE"}},"caseSensitive":true}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"query":{"key":"value"}},"caseSensitive":true}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"headers":{"x-foo":"bar"}},"caseSensitive":true}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"equals":{"headers":{"X-Foo":"bar"}},"caseSensitive":true}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"equals":{"headers":{"x-foo":"BAR"}}}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"equals":{"body":{"NAME":"ALICE"}}}`, postJSON("P0", "/", `{"name":"alice"}`)),
			pr(`{"equals":{"method":"post"}}`, call("POST", "P0", "/")),
			pr(`{"equals":{"method":"post"},"caseSensitive":true}`, call("POST", "P0", "/"))),
		predCase("pred keyCaseSensitive",
			pr(`{"equals":{"query":{"KEY":"value"}},"keyCaseSensitive":true}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"query":{"key":"VALUE"}},"keyCaseSensitive":true}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"query":{"KEY":"value"}},"caseSensitive":true,"keyCaseSensitive":false}`, call("GET", "P0", "/?key=value")),
			pr(`{"equals":{"body":{"Name":"x"}},"keyCaseSensitive":true}`, postJSON("P0", "/", `{"name":"x"}`)),
			pr(`{"matches":{"query":{"KEY":"^v"}},"keyCaseSensitive":false,"caseSensitive":true}`, call("GET", "P0", "/?key=value"))),
		predCase("pred except",
			pr(`{"equals":{"path":"/abc"},"except":"\\d+"}`, call("GET", "P0", "/a1b2c3")),
			pr(`{"equals":{"body":"hello"},"except":"WORLD"}`, call("POST", "P0", "/").B("helloworld")),
			pr(`{"equals":{"body":"hello"},"except":"WORLD","caseSensitive":true}`, call("POST", "P0", "/").B("helloworld")),
			pr(`{"equals":{"query":{"id":"12"}},"except":"^0+"}`, call("GET", "P0", "/?id=0012")),
			pr(`{"matches":{"path":"^/abc$"},"except":"\\d"}`, call("GET", "P0", "/a1bc")),
			pr(`{"deepEquals":{"query":{"a":"x"}},"except":"\\d"}`, call("GET", "P0", "/?a=x9"))),
		predCase("pred jsonpath",
			pr(`{"equals":{"body":"Ann"},"jsonpath":{"selector":"$.people[0].name"}}`, postJSON("P0", "/", people)),
			pr(`{"equals":{"body":"Ben"},"jsonpath":{"selector":"$..name"}}`, postJSON("P0", "/", people)),
			pr(`{"deepEquals":{"body":["Ben","Ann"]},"jsonpath":{"selector":"$..name"}}`, postJSON("P0", "/", people)),
			pr(`{"equals":{"body":"1"},"jsonpath":{"selector":"$.n"}}`, postJSON("P0", "/", `{"n":1}`)),
			pr(`{"equals":{"body":"ann"},"jsonpath":{"selector":"$.NAME"}}`, postJSON("P0", "/", `{"name":"Ann"}`)),
			pr(`{"equals":{"body":"ann"},"jsonpath":{"selector":"$.NAME"},"caseSensitive":true}`, postJSON("P0", "/", `{"name":"Ann"}`)),
			pr(`{"exists":{"body":true},"jsonpath":{"selector":"$.missing"}}`, postJSON("P0", "/", `{"a":1}`)),
			pr(`{"exists":{"body":false},"jsonpath":{"selector":"$.missing"}}`, postJSON("P0", "/", `{"a":1}`)),
			pr(`{"equals":{"body":"x"},"jsonpath":{"selector":"$.a"}}`, call("POST", "P0", "/").B("not json")),
			pr(`{"equals":{"query":{"q":"x"}},"jsonpath":{"selector":"$.a"}}`, call("GET", "P0", "/?q=%7B%22a%22%3A%22x%22%7D")),
			pr(`{"matches":{"body":"^A"},"jsonpath":{"selector":"$.people[*].name"}}`, postJSON("P0", "/", people)),
			pr(`{"equals":{"body":{"k":"v"}},"jsonpath":{"selector":"$.o"}}`, postJSON("P0", "/", `{"o":{"k":"v"}}`))),
		predCase("pred xpath",
			pr(`{"equals":{"body":"two"},"xpath":{"selector":"//n:item","ns":{"n":"urn:n"}}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"equals":{"body":"three"},"xpath":{"selector":"//n:item","ns":{"n":"urn:n"}}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"deepEquals":{"body":["two","one"]},"xpath":{"selector":"//n:item","ns":{"n":"urn:n"}}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"equals":{"body":"p"},"xpath":{"selector":"//plain"}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"equals":{"body":"p"},"xpath":{"selector":"//PLAIN"}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"equals":{"body":"2"},"xpath":{"selector":"count(//n:item)","ns":{"n":"urn:n"}}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"exists":{"body":true},"xpath":{"selector":"//x:item","ns":{"x":"urn:n"}}}`, call("POST", "P0", "/").B(xml)),
			pr(`{"equals":{"body":"one"},"xpath":{"selector":"//item"}}`, call("POST", "P0", "/").B(`<root xmlns="urn:d"><item>one</item></root>`)),
			pr(`{"equals":{"body":"one"},"xpath":{"selector":"//d:item","ns":{"d":"urn:d"}}}`, call("POST", "P0", "/").B(`<root xmlns="urn:d"><item>one</item></root>`)),
			pr(`{"equals":{"body":"v"},"xpath":{"selector":"//a/@k"}}`, call("POST", "P0", "/").B(`<a k="v"/>`)),
			pr(`{"exists":{"body":true},"xpath":{"selector":"//a"}}`, call("POST", "P0", "/").B(`not xml`))),
		predCase("pred form",
			pr(`{"equals":{"form":{"f1":"v1"}}}`, call("POST", "P0", "/").H("Content-Type", "application/x-www-form-urlencoded").B("f1=v1&f2=v%202")),
			pr(`{"equals":{"form":{"f2":"v 2"}}}`, call("POST", "P0", "/").H("Content-Type", "application/x-www-form-urlencoded").B("f1=v1&f2=v%202")),
			pr(`{"deepEquals":{"form":{"f1":"v1"}}}`, call("POST", "P0", "/").H("Content-Type", "application/x-www-form-urlencoded").B("f1=v1&f2=v%202")),
			pr(`{"equals":{"form":{"f1":"v1"}}}`, call("POST", "P0", "/").H("Content-Type", "text/plain").B("f1=v1&f2=v%202")),
			pr(`{"equals":{"form":{"f1":"v1"}}}`, call("POST", "P0", "/").H("Content-Type", "application/x-www-form-urlencoded; charset=utf-8").B("f1=v1")),
			pr(`{"equals":{"form":{"f1":["v1","v3"]}}}`, call("POST", "P0", "/").H("Content-Type", "application/x-www-form-urlencoded").B("f1=v1&f1=v3"))),
		predCase("pred logical",
			pr(`{"equals":{"method":"GET"}},{"startsWith":{"path":"/a"}}`, call("GET", "P0", "/abc")),
			pr(`{"equals":{"method":"GET"}},{"startsWith":{"path":"/a"}}`, call("POST", "P0", "/abc")),
			pr(`{"equals":{"path":"/abc","method":"GET"}}`, call("GET", "P0", "/abc")),
			pr(`{"or":[{"equals":{"path":"/x"}},{"equals":{"path":"/abc"}}]}`, call("GET", "P0", "/abc")),
			pr(`{"or":[{"equals":{"path":"/x"}},{"equals":{"path":"/y"}}]}`, call("GET", "P0", "/abc")),
			pr(`{"and":[{"startsWith":{"path":"/a"}},{"not":{"equals":{"method":"POST"}}}]}`, call("GET", "P0", "/abc")),
			pr(`{"and":[{"startsWith":{"path":"/a"}},{"not":{"equals":{"method":"POST"}}}]}`, call("POST", "P0", "/abc")),
			pr(`{"not":{"not":{"equals":{"path":"/abc"}}}}`, call("GET", "P0", "/abc")),
			pr(`{"or":[]}`, call("GET", "P0", "/")),
			pr(`{"and":[]}`, call("GET", "P0", "/"))),
		predCase("pred matches",
			pr(`{"matches":{"path":"^/\\w+$"}}`, call("GET", "P0", "/abc")),
			pr(`{"matches":{"path":"^/ABC$"}}`, call("GET", "P0", "/abc")),
			pr(`{"matches":{"path":"^/ABC$"},"caseSensitive":true}`, call("GET", "P0", "/abc")),
			pr(`{"matches":{"headers":{"X-FOO":"^b"}}}`, call("GET", "P0", "/").H("x-foo", "BAR")),
			pr(`{"matches":{"body":"\\d{3}"}}`, call("POST", "P0", "/").B("abc123")),
			pr(`{"matches":{"query":{"q":"^h.*o$"}}}`, call("GET", "P0", "/?q=hello")),
			pr(`{"matches":{"body":{"a":"^\\d+$"}}}`, postJSON("P0", "/", `{"a":"123"}`)),
			pr(`{"matches":{"body":{"a":"^\\d+$"}}}`, postJSON("P0", "/", `{"a":123}`)),
			pr(`{"matches":{"method":"^(GET|PUT)$"}}`, call("PUT", "P0", "/")),
			pr(`{"matches":{"query":{"a":"^2$"}}}`, call("GET", "P0", "/?a=1&a=2"))),
		predCase("pred gzip body",
			pr(`{"equals":{"body":{"a":1}}}`, call("POST", "P0", "/").H("Content-Encoding", "gzip").H("Content-Type", "application/json").Raw(gz(`{"a":1}`))),
			pr(`{"contains":{"body":"zipped"}}`, call("POST", "P0", "/").H("Content-Encoding", "gzip").Raw(gz(`zipped text`)))),
		predCase("pred method ip requestFrom path",
			pr(`{"equals":{"ip":"127.0.0.1"}}`, call("GET", "P0", "/")),
			pr(`{"equals":{"requestFrom":"127.0.0.1"}}`, call("GET", "P0", "/")),
			pr(`{"matches":{"requestFrom":"^127\\.0\\.0\\.1:\\d+$"}}`, call("GET", "P0", "/")),
			pr(`{"equals":{"path":"/a%20b"}}`, call("GET", "P0", "/a%20b")),
			pr(`{"equals":{"path":"/a b"}}`, call("GET", "P0", "/a%20b")),
			pr(`{"equals":{"path":"/p"}}`, call("GET", "P0", "/p?x=1")),
			pr(`{"equals":{"path":"/p/"}}`, call("GET", "P0", "/p")),
			pr(`{"equals":{"method":"DELETE"}}`, call("DELETE", "P0", "/"))),
		predCase("pred headers",
			pr(`{"equals":{"headers":{"Content-Type":"application/json"}}}`, call("POST", "P0", "/").H("content-type", "application/json").B("{}")),
			pr(`{"equals":{"headers":{"X-Dup":"two"}}}`, call("GET", "P0", "/").H("X-Dup", "one").H("X-Dup", "two")),
			pr(`{"equals":{"headers":{"X-Dup":["one","two"]}}}`, call("GET", "P0", "/").H("X-Dup", "one").H("X-Dup", "two")),
			pr(`{"deepEquals":{"headers":{"X-Foo":"bar"}}}`, call("GET", "P0", "/").H("X-Foo", "bar")),
			pr(`{"equals":{"headers":{"Host":"127.0.0.1:{{P0}}"}}}`, call("GET", "P0", "/")),
			pr(`{"equals":{"headers":{"X-Missing":""}}}`, call("GET", "P0", "/"))),
		predCase("pred nested objects",
			pr(`{"equals":{"body":{"a":{"b":{"c":{"d":"e"}}}}}}`, postJSON("P0", "/", `{"a":{"b":{"c":[1,{"d":"e"}]}}}`)),
			pr(`{"deepEquals":{"body":{"a":{"b":{"c":[1,{"d":"e"}]}}}}}`, postJSON("P0", "/", `{"a":{"b":{"c":[1,{"d":"e"}]}}}`)),
			pr(`{"deepEquals":{"body":{"a":{"b":{"c":[{"d":"e"},1]}}}}}`, postJSON("P0", "/", `{"a":{"b":{"c":[1,{"d":"e"}]}}}`)),
			pr(`{"equals":{"body":{"a":{"x":"1"}}}}`, postJSON("P0", "/", `{"a":{"x":1.0}}`)),
			pr(`{"contains":{"body":{"a":{"b":"ll"}}}}`, postJSON("P0", "/", `{"a":{"b":"hello"}}`))),

		// ---- proxies
		cs("proxyOnce",
			create(upstream),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true}}]}`),
			call("GET", "P1", "/first?x=1").H("X-Client", "c1"),
			call("POST", "P1", "/second").JSON(`{"posted":true}`),
			call("GET", "P1", "/first?x=2"),
			get("/imposters/{{P1}}"), get("/imposters/{{P0}}"),
			get("/imposters/{{P1}}?replayable=true"), get("/imposters/{{P1}}?removeProxies=true"),
			get("/imposters?replayable=true&removeProxies=true"),
			del("/imposters/{{P1}}/savedProxyResponses"),
			call("GET", "P1", "/first"), get("/imposters/{{P1}}")),
		cs("proxyAlways",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"headers":{"Content-Type":"application/json"},"body":"{\"compact\":true,\"n\":1}"}},{"is":{"body":"plain2"}},{"is":{"body":"plain3"}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyAlways","predicateGenerators":[{"matches":{"path":true,"query":true},"caseSensitive":true},{"matches":{"method":true}}]}`),
			call("GET", "P1", "/a?k=V"), call("GET", "P1", "/a?k=V"), call("POST", "P1", "/b").B("data"),
			get("/imposters/{{P1}}"),
			del("/imposters/{{P1}}/requests"), get("/imposters/{{P1}}")),
		cs("proxyTransparent",
			create(upstream),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyTransparent","predicateGenerators":[{"matches":{"path":true}}]}`),
			call("GET", "P1", "/t"), call("GET", "P1", "/t"), call("GET", "P1", "/t"),
			get("/imposters/{{P1}}")),
		cs("proxy default mode without generators",
			create(upstream),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}"}`),
			call("GET", "P1", "/a"), call("GET", "P1", "/b"), get("/imposters/{{P1}}"), get("/imposters/{{P0}}")),
		cs("predicateGenerators variants",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"up"}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"query":true},"except":"\\d+"}]}`),
			proxy("P2", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]}`),
			proxy("P3", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"query":true},"ignore":{"query":"ts"}}]}`),
			proxy("P4", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"query":{"a":true}}}]}`),
			proxy("P5", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"headers":{"X-Id":true}}}]}`),
			proxy("P6", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"body":true},"xpath":{"selector":"//id"}}]}`),
			proxy("P7", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"method":true,"path":true,"body":true},"caseSensitive":true}]}`),
			call("GET", "P1", "/p?id=abc123"),
			postJSON("P2", "/p", `{"id":7,"x":1}`),
			call("GET", "P3", "/p?a=1&ts=999"),
			call("GET", "P4", "/p?a=1&b=2"),
			call("GET", "P5", "/p").H("X-Id", "42").H("X-Other", "o"),
			call("POST", "P6", "/p").B(`<r><id>5</id></r>`),
			call("POST", "P7", "/P").B(`Body`),
			get("/imposters/{{P1}}?replayable=true"), get("/imposters/{{P2}}?replayable=true"), get("/imposters/{{P3}}?replayable=true"),
			get("/imposters/{{P4}}?replayable=true"), get("/imposters/{{P5}}?replayable=true"), get("/imposters/{{P6}}?replayable=true"),
			get("/imposters/{{P7}}?replayable=true"),
			call("GET", "P1", "/p?id=abc999"), call("GET", "P4", "/p?a=1&b=3")),
		cs("predicateGenerators all headers",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"up"}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","predicateGenerators":[{"matches":{"headers":true}}]}`),
			call("GET", "P1", "/p").H("X-Id", "42"),
			call("GET", "P1", "/p").H("X-Id", "42"),
			get("/imposters/{{P1}}?replayable=true")),
		cs("addWaitBehavior",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"slow"},"behaviors":[{"wait":50}]}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","addWaitBehavior":true}`),
			call("GET", "P1", "/w").Min(50*time.Millisecond),
			get("/imposters/{{P1}}"),
			call("GET", "P1", "/w").Min(50*time.Millisecond)),
		cs("injectHeaders",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":true,"stubs":[{"responses":[{"is":{"body":"up"}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyTransparent","injectHeaders":{"X-Injected":"yes","X-Client":"overridden"}}`),
			proxy("P2", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyTransparent","injectHeaders":{"Host":"override.example"}}`),
			call("GET", "P1", "/i").H("X-Client", "c"),
			call("GET", "P2", "/h"),
			get("/imposters/{{P0}}"), get("/imposters/{{P1}}")),
		cs("proxy unreachable",
			proxy("P1", `{"to":"http://127.0.0.1:{{P9}}"}`),
			call("GET", "P1", "/x"), get("/imposters/{{P1}}")),
		cs("proxy binary and headers",
			create(`{"protocol":"http","port":{{P0}},"stubs":[{"responses":[{"is":{"_mode":"binary","headers":{"Content-Type":"application/octet-stream","Set-Cookie":["a=1","b=2"]},"body":"AAECAw=="}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyOnce"}`),
			call("GET", "P1", "/bin"), call("GET", "P1", "/bin"), get("/imposters/{{P1}}?replayable=true")),
		cs("proxy upstream status and query",
			create(`{"protocol":"http","port":{{P0}},"recordRequests":true,"stubs":[{"responses":[{"is":{"statusCode":404,"headers":{"X-Up":"1","x-lower-up":"v"},"body":"missing"}}]}]}`),
			proxy("P1", `{"to":"http://127.0.0.1:{{P0}}","mode":"proxyAlways","predicateGenerators":[{"matches":{"query":true}}]}`),
			call("PUT", "P1", "/res?b=2&a=1&a=3").H("Content-Type", "text/plain").B("payload"),
			get("/imposters/{{P0}}"), get("/imposters/{{P1}}?replayable=true")),

		// ---- https
		cs("https imposter",
			create(`{"protocol":"https","port":{{P0}},"stubs":[{"responses":[{"is":{"body":"secure"}}]}]}`).
				Expect("body", `^(key|cert)$`, reasonHTTPS),
			call("GET", "P0", "/s").TLS(),
			get("/imposters/{{P0}}").Expect("body", `^(key|cert)$`, reasonHTTPS),
			get("/imposters").Expect("body", `^imposters\[\d+\]\.(key|cert)$`, reasonHTTPS)),
	}
}

// ---------------------------------------------------------------------------

func serverFrom(name, raw string, base int) (*server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("%s: no port in %q", name, raw)
	}
	return &server{name: name, host: u.Hostname(), adminPort: p, base: base}, nil
}

func main() {
	mbURL := flag.String("mb", "http://127.0.0.1:3525", "mountebank's admin URL")
	flURL := flag.String("fl", "http://127.0.0.1:3625", "fenceline's admin URL")
	run := flag.String("run", "", "only cases whose name matches this regexp")
	list := flag.Bool("list", false, "list the cases and exit")
	verbose := flag.Bool("v", false, "print each step as it runs")
	flag.StringVar(&csvPath, "csv", csvPath, "where to write the CSV the lookup case reads")
	injection := flag.Bool("injection", false, "run the JavaScript injection cases instead (both servers started with injection allowed: mb --allowInjection, fenceline -allowInjection)")
	rotate := flag.String("fl-rotate", "", "comma-separated hosts of a fenceline cluster's members (each on -fl's ports): every call goes to the next in turn, as behind a round-robin balancer")
	flag.Parse()

	all := cases()
	if *injection {
		all = injectionCases()
	}
	if *list {
		for _, c := range all {
			fmt.Printf("%-45s %d steps\n", c.name, len(c.steps))
		}
		return
	}
	sm, err := serverFrom("mb", *mbURL, 4700)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sf, err := serverFrom("fl", *flURL, 4800)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *rotate != "" {
		sf.rotate = strings.Split(*rotate, ",")
	}
	if err := os.MkdirAll(filepath.Dir(csvPath), 0o755); err == nil {
		err = os.WriteFile(csvPath, []byte("id,name,city\n123,Alice,Paris\n456,Bob,\"New York\"\n"), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "csv:", err)
		os.Exit(2)
	}
	var filter *regexp.Regexp
	if *run != "" {
		filter = regexp.MustCompile(*run)
	}

	var diffs []diff
	nCases, nSteps := 0, 0
	for _, c := range all {
		if filter != nil && !filter.MatchString(c.name) {
			continue
		}
		nCases++
		for _, s := range []*server{sm, sf} {
			s.reset()
			addr := net.JoinHostPort(s.host, strconv.Itoa(s.adminPort))
			r := doHTTP(addr, false, "DELETE", "/imposters", nil, nil, 10*time.Second)
			if r.outcome != "" || r.status != 200 {
				fmt.Fprintf(os.Stderr, "%s: cannot reset before %q: %s %d\n", s.name, c.name, r.outcome, r.status)
				os.Exit(2)
			}
		}
		for i, st := range c.steps {
			nSteps++
			rm := sm.exec(st)
			rf := sf.exec(st)
			if *verbose {
				fmt.Printf("%s %s: mb %d%s fl %d%s\n", c.name, st.label(i), rm.status, rm.outcome, rf.status, rf.outcome)
			}
			cmp := &comparer{cse: c.name, step: st.label(i), expects: st.expects}
			compareStep(cmp, st, rm, rf, sm, sf)
			diffs = append(diffs, cmp.out...)
		}
	}
	for _, s := range []*server{sm, sf} {
		doHTTP(net.JoinHostPort(s.host, strconv.Itoa(s.adminPort)), false, "DELETE", "/imposters", nil, nil, 10*time.Second)
	}

	var real, expected []diff
	for _, d := range diffs {
		if d.reason == "" {
			real = append(real, d)
		} else {
			expected = append(expected, d)
		}
	}
	line := func(d diff) string {
		what := d.kind
		if d.path != "" {
			what += " " + d.path
		}
		return fmt.Sprintf("%s | %s | %s | mb: %s | fl: %s", d.cse, d.step, what, d.mb, d.fl)
	}
	fmt.Printf("== differences (%d) ==\n", len(real))
	for _, d := range real {
		fmt.Println(line(d))
	}
	fmt.Printf("\n== expected (%d, not counted) ==\n", len(expected))
	framing := 0
	var framingEx string
	for _, d := range expected {
		if d.kind == "framing" {
			if framing == 0 {
				framingEx = line(d)
			}
			framing++
			continue
		}
		fmt.Printf("%s  [%s]\n", line(d), d.reason)
	}
	if framing > 0 {
		fmt.Printf("framing differs on %d imposter calls (fenceline frames with Content-Length), e.g. %s\n", framing, framingEx)
	}
	if mbNotStringify > 0 {
		fmt.Printf("\nharness warning: %d mountebank JSON bodies did not match the JSON.stringify emulation\n", mbNotStringify)
	}
	fmt.Printf("\n%d cases, %d steps, %d differences, %d expected\n", nCases, nSteps, len(real), len(expected))
	if len(real) > 0 {
		os.Exit(1)
	}
}
