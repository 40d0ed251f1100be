// Package imposterhttp serves imposters over HTTP: mountebank's admin API
// (on the node's HTTP address) and one listener per imposter, which turns
// each request into the engine's Request and the engine's Outcome back
// into bytes on the wire, faults included.
package imposterhttp

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceline/fenceline/imposter"
	"github.com/fenceline/fenceline/script"
)

// MaxBodyBytes bounds a request body, to an imposter or to the admin API
// (after gzip decoding too). Past it an imposter answers 413 and the admin
// API 400; nothing changes.
const MaxBodyBytes = 16 << 20

// Server holds the node's imposters: it serves what its Config holds,
// reconciling its running imposters with the definitions after every
// admin call it takes and whenever the configuration's revision moves.
type Server struct {
	host string // imposters listen on this host (the admin API's)
	log  *slog.Logger
	logs *logRing
	cfg  Config

	// recMu serializes reconcile passes, so that a pass never undoes a
	// newer one. Taken before mu, never while serving.
	recMu sync.Mutex
	// lastRev is the revision the last pass saw (under recMu).
	lastRev uint64

	mu        sync.Mutex // guards imposters and reserved; never held while serving
	imposters map[int]*served
	// reserved holds ports an admin call bound before proposing its
	// change, so that the change never names a port this node cannot
	// take; the pass that starts the imposter takes the listener over.
	reserved map[int]net.Listener
	maxConns int // per imposter; MaxConns
	// access is who may connect to the imposters (UseAccess); memberKey
	// proves the members' calls to each other (UseMemberKey).
	access       Access
	memberKey    []byte
	memberAccept [][]byte
	// ports is the range imposters may listen in (UsePorts).
	ports   PortRange
	exposed atomic.Bool // Exposed

	// flows keeps stateful imposters' flow state, routed by route
	// (UseFlows).
	flows Flows
	route RouteMode
	// claims serializes proxyOnce's first calls (UseClaims).
	claims Claims
	// cluster is the members this server answers for (UseCluster).
	cluster Cluster
	// caughtUp: a linearizable read of the configuration has succeeded
	// since the server started. Until then no pass runs: what the node's
	// journal holds may be older than a change this node confirmed
	// before it went down (raft does not sync the commit index), and no
	// imposter is served from it (Start).
	caughtUp atomic.Bool
	// restarted: the node ran before with this data, so the imposters
	// its first pass starts may have lost requests they recorded then
	// (SetRestarted); passed is whether a pass has succeeded (under
	// recMu), ready the same for readers without it (the records route).
	restarted, passed bool
	ready             atomic.Bool
	// gathers bounds the reads of the members' records in flight from
	// this node (maxGathers): each may hold every member's answer.
	gathers chan struct{}
	// lostRaces counts scenario moves dropped because another request
	// moved the state first.
	lostRaces atomic.Uint64

	certOnce        sync.Once // the self-signed pair for https imposters
	keyPEM, certPEM string
	certErr         error

	// injection is what imposters' JavaScript runs with; nil: injection
	// is not allowed (AllowInjection).
	injection *script.Host

	// files is the data root lookup behaviors read under (UseDataRoot;
	// the start directory's, opened at first use, otherwise); egress is
	// the proxies' policy (UseEgress; nil: any address).
	files  atomic.Pointer[dataFiles]
	egress atomic.Pointer[Egress]
}

