package ring

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScopedKeys(t *testing.T) {
	require.Equal(t, "i8080:alice", ImposterKey(8080, "alice"))
	require.Equal(t, "i0:", ImposterKey(0, ""))
	require.Equal(t, "i65535:a:b", ImposterKey(65535, "a:b"))
	require.Equal(t, "tacme:alice", TenantKey("acme", "alice"))
	require.Equal(t, "f:alice", FleetKey("alice"))

	// The default scope keeps two imposters that see the same flow id apart.
	require.NotEqual(t, ImposterKey(8080, "alice"), ImposterKey(8081, "alice"))
}

func TestTenantNamesMustNotBlurTheSeparator(t *testing.T) {
	// Without the check, tenant "a:b" with flow "c" and tenant "a" with flow
	// "b:c" would both be "ta:b:c": two tenants sharing one flow's state.
	require.Equal(t, "t"+"a"+":"+"b:c", "t"+"a:b"+":"+"c")

	require.NoError(t, ValidateTenant("acme"))
	for _, bad := range []string{"", "a:b", ":"} {
		err := ValidateTenant(bad)
		require.ErrorIsf(t, err, ErrBadTenant, "%q", bad)
		require.Panicsf(t, func() { TenantKey(bad, "c") }, "%q", bad)
	}
	require.ErrorContains(t, ValidateTenant("a:b"), `"a:b"`)
}

func TestParseFlowIDSource(t *testing.T) {
	port := FlowIDSource{}
	for _, tc := range []struct {
		in, header, str string
	}{
		{"", "", "imposter_port"},
		{"imposter_port", "", "imposter_port"},
		{"header:X-Flow-Id", "X-Flow-Id", "header:X-Flow-Id"},
		{"header:x-flow-id", "X-Flow-Id", "header:X-Flow-Id"},
		{"header:X-FLOW-ID", "X-Flow-Id", "header:X-Flow-Id"},
		{"header:session", "Session", "header:Session"},
		{"header:x_trace.id", "X_trace.id", "header:X_trace.id"},
		{"header:--a", "--A", "header:--A"},
		{"header:!#$%&'*+-.^_`|~09azAZ", "!#$%&'*+-.^_`|~09azaz", "header:!#$%&'*+-.^_`|~09azaz"},
	} {
		src, err := ParseFlowIDSource(tc.in)
		require.NoErrorf(t, err, "%q", tc.in)
		name, ok := src.Header()
		require.Equalf(t, tc.header, name, "%q", tc.in)
		require.Equalf(t, tc.header != "", ok, "%q", tc.in)
		require.Equalf(t, tc.str, src.String(), "%q", tc.in)
		back, err := ParseFlowIDSource(src.String())
		require.NoError(t, err)
		require.Equal(t, src, back, "String must read back as the same source")
		if tc.header == "" {
			require.Equal(t, port, src)
		}
	}
	// Case in the setting does not make a different source.
	a, _ := ParseFlowIDSource("header:x-flow-id")
	b, _ := ParseFlowIDSource("header:X-Flow-ID")
	require.Equal(t, a, b)
	require.Equal(t, a, HeaderSource("X-FLOW-ID"))
}

func TestParseFlowIDSourceRejects(t *testing.T) {
	for _, tc := range []struct {
		in   string
		says string // besides the input itself and the valid forms
	}{
		{"header:", "empty"},
		{"header:X Flow", `' ' at byte 1`},
		{"header:X-Flow-Id ", `' ' at byte 9`},
		{"header:X:Flow", `':' at byte 1`},
		{"header:Flöw", `'ö' at byte 2`},
		{"header:a\x00", `'\x00' at byte 1`},
		{"Header:X-Flow-Id", ""},
		{"header X-Flow-Id", ""},
		{"imposter-port", ""},
		{"IMPOSTER_PORT", ""},
		{" imposter_port", ""},
		{"port", ""},
		{"query:id", ""},
	} {
		src, err := ParseFlowIDSource(tc.in)
		require.Errorf(t, err, "%q", tc.in)
		require.Truef(t, errors.Is(err, ErrBadFlowIDSource), "%q: %v", tc.in, err)
		require.Equal(t, FlowIDSource{}, src)
		msg := err.Error()
		require.Containsf(t, msg, fmt.Sprintf("%q", tc.in), "%q: the error must quote the bad value: %s", tc.in, msg)
		require.Containsf(t, msg, `header:<Name>`, "%q: the error must name the valid forms: %s", tc.in, msg)
		require.Containsf(t, msg, `imposter_port`, "%q: the error must name the valid forms: %s", tc.in, msg)
		require.Containsf(t, msg, tc.says, "%q", tc.in)
	}
	require.Panics(t, func() { HeaderSource("") })
	require.Panics(t, func() { HeaderSource("a b") })
}

func TestFlowIDFallsBackToThePort(t *testing.T) {
	src := HeaderSource("X-Flow-Id")
	var asked []string
	headers := func(values map[string]string) func(string) string {
		return func(name string) string {
			asked = append(asked, name)
			return values[name]
		}
	}

	require.Equal(t, "alice", src.FlowID(8080, headers(map[string]string{"X-Flow-Id": "alice"})))
	require.Equal(t, []string{"X-Flow-Id"}, asked, "the lookup gets the canonical name")
	require.Equal(t, "8080", src.FlowID(8080, headers(nil)), "absent header")
	require.Equal(t, "8080", src.FlowID(8080, headers(map[string]string{"X-Flow-Id": ""})), "empty header")
	require.Equal(t, "a:b c", src.FlowID(8080, headers(map[string]string{"X-Flow-Id": "a:b c"})), "values are taken as they are")

	// The port source never looks at headers, so a nil lookup is fine.
	require.Equal(t, "8080", FlowIDSource{}.FlowID(8080, nil))

	// Fallback and the port source land on the same flow, and so the same
	// owner.
	require.Equal(t, ImposterKey(8080, FlowIDSource{}.FlowID(8080, nil)), ImposterKey(8080, src.FlowID(8080, headers(nil))))
	require.Equal(t, "i8080:8080", ImposterKey(8080, src.FlowID(8080, headers(nil))))
}
