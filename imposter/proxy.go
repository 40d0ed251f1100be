package imposter

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/proxyonce"
)

// A proxy response calls the real service (the HTTP layer does the call)
// and records what it answered as a new stub, so that the imposter can
// answer the same request itself afterwards:
//
//   - proxyOnce (the default) records a stub just before the proxy stub,
//     so the next matching request is answered from the recording;
//   - proxyAlways keeps proxying, and records after the proxy stub,
//     appending to an existing recording with the same predicates;
//   - proxyTransparent records nothing.
//
// The recorded stub's predicates come from predicateGenerators: each
// field named in matches gives a deepEquals predicate on the request's
// value for it (an object given for a field gives equals on the keys it
// names), with the generator's caseSensitive, except, jsonpath and xpath
// copied in, and the fields named by ignore left out.

// Proxy modes.
const (
	ProxyOnce        = "proxyOnce"
	ProxyAlways      = "proxyAlways"
	ProxyTransparent = "proxyTransparent"
)

type proxyConfig struct {
	to         string
	mode       string
	generators []generator
	addWait    bool
	decorate   string  // addDecorateBehavior: a decorate behavior for the recorded response
	inject     *Object // injectHeaders
	verifyTLS  bool    // VerifyTLSField
}

// VerifyTLSField is fenceline's proxy option (mountebank has none: it
// never checks an upstream's certificate) that turns off the check of an
// https upstream's certificate for this proxy: "verifyTLS": false, for a
// test double with a self-signed certificate on another machine. It is
// true when absent, and only true or false are taken. It is kept with
// the stub as given, so GET /imposters/{port} and the replayable export
// show it. An upstream on a loopback address is not checked unless the
// server's egress policy says so (imposterhttp.Egress).
const VerifyTLSField = "verifyTLS"

type generator struct {
	inject   string  // a function returning predicates; the rest is unused then
	base     *Object // the keys copied into each predicate, in order
	matches  *Object
	ignore   any
	jsonpath *JSONPath
	xpath    *XPath
}

func compileProxy(v any, r *Object) (*proxyConfig, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, badData("proxy must be an object", r)
	}
	pc := &proxyConfig{mode: ProxyOnce}
	to, _ := o.Get("to")
	pc.to, _ = to.(string)
	if pc.to == "" {
		return nil, dryRunError(CodeBadData, "Missing to")
	}
	u, err := url.Parse(pc.to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "tcp") || u.Host == "" {
		return nil, dryRunError(CodeInvalidProxy, fmt.Sprintf("Unable to connect to %s", string(Marshal(pc.to, 0))))
	}
	if u.Path != "" && u.Path != "/" {
		return nil, dryRunError(CodeBadData, fmt.Sprintf("proxy.to must not contain a path '%s'", u.Path))
	}
	if m, ok := o.Get("mode"); ok {
		switch m {
		case ProxyOnce, ProxyAlways, ProxyTransparent:
			pc.mode = m.(string)
		}
		// mountebank treats any other mode as proxyOnce.
	}
	if v, ok := o.Get("addDecorateBehavior"); ok && truthy(v) {
		if pc.decorate, ok = v.(string); !ok {
			return nil, badData("proxy.addDecorateBehavior must be a string, representing a JavaScript function", r)
		}
	}
	pc.addWait = has(o, "addWaitBehavior")
	pc.verifyTLS = true
	if v, ok := o.Get(VerifyTLSField); ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, badData("proxy."+VerifyTLSField+" must be true or false", r)
		}
		pc.verifyTLS = b
	}
	if ih, ok := o.Get("injectHeaders"); ok && ih != nil {
		if pc.inject, ok = ih.(*Object); !ok {
			return nil, badData("proxy.injectHeaders must be an object", r)
		}
	}
	if gs, ok := o.Get("predicateGenerators"); ok && gs != nil {
		list, ok := gs.([]any)
		if !ok {
			return nil, badData("proxy.predicateGenerators must be an array", r)
		}
		for _, g := range list {
			cg, err := compileGenerator(g, r)
			if err != nil {
				return nil, err
			}
			pc.generators = append(pc.generators, cg)
		}
	}
	return pc, nil
}

