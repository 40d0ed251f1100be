package imposterhttp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// This file: who may reach the admin API and the imposters, and how the
// members' own calls to each other prove they come from a member.

// Access is which client addresses the admin API and the imposters take
// connections from: mountebank's --localOnly and --ipWhitelist. The zero
// value takes every address. A connection from any other address is
// closed as it is accepted, before anything is read from it, as
// mountebank destroys the socket.
type Access struct {
	localOnly bool
	all       bool // the allow-list is "*"
	allow     []netip.Prefix
	// Blocked counts the connections closed for their address.
	Blocked *atomic.Uint64
}

// ParseAccess reads mountebank's two options: localOnly (loopback
// addresses only) and a pipe-delimited allow-list of addresses, each an
// IP or a CIDR network ("*" for every address, mountebank's default).
// The loopback interface's own addresses (127.0.0.1 and ::1) are always
// allowed, as mountebank allows its own interfaces' addresses.
func ParseAccess(localOnly bool, whitelist string) (Access, error) {
	a := Access{localOnly: localOnly, Blocked: new(atomic.Uint64)}
	if localOnly {
		return a, nil
	}
	for _, s := range strings.Split(whitelist, "|") {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			continue
		case s == "*":
			a.all = true
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			a.allow = append(a.allow, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return Access{}, fmt.Errorf("ipWhitelist: %q is neither an IP address nor a CIDR network", s)
		}
		ip = ip.Unmap()
		a.allow = append(a.allow, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if len(a.allow) == 0 {
		a.all = true // an empty list is mountebank's default, "*"
	}
	return a, nil
}

// Open reports whether every address is allowed.
func (a Access) Open() bool { return !a.localOnly && (a.all || a.Blocked == nil) }

// Allows reports whether a connection from addr is taken.
func (a Access) Allows(addr net.Addr) bool {
	if a.Open() {
		return true
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	if ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || ip == netip.IPv6Loopback() {
		return true
	}
	if a.localOnly {
		return ip.IsLoopback()
	}
	for _, p := range a.allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Admit is Allows, counting and closing a connection it refuses.
func (a Access) Admit(c net.Conn) bool {
	if a.Allows(c.RemoteAddr()) {
		return true
	}
	if a.Blocked != nil {
		a.Blocked.Add(1)
	}
	_ = c.Close()
	return false
}

// UseAccess makes the imposters take connections only from the
// addresses a allows.
func (s *Server) UseAccess(a Access) { s.access = a }

// --- the members' own calls

// MemberHeader carries the proof that a call between members comes from
// a member: on the members' internal routes, and on a request one
// member forwards to another's imposter.
const MemberHeader = "X-Fenceline-Member"

// memberSkew is how far a member call's time may be from the receiver's
// clock: a captured call is refused once it is older than this.
const memberSkew = time.Minute

// UseMemberKey makes the members' calls to each other carry, and
// require, a MAC under key (derived from the cluster's control key, so
// only members hold it). Without one (a server alone) the internal route
// is refused and a forwarded request's header is not believed.
//
// accept are keys also believed, never signed with: during a rotation of
// the control key, members still on the old key and those on the new one
// keep believing each other.
func (s *Server) UseMemberKey(key []byte, accept ...[]byte) {
	s.memberKey = append([]byte(nil), key...)
	s.memberAccept = accept
}

// memberKeys is every key a member call may be signed with.
func (s *Server) memberKeys() [][]byte {
	if len(s.memberKey) == 0 {
		return nil
	}
	return append([][]byte{s.memberKey}, s.memberAccept...)
}

// memberMAC is the MAC of one member call's parts.
func memberMAC(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(strconv.Itoa(len(p))))
		m.Write([]byte{':'})
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

func bodyDigest(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// signCall is the header value for a member call: when it was made, a
// nonce the answer is bound to, and a MAC over both, the method, the
// path and the body.
func signCall(key []byte, method, path string, body []byte, now time.Time) (value, nonce string) {
	var n [12]byte
	_, _ = rand.Read(n[:])
	nonce = hex.EncodeToString(n[:])
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	return ts + "." + nonce + "." + memberMAC(key, "call", method, path, ts, nonce, bodyDigest(body)), nonce
}

var errNotMember = errors.New("not a member's call")

// checkCall verifies a member call's header; it returns the nonce the
// answer is to be bound to.
func checkCall(keys [][]byte, value, method, path string, body []byte, now time.Time) (nonce string, signer []byte, err error) {
	if len(keys) == 0 {
		return "", nil, errNotMember
	}
	parts := strings.Split(value, ".")
	if len(parts) != 3 {
		return "", nil, errNotMember
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return "", nil, errNotMember
	}
	if d := now.Sub(time.UnixMilli(ms)); d > memberSkew || d < -memberSkew {
		return "", nil, fmt.Errorf("%w: its time is %v from this member's clock", errNotMember, d.Round(time.Second))
	}
	digest := bodyDigest(body)
	for _, key := range keys {
		if hmac.Equal([]byte(memberMAC(key, "call", method, path, parts[0], parts[1], digest)), []byte(parts[2])) {
			return parts[1], key, nil
		}
	}
	return "", nil, errNotMember
}

// signAnswer binds an answer's body to the call's nonce: the caller
// believes an answer only from a member, and only to its own call.
func signAnswer(key []byte, nonce string, body []byte) string {
	return memberMAC(key, "answer", nonce, bodyDigest(body))
}

// answeredBy reports whether an answer's header is its body's MAC, bound
// to nonce, under one of keys.
func answeredBy(keys [][]byte, header, nonce string, body []byte) bool {
	for _, key := range keys {
		if hmac.Equal([]byte(header), []byte(signAnswer(key, nonce, body))) {
			return true
		}
	}
	return false
}

// forwardedFrom is the client a forwarded request names, if the header
// carries a member's MAC made within memberSkew; a client's own header of
// that name is not believed (and is not recorded: the caller strips it).
func (s *Server) forwardedFrom(wr *wireRequest) (string, bool) {
	v, ok := wr.header(ForwardedHeader)
	if !ok || len(s.memberKey) == 0 {
		return "", false
	}
	// from;ms;mac — from is host:port, never holding ';'.
	parts := strings.Split(v, ";")
	if len(parts) != 3 {
		return "", false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", false
	}
	if d := time.Since(time.UnixMilli(ms)); d > memberSkew || d < -memberSkew {
		return "", false
	}
	for _, key := range s.memberKeys() {
		if hmac.Equal([]byte(memberMAC(key, "forward", parts[0], parts[1], wr.method, wr.target)), []byte(parts[2])) {
			return parts[0], true
		}
	}
	return "", false
}

// forwardedValue is the loop guard's value for a request forwarded on
// behalf of from.
func (s *Server) forwardedValue(from, method, target string) string {
	ms := strconv.FormatInt(time.Now().UnixMilli(), 10)
	return from + ";" + ms + ";" + memberMAC(s.memberKey, "forward", from, ms, method, target)
}

// denyMember answers a call to a members' route that is not a member's.
func denyMember(w http.ResponseWriter, err error) {
	writeErrors(w, http.StatusForbidden, &imposter.Error{Code: "forbidden", Message: "this route is for the cluster's members: " + err.Error()})
}

// memberURL is the base URL of a member's admin API, from the address its
// membership entry gives: https when the address says so.
func memberURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + addr
}

// PortRange is the ports imposters may listen on: [Lo, Hi].
type PortRange struct{ Lo, Hi int }

// AllPorts is every port, mountebank's rule; a node narrows it
// (-imposter-ports), above 1023 by default.
var AllPorts = PortRange{1, 65535}

// ParsePortRange reads "LO-HI" (or one port).
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return PortRange{}, fmt.Errorf("%q is not a port range LO-HI within 1-65535", s)
	}
	return PortRange{a, b}, nil
}

// Has reports whether port is in the range.
func (p PortRange) Has(port int) bool { return port >= p.Lo && port <= p.Hi }

func (p PortRange) String() string { return fmt.Sprintf("%d-%d", p.Lo, p.Hi) }

func (p PortRange) refusal(port int) *imposter.Error {
	return &imposter.Error{Code: imposter.CodeBadData, Message: fmt.Sprintf("port %d is outside this node's imposter ports, %s", port, p)}
}

// listenAny listens on a free port of the range that free approves,
// trying at most maxPortTries of them from a random start.
func (p PortRange) listenAny(host string, free func(int) bool) (net.Listener, error) {
	n := p.Hi - p.Lo + 1
	var b [4]byte
	_, _ = rand.Read(b[:])
	start := int(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) % n
	err := errors.New("no free port")
	for i := range min(n, maxPortTries) {
		port := p.Lo + (start+i)%n
		if !free(port) {
			continue
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return nil, err
}

// maxPortTries bounds the ports one creation without a port tries.
const maxPortTries = 256

// UsePorts makes the imposters listen only on ports in r: a creation
// outside it is refused (400), and a definition outside it that reaches
// this node's configuration another way is not listened on (the rollout
// names this node).
func (s *Server) UsePorts(r PortRange) { s.ports = r }

// Exposed says the admin API is reachable beyond loopback: answers leave
// out what only the machine's own user should see (the working
// directory in GET /config).
func (s *Server) Exposed() { s.exposed.Store(true) }

// Bounds on the cluster's configuration: every member holds all of it in
// memory, in its journal and in every snapshot, and serves every
// imposter. A change past one is refused (400), changing nothing.
const (
	// MaxImposters bounds the imposters of the cluster.
	MaxImposters = 1000
	// MaxConfigBytes bounds the definitions' bytes together (one is at
	// most the KV's value bound, 1 MiB).
	MaxConfigBytes = 64 << 20
	// MaxStubs bounds one imposter's stubs: a request is matched against
	// them in order.
	MaxStubs = 10000
)

// checkBounds refuses a change that would take the configuration past a
// bound; a change that shrinks it is never refused.
func checkBounds(defs []Definition, c Change) error {
	after := make(map[int]int, len(defs)+len(c.Put))
	for _, d := range defs {
		after[d.Port] = len(d.JSON)
	}
	for _, p := range c.Delete {
		delete(after, p)
	}
	grows := false
	for _, d := range c.Put {
		old, had := after[d.Port]
		grows = grows || !had || len(d.JSON) > old
		after[d.Port] = len(d.JSON)
	}
	if !grows {
		return nil
	}
	total := 0
	for _, n := range after {
		total += n
	}
	switch {
	case len(after) > MaxImposters && len(after) > len(defs):
		return &imposter.Error{Code: imposter.CodeBadData, Message: fmt.Sprintf("the cluster holds %d imposters, the most it takes: delete some first", MaxImposters)}
	case total > MaxConfigBytes:
		return &imposter.Error{Code: imposter.CodeBadData, Message: fmt.Sprintf("the imposters' definitions would hold %d bytes, over the cluster's bound of %d", total, MaxConfigBytes)}
	}
	for _, d := range c.Put {
		if st, err := imposter.DecodeStored(d.JSON); err == nil && len(st.StubIDs) > MaxStubs {
			return &imposter.Error{Code: imposter.CodeBadData, Message: fmt.Sprintf("imposter %d would have %d stubs; at most %d", d.Port, len(st.StubIDs), MaxStubs)}
		}
	}
	return nil
}
