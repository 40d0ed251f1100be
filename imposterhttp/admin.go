package imposterhttp

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// Version is the mountebank API version this server follows.
const Version = "2.9.2"

// Register adds mountebank's admin routes to mux.
func (s *Server) Register(mux *http.ServeMux) { s.register(mux) }

// logged notes each admin call in the log GET /logs shows, as mountebank
// does (only there: the node's own log stays quiet).
func (s *Server) logged(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.logs.add("info", "[mb:"+strconv.Itoa(int(s.adminPort(r)))+"] "+r.Method+" "+r.URL.RequestURI(), time.Now())
		h(w, r)
	}
}

func (s *Server) register(mux *http.ServeMux) {
	for _, r := range []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /config", s.config},
		{"GET /logs", s.getLogs},
		{"GET /imposters", s.list},
		{"POST /imposters", s.post},
		{"PUT /imposters", s.putAll},
		{"DELETE /imposters", s.deleteAll},
		{"GET /imposters/{port}", s.get},
		{"DELETE /imposters/{port}", s.deleteOne},
		{"DELETE /imposters/{port}/savedRequests", s.resetRequests},
		// Deprecated, kept by mountebank for old clients: it removes saved
		// proxy responses, not requests (mountebank routes it so).
		{"DELETE /imposters/{port}/requests", s.deleteSavedProxyResponses},
		{"DELETE /imposters/{port}/savedProxyResponses", s.deleteSavedProxyResponses},
		{"PUT /imposters/{port}/stubs", s.putStubs},
		{"POST /imposters/{port}/stubs", s.postStub},
		{"GET /imposters/{port}/stubs/{index}", s.getStub},
		{"PUT /imposters/{port}/stubs/{index}", s.putStub},
		{"DELETE /imposters/{port}/stubs/{index}", s.deleteStub},
		// fenceline's: scenario states in a flow (flows.go).
		{"GET /imposters/{port}/scenarios", s.getScenarios},
		{"PUT /imposters/{port}/scenarios/{name}/state", s.putScenarioState},
		{"POST /imposters/{port}/scenarios/reset", s.resetScenarios},
	} {
		// mountebank's routes take a trailing slash too (express routes
		// are not strict).
		mux.HandleFunc(r.pattern, s.logged(r.h))
		mux.HandleFunc(r.pattern+"/{$}", s.logged(r.h))
	}
	// The members' own route: each asks the others for their recorded
	// requests (cluster.go). Not one of mountebank's, and not logged.
	mux.HandleFunc("POST "+recordsPath, s.records)
	mux.HandleFunc("GET /{$}", s.logged(s.home))
	mux.HandleFunc("/", notFound)
}

// notFound answers an unknown route as mountebank's express app does.
func notFound(w http.ResponseWriter, r *http.Request) {
	body := "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot " +
		html.EscapeString(r.Method+" "+r.URL.EscapedPath()) + "</pre>\n</body>\n</html>\n"
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, body)
}

func link(href string) *imposter.Object {
	return imposter.NewObject().Set("href", href)
}

// baseURL is where links point: mountebank makes them absolute with the
// request's Host.
func baseURL(r *http.Request) string { return "http://" + r.Host }

// negotiated marks the answers mountebank content-negotiates.
func negotiated(w http.ResponseWriter) { w.Header().Set("Vary", "Accept") }

func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	b := baseURL(r)
	negotiated(w)
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("_links", imposter.NewObject().
		Set("imposters", link(b+"/imposters")).
		Set("config", link(b+"/config")).
		Set("logs", link(b+"/logs"))))
}

var started = time.Now()

