package imposter

import (
	"context"
	"net/url"

	"github.com/fenceline/fenceline/script"
	"strings"
	"time"
)

// Request is an HTTP request as stubs see it, independent of net/http so
// that the simulator can make them too. Query, Headers and Form map names
// to a string, or to an array of strings for a repeated name, as
// mountebank's request object does.
type Request struct {
	RequestFrom string // "ip:port" of the client
	Method      string
	Path        string
	Query       *Object
	Headers     *Object // names as the client sent them (as far as the server keeps them)
	Body        string
	Form        *Object // nil unless the body is application/x-www-form-urlencoded
	IP          string
	Arrived     time.Time // when it arrived; recorded as ISO 8601 UTC with milliseconds
	// TCP marks a tcp imposter's request, whose fields are requestFrom,
	// data (in the imposter's mode: text, or base64) and ip.
	TCP  bool
	Data string
	// MatchData is what predicates compare data with, when it differs
	// from Data: a binary tcp request's bytes as text, as mountebank
	// decodes base64 on both sides before it compares.
	MatchData string
	// Fields, when set, is the whole request as the protocol records it
	// (an smtp imposter's message: envelopeFrom, to, subject, text...):
	// predicates read its fields and it is recorded as it is.
	Fields *Object

	// js is the engine a scripted imposter's functions run in while it
	// is matched and answered (scripted.go); scriptErr the first of them
	// that failed, which fails the request; scriptJSON the request as
	// they see it, made once.
	js         *script.Engine
	yield      func(wait func())                                       // YieldWith
	shell      func(command, request, response string) ([]byte, error) // shellTransform's runner; nil: none may run
	scriptErr  error
	scriptJSON []byte
}

// YieldWith lets the caller release its lock on the imposter while an
// injected function waits for its asynchronous answer: yield runs the
// wait it is given (unlocked), and comes back locked.
func (r *Request) YieldWith(yield func(wait func())) { r.yield = yield }

// scriptCtx is the context injected functions run with.
func (r *Request) scriptCtx() context.Context {
	if r.yield == nil {
		return context.Background()
	}
	return script.WithYield(context.Background(), r.yield)
}

// field returns a request field by predicate key; with lower-cased keys
// the key came lower-cased ("requestfrom").
func (r *Request) field(key string) (any, bool) {
	if r.Fields != nil {
		return r.Fields.Get(key)
	}
	if r.TCP {
		switch key {
		case "data":
			if r.MatchData != "" {
				return r.MatchData, true
			}
			return r.Data, true
		case "ip":
			return r.IP, true
		case "requestFrom", "requestfrom":
			return r.RequestFrom, true
		}
		return nil, false
	}
	switch key {
	case "method":
		return r.Method, true
	case "path":
		return r.Path, true
	case "query":
		return orEmpty(r.Query), true
	case "headers":
		return orEmpty(r.Headers), true
	case "body":
		return r.Body, true
	case "form":
		if r.Form == nil {
			return nil, false
		}
		return r.Form, true
	case "ip":
		return r.IP, true
	case "requestFrom", "requestfrom":
		return r.RequestFrom, true
	}
	return nil, false
}

// stringField returns the request's string fields by predicate key.
func (r *Request) stringField(key string) (string, bool) {
	if r.Fields != nil {
		v, ok := r.Fields.Get(key)
		s, isStr := v.(string)
		return s, ok && isStr
	}
	if r.TCP {
		if key == "data" {
			if r.MatchData != "" {
				return r.MatchData, true
			}
			return r.Data, true
		}
		return "", false
	}
	switch key {
	case "method":
		return r.Method, true
	case "path":
		return r.Path, true
	case "body":
		return r.Body, true
	case "ip":
		return r.IP, true
	case "requestFrom", "requestfrom":
		return r.RequestFrom, true
	}
	return "", false
}

func orEmpty(o *Object) *Object {
	if o == nil {
		return &Object{}
	}
	return o
}

// ParseQuery parses a raw query string as node's querystring.parse does:
// '+' is a space, a repeated name collects an array, a name without '='
// has the empty string, and bad escapes are kept as written.
func ParseQuery(raw string) *Object {
	o := &Object{}
	for parts := 0; raw != "" && parts < MaxQueryKeys; parts++ {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		addValue(o, unescape(k), unescape(v))
	}
	return o
}

// MaxQueryKeys bounds the pairs a query string or form body is read
// into, past which the rest is left out: node's querystring.parse reads
// at most 1,000 (its maxKeys), so mountebank does the same, and a 1 MB
// form body of distinct keys is not a million keys to match against.
const MaxQueryKeys = 1000

func unescape(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// addValue sets name, turning a repeated name into an array of its values.
func addValue(o *Object, name, value string) {
	switch cur, ok := o.Get(name); {
	case !ok:
		o.Set(name, value)
	case isArray(cur):
		o.Set(name, append(cur.([]any), value))
	default:
		o.Set(name, []any{cur, value})
	}
}

// AddHeader adds one header line to h.
func AddHeader(h *Object, name, value string) { addValue(h, name, value) }

func isArray(v any) bool { _, ok := v.([]any); return ok }

// IsForm reports whether a Content-Type names a URL-encoded form.
func IsForm(contentType string) bool {
	t, _, _ := strings.Cut(contentType, ";")
	return strings.TrimSpace(t) == "application/x-www-form-urlencoded"
}

// Value is the request as mountebank records and prints it.
func (r *Request) Value() *Object {
	if r.Fields != nil {
		o := Clone(r.Fields).(*Object)
		if !r.Arrived.IsZero() {
			o.Set("timestamp", r.Arrived.UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		return o
	}
	o := &Object{}
	if r.TCP {
		o.Set("requestFrom", r.RequestFrom) // mountebank's order
		o.Set("ip", r.IP)
		o.Set("data", r.Data)
		if !r.Arrived.IsZero() {
			o.Set("timestamp", r.Arrived.UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		return o
	}
	o.Set("requestFrom", r.RequestFrom)
	o.Set("method", r.Method)
	o.Set("path", r.Path)
	o.Set("query", Clone(orEmpty(r.Query)))
	o.Set("headers", Clone(orEmpty(r.Headers)))
	o.Set("body", r.Body)
	o.Set("ip", r.IP)
	if r.Form != nil {
		o.Set("form", Clone(r.Form))
	}
	if !r.Arrived.IsZero() {
		o.Set("timestamp", r.Arrived.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return o
}

// size is about what the request holds once recorded: its body, path,
// and headers' and query's names and values, plus a little for the rest.
func (r *Request) size() int {
	n := 256 + len(r.Body) + len(r.Data) + len(r.Path) + len(r.RequestFrom)
	if r.Fields != nil {
		n += len(Marshal(r.Fields, 0))
	}
	for _, o := range []*Object{r.Headers, r.Query} {
		if o == nil {
			continue
		}
		for i := range o.Len() {
			k, v := o.At(i)
			n += len(k) + 16
			switch t := v.(type) {
			case string:
				n += len(t)
			case []any:
				for _, x := range t {
					if str, ok := x.(string); ok {
						n += len(str)
					}
				}
			}
		}
	}
	return n
}
