package imposterhttp

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseEgress(t *testing.T) {
	e, err := ParseEgress([]string{"10.0.0.0/8", "192.168.1.7", "API.Example.com.", "*.corp.example", "::ffff:172.16.0.0/108"}, []string{"fd00::/8", "::1", "metadata.internal"})
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("172.16.0.0/12")}, e.allow)
	require.Equal(t, []string{"api.example.com", "*.corp.example"}, e.allowNames)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("::1/128")}, e.deny)
	require.Equal(t, []string{"metadata.internal"}, e.denyNames)

	_, err = ParseEgress([]string{"10.0.0.0/33", "", "bad name!"}, []string{"fe80::1%eth0", "-x.example", "::ffff:0.0.0.0/90"})
	require.Error(t, err)
	for _, want := range []string{
		`egress allow entry "10.0.0.0/33": not a CIDR network`,
		`egress allow entry "": empty`,
		`egress allow entry "bad name!": not a CIDR network, an IP address or a host name`,
		`egress deny entry "fe80::1%eth0": an address with a zone`,
		`egress deny entry "-x.example": not a CIDR network, an IP address or a host name`,
		`egress deny entry "::ffff:0.0.0.0/90": an IPv4-mapped network shorter than /96`,
	} {
		require.Contains(t, err.Error(), want)
	}

	exposed, err := ExposedEgress([]string{"10.1.2.3", "192.0.2.0/24"})
	require.NoError(t, err)
	require.Error(t, exposed.permits("", netip.MustParseAddr("10.1.2.3")), "the node's own address")
	require.Error(t, exposed.permits("", netip.MustParseAddr("192.0.2.77")))
	require.NoError(t, exposed.permits("", netip.MustParseAddr("10.1.2.4")))
	_, err = ExposedEgress([]string{"not an address!"})
	require.Error(t, err)
}

// The decision on an address dialed for a target (a name, or "" for an
// address given as such): deny wins, an empty allow list allows what is
// not denied, an IPv4-mapped or zoned form is the address it stands for.
func TestEgressPermits(t *testing.T) {
	exposed, err := ExposedEgress(nil)
	require.NoError(t, err)
	lists, err := ParseEgress([]string{"10.0.0.0/8", "api.example.com", "*.corp.example"}, []string{"10.9.0.0/16", "bad.corp.example"})
	require.NoError(t, err)
	for _, tc := range []struct {
		e    Egress
		name string
		addr string
		ok   bool
	}{
		{Egress{}, "", "127.0.0.1", true},
		{Egress{}, "localhost", "::1", true},
		{exposed, "", "127.0.0.1", false},
		{exposed, "", "127.255.0.9", false},
		{exposed, "", "::1", false},
		{exposed, "", "::ffff:127.0.0.1", false},
		{exposed, "", "169.254.169.254", false},
		{exposed, "metadata.google.internal", "169.254.169.254", false},
		{exposed, "", "fe80::1%eth0", false},
		{exposed, "", "0.0.0.0", false},
		{exposed, "", "::", false},
		{exposed, "", "fd00:ec2::254", false},
		{exposed, "rebound.example", "127.0.0.1", false},
		{exposed, "", "93.184.216.34", true},
		{exposed, "", "10.0.0.1", true},
		{lists, "", "10.1.2.3", true},
		{lists, "", "10.9.2.3", false},
		{lists, "", "11.0.0.1", false},
		{lists, "api.example.com", "11.0.0.1", true},
		{lists, "api.example.com", "10.9.0.1", false},
		{lists, "x.corp.example", "11.0.0.1", true},
		{lists, "corp.example", "11.0.0.1", false},
		{lists, "bad.corp.example", "10.1.1.1", false},
		{lists, "other.example.com", "11.0.0.1", false},
	} {
		err := tc.e.permits(tc.name, netip.MustParseAddr(tc.addr))
		require.Equal(t, tc.ok, err == nil, "%s %s: %v", tc.name, tc.addr, err)
	}
	require.Error(t, lists.permitsName("bad.corp.example"))
	require.NoError(t, lists.permitsName("x.corp.example"))
}

// upstream serves on host, counting the requests it gets.
func upstream(t *testing.T, host string) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = fmt.Fprint(w, "upstream")
	})}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), &calls
}

// proxyTo creates a proxyTransparent imposter to `to` (extra: more
// fields of the proxy object) and returns its port.
func proxyTo(t *testing.T, base, to, extra string) int {
	t.Helper()
	return create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":%q,"mode":"proxyTransparent"%s}}]}]}`, to, extra))
}

// refused checks a proxy answered as a failed connection does (500,
// "invalid proxy"), saying the policy refused it.
func refused(t *testing.T, a answer, to string) {
	t.Helper()
	require.Equal(t, 500, a.code, a.body)
	c, m := errorOf(t, a)
	require.Equal(t, "invalid proxy", c)
	require.True(t, strings.HasPrefix(m, fmt.Sprintf("Unable to connect to %q: the egress policy refuses ", to)), m)
}

