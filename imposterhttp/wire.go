package imposterhttp

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// An imposter speaks HTTP/1.1 itself rather than through net/http's
// server, for one reason: mountebank's contract shows clients the request
// as they sent it and the response as the stub wrote it. net/http
// canonicalizes header names, drops their order, and sets framing and
// content type headers of its own; here a recorded request keeps every
// header's name, case and order (a name sent twice in one case becomes an
// array, in two cases two keys, as in mountebank), and a response goes out
// with the stub's headers in the stub's order and case, then Date and the
// framing.
//
// Bounds, each with its refusal: a request head of at most MaxHeadBytes
// (431, then close), a body of at most MaxBodyBytes (413, then close),
// MaxConns connections per imposter (further ones are closed at accept),
// IdleTimeout between requests and for reading one (the connection is
// closed).
const (
	MaxHeadBytes = 64 << 10
	MaxConns     = 4096
	IdleTimeout  = 60 * time.Second
)

// wireRequest is one request as read off the connection.
type wireRequest struct {
	method, target string
	http10         bool
	headers        [][2]string // name (as sent), value; in order
	body           []byte
	keepAlive      bool
	chunked        bool // the body came chunked
	// forwarded: a member forwarded it, its loop guard checked once
	// (forwardedFrom) when it was read.
	forwarded bool
	// tcp: a tcp imposter's request (serveTCP), never forwarded.
	tcp bool
}

// framing is how a message's body is delimited.
type framing struct {
	encoded bool  // a Transfer-Encoding is given
	chunked bool  // and its last coding is chunked
	length  int64 // Content-Length, when given and not chunked
	sized   bool
}

// framingOf reads the framing headers as RFC 9112 §6.3 orders them: a
// Transfer-Encoding whose last coding is chunked frames the body and any
// Content-Length is ignored; Content-Length values that differ, or one
// that is no number, are an error, since the two ends of a connection
// could read different bodies from them.
func framingOf(headers [][2]string) (framing, error) {
	var f framing
	var codings []string
	for _, h := range headers {
		switch {
		case strings.EqualFold(h[0], "Transfer-Encoding"):
			f.encoded = true
			codings = append(codings, strings.Split(h[1], ",")...)
		case strings.EqualFold(h[0], "Content-Length"):
			n, err := strconv.ParseInt(strings.TrimSpace(h[1]), 10, 64)
			if err != nil || n < 0 || (f.sized && n != f.length) {
				return framing{}, fmt.Errorf("malformed or conflicting Content-Length %q", h[1])
			}
			f.length, f.sized = n, true
		}
	}
	if f.encoded {
		f.chunked = strings.EqualFold(strings.TrimSpace(codings[len(codings)-1]), "chunked")
		f.length, f.sized = 0, false
	}
	return f, nil
}

// framedHeaders is a head to send with a body of n bytes, framed as the
// message it came from was: chunked, with its Transfer-Encoding lines and
// no Content-Length; or by length, with no Transfer-Encoding and one
// Content-Length (the first one's place and name, the body's length),
// added at the end if the body needs one.
func framedHeaders(headers [][2]string, chunked bool, n int) [][2]string {
	out := make([][2]string, 0, len(headers)+1)
	sized := false
	for _, h := range headers {
		switch {
		case strings.EqualFold(h[0], "Transfer-Encoding"):
			if !chunked {
				continue
			}
		case strings.EqualFold(h[0], "Content-Length"):
			if chunked || sized {
				continue
			}
			sized, h[1] = true, strconv.Itoa(n)
		}
		out = append(out, h)
	}
	if !chunked && !sized && n > 0 {
		out = append(out, [2]string{"Content-Length", strconv.Itoa(n)})
	}
	return out
}

// header returns the first value of a header, by name in any case.
func (r *wireRequest) header(name string) (string, bool) { return headerIn(r.headers, name) }

// headerIn returns the first value of a header, by name in any case.
func headerIn(headers [][2]string, name string) (string, bool) {
	for _, h := range headers {
		if strings.EqualFold(h[0], name) {
			return h[1], true
		}
	}
	return "", false
}

