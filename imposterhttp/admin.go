package imposterhttp

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
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
	} {
		// mountebank's routes take a trailing slash too (express routes
		// are not strict).
		mux.HandleFunc(r.pattern, s.logged(r.h))
		mux.HandleFunc(r.pattern+"/{$}", s.logged(r.h))
	}
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
	wd, _ := os.Getwd()
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

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	opt := imposter.PrintOptions{Replayable: flag(r, "replayable"), RemoveProxies: flag(r, "removeProxies")}
	opt.List = !opt.Replayable && !opt.RemoveProxies
	opt.BaseURL = baseURL(r)
	negotiated(w)
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", s.values(s.sorted(), opt)))
}

func (s *Server) values(all []*served, opt imposter.PrintOptions) []any {
	out := []any{}
	for _, sv := range all {
		sv.mu.Lock()
		out = append(out, sv.imp.Value(opt))
		sv.mu.Unlock()
	}
	return out
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
	if errs := validate(creation); errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	sv, err := s.create(creation)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, err)
		return
	}
	s.mu.Lock()
	s.imposters[sv.imp.Port] = sv
	s.mu.Unlock()
	sv.mu.Lock()
	val := sv.imp.Value(imposter.PrintOptions{BaseURL: baseURL(r)})
	sv.mu.Unlock()
	w.Header().Set("Location", baseURL(r)+"/imposters/"+strconv.Itoa(sv.imp.Port))
	writeJSON(w, http.StatusCreated, val)
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
	// Validate every imposter before touching the running set: a bad one
	// leaves the previous imposters in place.
	var errs []error
	for _, x := range arr {
		o, isObj := x.(*imposter.Object)
		if !isObj {
			o = imposter.NewObject()
		}
		errs = append(errs, validate(o)...)
	}
	if errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	s.stopAll()
	var created []*served
	for _, x := range arr {
		sv, err := s.create(x.(*imposter.Object))
		if err != nil {
			writeErrors(w, http.StatusBadRequest, err)
			return
		}
		s.mu.Lock()
		s.imposters[sv.imp.Port] = sv
		s.mu.Unlock()
		created = append(created, sv)
	}
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", s.values(created, imposter.PrintOptions{List: true, BaseURL: baseURL(r)})))
}

func (s *Server) stopAll() []*served {
	all := s.sorted()
	s.mu.Lock()
	s.imposters = map[int]*served{}
	s.mu.Unlock()
	for _, sv := range all {
		sv.stop()
	}
	return all
}

func (s *Server) deleteAll(w http.ResponseWriter, r *http.Request) {
	// Replayable unless ?replayable=false, for backwards compatibility.
	opt := imposter.PrintOptions{Replayable: !strings.EqualFold(r.URL.Query().Get("replayable"), "false"), RemoveProxies: flag(r, "removeProxies"), BaseURL: baseURL(r)}
	json := s.values(s.sorted(), opt)
	s.stopAll()
	writeJSON(w, http.StatusOK, imposter.NewObject().Set("imposters", json))
}

// printOptions reads the query flags of a single imposter's view.
func printOptions(r *http.Request) imposter.PrintOptions {
	return imposter.PrintOptions{Replayable: flag(r, "replayable"), RemoveProxies: flag(r, "removeProxies"), BaseURL: baseURL(r)}
}

// full is the full view, with absolute links.
func full(r *http.Request) imposter.PrintOptions { return imposter.PrintOptions{BaseURL: baseURL(r)} }

// find returns the imposter on the path's port, or answers 404.
func (s *Server) find(w http.ResponseWriter, r *http.Request) (*served, bool) {
	port, err := strconv.Atoi(r.PathValue("port"))
	s.mu.Lock()
	sv := s.imposters[port]
	s.mu.Unlock()
	if err != nil || sv == nil {
		writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeNoSuchResource,
			Message: "Try POSTing to /imposters first?"})
		return nil, false
	}
	return sv, true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	sv.mu.Lock()
	val := sv.imp.Value(printOptions(r))
	sv.mu.Unlock()
	negotiated(w)
	writeJSON(w, http.StatusOK, val)
}