// served is one imposter and its listener. mu serializes the engine,
// which keeps each stub's response cycle and the recorded requests.
type served struct {
	port int // never changes
	mu   sync.Mutex
	imp  *imposter.Imposter
	ln   net.Listener // nil while the port cannot be bound
	// def is the definition it runs, incarnation its creation's name,
	// resets its count of DELETE /savedRequests and scope the creation
	// and recording generation its recordings belong to
	// (imposter.Stored); always counts the proxyAlways recordings placed.
	def         Definition
	incarnation string
	resets      int
	scope       string
	always      int
	creation    *imposter.Object
	// partial: started when the node restarted, so the requests it
	// recorded before are gone; a read of the cluster's records names
	// this node for it, until a reset (guarded by mu).
	partial bool
	// bindErr says why the port could not be bound (guarded by mu); the
	// imposter exists in the cluster's configuration all the same.
	bindErr   string
	lastRetry time.Time // the last bind attempt, for backing off (under the server's recMu)

	// turn is the imposter's script section on this node: one scripted
	// request at a time holds it (imposter.ServeScripted).
	turn chan struct{}

	connMu  sync.Mutex // guards conns and stopped
	conns   map[net.Conn]struct{}
	stopped bool
}

// Lookup behaviors' CSV files are read under a data root, by default the
// directory the process started in (datafiles.go).
func init() { startDir, startDirErr = os.Getwd() }

// New returns a server whose imposters listen on host and whose
// definitions live in cfg.
// A server alone claims proxyOnce calls in memory, recording into cfg if
// it is a MemoryConfig; the node hands in the cluster's with UseClaims.
func New(host string, log *slog.Logger, cfg Config) *Server {
	s := &Server{host: host, cfg: cfg, imposters: map[int]*served{}, reserved: map[int]net.Listener{}, maxConns: MaxConns, ports: AllPorts,
		flows: NewMemoryFlows(), cluster: alone{}, gathers: make(chan struct{}, maxGathers)}
	if mc, ok := cfg.(*MemoryConfig); ok {
		s.claims = NewMemoryClaims(mc)
		s.caughtUp.Store(true) // a configuration in memory is never behind
	}
	s.logs = newLogRing(1000)
	s.log = slog.New(&ringHandler{ring: s.logs, next: log.Handler()})
	return s
}

// checkPort reads an imposter's port: 0 when absent (assigned). The rule
// is mountebank's: a whole number above 0 and below 65536, or a string
// of one.
func checkPort(creation *imposter.Object) (int, error) {
	v, ok := creation.Get("port")
	if !ok {
		return 0, nil
	}
	f, isNum := v.(float64)
	if str, isStr := v.(string); isStr {
		n, err := strconv.Atoi(str)
		f, isNum = float64(n), err == nil
	}
	if !isNum || f != float64(int(f)) || f <= 0 || f >= 65536 {
		return 0, &imposter.Error{Code: imposter.CodeBadData, Message: "invalid value for 'port'"}
	}
	return int(f), nil
}

