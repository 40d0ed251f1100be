package imposterhttp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The imposters call out over HTTP/1.1 themselves too (a proxy's upstream,
// a stateful request forwarded to its owner), for the reason they serve
// it themselves: mountebank records an upstream's answer with its
// headers' names as the upstream wrote them and in its order, and sends
// the client's headers upstream in the client's case and order. Go's
// client canonicalizes both ways and sorts what it writes.
//
// Bounds, each with its behaviour: a response head of at most
// MaxHeadBytes and a body of at most MaxBodyBytes (the call fails), one
// deadline over the whole call (dial, write, answer), maxIdlePerHost idle
// connections per target and maxIdle in all (a connection given back
// past either is closed), and idleFor before an idle one is closed
// instead of reused.
const (
	maxIdle = 1024
	idleFor = 30 * time.Second
)

// outRequest is a request as it goes out: the head exactly as listed
// (the caller decides names, case, order and framing headers), then the
// body, framed by Content-Length or, if chunked, as one chunk.
type outRequest struct {
	method, target string
	headers        [][2]string
	body           []byte
	chunked        bool
}

// closes reports whether the request asks the server to close after it.
func (r *outRequest) closes() bool { return !keptAlive(r.headers, false) }

// wireResponse is an answer as read off the connection.
type wireResponse struct {
	status    int
	headers   [][2]string // name (as sent), value; in order
	body      []byte
	keepAlive bool
}

// rawClient keeps idle connections per scheme and address.
type rawClient struct {
	perHost int
	timeout time.Duration

	mu    sync.Mutex
	idle  map[string][]*clientConn // newest last
	total int
}

// dialPolicy is what a proxy's call may reach and how it trusts an https
// upstream (Egress); verify is the proxy's verifyTLS. A call without one
// (a request forwarded to a member's own imposter) reaches any address
// and checks no certificate: the members' https imposters are
// self-signed.
type dialPolicy struct {
	egress *Egress
	verify bool
}

// poolKey keeps connections apart by the policy they were made under: a
// connection is reused only by a call under the same policy (each
// UseEgress names a new one) and the same certificate check.
func (p *dialPolicy) poolKey(scheme, addr string) string {
	if p == nil {
		return scheme + "://" + addr
	}
	return fmt.Sprintf("%s://%s|egress %d|verify %t", scheme, addr, p.egress.id, p.verify)
}

type clientConn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
	// spoiled: a cancellation may still set a deadline on it, so it is
	// closed, not kept.
	spoiled bool
}

func newRawClient(perHost int, timeout time.Duration) *rawClient {
	return &rawClient{perHost: perHost, timeout: timeout, idle: map[string][]*clientConn{}}
}

// errNothingBack is a call whose connection ended before any byte of an
// answer came back.
var errNothingBack = errors.New("the connection closed before an answer")

// do sends req to scheme://addr and reads the answer. A reused
// connection that closes before answering a request that is safe to
// repeat (GET, HEAD, OPTIONS, TRACE) is retried once on a new one: the
// server closed it idle, as servers do.
func (rc *rawClient) do(ctx context.Context, scheme, addr string, req *outRequest) (*wireResponse, error) {
	return rc.call(ctx, scheme, addr, req, nil)
}

// call is do under a dialPolicy (nil: none).
func (rc *rawClient) call(ctx context.Context, scheme, addr string, req *outRequest, pol *dialPolicy) (*wireResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, rc.timeout)
	defer cancel()
	key := pol.poolKey(scheme, addr)
	for attempt := 0; ; attempt++ {
		cc, reused, err := rc.get(ctx, scheme, addr, key, pol)
		if err != nil {
			return nil, err
		}
		resp, err := rc.roundTrip(ctx, cc, req)
		if err == nil {
			if resp.keepAlive && !req.closes() && !cc.spoiled {
				rc.put(key, cc)
			} else {
				_ = cc.c.Close()
			}
			return resp, nil
		}
		_ = cc.c.Close()
		if !reused || attempt > 0 || !errors.Is(err, errNothingBack) || !safeToRepeat(req.method) || ctx.Err() != nil {
			return nil, err
		}
	}
}