// keptAlive reports whether a message's connection stays open after it:
// HTTP/1.1 unless it says close, HTTP/1.0 only if it says keep-alive.
func keptAlive(headers [][2]string, http10 bool) bool {
	conn, _ := headerIn(headers, "Connection")
	conn = strings.ToLower(conn)
	return !strings.Contains(conn, "close") && (!http10 || strings.Contains(conn, "keep-alive"))
}

var (
	errMalformed = errors.New("malformed request")
	errHeadLarge = errors.New("request head too large")
)

// readRequest reads one request. io.EOF means the client closed between
// requests.
func readRequest(br *bufio.Reader, w *bufio.Writer) (*wireRequest, error) {
	budget := MaxHeadBytes
	line, err := readLine(br, &budget)
	for err == nil && line == "" { // tolerate blank lines before a request (RFC 9112 §2.2)
		line, err = readLine(br, &budget)
	}
	if err != nil {
		return nil, err
	}
	// A CR inside a line of the head (a bare CR: readLine takes off the
	// CR of the CRLF) makes the request malformed, as RFC 9112 §2.2 lets
	// a recipient decide. Taken as text it would reach the engine and the
	// recorded request inside a name, value or target, while the request
	// forwarded to a flow's owner carries a space there (headerSafe), or,
	// in a target, the CR itself, which a peer may read as a line's end.
	if strings.IndexByte(line, '\r') >= 0 {
		return nil, errMalformed
	}
	parts := strings.Split(line, " ")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || !strings.HasPrefix(parts[2], "HTTP/1.") {
		return nil, errMalformed
	}
	r := &wireRequest{method: parts[0], target: parts[1], http10: parts[2] == "HTTP/1.0"}
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errMalformed
			}
			return nil, err
		}
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") || strings.IndexByte(line, '\r') >= 0 {
			return nil, errMalformed // includes obsolete line folding, and a bare CR (above)
		}
		r.headers = append(r.headers, [2]string{name, strings.Trim(value, " \t")})
	}
	r.keepAlive = keptAlive(r.headers, r.http10)

	f, err := framingOf(r.headers)
	if err != nil || (f.encoded && !f.chunked) {
		return nil, errMalformed // RFC 9112 §6.3: a request's coding must end in chunked
	}
	chunked, length := f.chunked, f.length
	if length > MaxBodyBytes {
		return nil, errTooLarge
	}
	r.chunked = chunked
	if (chunked || length > 0) && w != nil {
		if exp, ok := r.header("Expect"); ok && strings.EqualFold(exp, "100-continue") {
			_, _ = w.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if err := w.Flush(); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case chunked:
		r.body, err = readChunked(br)
	case length > 0:
		r.body = make([]byte, length)
		_, err = io.ReadFull(br, r.body)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// readLine reads a line without its CRLF (or bare LF), charging it to
// budget.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		*budget -= len(frag)
		if *budget < 0 {
			return "", errHeadLarge
		}
		switch {
		case err == nil:
			line = append(line, frag...)
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			return string(line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, frag...)
		default:
			if len(frag) > 0 || len(line) > 0 {
				return "", errMalformed
			}
			return "", err
		}
	}
}

// readChunked reads a chunked body and its trailers.
func readChunked(br *bufio.Reader) ([]byte, error) {
	var body []byte
	budget := MaxHeadBytes
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, err
		}
		size, _, _ := strings.Cut(line, ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 {
			return nil, errMalformed
		}
		if n == 0 {
			for { // trailers
				t, err := readLine(br, &budget)
				if err != nil {
					return nil, err
				}
				if t == "" {
					return body, nil
				}
			}
		}
		if int64(len(body))+n > MaxBodyBytes {
			return nil, errTooLarge
		}
		start := len(body)
		body = append(body, make([]byte, n)...)
		if _, err := io.ReadFull(br, body[start:]); err != nil {
			return nil, err
		}
		if crlf, err := readLine(br, &budget); err != nil || crlf != "" {
			return nil, errMalformed
		}
		budget = MaxHeadBytes
	}
}

// accept serves an imposter's listener until it is closed.
func (s *Server) accept(sv *served, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !s.access.Admit(c) {
			continue
		}
		if !sv.track(c, s.maxConns) {
			_ = c.Close()
			continue
		}
		sv.mu.Lock()
		proto := sv.imp.Protocol
		sv.mu.Unlock()
		switch proto {
		case "tcp":
			go s.serveTCP(sv, c)
		case "smtp":
			go s.serveSMTP(sv, c)
		default:
			go s.serveConn(sv, c)
		}
	}
}