func (s *Server) deleteOne(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	s.mu.Lock()
	sv := s.imposters[port]
	if err == nil {
		delete(s.imposters, port)
	}
	s.mu.Unlock()
	if sv == nil {
		writeJSON(w, http.StatusOK, imposter.NewObject()) // deleting nothing is no error
		return
	}
	sv.stop()
	sv.mu.Lock()
	val := sv.imp.Value(printOptions(r))
	sv.mu.Unlock()
	writeJSON(w, http.StatusOK, val)
}

func (s *Server) resetRequests(w http.ResponseWriter, r *http.Request) {
	s.reset(w, r, (*imposter.Imposter).ResetRequests)
}

func (s *Server) deleteSavedProxyResponses(w http.ResponseWriter, r *http.Request) {
	s.reset(w, r, (*imposter.Imposter).DeleteSavedProxyResponses)
}

// reset runs one of the DELETE resets on the path's imposter and answers
// its full view (content-negotiated, as mountebank's are).
func (s *Server) reset(w http.ResponseWriter, r *http.Request, f func(*imposter.Imposter)) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	sv.mu.Lock()
	f(sv.imp)
	val := sv.imp.Value(full(r))
	sv.mu.Unlock()
	negotiated(w)
	writeJSON(w, http.StatusOK, val)
}

func (s *Server) putStubs(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
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
	var stubs []*imposter.Stub
	for _, x := range arr {
		st, err := imposter.NewStub(x)
		if err != nil {
			writeErrors(w, http.StatusBadRequest, err)
			return
		}
		stubs = append(stubs, st)
	}
	sv.mu.Lock()
	sv.imp.ReplaceStubs(stubs)
	val := sv.imp.Value(full(r))
	sv.mu.Unlock()
	writeJSON(w, http.StatusOK, val)
}

func (s *Server) postStub(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	body, _ := v.(*imposter.Object)
	sv.mu.Lock()
	defer sv.mu.Unlock()
	var errs []error
	index := sv.imp.Stubs()
	if iv, has := body.Get("index"); has {
		f, isNum := iv.(float64)
		if !isNum || f < 0 || f > float64(sv.imp.Stubs()) || f != float64(int(f)) {
			errs = append(errs, &imposter.Error{Code: imposter.CodeBadData, Message: "'index' must be between 0 and the length of the stubs array"})
		}
		index = int(f)
	}
	raw, has := body.Get("stub")
	if !has {
		errs = append(errs, &imposter.Error{Code: imposter.CodeBadData, Message: "must contain 'stub' field"})
	}
	if errs != nil {
		writeErrors(w, http.StatusBadRequest, errs...)
		return
	}
	st, err := imposter.NewStub(raw)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, err)
		return
	}
	sv.imp.InsertStub(st, index)
	writeJSON(w, http.StatusOK, sv.imp.Value(full(r)))
}

// stubIndex reads the path's stub index, answering 404 if there is none.
func stubIndex(w http.ResponseWriter, r *http.Request, imp *imposter.Imposter) (int, bool) {
	raw := r.PathValue("index")
	i, err := strconv.Atoi(raw)
	if err != nil || i < 0 || i >= imp.Stubs() || strconv.Itoa(i) != raw {
		writeErrors(w, http.StatusNotFound, &imposter.Error{Code: imposter.CodeBadData,
			Message: "'stubIndex' must be a valid integer, representing the array index position of the stub to replace"})
		return 0, false
	}
	return i, true
}

func (s *Server) getStub(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if i, ok := stubIndex(w, r, sv.imp); ok {
		writeJSON(w, http.StatusOK, sv.imp.StubValue(i, baseURL(r)))
	}
}

func (s *Server) putStub(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	v, ok := readJSON(w, r)
	if !ok {
		return
	}
	st, err := imposter.NewStub(v)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, err)
		return
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if i, ok := stubIndex(w, r, sv.imp); ok {
		sv.imp.ReplaceStub(st, i)
		writeJSON(w, http.StatusOK, sv.imp.Value(full(r)))
	}
}

func (s *Server) deleteStub(w http.ResponseWriter, r *http.Request) {
	sv, ok := s.find(w, r)
	if !ok {
		return
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if i, ok := stubIndex(w, r, sv.imp); ok {
		sv.imp.DeleteStub(i)
		writeJSON(w, http.StatusOK, sv.imp.Value(full(r)))
	}
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
