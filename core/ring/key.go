package ring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A flow's key on the ring is its flow id scoped by a namespace prefix, so
// that two imposters which see the same flow id (say, the same X-Flow-Id
// header value) do not share state unless they opt into it:
//
//	i<port>:<id>    imposter scope, the default
//	t<tenant>:<id>  tenant scope
//	f:<id>          fleet scope, one namespace for every imposter
//	s<port>:<stub>  a stub's response cycle, shared by the cluster
//	                (placed under ClassSequence, the others ClassFlow)
//
// The scoped key is what Ring.Owner hashes, so one owner holds every entry of
// a flow. The leading letters differ and the port is plain decimal, so no two
// scopes can produce the same key; a tenant name must not contain ':' for
// the same reason (see ValidateTenant).

// ImposterKey scopes flow id to the imposter listening on port: i<port>:<id>.
func ImposterKey(port uint16, id string) string {
	return "i" + strconv.FormatUint(uint64(port), 10) + ":" + id
}

// SequenceKey names the response cycle of the stub called stub (an id
// the stub keeps across edits) of the imposter on port: s<port>:<stub>.
func SequenceKey(port uint16, stub string) string {
	return "s" + strconv.FormatUint(uint64(port), 10) + ":" + stub
}

// ClassOf is the ring class a key of the flow store is placed under: a
// response cycle's under ClassSequence, every flow scope under ClassFlow.
func ClassOf(key string) Class {
	if len(key) > 0 && key[0] == 's' {
		return ClassSequence
	}
	return ClassFlow
}

// FleetKey puts flow id in the fleet-wide namespace: f:<id>.
func FleetKey(id string) string { return "f:" + id }

// TenantKey scopes flow id to a tenant: t<tenant>:<id>. The tenant name must
// have passed ValidateTenant when the configuration was loaded; TenantKey
// panics on one that would not, because such a name makes two different
// (tenant, id) pairs share a key ("a:b"+"c" and "a"+"b:c"), and by the time a
// request builds a key that is a bug, not bad input.
func TenantKey(tenant, id string) string {
	if err := ValidateTenant(tenant); err != nil {
		panic(err)
	}
	return "t" + tenant + ":" + id
}

// ErrBadTenant is wrapped by ValidateTenant's errors.
var ErrBadTenant = errors.New("ring: bad tenant name")

// ValidateTenant checks that tenant can scope flow keys: non-empty and free
// of ':', the separator between tenant and flow id.
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return fmt.Errorf("%w: empty", ErrBadTenant)
	}
	if strings.Contains(tenant, ":") {
		return fmt.Errorf("%w: %q contains ':', which separates the tenant from the flow id", ErrBadTenant, tenant)
	}
	return nil
}

// FlowIDSource says where an imposter takes a request's flow id from: its
// own port (every request shares one flow) or a request header (each
// distinct header value is its own flow). The zero value is the port.
// Sources compare with ==; header names are stored canonicalized, so
// "header:x-flow-id" and "header:X-FLOW-ID" are the same source.
type FlowIDSource struct {
	header string // canonical header name; "" means the imposter port
}

// The spellings ParseFlowIDSource accepts.
const (
	sourcePort         = "imposter_port"
	sourceHeaderPrefix = "header:"
)

// ErrBadFlowIDSource is wrapped by ParseFlowIDSource's errors.
var ErrBadFlowIDSource = errors.New("ring: bad flow id source")

// ParseFlowIDSource reads an imposter's flowIdSource setting. The forms are
// "imposter_port" (also the empty string, the default) and "header:<Name>",
// where Name is a non-empty HTTP header name (an RFC 9110 token), matched
// without regard to case. The spelling is otherwise exact: no surrounding
// space, and the words are lower case. A setting that fits no form is an
// error that quotes it and lists the valid forms, so an operator can fix the
// configuration from the message alone.
func ParseFlowIDSource(s string) (FlowIDSource, error) {
	if s == "" || s == sourcePort {
		return FlowIDSource{}, nil
	}
	name, ok := strings.CutPrefix(s, sourceHeaderPrefix)
	if !ok {
		return FlowIDSource{}, fmt.Errorf(`%w %q: want "imposter_port" (the default, also "") or "header:<Name>"`, ErrBadFlowIDSource, s)
	}
	if name == "" {
		return FlowIDSource{}, fmt.Errorf(`%w %q: the header name is empty; want "header:<Name>", e.g. "header:X-Flow-Id", or "imposter_port"`, ErrBadFlowIDSource, s)
	}
	for i, r := range name {
		if r >= 0x80 || !isTokenByte(byte(r)) {
			return FlowIDSource{}, fmt.Errorf(`%w %q: %q at byte %d of the header name is not allowed in an HTTP header name (letters, digits and %s only); want "header:<Name>" or "imposter_port"`,
				ErrBadFlowIDSource, s, r, i, tokenPunct)
		}
	}
	return FlowIDSource{header: canonicalHeader(name)}, nil
}

// HeaderSource returns the source that reads the named header. It panics on
// a name ParseFlowIDSource would reject; use that for names from
// configuration.
func HeaderSource(name string) FlowIDSource {
	src, err := ParseFlowIDSource(sourceHeaderPrefix + name)
	if err != nil || src.header == "" {
		panic(fmt.Sprintf("ring: HeaderSource(%q): not a header name", name))
	}
	return src
}

// Header returns the canonical header name the source reads, and false for
// the port source.
func (s FlowIDSource) Header() (name string, ok bool) { return s.header, s.header != "" }

// String returns the setting in the form ParseFlowIDSource reads back.
func (s FlowIDSource) String() string {
	if s.header == "" {
		return sourcePort
	}
	return sourceHeaderPrefix + s.header
}

// FlowID resolves a request's flow id (not yet scoped; see ImposterKey).
// The port source gives the port in decimal. The header source asks header
// for the value of its header and falls back to the port, exactly like the
// port source, when the value is empty; an absent header and an empty one
// are the same case, because clients that send "X-Flow-Id:" with nothing
// after it did not name a flow, and giving them one shared "" flow apart from
// the port's would be a surprise. header receives the canonical name (e.g.
// "X-Flow-Id") and must find the header whatever its case on the wire;
// net/http's Header.Get does. header is not called for the port source and
// may be nil there.
func (s FlowIDSource) FlowID(port uint16, header func(name string) string) string {
	if s.header != "" {
		if v := header(s.header); v != "" {
			return v
		}
	}
	return strconv.FormatUint(uint64(port), 10)
}

// tokenPunct is the punctuation RFC 9110 allows in a token.
const tokenPunct = "!#$%&'*+-.^_`|~"

// isTokenByte reports whether c may appear in an RFC 9110 token (tchar).
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte(tokenPunct, c) >= 0
}

// canonicalHeader puts a valid header name in the canonical form net/http
// uses for its map keys: upper case at the start and after each '-', lower
// case elsewhere. It is written out here because core/ may not import net
// packages.
func canonicalHeader(name string) string {
	b := []byte(name)
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
	return string(b)
}