func compileGenerator(v any, r *Object) (generator, error) {
	o, ok := v.(*Object)
	if !ok {
		return generator{}, badData("each predicateGenerator must be an object", r)
	}
	if v, ok := o.Get("inject"); ok && truthy(v) {
		src, isStr := v.(string)
		if !isStr {
			return generator{}, badData("a predicateGenerator's inject must be a string, representing a JavaScript function", r)
		}
		return generator{inject: src}, nil // its other fields are not read, as in mountebank
	}
	if has(o, "predicateOperator") {
		return generator{}, notSupported("predicateGenerators' predicateOperator", r)
	}
	g := generator{base: NewObject()}
	m, _ := o.Get("matches")
	if g.matches, ok = m.(*Object); !ok {
		return generator{}, badData("each predicateGenerator needs a matches object", r)
	}
	g.ignore, _ = o.Get("ignore")
	for i := range o.Len() {
		k, val := o.At(i)
		if k != "matches" && k != "predicateOperator" && k != "ignore" {
			g.base.Set(k, Clone(val))
		}
	}
	if jp, ok := o.Get("jsonpath"); ok {
		sel, err := selectorOf(jp, "jsonpath", r)
		if err != nil {
			return generator{}, err
		}
		if g.jsonpath, err = compileJSONPathParam(sel, false, "jsonpath predicateGenerator", r); err != nil {
			return generator{}, err
		}
	}
	if xp, ok := o.Get("xpath"); ok {
		sel, err := selectorOf(xp, "xpath", r)
		if err != nil {
			return generator{}, err
		}
		ns, _ := xp.(*Object).Get("ns")
		if g.xpath, err = compileXPathParam(sel, ns, false, "xpath predicateGenerator", r); err != nil {
			return generator{}, err
		}
	}
	return g, nil
}

// valueOf applies the generator's selector to a request value: none
// found is "", one is itself, several an array.
func (g *generator) valueOf(v any) any {
	var found []any
	switch {
	case g.jsonpath != nil:
		doc := v
		if s, ok := v.(string); ok {
			p, err := Parse(s)
			if err != nil {
				return ""
			}
			doc = p
		}
		// A selector past its work budget finds nothing here: a proxy's
		// predicate generation has no way to fail the request.
		sel, _ := g.jsonpath.Select(toPlain(doc))
		found = anySlice(sel)
	case g.xpath != nil:
		sel, _ := g.xpath.Select(ToString(v))
		found = stringsAsAny(sel)
	default:
		return v
	}
	switch len(found) {
	case 0:
		return ""
	case 1:
		return found[0]
	}
	return found
}