func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	// A node exposed beyond loopback does not tell callers where it runs
	// on its machine (mountebank's field stays, empty).
	wd := ""
	if !s.exposed.Load() {
		wd, _ = os.Getwd()
	}
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	negotiated(w)
	writeJSON(w, http.StatusOK, imposter.NewObject().
		Set("version", Version).
		Set("options", imposter.NewObject().Set("port", s.adminPort(r)).Set("host", s.host)).
		Set("process", imposter.NewObject().
			Set("nodeVersion", runtime.Version()).
			Set("architecture", runtime.GOARCH).
			Set("platform", runtime.GOOS).
			Set("rss", float64(mem.Sys)).
			Set("heapTotal", float64(mem.HeapSys)).
			Set("heapUsed", float64(mem.HeapAlloc)).
			Set("uptime", time.Since(started).Seconds()).
			Set("cwd", wd)))
}

func (s *Server) adminPort(r *http.Request) float64 {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(interface{ String() string }); ok {
		if i := strings.LastIndexByte(a.String(), ':'); i >= 0 {
			if n, err := strconv.Atoi(a.String()[i+1:]); err == nil {
				return float64(n)
			}
		}
	}
	return 0
}

func (s *Server) getLogs(w http.ResponseWriter, r *http.Request) {
	all := s.logs.all()
	start, end := 0, len(all)
	if v, err := strconv.Atoi(r.URL.Query().Get("startIndex")); err == nil && v >= 0 {
		start = min(v, end)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("endIndex")); err == nil && v >= 0 {
		end = min(v+1, end)
	}
	// Both indexes are inclusive.
	list := []any{}
	for _, e := range all[start:max(start, end)] {
		list = append(list, e)
	}
	negotiated(w)
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("logs", list))
}

// flag reads a query flag as mountebank does: set means "true".
func flag(r *http.Request, name string) bool {
	return strings.EqualFold(r.URL.Query().Get(name), "true")
}

// readJSON parses the request body, answering the error itself.
func readJSON(w http.ResponseWriter, r *http.Request) (any, bool) {
	body, err := readBody(r)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: err.Error()})
		return nil, false
	}
	if strings.TrimSpace(body) == "" {
		return imposter.NewObject(), true // express reads no body as {}
	}
	v, err := imposter.Parse(body)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeInvalidJSON, Message: "Unable to parse body as JSON", Source: body})
		return nil, false
	}
	return v, true
}

// configTimeout bounds an admin call's wait on the configuration.
const configTimeout = 10 * time.Second

// current waits until this node serves every change committed before
// the call (a linearizable read of the configuration), answering 503
// itself when it cannot tell.
func (s *Server) current(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), configTimeout)
	err := s.cfg.Sync(ctx)
	if err == nil {
		s.caughtUp.Store(true) // this node has caught up: it may serve
		err = s.reconcile(ctx)
	}
	if err != nil {
		cancel()
		writeUnavailable(w, err)
		return nil, nil, false
	}
	return ctx, cancel, true
}

// writeUnavailable answers a configuration that could not be read or
// changed: 503, in mountebank's error shape. A change may have applied.
func writeUnavailable(w http.ResponseWriter, err error) {
	writeErrors(w, http.StatusServiceUnavailable, &imposter.Error{Code: "unavailable",
		Message: "the cluster's configuration could not be reached: " + err.Error()})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := s.current(w, r)
	if !ok {
		return
	}
	defer cancel()
	opt := imposter.PrintOptions{Replayable: flag(r, "replayable"), RemoveProxies: flag(r, "removeProxies")}
	opt.List = !opt.Replayable && !opt.RemoveProxies
	opt.BaseURL = baseURL(r)
	all := s.sorted()
	negotiated(w)
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", s.values(ctx, w, all, opt)))
}

// values prints the imposters all as opt says, with every member's
// recorded requests (or, in the list view, their count) unless the
// view is replayable, which shows neither.
func (s *Server) values(ctx context.Context, w http.ResponseWriter, all []*served, opt imposter.PrintOptions) []any {
	var g map[int]*imposter.Gathered
	if !opt.Replayable {
		g = s.gathered(ctx, w, all, !opt.List)
	}
	out := []any{}
	for _, sv := range all {
		o := opt
		o.Gathered = g[sv.port]
		out = append(out, sv.value(o))
	}
	return out
}