func safeToRepeat(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

// get takes an idle connection kept under key that is still open, or
// dials, under pol if given: a name the policy denies is refused before
// it is resolved, and each address dialed is checked before connecting.
func (rc *rawClient) get(ctx context.Context, scheme, addr, key string, pol *dialPolicy) (cc *clientConn, reused bool, err error) {
	for {
		rc.mu.Lock()
		list := rc.idle[key]
		if len(list) == 0 {
			rc.mu.Unlock()
			break
		}
		cc = list[len(list)-1]
		rc.idle[key] = list[:len(list)-1]
		if len(list) == 1 {
			delete(rc.idle, key)
		}
		rc.total--
		rc.mu.Unlock()
		if time.Since(cc.since) < idleFor && stillOpen(cc) {
			return cc, true, nil
		}
		_ = cc.c.Close()
	}
	host, _, _ := net.SplitHostPort(addr)
	var d net.Dialer
	if pol != nil {
		name := hostName(host)
		if err := pol.egress.permitsName(name); err != nil {
			return nil, false, err
		}
		d.Control = pol.egress.control(name)
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	if scheme == "https" {
		cfg := &tls.Config{ServerName: host, InsecureSkipVerify: true} //nolint:gosec // a member's own self-signed imposter
		if pol != nil {
			cfg = pol.egress.tlsConfig(host, c.RemoteAddr(), pol.verify)
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, false, err
		}
		c = tc
	}
	return &clientConn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}, false, nil
}

// stillOpen reports whether an idle connection has neither been closed
// by its server nor sent anything unasked.
func stillOpen(cc *clientConn) bool {
	if cc.br.Buffered() > 0 {
		return false
	}
	if _, isTLS := cc.c.(*tls.Conn); isTLS {
		// Bytes waiting under TLS may be a session ticket (the TLS layer
		// takes it and reads on) or a close_notify alert (EOF): only a
		// read through the layer tells them apart, so it is given a
		// millisecond to time out.
		_ = cc.c.SetReadDeadline(time.Now().Add(time.Millisecond))
		_, err := cc.br.Peek(1)
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	sc, ok := cc.c.(syscall.Conn)
	if !ok {
		return true
	}
	state, ok := peekState(sc)
	return ok && state == peekNothing
}

// put gives a connection back, or closes it at the bounds. At the bound
// in all, the connections idle past idleFor are closed first (a target
// never called again keeps its connections until then).
func (rc *rawClient) put(key string, cc *clientConn) {
	cc.since = time.Now()
	rc.mu.Lock()
	if rc.total >= maxIdle {
		rc.evictStale(cc.since)
	}
	if len(rc.idle[key]) >= rc.perHost || rc.total >= maxIdle {
		rc.mu.Unlock()
		_ = cc.c.Close()
		return
	}
	rc.idle[key] = append(rc.idle[key], cc)
	rc.total++
	rc.mu.Unlock()
}

// evictStale closes the idle connections older than idleFor; rc.mu is
// held.
func (rc *rawClient) evictStale(now time.Time) {
	for key, list := range rc.idle { //fenceline:unordered each list on its own
		kept := list[:0]
		for _, cc := range list {
			if now.Sub(cc.since) < idleFor {
				kept = append(kept, cc)
			} else {
				_ = cc.c.Close()
				rc.total--
			}
		}
		if len(kept) == 0 {
			delete(rc.idle, key)
		} else {
			rc.idle[key] = kept
		}
	}
}

func (rc *rawClient) roundTrip(ctx context.Context, cc *clientConn, req *outRequest) (*wireResponse, error) {
	deadline, _ := ctx.Deadline()
	_ = cc.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = cc.c.SetDeadline(time.Now()) })
	defer func() {
		if !stop() {
			// The cancellation ran, or is running: its deadline could
			// land on the connection's next user.
			cc.spoiled = true
		}
	}()
	writeRequest(cc.bw, req)
	if err := cc.bw.Flush(); err != nil {
		return nil, fmt.Errorf("%w: %v", errNothingBack, err)
	}
	for {
		resp, err := readResponse(cc.br, req.method)
		if err != nil {
			return nil, err
		}
		if resp.status >= 100 && resp.status < 200 && resp.status != 101 {
			continue // 100 Continue and other interim answers: the final one follows
		}
		return resp, nil
	}
}

func writeRequest(bw *bufio.Writer, req *outRequest) {
	bw.WriteString(req.method)
	bw.WriteByte(' ')
	bw.WriteString(req.target)
	bw.WriteString(" HTTP/1.1\r\n")
	for _, h := range req.headers {
		writeHeader(bw, h[0], h[1])
	}
	bw.WriteString("\r\n")
	writeBody(bw, req.body, req.chunked)
}

// readResponse reads one answer to a request of the given method.
func readResponse(br *bufio.Reader, method string) (*wireResponse, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, fmt.Errorf("%w: %v", errNothingBack, err)
	}
	budget := MaxHeadBytes
	line, err := readLine(br, &budget)
	if err != nil {
		return nil, noEOF(err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if !strings.HasPrefix(proto, "HTTP/1.") || len(code) != 3 || err != nil || status < 100 {
		return nil, fmt.Errorf("malformed status line %q", line)
	}
	r := &wireResponse{status: status}
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, noEOF(err)
		}
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("malformed header line %q", line)
		}
		r.headers = append(r.headers, [2]string{name, strings.Trim(value, " \t")})
	}
	r.keepAlive = keptAlive(r.headers, proto == "HTTP/1.0")
	if method == "HEAD" || status < 200 || status == 204 || status == 304 {
		r.keepAlive = r.keepAlive && status != 101
		return r, nil
	}
	f, err := framingOf(r.headers)
	if err != nil {
		return nil, err
	}
	switch {
	case f.chunked:
		r.body, err = readChunked(br)
	case f.sized && !f.encoded:
		if f.length > MaxBodyBytes {
			return nil, errTooLarge
		}
		r.body = make([]byte, f.length)
		_, err = io.ReadFull(br, r.body)
	default: // the body runs to the close (RFC 9112 §6.3, also for a coding that does not end in chunked)
		r.keepAlive = false
		r.body, err = io.ReadAll(io.LimitReader(br, MaxBodyBytes+1))
		if err == nil && len(r.body) > MaxBodyBytes {
			err = errTooLarge
		}
	}
	if err != nil {
		return nil, noEOF(err)
	}
	return r, nil
}

// noEOF makes a connection that ended mid-answer an error that says so.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