// track adds a connection, unless the imposter is stopped or at max.
func (sv *served) track(c net.Conn, max int) bool {
	sv.connMu.Lock()
	defer sv.connMu.Unlock()
	if sv.stopped || len(sv.conns) >= max {
		return false
	}
	sv.conns[c] = struct{}{}
	return true
}

func (sv *served) untrack(c net.Conn) {
	sv.connMu.Lock()
	delete(sv.conns, c)
	sv.connMu.Unlock()
	_ = c.Close()
}

// stop closes the listener and every connection.
func (sv *served) stop() {
	sv.connMu.Lock()
	sv.stopped = true
	conns := sv.conns
	sv.conns = map[net.Conn]struct{}{}
	sv.connMu.Unlock()
	sv.mu.Lock()
	ln := sv.ln
	sv.imp.Close() // its script engine's timers
	sv.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for c := range conns { //fenceline:unordered closing each
		_ = c.Close()
	}
}

// serveConn answers one connection's requests in turn.
func (s *Server) serveConn(sv *served, c net.Conn) {
	defer sv.untrack(c)
	br := bufio.NewReaderSize(c, 16<<10)
	bw := bufio.NewWriterSize(c, 16<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		wr, err := readRequest(br, bw)
		switch {
		case err == nil:
		case errors.Is(err, errTooLarge):
			refuse(bw, http.StatusRequestEntityTooLarge)
			lingerClose(c)
			return
		case errors.Is(err, errHeadLarge):
			refuse(bw, http.StatusRequestHeaderFieldsTooLarge)
			return
		case errors.Is(err, errMalformed):
			refuse(bw, http.StatusBadRequest)
			return
		default:
			return // closed, timed out or reset
		}
		remote := c.RemoteAddr().String()
		if from, ok := s.forwardedFrom(wr); ok {
			// Forwarded by another member: the client is the one it names.
			remote, wr.forwarded = from, true
		}
		req := toEngineRequest(wr, remote)
		out := s.answer(sv, wr, req)
		if !waitOrFault(c, out) {
			return
		}
		closeAfter := writeResponse(bw, out, wr.method == "HEAD", wr.http10) || !wr.keepAlive
		if err := bw.Flush(); err != nil || closeAfter {
			return
		}
	}
}

// waitOrFault waits as the outcome says, then does its fault to the
// connection, if it names one: false if the connection is done with.
func waitOrFault(c net.Conn, out imposter.Outcome) bool {
	if out.Wait > 0 {
		time.Sleep(out.Wait)
	}
	switch out.Fault {
	case imposter.FaultReset:
		resetConn(c)
		return false
	case imposter.FaultRandom:
		garbageConn(c)
		return false
	}
	return true
}

// lingerClose ends a connection whose client may still be sending (a body
// refused as too large): closing at once would reset it before the client
// reads the refusal, so the server stops writing, reads and drops what
// comes for at most a second, then closes.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 2*MaxBodyBytes))
}

// refuse answers a request that cannot be read, and the connection ends.
func refuse(bw *bufio.Writer, code int) {
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", code, http.StatusText(code))
	_ = bw.Flush()
}