// value is the imposter as GET prints it, with this node's bind error
// if it could not listen.
func (sv *served) value(opt imposter.PrintOptions) *imposter.Object {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	o := sv.imp.Value(opt)
	if sv.bindErr != "" && !opt.Replayable {
		o.Set("bindError", sv.bindErr)
	}
	return o
}

// propose applies a change built from the definitions this node serves,
// after a linearizable read, again if another change raced it (a few
// times), and reconciles; then it waits until every member serves the
// change, naming in UnconfirmedHeader those that did not confirm in
// time. build answers the caller itself and returns false when the call
// is refused.
func (s *Server) propose(w http.ResponseWriter, r *http.Request, build func(defs []Definition) (Change, bool)) (context.Context, context.CancelFunc, bool) {
	ctx, cancel, ok := s.current(w, r)
	if !ok {
		return nil, nil, false
	}
	for attempt := 0; ; attempt++ {
		defs, err := s.cfg.List(ctx)
		if err != nil {
			cancel()
			writeUnavailable(w, err)
			return nil, nil, false
		}
		c, ok := build(defs)
		if !ok {
			cancel()
			return nil, nil, false
		}
		if err := checkBounds(defs, c); err != nil {
			cancel()
			writeErrors(w, http.StatusBadRequest, err)
			return nil, nil, false
		}
		rev, err := s.cfg.Apply(ctx, c)
		if errors.Is(err, ErrConflict) && attempt < maxAttempts {
			continue
		}
		if err == nil {
			err = s.reconcile(ctx)
		}
		if err != nil {
			cancel()
			if errors.Is(err, ErrConflict) {
				writeErrors(w, http.StatusConflict, &imposter.Error{Code: imposter.CodeResourceConflict, Message: err.Error()})
			} else if errors.Is(err, ErrTooLarge) {
				writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: err.Error()})
			} else {
				writeUnavailable(w, err)
			}
			return nil, nil, false
		}
		partial(w, UnconfirmedHeader, s.unconfirmed(ctx, rev))
		return ctx, cancel, true
	}
}

// unconfirmed waits until every member serves rev, and returns the
// members that did not confirm it in time (and why the rollout itself
// failed, if it did).
func (s *Server) unconfirmed(ctx context.Context, rev uint64) []string {
	missing, err := s.cluster.AwaitRollout(ctx, rev)
	if err != nil {
		missing = append(missing, "rollout not confirmed: "+err.Error())
	}
	return missing
}

// maxAttempts bounds how often a change is retried after losing a race.
const maxAttempts = 5

// ErrTooLarge is a definition, or a change, over what the configuration
// store holds.
var ErrTooLarge = errors.New("too large for the cluster's configuration")

func find(defs []Definition, port int) (Definition, bool) {
	for _, d := range defs {
		if d.Port == port {
			return d, true
		}
	}
	return Definition{}, false
}

func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	creation, isObj := v.(*imposter.Object)
	if !isObj {
		creation = imposter.NewObject() // [] or "http": no protocol
	}
	if errs := s.validate(creation); errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	port, _ := checkPort(creation)
	port, err := s.reserve(port)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, err)
		return
	}
	defer s.unreserve(port)
	creation = imposter.Clone(creation).(*imposter.Object)
	if _, has := creation.Get("port"); has {
		creation.Set("port", float64(port))
	}
	def := Definition{Port: port, JSON: newStored(creation).Encode()}
	_, cancel, ok := s.propose(w, r, func(defs []Definition) (Change, bool) {
		if _, taken := find(defs, port); taken {
			writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeResourceConflict, Message: fmt.Sprintf("Port %d is already in use", port)})
			return Change{}, false
		}
		return Change{Guards: []Guard{{Port: port}}, Put: []Definition{def}}, true
	})
	if !ok {
		return
	}
	defer cancel()
	s.mu.Lock()
	sv := s.imposters[port]
	s.mu.Unlock()
	if sv == nil { // deleted again before it could be shown
		writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeNoSuchResource, Message: "Try POSTing to /imposters first?"})
		return
	}
	w.Header().Set("Location", baseURL(r)+"/imposters/"+strconv.Itoa(port))
	writeJSON(w, http.StatusCreated, sv.value(imposter.PrintOptions{BaseURL: baseURL(r)}))
}

