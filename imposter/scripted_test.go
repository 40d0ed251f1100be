package imposter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A node that does not allow injection (no UseScripts) runs none of an
// imposter's JavaScript or commands it was handed (a definition written
// by a member that did): each injection point answers a clear error, and
// nothing panics.
func TestInjectionOffOnThisNode(t *testing.T) {
	for _, tc := range []struct{ name, stubs string }{
		{"inject predicate", `[{"predicates":[{"inject":"() => true"}],"responses":[{"is":{}}]}]`},
		{"inject response", `[{"responses":[{"inject":"(c) => ({})"}]}]`},
		{"decorate", `[{"responses":[{"is":{},"behaviors":[{"decorate":"(c) => {}"}]}]}]`},
		{"wait function", `[{"responses":[{"is":{},"behaviors":[{"wait":"() => 5"}]}]}]`},
		{"shellTransform", `[{"responses":[{"is":{},"behaviors":[{"shellTransform":"cat"}]}]}]`},
	} {
		imp := mustImposter(t, `{"protocol":"http","stubs":`+tc.stubs+`}`)
		_, _, err := imp.Respond(&Request{Method: "GET", Path: "/"})
		var e *Error
		require.ErrorAs(t, err, &e, tc.name)
		assert.Equal(t, CodeInvalidInjection, e.Code, tc.name)
		assert.Contains(t, e.Message, "not allowed on this node", tc.name)
	}
	// A wait given as a string of digits is a number, run with no engine;
	// it needs injection allowed all the same, as in mountebank.
	imp := mustImposter(t, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"w"},"behaviors":[{"wait":"150"},{"wait":" 25abc"}]}]}]}`)
	out, _, err := imp.Respond(&Request{Method: "GET", Path: "/"})
	require.NoError(t, err)
	assert.Equal(t, int64(175), out.Wait.Milliseconds(), "parseInt's reading: leading space, digits up to the first other character")
	assert.NotEmpty(t, imp.InjectionErrors(), "refused where injection is not allowed")
}