// validate reports what is wrong with a creation request, port first, as
// mountebank lists them; nil if it compiles.
func (s *Server) validate(creation *imposter.Object) []error {
	var errs []error
	port, err := checkPort(creation)
	if err != nil {
		errs = append(errs, err)
	}
	proto, _ := creation.Get("protocol")
	if err := imposter.CheckProtocol(proto); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if imp, err := imposter.New(creation, port); err != nil {
			errs = append(errs, err)
		} else if ierrs := s.injectionErrors(imp); ierrs != nil {
			errs = append(errs, ierrs...)
		} else if err := checkTLS(creation); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// start compiles a definition and binds its port (taking over a reserved
// listener). A definition that compiled where it was proposed compiles
// here; one that does not, or a port that will not bind, gives an
// imposter that serves nothing and says why.
func (s *Server) start(d Definition) *served {
	sv := &served{port: d.Port, def: d, conns: map[net.Conn]struct{}{}, turn: make(chan struct{}, 1)}
	st, imp, err := s.build(d)
	sv.imp = imp
	if err != nil {
		// Not ours to have written: keep the port taken in the listing.
		sv.imp, _ = imposter.New(imposter.NewObject().Set("protocol", "http"), d.Port)
		sv.bindErr = "the definition does not compile on this node: " + err.Error()
		s.log.Error(fmt.Sprintf("[imposter:%d] %s", d.Port, sv.bindErr))
		return sv
	}
	sv.incarnation, sv.resets, sv.creation, sv.scope = st.Incarnation, st.Resets, st.Creation, st.Scope()
	sv.always = s.place(imp, sv.scope, d.Recordings)
	s.bind(sv)
	return sv
}

// build compiles a definition, one of the cluster's (its proxy
// recordings are placed by the caller: place).
func (s *Server) build(d Definition) (imposter.Stored, *imposter.Imposter, error) {
	st, err := imposter.DecodeStored(d.JSON)
	if err != nil {
		return st, nil, err
	}
	imp, err := st.Build(d.Port, false)
	s.giveFiles(imp)
	s.giveLog(imp)
	s.giveScripts(imp)
	return st, imp, err
}

// giveLog hands a built imposter the server's log, its lines prefixed
// with the imposter's name as mountebank prefixes them (a predicate's
// selector stopped at its work budget).
func (s *Server) giveLog(imp *imposter.Imposter) {
	if imp != nil {
		who := fmt.Sprintf("[%s:%d] ", imp.Protocol, imp.Port)
		imp.UseLog(func(msg string) { s.log.Warn(who + msg) })
	}
}

// place puts the recordings made for scope (the creation and recording
// generation imp runs) into imp, in the order they were stored, and
// returns how many proxyAlways recordings imp holds then. A recording
// already placed is passed over without being read.
func (s *Server) place(imp *imposter.Imposter, scope string, recs []Recording) (always int) {
	for _, r := range recs {
		isAlways := strings.Contains(r.Key, alwaysKey)
		if imp.Placed(r.Key) {
			if isAlways {
				always++
			}
			continue
		}
		rec, err := decodeRecording(r.JSON)
		if err != nil || rec.incarnation != scope {
			continue // another creation's, or generation's
		}
		if rec.always {
			err = imp.AddAlwaysRecording(r.Key, rec.proxyStub, rec.stub)
		} else {
			err = imp.AddRecording(r.Key, rec.proxyStub, rec.stub)
		}
		if err != nil {
			s.log.Debug("recording not placed", "port", imp.Port, "key", r.Key, "err", err)
		} else if isAlways {
			always++
		}
	}
	return always
}

// bind listens on the imposter's port, or notes why it cannot.
func (s *Server) bind(sv *served) {
	port := sv.def.Port
	var tlsCfg *tls.Config
	var err error
	if sv.imp.Protocol == "https" {
		if tlsCfg, err = s.tlsConfig(sv.imp, sv.creation); err != nil {
			sv.bindErr = err.Error()
			return
		}
	}
	if !s.ports.Has(port) {
		// Written to the configuration by a node with another range (or
		// before this one was set): this node does not listen there.
		sv.mu.Lock()
		sv.bindErr = s.ports.refusal(port).Message
		sv.mu.Unlock()
		return
	}
	s.mu.Lock()
	ln := s.reserved[port]
	delete(s.reserved, port)
	s.mu.Unlock()
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(port))); err != nil {
			if sv.bindErr == "" {
				s.log.Error(fmt.Sprintf("[%s:%d] cannot listen: %v", sv.imp.Protocol, port, err))
			}
			sv.mu.Lock()
			sv.bindErr = err.Error()
			sv.mu.Unlock()
			return
		}
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	sv.mu.Lock()
	sv.ln, sv.bindErr = ln, ""
	sv.mu.Unlock()
	go s.accept(sv, ln)
	s.log.Info(fmt.Sprintf("[%s:%d] Open for business...", sv.imp.Protocol, port))
}