func (s *Server) putAll(w http.ResponseWriter, r *http.Request) {
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	body, _ := v.(*imposter.Object)
	list, has := body.Get("imposters")
	if !has {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "'imposters' is a required field"})
		return
	}
	arr, _ := list.([]any)
	// Validate every imposter before changing anything: a bad one leaves
	// the previous imposters in place.
	var errs []error
	creations := make([]*imposter.Object, len(arr))
	for i, x := range arr {
		o, isObj := x.(*imposter.Object)
		if !isObj {
			o = imposter.NewObject()
		}
		creations[i] = o
		errs = append(errs, s.validate(o)...)
	}
	if errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	var puts []Definition
	seen := map[int]bool{}
	for _, c := range creations {
		port, _ := checkPort(c)
		port, err := s.reserve(port)
		if err == nil && seen[port] {
			err = &imposter.Error{Code: imposter.CodeResourceConflict, Message: fmt.Sprintf("Port %d is already in use", port)}
		}
		if err != nil {
			for _, d := range puts {
				s.unreserve(d.Port)
			}
			writeErrors(w, http.StatusBadRequest, err)
			return
		}
		seen[port] = true
		c = imposter.Clone(c).(*imposter.Object)
		if _, has := c.Get("port"); has {
			c.Set("port", float64(port))
		}
		puts = append(puts, Definition{Port: port, JSON: newStored(c).Encode()})
	}
	defer func() {
		for _, d := range puts {
			s.unreserve(d.Port)
		}
	}()
	ctx, cancel, ok := s.propose(w, r, func(defs []Definition) (Change, bool) {
		var c Change
		for _, d := range defs {
			c.Guards = append(c.Guards, Guard{Port: d.Port, Version: d.Version})
			c.DeleteRecordings = append(c.DeleteRecordings, d.Port)
			if !seen[d.Port] {
				c.Delete = append(c.Delete, d.Port)
			}
		}
		for _, d := range puts {
			if _, had := find(defs, d.Port); !had {
				c.Guards = append(c.Guards, Guard{Port: d.Port})
			}
		}
		c.Put = puts
		return c, true
	})
	if !ok {
		return
	}
	defer cancel()
	var created []*served
	s.mu.Lock()
	for _, d := range puts {
		if sv := s.imposters[d.Port]; sv != nil {
			created = append(created, sv)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", s.values(ctx, w, created, imposter.PrintOptions{List: true, BaseURL: baseURL(r)})))
}

func (s *Server) deleteAll(w http.ResponseWriter, r *http.Request) {
	// Replayable unless ?replayable=false, for backwards compatibility.
	opt := imposter.PrintOptions{Replayable: !strings.EqualFold(r.URL.Query().Get("replayable"), "false"), RemoveProxies: flag(r, "removeProxies"), BaseURL: baseURL(r)}
	var json []any
	_, cancel, ok := s.propose(w, r, func(defs []Definition) (Change, bool) {
		json = s.values(r.Context(), w, s.sorted(), opt) // what the cluster served, as the change removes it
		var c Change
		for _, d := range defs {
			c.Guards = append(c.Guards, Guard{Port: d.Port, Version: d.Version})
			c.Delete = append(c.Delete, d.Port)
			c.DeleteRecordings = append(c.DeleteRecordings, d.Port)
		}
		return c, true
	})
	if !ok {
		return
	}
	defer cancel()
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", json))
}

// printOptions reads the query flags of a single imposter's view.
func printOptions(r *http.Request) imposter.PrintOptions {
	return imposter.PrintOptions{Replayable: flag(r, "replayable"), RemoveProxies: flag(r, "removeProxies"), BaseURL: baseURL(r)}
}

// full is the full view, with absolute links.
func full(r *http.Request) imposter.PrintOptions { return imposter.PrintOptions{BaseURL: baseURL(r)} }

// pathPort reads the path's port; -1 if it is not a number.
func pathPort(r *http.Request) int {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		return -1
	}
	return port
}

