package imposterhttp

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/fenceline/fenceline/imposter"
)

// Proxies call whatever their definition names, on behalf of whoever may
// create imposters. A node whose admin API is reachable beyond its own
// machine would otherwise let any caller reach what only the node can:
// its own admin API and peers on loopback, the cloud's metadata service
// on a link-local address, the private network behind it. Egress is the
// policy for the addresses a proxy may call:
//
//   - deny wins over allow; an empty allow list allows what is not denied;
//   - an entry is a CIDR network ("10.0.0.0/8"), an address ("10.0.0.5",
//     "::1"), a host name ("api.example.com", matched without regard to
//     case) or every name below a domain ("*.example.com");
//   - an address is checked as dialed: the name is resolved by the dialer
//     and every address it connects to is checked before the connection
//     is made (net.Dialer.Control), so a name that resolves to a denied
//     address (DNS rebinding, "localhost") is refused however it
//     resolves. A name is checked as given, before resolving.
//
// The zero Egress allows every address: a node on loopback keeps
// mountebank's behaviour (its tests proxy to imposters on 127.0.0.1).
// ExposedEgress is the policy for a node reachable beyond its machine.
//
// An https upstream's certificate is checked (against RootCAs, or the
// system's roots) unless the proxy says "verifyTLS": false
// (imposter.VerifyTLSField), or it is on a loopback address: a test
// double with a self-signed certificate on the same machine, as
// mountebank's own tests proxy to, unless VerifyLoopbackTLS.
type Egress struct {
	allow, deny           []netip.Prefix
	allowNames, denyNames []string // lower case, without a trailing dot; "*." prefixed for a domain's names
	// VerifyLoopbackTLS checks the certificates of https upstreams on
	// loopback addresses too.
	VerifyLoopbackTLS bool
	// RootCAs are the roots upstream certificates are checked against;
	// nil: the system's.
	RootCAs *x509.CertPool

	// id names the policy a server was given (UseEgress), never reused:
	// kept connections are pooled by it (dialPolicy.poolKey).
	id uint64
}

// ParseEgress reads allow and deny lists (see Egress for the entries).
// An entry that is none of a network, an address or a host name is an
// error that names it.
func ParseEgress(allow, deny []string) (Egress, error) {
	var e Egress
	var errs []error
	for _, l := range []struct {
		what  string
		list  []string
		nets  *[]netip.Prefix
		names *[]string
	}{{"allow", allow, &e.allow, &e.allowNames}, {"deny", deny, &e.deny, &e.denyNames}} {
		for _, entry := range l.list {
			p, name, err := parseEgressEntry(entry)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("egress %s entry %q: %v", l.what, entry, err))
			case name != "":
				*l.names = append(*l.names, name)
			default:
				*l.nets = append(*l.nets, p)
			}
		}
	}
	return e, errors.Join(errs...)
}

func parseEgressEntry(s string) (netip.Prefix, string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, "", errors.New("empty")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, "", errors.New("not a CIDR network (e.g. 10.0.0.0/8, fd00::/8)")
		}
		if p.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 means 10.0.0.0/8: dialed addresses are
			// checked unmapped.
			bits := p.Bits() - 96
			if bits < 0 {
				return netip.Prefix{}, "", errors.New("an IPv4-mapped network shorter than /96")
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), bits)
		}
		return p.Masked(), "", nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, "", errors.New("an address with a zone")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), "", nil
	}
	name := strings.TrimSuffix(strings.ToLower(s), ".")
	if !validHostPattern(name) {
		return netip.Prefix{}, "", errors.New("not a CIDR network, an IP address or a host name")
	}
	return netip.Prefix{}, name, nil
}

