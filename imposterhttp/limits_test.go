package imposterhttp

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A predicate's selector that stops at its work budget passes its stub
// over (the next one answers), and the server's log says so once, under
// the imposter's name, naming the selector.
func TestSelectorBudgetOverHTTP(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"body":"x"},"xpath":{"selector":"//a[count(//a) > 0]"}}],"responses":[{"is":{"body":"selected"}}]},
		{"responses":[{"is":{"body":"next"}}]}]}`)
	a := do(t, "POST", at(port, "/"), "<r>"+strings.Repeat("<a/>", 4000)+"</r>")
	require.Equal(t, 200, a.code)
	require.Equal(t, "next", a.body)
	log := logged(t, base)
	require.Equal(t, 1, strings.Count(log, "selector stopped at its work budget"), log)
	require.Contains(t, log, fmt.Sprintf(`[http:%d] selector stopped at its work budget: xpath selector "//a[count(//a) > 0]"`, port))

	// Within the budget, it selects.
	a = do(t, "POST", at(port, "/"), "<r><a>x</a></r>")
	require.Equal(t, "selected", a.body)
}

// An imposter's regular expressions are bounded together, whether the
// imposter is created whole or its stubs are added one by one (each of
// which compiles alone): refused with a 400 in mountebank's shape, naming
// the limit, and nothing changes.
func TestRegexTotalBoundOverHTTP(t *testing.T) {
	base, _ := admin(t)
	stub := `{"predicates":[{"matches":{"body":"a{1000}"}}],"responses":[{"is":{}}]}`
	stubs := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(stub+",", n), ",") + "]" }

	a := do(t, "POST", base+"/imposters", `{"protocol":"http","stubs":`+stubs(1100)+`}`)
	require.Equal(t, http.StatusBadRequest, a.code, a.body)
	code, msg := errorOf(t, a)
	require.Equal(t, "bad data", code)
	require.Contains(t, msg, "past the limit of 1048576")

	port := create(t, base, `{"protocol":"http","stubs":`+stubs(1040)+`}`)
	imposter := fmt.Sprintf("%s/imposters/%d", base, port)
	before := do(t, "GET", imposter+"?replayable=true", "").body
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/stubs", `{"stub":{"predicates":[{"matches":{"body":"b{1000}c{1000}d{1000}e{1000}f{1000}g{1000}h{1000}i{1000}j{1000}"}}],"responses":[{"is":{}}]}}`},
		{"PUT", "/stubs", `{"stubs":` + stubs(1100) + `}`},
	} {
		a := do(t, tc.method, imposter+tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, a.code, "%s %s: %s", tc.method, tc.path, a.body)
		code, msg := errorOf(t, a)
		require.Equal(t, "bad data", code)
		require.Contains(t, msg, "past the limit of 1048576")
	}
	require.Equal(t, before, do(t, "GET", imposter+"?replayable=true", "").body)
	// One more ordinary stub is taken.
	a = do(t, "POST", imposter+"/stubs", `{"stub":{"predicates":[{"matches":{"path":"^/x/\\d+$"}}],"responses":[{"is":{}}]}}`)
	require.Equal(t, 200, a.code, a.body)
}