// lookup returns the imposter this node runs on port, or answers 404.
func (s *Server) lookup(w http.ResponseWriter, port int) (*served, bool) {
	s.mu.Lock()
	sv := s.imposters[port]
	s.mu.Unlock()
	if sv == nil {
		writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeNoSuchResource,
			Message: "Try POSTing to /imposters first?"})
		return nil, false
	}
	return sv, true
}

// find returns the path's imposter as committed, or answers itself.
func (s *Server) find(w http.ResponseWriter, r *http.Request) (*served, bool) {
	_, cancel, ok := s.current(w, r)
	if !ok {
		return nil, false
	}
	cancel()
	return s.lookup(w, pathPort(r))
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	negotiated(w)
	writeJSON(w, http.StatusOK, s.view(r.Context(), w, sv, printOptions(r)))
}

// view is one imposter as opt prints it, with every member's recorded
// requests (none in the replayable view).
func (s *Server) view(ctx context.Context, w http.ResponseWriter, sv *served, opt imposter.PrintOptions) *imposter.Object {
	if !opt.Replayable {
		opt.Gathered = s.gathered(ctx, w, []*served{sv}, true)[sv.port]
	}
	return sv.value(opt)
}

func (s *Server) deleteOne(w http.ResponseWriter, r *http.Request) {
	port := pathPort(r)
	var val *imposter.Object
	_, cancel, ok := s.propose(w, r, func(defs []Definition) (Change, bool) {
		d, had := find(defs, port)
		if !had {
			val = nil
			return Change{}, true // deleting nothing is no error
		}
		s.mu.Lock()
		sv := s.imposters[port]
		s.mu.Unlock()
		if sv != nil {
			val = s.view(r.Context(), w, sv, printOptions(r))
		}
		return Change{Guards: []Guard{{Port: port, Version: d.Version}}, Delete: []int{port}, DeleteRecordings: []int{port}}, true
	})
	if !ok {
		return
	}
	defer cancel()
	if val == nil {
		val = imposter.NewObject()
	}
	writeJSON(w, http.StatusOK, val)
}

// resetRequests forgets the imposter's recorded requests, on every
// member: a change of its stored reset count, which every member applies
// by forgetting its own.
func (s *Server) resetRequests(w http.ResponseWriter, r *http.Request) {
	s.editStored(w, r, true, func(d imposter.Stored) (imposter.Stored, int, []error) {
		d.Resets++
		return d, 0, nil
	}, nil)
}

// deleteSavedProxyResponses removes what proxies recorded, on every
// member: the cluster's stored recordings, and every response of the
// definition that a proxy recorded (an imported export's too). As in
// mountebank, every stub starts its response cycle again.
func (s *Server) deleteSavedProxyResponses(w http.ResponseWriter, r *http.Request) {
	s.editStored(w, r, true, func(d imposter.Stored) (imposter.Stored, int, []error) {
		d.Creation = imposter.Clone(d.Creation).(*imposter.Object)
		stubs := imposter.WithoutSavedProxyResponses(imposter.StubConfigs(d.Creation))
		d.Creation.Set("stubs", stubs)
		d.StubIDs = newIDs(len(stubs))
		d.Recordings++ // what is left of the recordings is never placed again
		return d, 0, nil
	}, func(c *Change, port int) { c.DeleteRecordings = []int{port} })
}