// reserve binds port for an admin call about to propose it (any free
// port if 0), unless this node already serves it. It returns the port.
func (s *Server) reserve(port int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if port != 0 && !s.ports.Has(port) {
		return port, s.ports.refusal(port)
	}
	if port != 0 && (s.imposters[port] != nil || s.reserved[port] != nil) {
		return port, nil // ours already: a replacement rebinds it
	}
	var ln net.Listener
	var err error
	if port == 0 && s.ports != AllPorts {
		ln, err = s.ports.listenAny(s.host, func(p int) bool { return s.imposters[p] == nil && s.reserved[p] == nil })
	} else {
		ln, err = net.Listen("tcp", net.JoinHostPort(s.host, strconv.Itoa(port)))
	}
	if err != nil {
		if port == 0 {
			return port, &imposter.Error{Code: imposter.CodeResourceConflict, Message: fmt.Sprintf("no free port in %s", s.ports)}
		}
		return port, &imposter.Error{Code: imposter.CodeResourceConflict, Message: fmt.Sprintf("Port %d is already in use", port)}
	}
	port = ln.Addr().(*net.TCPAddr).Port
	s.reserved[port] = ln
	return port, nil
}

// unreserve gives up a reservation no pass took (the change failed).
func (s *Server) unreserve(port int) {
	s.mu.Lock()
	ln := s.reserved[port]
	delete(s.reserved, port)
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// reconcile makes the running imposters what the configuration this node
// applied says: new definitions start, changed ones take the new stubs
// in place (keeping the listener, the recorded requests and unchanged
// stubs' response cycles), deleted ones stop.
//
// Once it is done it reports to the cluster that this node serves the
// revision it read before listing: what admin calls wait for.
func (s *Server) reconcile(ctx context.Context) error {
	if !s.caughtUp.Load() {
		return nil // Start has not caught up: nothing is served yet
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	first := !s.passed
	rev, err := s.cfg.Revision(ctx)
	if err != nil {
		return err
	}
	defs, err := s.cfg.List(ctx)
	if err != nil {
		return err
	}
	s.lastRev = rev
	want := make(map[int]bool, len(defs))
	for _, d := range defs {
		want[d.Port] = true
		s.mu.Lock()
		cur := s.imposters[d.Port]
		s.mu.Unlock()
		switch {
		case cur != nil && cur.def.Version == d.Version && cur.def.recVersion() == d.recVersion():
			if cur.ln == nil && cur.creation != nil && time.Since(cur.lastRetry) >= bindRetry {
				cur.lastRetry = time.Now()
				s.bind(cur) // the port may be free now
			}
			continue
		case cur != nil && cur.def.Version == d.Version && s.addRecordings(cur, d):
			continue
		case cur != nil && s.changeInPlace(cur, d):
			continue
		case cur != nil:
			cur.stop()
		}
		sv := s.start(d)
		sv.lastRetry = time.Now()
		sv.partial = first && s.restarted
		s.mu.Lock()
		s.imposters[d.Port] = sv
		s.mu.Unlock()
	}
	serving := true
	for _, sv := range s.sorted() {
		if !want[sv.def.Port] {
			s.mu.Lock()
			delete(s.imposters, sv.def.Port)
			s.mu.Unlock()
			sv.stop()
			continue
		}
		sv.mu.Lock()
		serving = serving && sv.ln != nil
		sv.mu.Unlock()
	}
	s.passed = true
	s.ready.Store(true)
	// An imposter this node cannot serve (its port taken, its definition
	// not compiling here) means it does not serve the configuration: the
	// rollout names it, until a pass binds the port (the watch retries).
	if serving {
		s.cluster.Served(rev)
	}
	return nil
}

// addRecordings places, in a running imposter whose definition did not
// change, the proxy recordings stored since the last pass: the common
// change while a proxy records, done without recompiling the imposter.
// It reports false when recordings went too (the caller rebuilds).
func (s *Server) addRecordings(cur *served, d Definition) bool {
	now := make(map[string]bool, len(d.Recordings))
	for _, r := range d.Recordings {
		now[r.Key] = true
	}
	for _, r := range cur.def.Recordings {
		if !now[r.Key] {
			return false
		}
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	cur.always = s.place(cur.imp, cur.scope, d.Recordings)
	cur.def = d
	return true
}

// bindRetry is how often a pass tries again to bind a port it could not.
const bindRetry = time.Second

// changeInPlace swaps a changed definition of the same creation into a
// running imposter, if its listener can stay as it is: the recorded
// requests carry over (unless the change reset them) and every stub
// that kept its id keeps its place in its cycle.
func (s *Server) changeInPlace(cur *served, d Definition) bool {
	st, imp, err := s.build(d)
	if err != nil || st.Incarnation != cur.incarnation || cur.ln == nil || !sameListener(cur.creation, st.Creation) {
		return false
	}
	always := s.place(imp, st.Scope(), d.Recordings)
	cur.mu.Lock()
	imp.Inherit(cur.imp)
	if st.Resets != cur.resets {
		imp.ResetRequests()
		cur.partial = false // nothing recorded before the reset counts
	}
	imp.KeyPEM, imp.CertPEM = cur.imp.KeyPEM, cur.imp.CertPEM
	cur.imp, cur.def, cur.creation, cur.resets, cur.scope, cur.always = imp, d, st.Creation, st.Resets, st.Scope(), always
	cur.mu.Unlock()
	return true
}

// sameListener reports whether two creations listen alike.
func sameListener(a, b *imposter.Object) bool {
	for _, k := range []string{"protocol", "key", "cert", "mutualAuth", "ca", "rejectUnauthorized"} {
		va, _ := a.Get(k)
		vb, _ := b.Get(k)
		if string(imposter.Marshal(va, 0)) != string(imposter.Marshal(vb, 0)) {
			return false
		}
	}
	return true
}

// Watch reconciles whenever the configuration's revision moves, and
// retries ports that would not bind, until ctx ends.
func (s *Server) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.cluster.Nudges():
			// A change waits for this node: reconcile now.
			if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("reconcile", "err", err)
			}
			continue
		}
		rev, err := s.cfg.Revision(ctx)
		if err != nil {
			continue
		}
		s.recMu.Lock()
		moved := rev != s.lastRev
		s.recMu.Unlock()
		if moved || s.unbound() > 0 {
			if err := s.reconcile(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("reconcile", "err", err)
			}
		}
	}
}