// predicates generates the recorded stub's predicates for a request.
func (pc *proxyConfig) predicates(r *Request) ([]any, error) {
	out := []any{}
	reqVal := r.Value()
	for i := range pc.generators {
		g := &pc.generators[i]
		if g.inject != "" {
			more, err := generateInjected(r, g.inject)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
			continue
		}
		for _, field := range g.matches.Keys() {
			mv, _ := g.matches.Get(field)
			p := Clone(g.base).(*Object)
			actual, _ := reqVal.Get(field)
			actual = Clone(actual)
			if mv == true {
				if g.ignore != nil {
					if spec, ok := g.ignore.(*Object); ok {
						if f, ok := spec.Get(field); ok {
							actual = filterKeys(actual, f)
						}
					}
				}
				p.Set("deepEquals", NewObject().Set(field, g.valueOf(actual)))
			} else {
				p.Set("equals", NewObject().Set(field, g.buildEquals(actual, mv)))
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// buildEquals copies the request's values for the keys a nested matches
// object names.
func (g *generator) buildEquals(actual, matcher any) any {
	mo, ok := matcher.(*Object)
	if !ok {
		return g.valueOf(actual)
	}
	out := NewObject()
	ao, _ := actual.(*Object)
	for _, k := range mo.Keys() {
		sub, _ := mo.Get(k)
		av, _ := ao.Get(k)
		if avo, isObj := av.(*Object); isObj {
			out.Set(k, g.buildEquals(avo, sub))
		} else {
			out.Set(k, g.valueOf(av))
		}
	}
	return out
}

// filterKeys removes what an ignore spec names: a key, a list of them,
// or an object of nested specs.
func filterKeys(v, spec any) any {
	o, ok := v.(*Object)
	if !ok {
		return v
	}
	switch t := spec.(type) {
	case string:
		o.Delete(t)
	case []any:
		for _, k := range t {
			filterKeys(o, k)
		}
	case *Object:
		for _, k := range t.Keys() {
			sub, _ := t.Get(k)
			if inner, ok := o.Get(k); ok {
				filterKeys(inner, sub)
			}
		}
	}
	return o
}

// ProxyCall is a request the HTTP layer must send upstream; it hands the
// answer back to Proxied.
type ProxyCall struct {
	To      string // scheme://host[:port]
	Headers *Object
	// Signature is a proxyOnce call's claim key, proxyonce.KeyOf the
	// imposter's port and the request's canonical signature: concurrent
	// calls with the same one call upstream once. Empty for the other
	// modes.
	Signature string
	Mode      string

	req  *Request
	data []byte // a tcp request's data, decoded
	stub *Stub
	resp *response
	pc   *proxyConfig
	// recording is the stub a proxyOnce call recorded, or the response
	// a clustered imposter's proxyAlways call recorded, with its
	// predicates (Proxied sets it).
	recording *Object
}

// Recording is what the call recorded, for the cluster to store so that
// every node places it: a proxyOnce call's stub, as the imposter placed
// it; a clustered imposter's proxyAlways call's predicates and response,
// which no member has placed yet (AddAlwaysRecording). Nil before
// Proxied, and for proxyTransparent.
func (c *ProxyCall) Recording() *Object { return c.recording }

// ProxyStub is the place, in the imposter's definition, of the proxy
// stub that made the call (-1 if it is not in the definition): where a
// recording goes, on every node, as mountebank places it.
func (c *ProxyCall) ProxyStub() int { return c.stub.defIndex }

func (imp *Imposter) proxyCall(r *Request, st *Stub, resp *response) *ProxyCall {
	pc := resp.proxy
	c := &ProxyCall{To: strings.TrimSuffix(pc.to, "/"), Mode: pc.mode, req: r, stub: st, resp: resp, pc: pc, Headers: Clone(orEmpty(r.Headers)).(*Object)}
	if pc.inject != nil {
		for _, k := range pc.inject.Keys() {
			v, _ := pc.inject.Get(k)
			c.Headers.Set(k, Clone(v))
		}
	}
	if pc.mode == ProxyOnce {
		c.Signature = proxyonce.KeyOf(imp.Port, pc.signature(imp.scope, r))
	}
	if r.TCP {
		c.data = imp.decodeData(r.Data)
	}
	return c
}

// signature is a request's canonical proxyOnce signature: its method, path
// and query, and the predicates the stub's predicateGenerators make of it
// (so the parts they name, with their selectors applied), as JSON with
// every object's keys sorted, under the imposter's scope (its creation and
// recording generation: a recording of an earlier one is never its
// answer). Two nodes compute the same bytes for the same request,
// whatever order its query or headers came in.
func (pc *proxyConfig) signature(scope string, r *Request) []byte {
	preds, err := pc.predicates(r)
	if err != nil {
		preds = []any{err.Error()} // the call fails when the recording is made
	}
	sig := []any{r.Method, r.Path, orEmpty(r.Query), preds}
	if scope != "" {
		sig = append([]any{scope}, sig...)
	}
	return stableJSON(sig, nil)
}

// VerifyTLS reports whether an https upstream's certificate is to be
// checked (VerifyTLSField).
func (c *ProxyCall) VerifyTLS() bool { return c.pc.verifyTLS }

// Data is a tcp request's data, as bytes to send upstream.
func (c *ProxyCall) Data() []byte { return c.data }

// Body is the request body to send upstream.
func (c *ProxyCall) Body() string { return c.req.Body }

// InjectedHost reports whether injectHeaders sets Host, which then goes
// upstream instead of the target's.
func (c *ProxyCall) InjectedHost() bool {
	if c.pc.inject == nil {
		return false
	}
	_, ok := headerName(c.pc.inject, "Host")
	return ok
}

// Upstream is what the proxied service answered.
type Upstream struct {
	StatusCode int
	Headers    []Header // in the order received, names as received
	Body       []byte
	Elapsed    time.Duration
}

// binaryEncodings and binaryTypes make a proxied body binary (recorded as
// base64 with _mode binary), as mountebank decides it.
var (
	binaryEncodings = []string{"gzip", "br", "compress", "deflate"}
	binaryTypes     = []string{"audio/", "application/epub+zip", "application/gzip", "application/java-archive", "application/msword",
		"application/octet-stream", "application/pdf", "application/rtf", "application/vnd.ms-excel", "application/vnd.ms-fontobject",
		"application/vnd.ms-powerpoint", "application/vnd.visio", "application/x-shockwave-flash", "application/x-tar",
		"application/zip", "font/", "image/", "model/", "video/"}
)

// Proxied takes the upstream's answer to c: it runs the proxy response's
// behaviors on it, records it as the mode says, and returns what to
// answer the client.
func (imp *Imposter) Proxied(c *ProxyCall, up Upstream) (Outcome, error) {
	if imp.Protocol == "tcp" {
		is := NewObject().Set("data", imp.encodeData(up.Body))
		return imp.proxiedIs(c, is)
	}
	headers := NewObject()
	var encoding, ctype string
	for _, h := range up.Headers {
		for _, v := range h.Values {
			AddHeader(headers, h.Name, v)
		}
		switch strings.ToLower(h.Name) {
		case "content-encoding":
			encoding = strings.Join(h.Values, ",")
		case "content-type":
			ctype = strings.Join(h.Values, ",")
		}
	}
	binary := false
	for _, e := range binaryEncodings {
		binary = binary || strings.Contains(encoding, e)
	}
	for _, t := range binaryTypes {
		binary = binary || strings.Contains(ctype, t)
	}
	is := NewObject().Set("statusCode", float64(up.StatusCode)).Set("headers", headers)
	if binary {
		is.Set("body", base64.StdEncoding.EncodeToString(up.Body)).Set("_mode", "binary")
	} else {
		var body any = string(up.Body)
		if v, err := Parse(string(up.Body)); err == nil {
			body = v
		}
		is.Set("body", body).Set("_mode", "text")
	}
	is.Set("_proxyResponseTime", float64(up.Elapsed.Milliseconds()))
	return imp.proxiedIs(c, is)
}

// proxiedIs runs the proxy response's behaviors on what upstream
// answered, records it as the proxy's mode says, and makes the outcome.
func (imp *Imposter) proxiedIs(c *ProxyCall, is *Object) (Outcome, error) {
	imp.withScript(c.req)
	var wait time.Duration
	for _, b := range c.resp.behaviors {
		d, err := b.apply(c.req, is, imp.files)
		if err != nil {
			return Outcome{}, err
		}
		wait += d
	}
	if err := imp.record(c, is); err != nil {
		return Outcome{}, err
	}
	out, err := imp.postProcess(is, c.req)
	out.Wait = wait
	return out, err
}

func (imp *Imposter) record(c *ProxyCall, is *Object) error {
	if c.pc.mode == ProxyTransparent {
		return nil
	}
	newResp := NewObject().Set("is", Clone(is))
	var behaviors []any
	if c.pc.addWait {
		ms, _ := is.Get("_proxyResponseTime")
		behaviors = append(behaviors, NewObject().Set("wait", ms))
	}
	if c.pc.decorate != "" {
		behaviors = append(behaviors, NewObject().Set("decorate", c.pc.decorate))
	}
	if behaviors != nil {
		newResp.Set("behaviors", behaviors)
	}
	preds, err := c.pc.predicates(c.req)
	if err != nil {
		return err
	}
	if c.pc.mode == ProxyOnce || imp.clustered {
		// The recording is what the cluster stores and every node
		// places, this one included, even if the stubs changed here
		// meanwhile.
		c.recording = NewObject().Set("predicates", preds).Set("responses", []any{newResp})
	}
	if c.pc.mode == ProxyAlways && imp.clustered {
		return nil // placed on every member, this one too, once stored
	}
	at := -1
	for i, st := range imp.stubs {
		if st == c.stub || (st.defIndex >= 0 && st.defIndex == c.stub.defIndex && sameConfig(st, c.stub)) {
			at = i // the proxy stub, or its twin in an imposter rebuilt since
		}
	}
	if at < 0 {
		return nil // the proxy stub was removed meanwhile: nothing to place here
	}
	switch c.pc.mode {
	case ProxyOnce:
		st, err := NewStub(c.recording)
		if err == nil {
			imp.InsertStub(st, at)
			imp.markRecorded(c.Signature)
		}
	case ProxyAlways:
		imp.placeAlways(at, preds, newResp)
	}
	return nil
}

// placeAlways places a proxyAlways response as mountebank does: appended
// to the first stub after the proxy stub (at) whose predicates equal the
// recorded ones, or as a new stub at the end.
func (imp *Imposter) placeAlways(at int, preds any, resp *Object) {
	want := string(stableJSON(preds, nil))
	for _, st := range imp.stubs[at+1:] {
		p, _ := st.config.Get("predicates")
		if p == nil {
			p = []any{}
		}
		if string(stableJSON(p, nil)) == want {
			st.addResponse(resp)
			return
		}
	}
	if st, err := NewStub(NewObject().Set("predicates", preds).Set("responses", []any{resp})); err == nil {
		imp.stubs = append(imp.stubs, st)
		imp.stubsChanged()
	}
}

// AddAlwaysRecording places a proxyAlways recording made on any member
// (ProxyCall.Recording: its predicates and one response) as the proxy
// stub at place proxyStub of the definition records: every member places
// the cluster's recordings in the order they were stored, so every
// member's stubs, and the replayable export, come out the same. A
// recording whose proxy stub is gone (the stubs changed since) is
// dropped. key names the recording, which is placed once.
func (imp *Imposter) AddAlwaysRecording(key string, proxyStub int, rec *Object) error {
	at, place, err := imp.placing(key, proxyStub)
	if !place {
		return err
	}
	preds, _ := rec.Get("predicates")
	rs, _ := rec.Get("responses")
	list, _ := rs.([]any)
	if len(list) != 1 {
		return fmt.Errorf("a proxyAlways recording holds one response, not %d", len(list))
	}
	resp, ok := list[0].(*Object)
	if !ok {
		return fmt.Errorf("a proxyAlways recording's response is no object")
	}
	if preds == nil {
		preds = []any{}
	}
	imp.placeAlways(at, preds, Clone(resp).(*Object))
	imp.markRecorded(key)
	return nil
}

// AddRecording places the proxyOnce recording of signature key, made on
// any node, as the recording node placed it: just before the proxy stub
// at place proxyStub of the definition, after the recordings already
// there. A recording of a key already placed here is not added again;
// one whose proxy stub is gone (the stubs changed since) is dropped.
func (imp *Imposter) AddRecording(key string, proxyStub int, stub *Object) error {
	at, place, err := imp.placing(key, proxyStub)
	if !place {
		return err
	}
	st, err := NewStub(stub)
	if err != nil {
		return err
	}
	imp.InsertStub(st, at)
	imp.markRecorded(key)
	return nil
}

// Placed reports whether the recording key is placed here already.
func (imp *Imposter) Placed(key string) bool { return imp.recorded[key] }

// placing finds where a recording made by the proxy stub at place
// proxyStub of the definition goes: that stub's index now. place is false
// for a recording already placed (no error) and for one whose proxy stub
// is gone (an error).
func (imp *Imposter) placing(key string, proxyStub int) (at int, place bool, err error) {
	if imp.recorded[key] {
		return 0, false, nil
	}
	at = -1
	for i, st := range imp.stubs {
		if st.defIndex == proxyStub && proxyStub >= 0 {
			at = i
		}
	}
	if at < 0 {
		return 0, false, fmt.Errorf("no stub %d in the definition", proxyStub)
	}
	return at, true, nil
}

func (imp *Imposter) markRecorded(key string) {
	if imp.recorded == nil {
		imp.recorded = map[string]bool{}
	}
	imp.recorded[key] = true
}

func sameConfig(a, b *Stub) bool { return string(Marshal(a.config, 0)) == string(Marshal(b.config, 0)) }

// addResponse appends a recorded response to the stub and its cycle.
func (st *Stub) addResponse(r *Object) {
	cr, _, err := compileResponse(r)
	if err != nil {
		return
	}
	rs, _ := st.config.Get("responses")
	list, _ := rs.([]any)
	st.config.Set("responses", append(list, r))
	st.responses = append(st.responses, cr)
	st.cycle.add(len(st.responses)-1, 1)
}

// isRecorded reports whether a response config is a proxy's recording.
func isRecorded(r any) bool {
	o, ok := r.(*Object)
	if !ok {
		return false
	}
	is, _ := o.Get("is")
	io, ok := is.(*Object)
	if !ok {
		return false
	}
	t, _ := io.Get("_proxyResponseTime")
	_, isNum := t.(float64)
	return isNum
}