// validHostPattern accepts a DNS name (letters, digits, hyphens and
// underscores in dot-separated labels of at most 63 bytes), optionally
// "*." followed by one.
func validHostPattern(name string) bool {
	name = strings.TrimPrefix(name, "*.")
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ExposedDeny is what a node reachable beyond its machine denies its
// proxies: loopback (its own admin API and peers), link-local (the cloud
// metadata services at 169.254.169.254 and fe80::/10), the unspecified
// and "this network" addresses (0.0.0.0 connects to the machine itself),
// and AWS's IPv6 metadata address (unique-local, so named here).
func ExposedDeny() []string {
	return []string{"127.0.0.0/8", "::1/128", "169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128", "fd00:ec2::254/128"}
}

// ExposedEgress is the policy for a node whose admin API listens beyond
// loopback: ExposedDeny, and the node's own addresses (own: addresses or
// networks, e.g. those it listens on, or all of its interfaces' when it
// listens on an unspecified address), denied; anything else allowed.
func ExposedEgress(own []string) (Egress, error) {
	return ParseEgress(nil, append(ExposedDeny(), own...))
}

// EgressError is a call the egress policy refused: nothing was sent.
type EgressError struct {
	Target string // the address dialed, or the name given
}

func (e *EgressError) Error() string { return "the egress policy refuses " + e.Target }

// UseEgress makes the server's proxies call under e (by default, the
// zero Egress: any address). It takes effect for calls made after it; a
// connection kept alive under an earlier policy is not reused.
func (s *Server) UseEgress(e Egress) {
	e.allow, e.deny = append([]netip.Prefix(nil), e.allow...), append([]netip.Prefix(nil), e.deny...)
	e.allowNames, e.denyNames = append([]string(nil), e.allowNames...), append([]string(nil), e.denyNames...)
	e.id = egressIDs.Add(1)
	s.egress.Store(&e)
}

// egressIDs numbers the policies servers are given; 0 is openEgress.
var egressIDs atomic.Uint64

// openEgress is the policy of a server given none: every address.
var openEgress = &Egress{}

// egressPolicy is the server's policy, never nil. Each UseEgress stores
// a new one, never changed after: connections are kept per policy.
func (s *Server) egressPolicy() *Egress {
	if e := s.egress.Load(); e != nil {
		return e
	}
	return openEgress
}

// matchName reports whether host (lower case, no trailing dot) is one
// of names.
func matchName(names []string, host string) bool {
	for _, n := range names {
		if n == host || strings.HasPrefix(n, "*.") && strings.HasSuffix(host, n[1:]) {
			return true
		}
	}
	return false
}

func inNets(nets []netip.Prefix, a netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// hostName is a target's host as the policy matches it: "" for an
// address (checked as dialed), else lower case without a trailing dot.
func hostName(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// permitsName is the check made before resolving: a denied name is
// refused.
func (e *Egress) permitsName(name string) error {
	if name != "" && matchName(e.denyNames, name) {
		return &EgressError{Target: name}
	}
	return nil
}

// permits is the check made on each address dialed for the target named
// name ("" for an address given as such).
func (e *Egress) permits(name string, a netip.Addr) error {
	a = a.WithZone("").Unmap() // a zone or an IPv4-mapped form must not slip past a network
	if inNets(e.deny, a) || (name != "" && matchName(e.denyNames, name)) {
		return &EgressError{Target: a.String()}
	}
	if len(e.allow) == 0 && len(e.allowNames) == 0 {
		return nil
	}
	if inNets(e.allow, a) || (name != "" && matchName(e.allowNames, name)) {
		return nil
	}
	return &EgressError{Target: a.String()}
}

// control is the dialer's hook: it runs after the name is resolved and
// before each connection attempt, with the address about to be dialed.
func (e *Egress) control(name string) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &EgressError{Target: address} // unreadable: refused, never guessed
		}
		return e.permits(name, ap.Addr())
	}
}

// tlsConfig is how a proxy trusts an https upstream at address remote:
// checked (against RootCAs) unless verify is off or the upstream is on
// loopback and loopback is exempt.
func (e *Egress) tlsConfig(serverName string, remote net.Addr, verify bool) *tls.Config {
	if verify && !e.VerifyLoopbackTLS {
		if ta, ok := remote.(*net.TCPAddr); ok && ta.AddrPort().Addr().Unmap().IsLoopback() {
			verify = false
		}
	}
	if !verify {
		return &tls.Config{ServerName: serverName, InsecureSkipVerify: true} //nolint:gosec // a test double's self-signed certificate, as the definition or the loopback exemption says
	}
	return &tls.Config{ServerName: serverName, RootCAs: e.RootCAs}
}

// egressDetail is what a failed proxy call's error adds to mountebank's
// "Unable to connect to ...": that the policy refused it, or that the
// upstream's certificate did not verify. Other failures add nothing, as
// mountebank's answer says nothing more.
func egressDetail(err error) string {
	var refused *EgressError
	if errors.As(err, &refused) {
		return ": " + refused.Error()
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return fmt.Sprintf(`: the upstream's certificate does not verify (%v); the proxy's "%s": false takes it unchecked`, cert.Err, imposter.VerifyTLSField)
	}
	return ""
}
