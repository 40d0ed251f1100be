package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceline/fenceline/imposterhttp"
)

// This file: who may use the node's HTTP API. Four defences, in the order
// a call meets them:
//
//  1. The address it comes from (mountebank's --localOnly and
//     --ipWhitelist): refused at accept, before a byte is read.
//  2. The connection budget: at most maxAdminConns open connections,
//     maxAdminConnsPerIP from one address; past either, the connection
//     is closed at accept (and counted), so idle keep-alives and slow
//     bodies cannot hold the API (the server's timeouts end them).
//  3. Browser attacks on a node nobody meant to expose: a Host that is
//     not an address or localhost is refused while no API key is set
//     (DNS rebinding), and so is a call whose Origin is another site
//     than the one it was sent to (a page's text/plain POST), unless it
//     is the -origin the operator allowed.
//  4. The API key (mountebank's --apikey, sent as x-api-key): every call
//     but the members' own, which prove themselves with the control key
//     instead (the attestation of a join, a removal, a resize or an
//     added group; a records read's member MAC).

// Bounds of the HTTP API's connections and calls.
const (
	maxAdminConns      = 1024
	maxAdminConnsPerIP = 256
	// defaultReadTimeout bounds reading a whole call, body included (an
	// imposter of 16 MiB at 1 MiB/s: -http-read-timeout);
	// defaultIdleTimeout a keep-alive between calls (-http-idle-timeout);
	// adminWriteTimeout an answer (the watch stream renews it per write).
	defaultReadTimeout = 30 * time.Second
	defaultIdleTimeout = 60 * time.Second
	adminWriteTimeout  = 60 * time.Second
)

// apiKeyHeader is mountebank's header for the API key.
const apiKeyHeader = "x-api-key"

// guard is the API's access policy (the four defences above).
type guard struct {
	keyDigest []byte // sha512 of the API key; nil when none is set
	access    imposterhttp.Access
	origin    string // the one cross-site origin allowed (-origin), or ""
	log       *slog.Logger
	// refused counts calls refused, by why.
	unauthorized, badHost, badOrigin atomic.Uint64
}

func newGuard(apiKey string, access imposterhttp.Access, origin string, log *slog.Logger) *guard {
	g := &guard{access: access, origin: strings.TrimSuffix(origin, "/"), log: log}
	if apiKey != "" {
		d := sha512.Sum512([]byte(apiKey))
		g.keyDigest = d[:]
	}
	return g
}

// memberRoute reports whether a call is one of the members' own, which
// carry the control key's proof instead of the API key.
func memberRoute(r *http.Request) bool {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/_cluster/members":
		return true // a join: the control key's attestation
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/_cluster/members/"):
		return true // a removal: the control key's attestation
	case r.Method == http.MethodPut && r.URL.Path == "/_cluster/fleet/target":
		return true // a resize: the control key's attestation
	case r.Method == http.MethodPost && r.URL.Path == "/_cluster/fleet/groups":
		return true // an added group: the control key's attestation
	case r.Method == http.MethodPost && r.URL.Path == "/_cluster/records":
		return true // a records read: the member MAC
	}
	return false
}

