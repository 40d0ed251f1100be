package imposter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func proxyConfigOf(t testing.TB, proxy string) *proxyConfig {
	t.Helper()
	pc, err := compileProxy(mustParse(t, proxy), NewObject())
	require.NoError(t, err)
	return pc
}

// The canonical signature: a function of the method, path and query and
// of what the predicateGenerators name, not of the order things came in.
func TestSignature(t *testing.T) {
	paths := proxyConfigOf(t, `{"to":"http://u","predicateGenerators":[{"matches":{"path":true}}]}`)
	headers := proxyConfigOf(t, `{"to":"http://u","predicateGenerators":[{"matches":{"headers":{"X-Tenant":true}}}]}`)
	selected := proxyConfigOf(t, `{"to":"http://u","predicateGenerators":[{"matches":{"body":true},"jsonpath":{"selector":"$.id"}}]}`)
	base := req("GET", "/a", "x=1&y=2", "", "X-Tenant", "t1", "Accept", "*/*")
	for _, tc := range []struct {
		name string
		pc   *proxyConfig
		a, b *Request
		same bool
	}{
		{"same request", paths, base, req("GET", "/a", "x=1&y=2", "", "X-Tenant", "t1", "Accept", "*/*"), true},
		{"query in another order", paths, base, req("GET", "/a", "y=2&x=1", ""), true},
		{"headers not generated do not count", paths, base, req("GET", "/a", "x=1&y=2", "", "Accept", "text/html"), true},
		{"another path", paths, base, req("GET", "/b", "x=1&y=2", ""), false},
		{"another method", paths, base, req("POST", "/a", "x=1&y=2", ""), false},
		{"another query value", paths, base, req("GET", "/a", "x=1&y=3", ""), false},
		{"a generated header counts", headers, base, req("GET", "/a", "x=1&y=2", "", "X-Tenant", "t2"), false},
		{"a generated header, headers in another order", headers, base, req("GET", "/a", "x=1&y=2", "", "Accept", "*/*", "X-Tenant", "t1"), true},
		{"the selected part of a body counts", selected, req("POST", "/o", "", `{"id": 7, "at": 1}`), req("POST", "/o", "", `{"at": 2, "id": 7}`), true},
		{"another selected value", selected, req("POST", "/o", "", `{"id": 7}`), req("POST", "/o", "", `{"id": 8}`), false},
	} {
		a, b := string(tc.pc.signature("", tc.a)), string(tc.pc.signature("", tc.b))
		require.Equal(t, tc.same, a == b, "%s:\n%s\n%s", tc.name, a, b)
	}
	require.Equal(t, `["GET","/a",{"x":"1","y":"2"},[{"deepEquals":{"path":"/a"}}]]`, string(paths.signature("", base)))
}

// BenchmarkSignature is the canonical signature of a request whose
// generators name its path, query and one header.
func BenchmarkSignature(b *testing.B) {
	pc := proxyConfigOf(b, `{"to":"http://u","predicateGenerators":[{"matches":{"path":true,"query":true,"headers":{"X-Tenant":true}}}]}`)
	r := req("GET", "/customers/123/orders", "page=2&sort=desc&limit=50", "", "X-Tenant", "acme", "Accept", "application/json", "User-Agent", "bench")
	b.ReportAllocs()
	for b.Loop() {
		_ = pc.signature("", r)
	}
}