// answer runs the engine (and the upstream for a proxy). A fault comes
// back in the outcome; the connection loop carries it out.
func (s *Server) answer(sv *served, wr *wireRequest, req *imposter.Request) imposter.Outcome {
	// The stubs are matched outside the imposter's lock (a costly
	// predicate holds up only its own request), then answered under it.
	sv.mu.Lock()
	imp := sv.imp
	if imp.HasJavaScript() {
		// An injected function waiting for its callback lets the
		// imposter serve others meanwhile, as mountebank's node does.
		// (Set only here: a closure per request where no function runs
		// would cost every static stub.)
		req.YieldWith(sv.yield)
	}
	stateful, scripted := imp.Stateful(), imp.Scripted()
	cands := imp.Candidates()
	sv.mu.Unlock()
	var out imposter.Outcome
	var cyc *imposter.Cycle
	var err error
	if scripted {
		var final bool
		if out, final, err = s.respondScripted(sv, wr, req); final {
			return out
		}
		stateful = false
	} else if !stateful {
		found := cands.Find(req)
		sv.mu.Lock()
		switch {
		case sv.imp == imp:
			out, cyc, err = imp.RespondFound(req, cands, found)
		case !sv.imp.Stateful() && !sv.imp.Scripted():
			out, cyc, err = sv.imp.Respond(req) // replaced meanwhile: match again
		default:
			stateful = true
		}
		sv.mu.Unlock()
	}
	if stateful {
		var final bool
		if out, final, err = s.respondStateful(sv, wr, req); final {
			return out
		}
	} else if cyc != nil && err == nil {
		var final bool
		if out, final, err = s.stepCycle(sv, wr, req, cyc); final {
			return out
		}
	}
	h := &imposterHandler{s: s, sv: sv}
	for err == nil && out.Proxy != nil {
		var retry bool
		out, retry, err = h.proxy(wr, out.Proxy)
		if retry {
			// A recording of this signature was placed: match again.
			sv.mu.Lock()
			out, cyc, err = sv.imp.Rematch(req)
			sv.mu.Unlock()
			if cyc != nil && err == nil {
				var final bool
				if out, final, err = s.stepCycle(sv, wr, req, cyc); final {
					return out
				}
			}
			if err == nil && out.Proxy != nil && out.Proxy.Signature != "" {
				// The recording does not answer it (the stubs changed
				// meanwhile): calling upstream unclaimed could call it
				// twice, so the request is refused.
				err = errBusy{e: &imposter.Error{Code: "busy", Message: "proxyOnce: the recording does not match this request"}}
			}
		}
	}
	if err != nil {
		return errorOutcome(err, wr.keepAlive)
	}
	return out
}

// yield runs wait without the imposter's lock, which the caller holds.
func (sv *served) yield(wait func()) {
	sv.mu.Unlock()
	defer sv.mu.Lock()
	wait()
}

// errorOutcome is an imposter's own failure as mountebank's imposters
// write it: compact JSON, a lower-case content-type, and the Connection
// header node gives any answer, keep-alive unless the request said close.
func errorOutcome(err error, keepAlive bool) imposter.Outcome {
	status := http.StatusInternalServerError
	var busy errBusy
	if errors.As(err, &busy) {
		status = http.StatusServiceUnavailable
	}
	var e *imposter.Error
	if !errors.As(err, &e) {
		e = &imposter.Error{Code: imposter.CodeBadData, Message: err.Error()}
	}
	connection := "close"
	if keepAlive {
		connection = "keep-alive"
	}
	return imposter.Outcome{StatusCode: status, Body: imposter.Marshal(imposter.NewObject().Set("errors", []any{e.Value()}), 0),
		Headers: []imposter.Header{{Name: "content-type", Values: []string{"application/json"}}, {Name: "Connection", Values: []string{connection}}}}
}

// maxHeaderLines bounds the header lines a request is read into.
const maxHeaderLines = 2000

// toEngineRequest turns a request off the wire into the engine's.
func toEngineRequest(wr *wireRequest, remote string) *imposter.Request {
	rawPath, rawQuery := wr.target, ""
	if i := strings.IndexByte(rawPath, '?'); i >= 0 {
		rawPath, rawQuery = rawPath[:i], rawPath[i+1:]
	}
	if strings.HasPrefix(rawPath, "http://") || strings.HasPrefix(rawPath, "https://") {
		// absolute-form: the path starts after the authority
		rest := rawPath[strings.Index(rawPath, "//")+2:]
		rawPath = "/"
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			rawPath = rest[i:]
		}
	}
	if rawPath == "" {
		rawPath = "/"
	}
	req := &imposter.Request{
		RequestFrom: remote,
		Method:      wr.method,
		Path:        removeDotSegments(rawPath),
		Query:       imposter.ParseQuery(rawQuery),
		Headers:     imposter.NewObjectCap(len(wr.headers)),
		Arrived:     time.Now(),
	}
	if host, _, err := net.SplitHostPort(req.RequestFrom); err == nil {
		req.IP = host
	}
	for i, h := range wr.headers {
		if i == maxHeaderLines {
			break // as node's server, which keeps at most 2,000 (maxHeadersCount)
		}
		if !strings.EqualFold(h[0], ForwardedHeader) { // the cluster's, not the client's
			imposter.AddHeader(req.Headers, h[0], h[1])
		}
	}
	req.Body = decodeBody(wr)
	if ct, _ := wr.header("Content-Type"); req.Body != "" && imposter.IsForm(ct) {
		req.Form = imposter.ParseQuery(req.Body)
	}
	return req
}