// unbound counts imposters whose port is not bound.
func (s *Server) unbound() int {
	n := 0
	for _, sv := range s.sorted() {
		sv.mu.Lock()
		if sv.ln == nil {
			n++
		}
		sv.mu.Unlock()
	}
	return n
}

// Stats counts the imposters this node serves and those it cannot.
func (s *Server) Stats() (serving, unbound int) {
	u := s.unbound()
	return len(s.sorted()) - u, u
}

// Close stops every imposter.
func (s *Server) Close() {
	s.mu.Lock()
	all := s.imposters
	s.imposters = map[int]*served{}
	reserved := s.reserved
	s.reserved = map[int]net.Listener{}
	s.mu.Unlock()
	for _, sv := range all { //fenceline:unordered stopping each
		sv.stop()
	}
	for _, ln := range reserved { //fenceline:unordered closing each
		_ = ln.Close()
	}
}

// sorted returns the imposters by port.
func (s *Server) sorted() []*served {
	s.mu.Lock()
	defer s.mu.Unlock()
	ports := make([]int, 0, len(s.imposters))
	for p := range s.imposters {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	out := make([]*served, len(ports))
	for i, p := range ports {
		out[i] = s.imposters[p]
	}
	return out
}

// --- serving an imposter

type imposterHandler struct {
	s  *Server
	sv *served
}

// errBusy is a request refused at a bound: 503, nobody called.
type errBusy struct{ e *imposter.Error }

func (b errBusy) Error() string { return b.e.Error() }
func (b errBusy) Unwrap() error { return b.e }

// call sends the request upstream and hands the answer to the engine.
func (h *imposterHandler) call(wr *wireRequest, c *imposter.ProxyCall) (imposter.Outcome, bool, error) {
	var up imposter.Upstream
	var err error
	if wr.tcp {
		up, err = h.callTCP(c)
	} else {
		target := wr.target
		if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
			if u, err := url.Parse(target); err == nil {
				target = u.RequestURI()
			}
		}
		up, err = callUpstream(context.Background(), h.s.egressPolicy(), c, wr.method, target, wr.chunked)
	}
	if err != nil {
		return imposter.Outcome{}, false, &imposter.Error{Code: imposter.CodeInvalidProxy,
			Message: fmt.Sprintf("Unable to connect to %s", imposter.Marshal(c.To, 0)) + egressDetail(err)}
	}
	h.sv.mu.Lock()
	defer h.sv.mu.Unlock()
	out, err := h.sv.imp.Proxied(c, up)
	return out, false, err
}