// editStored changes the path's imposter through the configuration: edit
// gets it as stored and returns it changed, or a status and errors to
// answer instead; more, if set, adds to the change. The answer is the
// imposter's full view, with every member's records, once every member
// serves the change (or the header names those that did not confirm).
//
// The resets' answers are content-negotiated, as mountebank's are; the
// stub changes' are not.
func (s *Server) editStored(w http.ResponseWriter, r *http.Request, negotiate bool, edit func(d imposter.Stored) (imposter.Stored, int, []error), more func(c *Change, port int)) {
	port := pathPort(r)
	ctx, cancel, ok := s.propose(w, r, func(defs []Definition) (Change, bool) {
		d, had := find(defs, port)
		if !had {
			writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeNoSuchResource, Message: "Try POSTing to /imposters first?"})
			return Change{}, false
		}
		st, err := imposter.DecodeStored(d.JSON)
		if err != nil {
			writeUnavailable(w, err)
			return Change{}, false
		}
		st, status, errs := edit(st)
		if errs != nil {
			writeErrors(w, status, errs...)
			return Change{}, false
		}
		c := Change{Guards: []Guard{{Port: port, Version: d.Version}}, Put: []Definition{{Port: port, JSON: st.Encode()}}}
		if more != nil {
			more(&c, port)
		}
		return c, true
	})
	if !ok {
		return
	}
	defer cancel()
	if sv, ok := s.lookup(w, port); ok {
		if negotiate {
			negotiated(w)
		}
		writeJSON(w, http.StatusOK, s.view(ctx, w, sv, full(r)))
	}
}

// changeStubs changes the path's imposter's stubs through the
// configuration: edit gets the stubs as committed, each with its id, and
// returns them changed (a new or replaced stub with a new id), or
// answers the caller itself (status and errors) and returns false.
func (s *Server) changeStubs(w http.ResponseWriter, r *http.Request, edit func(stubs []stubEntry) ([]stubEntry, int, []error)) {
	s.editStored(w, r, false, func(d imposter.Stored) (imposter.Stored, int, []error) {
		stubs := imposter.StubConfigs(d.Creation)
		entries := make([]stubEntry, len(stubs))
		for i := range stubs {
			entries[i] = stubEntry{config: stubs[i], id: d.StubIDs[i]}
		}
		entries, status, errs := edit(entries)
		if errs != nil {
			return d, status, errs
		}
		list, ids := make([]any, len(entries)), make([]string, len(entries))
		for i, e := range entries {
			list[i], ids[i] = e.config, e.id
		}
		d.Creation = imposter.Clone(d.Creation).(*imposter.Object)
		d.Creation.Set("stubs", list)
		d.StubIDs = ids
		// Each stub compiled alone (compileStubs); the imposter's patterns
		// together are bounded too, as New bounds them on every member.
		if err := imposter.CheckRegexTotal(d.Creation); err != nil {
			return d, http.StatusBadRequest, []error{err}
		}
		return d, 0, nil
	}, nil)
}

// stubEntry is a stub as its imposter stores it: its configuration and
// its id.
type stubEntry struct {
	config any
	id     string
}

// newStubs is stubs as new entries, each with a new id.
func newStubs(stubs ...any) []stubEntry {
	out := make([]stubEntry, len(stubs))
	for i, st := range stubs {
		out[i] = stubEntry{config: st, id: newID()}
	}
	return out
}

// newStored is a new creation's stored form: a new incarnation, and a
// new id for each stub.
func newStored(creation *imposter.Object) imposter.Stored {
	return imposter.Stored{Incarnation: newID(), Creation: creation, StubIDs: newIDs(len(imposter.StubConfigs(creation)))}
}

// compileStubs checks stubs before they are proposed.
func (s *Server) compileStubs(stubs ...any) []error {
	var errs []error
	for _, x := range stubs {
		st, err := imposter.NewStub(x)
		if err != nil {
			return []error{err}
		}
		if s.injection == nil {
			errs = append(st.InjectionErrors(), errs...) // mountebank lists the last stub's first
		}
	}
	return errs
}

func (s *Server) putStubs(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.find(w, r); !ok {
		return // mountebank looks for the imposter before reading the body
	}
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	body, _ := v.(*imposter.Object)
	list, has := body.Get("stubs")
	if !has {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "'stubs' is a required field"})
		return
	}
	arr, isArr := list.([]any)
	if !isArr {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "'stubs' must be an array"})
		return
	}
	if errs := s.compileStubs(arr...); errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	// mountebank replaces every stub: each starts its cycle again.
	s.changeStubs(w, r, func([]stubEntry) ([]stubEntry, int, []error) { return newStubs(arr...), 0, nil })
}

