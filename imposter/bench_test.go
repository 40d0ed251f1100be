package imposter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Workloads are the imposter benchmark's stub sets (scripts/imposter-bench
// drives the same four over HTTP against mountebank): the request each
// sends, and the body it must get.
var workloads = []struct {
	name     string
	stubs    func() string
	req      *Request
	wantBody string
}{
	{"a-static", func() string { return `[{"responses":[{"is":{"body":"hello"}}]}]` },
		req("GET", "/", "", ""), "hello"},
	{"b-100-equals", func() string {
		var b []string
		for i := range 100 {
			b = append(b, fmt.Sprintf(`{"predicates":[{"equals":{"path":"/stub/%d"}}],"responses":[{"is":{"body":"stub %d"}}]}`, i, i))
		}
		return "[" + strings.Join(b, ",") + "]"
	}, req("GET", "/stub/99", "", ""), "stub 99"},
	{"c-jsonpath", func() string {
		return `[{"predicates":[{"equals":{"body":"gold"},"jsonpath":{"selector":"$.customer.tier"}}],"responses":[{"is":{"body":"gold"}}]}]`
	}, req("POST", "/orders", "", `{"customer": {"id": 42, "tier": "gold"}, "items": [1, 2, 3]}`), "gold"},
	{"d-1000-matches", func() string {
		var b []string
		for i := range 1000 {
			b = append(b, fmt.Sprintf(`{"predicates":[{"matches":{"path":"^/items/%d/\\d+$"}}],"responses":[{"is":{"body":"item %d"}}]}`, i, i))
		}
		return "[" + strings.Join(b, ",") + "]"
	}, req("GET", "/items/999/42", "", ""), "item 999"},
}

// BenchmarkRespond is the engine alone on each workload: matching the
// stubs in order and producing the response, per request.
func BenchmarkRespond(b *testing.B) {
	for _, w := range workloads {
		imp, err := New(mustParse(b, `{"protocol":"http","stubs":`+w.stubs()+`}`).(*Object), 4545)
		require.NoError(b, err)
		out, _, err := imp.Respond(w.req)
		require.NoError(b, err)
		require.Equal(b, w.wantBody, string(out.Body))
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = imp.Respond(w.req)
			}
		})
	}
}