// upstreamClient calls proxied services: no redirects followed (the
// client gets them, as from the real service), addresses and
// certificates checked as the server's Egress and the proxy's verifyTLS
// say (mountebank checks neither), bodies passed as they come (no
// transparent gzip), and a bound on each call.
var upstreamClient = newRawClient(64, UpstreamTimeout)

// UpstreamTimeout bounds one proxied call, answer included.
const UpstreamTimeout = 60 * time.Second

// callUpstream sends the proxied request as mountebank's proxy does: the
// client's headers in the client's order and case, Host (named "host")
// set to the target's unless injectHeaders sets it, the body framed as
// the client framed it (framedHeaders), and Connection: keep-alive
// added last unless the client said otherwise. The answer's headers are
// recorded as the upstream wrote them.
func callUpstream(ctx context.Context, eg *Egress, c *imposter.ProxyCall, method, requestURI string, chunked bool) (imposter.Upstream, error) {
	u, err := url.Parse(c.To)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return imposter.Upstream{}, fmt.Errorf("proxy target %q is no http or https URL", c.To)
	}
	port, defaultPort := u.Port(), "80"
	if u.Scheme == "https" {
		defaultPort = "443"
	}
	host := u.Host
	if port == "" || port == defaultPort {
		port, host = defaultPort, u.Hostname()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	body := []byte(c.Body())
	req := &outRequest{method: method, target: requestURI, body: body, chunked: chunked}
	hostAt, hostName := -1, "host"
	hasConn := false
	for _, name := range c.Headers.Keys() {
		v, _ := c.Headers.Get(name)
		vals := []string{imposter.ToString(v)}
		if arr, ok := v.([]any); ok {
			vals = vals[:0]
			for _, x := range arr {
				vals = append(vals, imposter.ToString(x))
			}
		}
		switch strings.ToLower(name) {
		case "host":
			if hostAt < 0 {
				hostAt = len(req.headers)
				req.headers = append(req.headers, [2]string{})
			}
			if c.InjectedHost() && len(vals) > 0 {
				hostName, host = name, vals[0] // the last one set wins, as in node
			}
			continue
		case "connection":
			hasConn = true
		}
		for _, v := range vals {
			req.headers = append(req.headers, [2]string{name, v})
		}
	}
	if hostAt < 0 {
		hostAt = len(req.headers)
		req.headers = append(req.headers, [2]string{})
	}
	req.headers[hostAt] = [2]string{hostName, host}
	req.headers = framedHeaders(req.headers, chunked, len(body))
	if !hasConn {
		req.headers = append(req.headers, [2]string{"Connection", "keep-alive"})
	}
	start := time.Now()
	resp, err := upstreamClient.call(ctx, u.Scheme, net.JoinHostPort(u.Hostname(), port), req, &dialPolicy{egress: eg, verify: c.VerifyTLS()})
	if err != nil {
		return imposter.Upstream{}, err
	}
	return imposter.Upstream{StatusCode: resp.status, Body: resp.body, Elapsed: time.Since(start), Headers: groupHeaders(resp.headers)}, nil
}