func (s *Server) postStub(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.find(w, r); !ok {
		return // mountebank looks for the imposter before reading the body
	}
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	body, _ := v.(*imposter.Object)
	s.changeStubs(w, r, func(stubs []stubEntry) ([]stubEntry, int, []error) {
		var errs []error
		index := len(stubs)
		if iv, has := body.Get("index"); has {
			f, isNum := iv.(float64)
			if !isNum || f < 0 || f > float64(len(stubs)) || f != float64(int(f)) {
				errs = append(errs, &imposter.Error{Code: imposter.CodeBadData, Message: "'index' must be between 0 and the length of the stubs array"})
			}
			index = int(f)
		}
		raw, has := body.Get("stub")
		if !has {
			errs = append(errs, &imposter.Error{Code: imposter.CodeBadData, Message: "must contain 'stub' field"})
		}
		if errs == nil {
			errs = s.compileStubs(raw)
		}
		if errs != nil {
			return nil, http.StatusBadRequest, errs
		}
		return slices.Insert(stubs, index, newStubs(raw)...), 0, nil
	})
}

// stubIndex reads the path's stub index among n stubs.
func stubIndex(r *http.Request, n int) (int, []error) {
	raw := r.PathValue("index")
	i, err := strconv.Atoi(raw)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != raw {
		return 0, []error{&imposter.Error{Code: imposter.CodeBadData,
			Message: "'stubIndex' must be a valid integer, representing the array index position of the stub to replace"}}
	}
	return i, nil
}

func (s *Server) getStub(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	i, errs := stubIndex(r, sv.imp.Stubs())
	if errs != nil {
		writeErrors(w, http.StatusNotFound, errs...)
		return
	}
	writeJSON(w, http.StatusOK, sv.imp.StubValue(i, baseURL(r)))
}

func (s *Server) putStub(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.find(w, r); !ok {
		return // mountebank looks for the imposter before reading the body
	}
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	if errs := s.compileStubs(v); errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	s.changeStubs(w, r, func(stubs []stubEntry) ([]stubEntry, int, []error) {
		i, errs := stubIndex(r, len(stubs))
		if errs != nil {
			return nil, http.StatusNotFound, errs
		}
		stubs[i] = newStubs(v)[0] // a replaced stub starts its cycle again
		return stubs, 0, nil
	})
}

func (s *Server) deleteStub(w http.ResponseWriter, r *http.Request) {
	s.changeStubs(w, r, func(stubs []stubEntry) ([]stubEntry, int, []error) {
		i, errs := stubIndex(r, len(stubs))
		if errs != nil {
			return nil, http.StatusNotFound, errs
		}
		return slices.Delete(stubs, i, i+1), 0, nil
	})
}

// --- logs

// logRing keeps the last entries logged, for GET /logs.
type logRing struct {
	mu      sync.Mutex
	entries []*imposter.Object
	max     int
}

func newLogRing(max int) *logRing { return &logRing{max: max} }

func (l *logRing) add(level, msg string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) >= l.max {
		l.entries = append(l.entries[:0], l.entries[1:]...)
	}
	l.entries = append(l.entries, imposter.NewObject().Set("level", level).Set("message", msg).
		Set("timestamp", at.UTC().Format("2006-01-02T15:04:05.000Z")))
}

func (l *logRing) all() []*imposter.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*imposter.Object(nil), l.entries...)
}

// ringHandler copies info and above into the ring, then passes records on.
type ringHandler struct {
	ring *logRing
	next slog.Handler
}

func (h *ringHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *ringHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		h.ring.add(strings.ToLower(r.Level.String()), r.Message, r.Time)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &ringHandler{ring: h.ring, next: h.next.WithAttrs(as)}
}

func (h *ringHandler) WithGroup(g string) slog.Handler {
	return &ringHandler{ring: h.ring, next: h.next.WithGroup(g)}
}
