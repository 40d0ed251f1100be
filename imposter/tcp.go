package imposter

import (
	"encoding/base64"
	"unicode/utf8"

	"github.com/fenceline/fenceline/script"
)

// This file: tcp imposters, as mountebank's. A request is what a client
// sent — each packet, or, with an endOfRequestResolver, what the
// resolver says is one request — as the string "data": UTF-8 text in
// mode text, base64 in mode binary. A response's "data" is written back
// (nothing when it is empty); predicates, behaviors, proxies (to
// tcp://host:port), recordings and cluster state work on "data" as the
// http imposter's work on its fields.

// compileTCP reads a tcp imposter's own fields.
func (imp *Imposter) compileTCP(creation *Object) error {
	imp.Mode = "text"
	if v, ok := creation.Get("mode"); ok && v != nil {
		m, _ := v.(string)
		if m != "text" && m != "binary" {
			return badData("'mode' must be one of ['text', 'binary']", nil)
		}
		imp.Mode = m
	}
	return nil
}

// EndOfRequestResolver is a tcp imposter's function deciding where a
// request ends ("" if none: each packet is one).
func (imp *Imposter) EndOfRequestResolver() string {
	v, _ := imp.header.Get("endOfRequestResolver")
	o, _ := v.(*Object)
	if o == nil {
		return ""
	}
	src, _ := o.Get("inject")
	s, _ := src.(string)
	return s
}

// EndOfRequest runs the endOfRequestResolver on the data received so
// far: whether it is a whole request. A resolver that fails, or a node
// that does not allow injection, says no, as mountebank's logs the
// failure and keeps reading; the failure goes to the log.
func (imp *Imposter) EndOfRequest(data []byte) bool {
	src := imp.EndOfRequestResolver()
	if src == "" {
		return true
	}
	js, err := imp.engine()
	if err != nil {
		if imp.log != nil {
			imp.log("endOfRequestResolver: " + err.Error())
		}
		return false
	}
	end, err := js.EndOfRequest(src, data, imp.Mode == "text")
	if err != nil {
		return false // the engine logged it
	}
	return end
}

// RequestData is raw bytes as a tcp request's or response's data.
func (imp *Imposter) RequestData(b []byte) string { return imp.encodeData(b) }

func (imp *Imposter) encodeData(b []byte) string {
	if imp.Mode == "binary" {
		return base64.StdEncoding.EncodeToString(b)
	}
	return bytesText(b)
}

// decodeData is a response's data as bytes to write.
func (imp *Imposter) decodeData(s string) []byte {
	if imp.Mode == "binary" {
		return script.DecodeBase64(s)
	}
	return []byte(s)
}

// tcpOutcome is what a tcp response writes: its data (else the default
// response's), decoded as the mode says.
func (imp *Imposter) tcpOutcome(is *Object) (Outcome, error) {
	data, ok := is.Get("data")
	if !ok || data == nil || data == "" {
		if imp.defaultResponse != nil {
			data, _ = imp.defaultResponse.Get("data")
		}
	}
	s, _ := data.(string)
	if data != nil && s == "" {
		if _, isStr := data.(string); !isStr {
			s = string(Marshal(data, 0)) // an object: written as JSON, as node's Buffer.from would fail
		}
	}
	return Outcome{Body: imp.decodeData(s)}, nil
}

// decodePredicates makes the predicates of a binary tcp imposter's
// stubs compare bytes: every string their operators expect is base64
// decoded, as mountebank decodes both sides in binary mode (the request's
// side is Request.MatchData). The stubs keep their definitions as given.
func (imp *Imposter) decodePredicates() {
	for _, st := range imp.stubs {
		if st.decoded {
			continue
		}
		st.decoded = true
		ps, _ := st.config.Get("predicates")
		list, _ := ps.([]any)
		var out []*Predicate
		for _, p := range list {
			cp, err := CompilePredicate(decodedPredicate(p))
			if err != nil {
				out = nil
				break // what was given compiled; a decoded regex may not: keep the given ones
			}
			out = append(out, cp)
		}
		if out != nil {
			st.predicates = out
		}
	}
}

// decodedPredicate is a predicate with the strings its operator expects
// base64-decoded (into text, as node's Buffer.toString does).
func decodedPredicate(v any) any {
	o, ok := v.(*Object)
	if !ok {
		return v
	}
	o = Clone(o).(*Object)
	switch op := predicateOperator(o); op {
	case "not":
		sub, _ := o.Get("not")
		o.Set("not", decodedPredicate(sub))
	case "and", "or":
		subs, _ := o.Get(op)
		list, _ := subs.([]any)
		for i, s := range list {
			list[i] = decodedPredicate(s)
		}
	case "equals", "deepEquals", "contains", "startsWith", "endsWith", "matches":
		operand, _ := o.Get(op)
		o.Set(op, mapStrings(operand, func(s string) string { return bytesText(script.DecodeBase64(s)) }))
	}
	return o
}

// mapStrings applies f to every string value (not key) of v.
func mapStrings(v any, f func(string) string) any {
	switch t := v.(type) {
	case string:
		return f(t)
	case *Object:
		for i := range t.vals {
			t.vals[i] = mapStrings(t.vals[i], f)
		}
		return t
	case []any:
		for i := range t {
			t[i] = mapStrings(t[i], f)
		}
		return t
	}
	return v
}

// bytesText is bytes as node's buf.toString() makes them: UTF-8, each
// invalid byte U+FFFD.
func bytesText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string([]rune(string(b)))
}

// MatchText is a binary tcp request's bytes as its predicates compare
// them ("" for a text imposter, whose data is compared as it is).
func (imp *Imposter) MatchText(b []byte) string {
	if imp.Mode != "binary" {
		return ""
	}
	return bytesText(b)
}