// Proxies under the policy: allowed by default (mountebank's tests
// proxy to loopback); under the exposed policy loopback is refused, by
// address or by a name that resolves to it, and upstream never sees the
// request; deny and allow lists by network and by name.
func TestProxyEgress(t *testing.T) {
	base, s := admin(t)
	addr, calls := upstream(t, "127.0.0.1")
	_, port, _ := net.SplitHostPort(addr)
	direct := proxyTo(t, base, "http://"+addr, "")
	byName := proxyTo(t, base, "http://localhost:"+port, "")

	require.Equal(t, "upstream", do(t, "GET", at(direct, "/"), "").body, "allowed by default")
	require.Equal(t, "upstream", do(t, "GET", at(byName, "/"), "").body)
	require.Equal(t, int64(2), calls.Load())

	exposed, err := ExposedEgress(nil)
	require.NoError(t, err)
	s.UseEgress(exposed)
	a := do(t, "GET", at(direct, "/"), "")
	refused(t, a, "http://"+addr)
	require.Contains(t, a.json["errors"].([]any)[0].(map[string]any)["message"], "refuses 127.0.0.1")
	refused(t, do(t, "GET", at(byName, "/"), ""), "http://localhost:"+port)
	require.Equal(t, int64(2), calls.Load(), "nothing reached upstream")

	deny, err := ParseEgress(nil, []string{"127.0.0.0/24"})
	require.NoError(t, err)
	s.UseEgress(deny)
	refused(t, do(t, "GET", at(direct, "/"), ""), "http://"+addr)

	byNameDeny, err := ParseEgress(nil, []string{"LOCALHOST"})
	require.NoError(t, err)
	s.UseEgress(byNameDeny)
	a = do(t, "GET", at(byName, "/"), "")
	refused(t, a, "http://localhost:"+port)
	require.Contains(t, a.body, "refuses localhost", "refused by name, before resolving")
	require.Equal(t, "upstream", do(t, "GET", at(direct, "/"), "").body, "the address itself is not denied")

	// An allow list: 127.0.0.2 only (the whole of 127/8 is this machine's
	// loopback), and the name localhost.
	other, otherCalls := upstream(t, "127.0.0.2")
	allow, err := ParseEgress([]string{"127.0.0.2/32", "localhost"}, nil)
	require.NoError(t, err)
	s.UseEgress(allow)
	require.Equal(t, "upstream", do(t, "GET", at(proxyTo(t, base, "http://"+other, ""), "/"), "").body)
	require.Equal(t, int64(1), otherCalls.Load())
	refused(t, do(t, "GET", at(direct, "/"), ""), "http://"+addr)
	require.Equal(t, "upstream", do(t, "GET", at(byName, "/"), "").body, "allowed by its name")
}

// A connection kept alive under one policy is not reused under another:
// a server that allowed loopback, then exposed, does not reach it on a
// connection it kept.
func TestProxyEgressKeptConnections(t *testing.T) {
	base, s := admin(t)
	addr, calls := upstream(t, "127.0.0.1")
	port := proxyTo(t, base, "http://"+addr, "")
	got := raw(t, port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
	require.True(t, strings.HasSuffix(got, "upstream"), got) // the upstream connection is kept
	exposed, err := ExposedEgress(nil)
	require.NoError(t, err)
	s.UseEgress(exposed)
	got = raw(t, port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 500 "), got)
	require.Contains(t, got, "the egress policy refuses 127.0.0.1")
	require.Equal(t, int64(1), calls.Load())
}

// Upstream certificates: not checked on loopback by default (a test
// double on the same machine); checked when the policy says so, and
// then a self-signed one fails the handshake unless the proxy says
// "verifyTLS": false, or the policy trusts its issuer. The field is kept
// with the stub and shown.
func TestProxyVerifiesTLS(t *testing.T) {
	base, s := admin(t)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprint(w, "tls upstream")
	}))
	t.Cleanup(up.Close)
	checked := proxyTo(t, base, up.URL, "")
	unchecked := proxyTo(t, base, up.URL, `,"verifyTLS":false`)

	require.Equal(t, "tls upstream", do(t, "GET", at(checked, "/"), "").body, "loopback: not checked by default")

	s.UseEgress(Egress{VerifyLoopbackTLS: true})
	a := do(t, "GET", at(checked, "/"), "")
	require.Equal(t, 500, a.code, a.body)
	c, m := errorOf(t, a)
	require.Equal(t, "invalid proxy", c)
	require.Contains(t, m, fmt.Sprintf("Unable to connect to %q: the upstream's certificate does not verify", up.URL))
	require.Contains(t, m, `"verifyTLS": false`)
	require.Equal(t, "tls upstream", do(t, "GET", at(unchecked, "/"), "").body, "the proxy's opt-out")

	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	s.UseEgress(Egress{VerifyLoopbackTLS: true, RootCAs: roots})
	require.Equal(t, "tls upstream", do(t, "GET", at(checked, "/"), "").body, "a certificate that verifies")

	for _, q := range []string{"", "?replayable=true"} {
		stubs := do(t, "GET", fmt.Sprintf("%s/imposters/%d%s", base, unchecked, q), "").json["stubs"].([]any)
		proxy := stubs[0].(map[string]any)["responses"].([]any)[0].(map[string]any)["proxy"].(map[string]any)
		require.Equal(t, false, proxy["verifyTLS"], "shown%s", q)
	}
}