// decodeBody is the body as text, gunzipped if it says gzip and is (a
// body that does not gunzip is taken as it came, as mountebank does).
func decodeBody(wr *wireRequest) string {
	if enc, _ := wr.header("Content-Encoding"); strings.EqualFold(enc, "gzip") && len(wr.body) > 0 {
		if u, err := gunzip(wr.body); err == nil {
			return string(u)
		}
	}
	return string(wr.body)
}

// writeResponse writes the engine's answer: the status line, the stub's
// headers in order and case (CR and LF in values become spaces), Date
// unless given, and the framing: the stub's Content-Length (corrected by
// the engine) or Transfer-Encoding chunked, or else chunked as
// mountebank's node server frames a body (Content-Length to an HTTP/1.0
// client). It reports whether the response closes the connection.
func writeResponse(bw *bufio.Writer, out imposter.Outcome, head, http10 bool) (closeAfter bool) {
	reason := http.StatusText(out.StatusCode)
	if reason == "" {
		reason = "unknown"
	}
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(out.StatusCode))
	bw.WriteByte(' ')
	bw.WriteString(reason)
	bw.WriteString("\r\n")
	hasDate, hasLength, chunked := false, false, false
	for _, h := range out.Headers {
		switch {
		case strings.EqualFold(h.Name, "Date"):
			hasDate = true
		case strings.EqualFold(h.Name, "Content-Length"):
			hasLength = true
		case strings.EqualFold(h.Name, "Transfer-Encoding"):
			chunked = chunked || strings.Contains(strings.ToLower(strings.Join(h.Values, ",")), "chunked")
		case strings.EqualFold(h.Name, "Connection"):
			closeAfter = closeAfter || strings.Contains(strings.ToLower(strings.Join(h.Values, ",")), "close")
		}
		for _, v := range h.Values {
			writeHeader(bw, h.Name, v)
		}
	}
	if !hasDate {
		bw.WriteString("Date: ")
		bw.WriteString(time.Now().UTC().Format(http.TimeFormat))
		bw.WriteString("\r\n")
	}
	bodyless := head || out.StatusCode < 200 || out.StatusCode == http.StatusNoContent || out.StatusCode == http.StatusNotModified
	switch {
	case hasLength || chunked || bodyless:
	case http10:
		// No chunks for HTTP/1.0: the length, as node gives it.
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(out.Body)))
		bw.WriteString("\r\n")
	default:
		// A body whose length the response does not give is chunked,
		// as mountebank's node server sends it (it writes the head
		// before the body, so node cannot know the length).
		bw.WriteString("Transfer-Encoding: chunked\r\n")
		chunked = true
	}
	bw.WriteString("\r\n")
	if !bodyless {
		writeBody(bw, out.Body, chunked)
	}
	return closeAfter
}

// writeBody writes a message's body: as one chunk and the last, or as it
// is (its length already in the head).
func writeBody(bw *bufio.Writer, body []byte, chunked bool) {
	if !chunked {
		bw.Write(body)
		return
	}
	if len(body) > 0 {
		bw.WriteString(strconv.FormatInt(int64(len(body)), 16))
		bw.WriteString("\r\n")
		bw.Write(body)
		bw.WriteString("\r\n")
	}
	bw.WriteString("0\r\n\r\n")
}

// writeHeader writes one header line (CR and LF in it become spaces).
func writeHeader(bw *bufio.Writer, name, value string) {
	bw.WriteString(headerSafe(name))
	bw.WriteString(": ")
	bw.WriteString(headerSafe(value))
	bw.WriteString("\r\n")
}

// headerSafe keeps a stub's header from ending the head early.
func headerSafe(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

// resetConn closes a connection with a TCP reset (SO_LINGER 0).
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// garbageConn writes 32 random printable characters, which are no HTTP
// response, and closes the connection (mountebank writes a fixed 32).
func garbageConn(c net.Conn) {
	b := []byte(rand.Text()[:26])
	b = append(b, "%@#[&]"...)
	_, _ = c.Write(b)
	_ = c.Close()
}