// wrap puts the guard in front of next.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.keyDigest == nil && !localHost(r.Host) {
			g.badHost.Add(1)
			g.refuse(w, http.StatusForbidden, "forbidden", fmt.Sprintf(
				"Host %q is not an IP address or localhost, and this node has no API key: a browser led here by a DNS name is refused (set -apikey-file)", r.Host))
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !g.sameSite(o, r) {
			g.badOrigin.Add(1)
			g.refuse(w, http.StatusForbidden, "forbidden", fmt.Sprintf("Origin %q is another site: calls from web pages elsewhere are refused (allow one with -origin)", o))
			return
		}
		if g.keyDigest != nil && !memberRoute(r) {
			got := sha512.Sum512([]byte(r.Header.Get(apiKeyHeader)))
			if subtle.ConstantTimeCompare(got[:], g.keyDigest) != 1 {
				g.unauthorized.Add(1)
				g.log.Warn("refused a call without the API key", "from", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
				// mountebank's answer, word for word.
				g.refuse(w, http.StatusUnauthorized, "unauthorized",
					"If you set the apiKey option, make sure you are sending the correct apiKey in the x-api-key header.")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *guard) refuse(w http.ResponseWriter, code int, errCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := jsonLine(map[string]any{"errors": []any{map[string]string{"code": errCode, "message": msg}}})
	_, _ = w.Write(b)
}

// localHost reports whether a Host header names an address or localhost:
// what a browser sends to a node it reaches by address. A DNS name is
// what a rebinding attack sends.
func localHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.ToLower(h)
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// sameSite reports whether an Origin is the site the call was sent to,
// or the one the operator allowed.
func (g *guard) sameSite(origin string, r *http.Request) bool {
	if g.origin != "" && origin == g.origin {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null" (a sandboxed page, a file) and garbage
	}
	return strings.EqualFold(u.Host, r.Host)
}

// limitListener closes, at accept, a connection from an address the
// access policy refuses, and one over the budget (maxAdminConns in all,
// maxAdminConnsPerIP from one address).
type limitListener struct {
	net.Listener
	access       imposterhttp.Access
	total, perIP int
	mu           sync.Mutex
	open         int
	byIP         map[netip.Addr]int
	overBudget   atomic.Uint64
}

func newLimitListener(ln net.Listener, access imposterhttp.Access, total, perIP int) *limitListener {
	return &limitListener{Listener: ln, access: access, total: total, perIP: perIP, byIP: map[netip.Addr]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if !l.access.Admit(c) {
			continue
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open >= l.total || l.byIP[ip] >= l.perIP {
			l.mu.Unlock()
			l.overBudget.Add(1)
			_ = c.Close()
			continue
		}
		l.open++
		l.byIP[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, l: l, ip: ip}, nil
	}
}

func remoteIP(c net.Conn) netip.Addr {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

type countedConn struct {
	net.Conn
	l    *limitListener
	ip   netip.Addr
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// loopbackHost reports whether a listen address's host is loopback only:
// a node listening there is not exposed to other machines. An empty host
// or an unspecified address listens on every interface.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// readAPIKey is the API key: the flag's value, or the file's first line.
func readAPIKey(value, file string) (string, error) {
	if value != "" && file != "" {
		return "", errors.New("give -apikey or -apikey-file, not both")
	}
	if file == "" {
		return value, nil
	}
	b, err := readSmallFile(file, 4<<10)
	if err != nil {
		return "", fmt.Errorf("-apikey-file: %v", err)
	}
	key := strings.TrimRight(strings.SplitN(string(b), "\n", 2)[0], "\r")
	if key == "" {
		return "", fmt.Errorf("-apikey-file %s: the first line is empty", file)
	}
	return key, nil
}

// readSmallFile reads a regular file of at most max bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s holds %d bytes; at most %d", path, st.Size(), max)
	}
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// memberKey is the key the members' own HTTP calls are signed with,
// derived from the control key (which only members hold).
func memberKey(control []byte) []byte {
	m := hmac.New(sha256.New, control)
	m.Write([]byte("fenceline member http v1"))
	return m.Sum(nil)
}

// memberClient calls another member's HTTP API (a join, a removal). A
// member's API over TLS may use a self-signed certificate, so it is not
// checked: what is asked is authenticated by the control key's
// attestation, and what comes back is only peer addresses, which the
// envelope authenticates before any frame from them is believed.
func memberClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
}

// egressPolicy is where the imposters' proxies may go: -egress-allow and
// -egress-deny; when the API is reachable beyond loopback, also never
// loopback, link-local (cloud metadata) or this node's own addresses,
// which would turn a proxy into a way in.
func egressPolicy(c config, httpAddr net.Addr, peer string) (imposterhttp.Egress, error) {
	deny := c.egressDeny
	if !loopbackHost(c.http) {
		own, err := ownAddresses(httpAddr, peer, c.imposterHost)
		if err != nil {
			return imposterhttp.Egress{}, err
		}
		deny = append(append(imposterhttp.ExposedDeny(), own...), deny...)
	}
	e, err := imposterhttp.ParseEgress(c.egressAllow, deny)
	if err != nil {
		return e, fmt.Errorf("-egress-allow/-egress-deny: %v", err)
	}
	return e, nil
}

// ownAddresses is the addresses this node listens on; every interface's
// when one of them is unspecified (0.0.0.0, ::).
func ownAddresses(httpAddr net.Addr, peer, imposterHost string) ([]string, error) {
	var own []string
	all := false
	for _, h := range []string{httpAddr.String(), peer, net.JoinHostPort(imposterHost, "0")} {
		host, _, _ := net.SplitHostPort(h)
		ip, err := netip.ParseAddr(host)
		switch {
		case host == "" || (err == nil && ip.IsUnspecified()):
			all = true
		case err == nil:
			own = append(own, ip.Unmap().String())
		}
	}
	if all {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("the node's own addresses, for the egress policy: %v", err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				own = append(own, p.Addr().Unmap().String())
			}
		}
	}
	return own, nil
}