// groupHeaders turns raw header lines into the engine's headers as
// mountebank does: a name written twice in one case is one header with
// both values, at its first place; in two cases, two headers.
func groupHeaders(lines [][2]string) []imposter.Header {
	out := make([]imposter.Header, 0, len(lines))
	for _, l := range lines {
		i := slices.IndexFunc(out, func(h imposter.Header) bool { return h.Name == l[0] })
		if i < 0 {
			out = append(out, imposter.Header{Name: l[0], Values: []string{l[1]}})
		} else {
			out[i].Values = append(out[i].Values, l[1])
		}
	}
	return out
}

var errTooLarge = fmt.Errorf("request body over %d bytes", MaxBodyBytes)

// readBody reads the body, gunzipped if it says gzip (a body that does
// not gunzip is taken as it came, as mountebank does).
func readBody(r *http.Request) (string, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return "", nil
	}
	var b []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= MaxBodyBytes {
		// The usual case: read exactly what was announced, in one buffer.
		b = make([]byte, n)
		if _, err = io.ReadFull(r.Body, b); err != nil {
			return "", err
		}
	} else if b, err = io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1)); err != nil {
		return "", err
	}
	if len(b) > MaxBodyBytes {
		return "", errTooLarge
	}
	if r.Header.Get("Content-Encoding") == "gzip" {
		if u, err := gunzip(b); err == nil {
			return string(u), nil
		} else if errors.Is(err, errTooLarge) {
			return "", err
		}
	}
	return string(b), nil
}

// gunzip decodes a gzip body, bounded by MaxBodyBytes.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	u, err := io.ReadAll(io.LimitReader(zr, MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(u) > MaxBodyBytes {
		return nil, errTooLarge
	}
	return u, nil
}

// --- errors

func writeErrors(w http.ResponseWriter, status int, errs ...error) {
	if len(errs) == 1 {
		var multi interface{ Unwrap() []error }
		if errors.As(errs[0], &multi) {
			errs = multi.Unwrap()
		}
	}
	list := make([]any, 0, len(errs))
	for _, err := range errs {
		var e *imposter.Error
		if !errors.As(err, &e) {
			e = &imposter.Error{Code: imposter.CodeBadData, Message: err.Error()}
		}
		list = append(list, e.Value())
	}
	writeJSON(w, status, imposter.NewObject().Set("errors", list))
}

// writeJSON answers as mountebank's express app does: JSON indented by
// two spaces.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b := imposter.Marshal(v, 2)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// removeDotSegments resolves "." and ".." in a path as a URL parser does
// (RFC 3986 §5.2.4), keeping everything else (percent-escapes, repeated
// slashes) as the client sent it.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	in := strings.Split(p, "/")
	out := make([]string, 0, len(in))
	for i, seg := range in {
		last := i == len(in)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	return strings.Join(out, "/")
}

// SetRestarted says the node ran before with its data: the imposters its
// first pass starts recorded requests that are gone.
func (s *Server) SetRestarted(restarted bool) { s.restarted = restarted }

// Start serves the imposters of the cluster's configuration once this
// node has caught up with it: a linearizable read, tried every
// catchUpRetry until one succeeds or ctx ends, then a pass. Until then
// this node binds no imposter port (its journal may hold an older
// configuration than one it confirmed before it went down); admin calls
// catch it up too.
func (s *Server) Start(ctx context.Context) {
	for ctx.Err() == nil && !s.caughtUp.Load() {
		cctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		err := s.cfg.Sync(cctx)
		cancel()
		if err == nil {
			s.caughtUp.Store(true)
			if err := s.reconcile(ctx); err != nil {
				s.log.Warn("imposters not started", "err", err)
			}
			return
		}
		s.log.Info("waiting to catch up with the cluster's configuration before serving imposters", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(catchUpRetry):
		}
	}
}

// Bounds on Start's catching up: each read's wait, and the pause after a
// read that failed.
const (
	catchUpTimeout = 2 * time.Second
	catchUpRetry   = 200 * time.Millisecond
)
