package imposter

import (
	"errors"
	"regexp/syntax"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// regexInsts counts, without compiling, at least the instructions Go's
// regexp compiles a pattern to, and not many more.
func TestRegexInstsCountsTheProgram(t *testing.T) {
	for _, p := range []string{
		"", "abc", "a{1000}", "(?i)a{1000}", "[ab]{1000}", ".{0,255}", `\pL{1000}`, "(a{10}){0,100}", "(?:ab){3,7}", "x{2,}",
		`^/api/v1/customers/\d+/orders$`, `(?i)^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$`, "^(GET|POST|PUT|DELETE)$", "(a|b|c)*x+y?",
	} {
		n, err := regexInsts(p)
		require.NoError(t, err, p)
		re, err := syntax.Parse(p, syntax.Perl)
		require.NoError(t, err)
		prog, err := syntax.Compile(re.Simplify())
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, len(prog.Inst), p)
		require.LessOrEqual(t, n, len(prog.Inst)+4, p)
	}
}

// One pattern past MaxRegexInsts is refused, in a matches predicate, an
// except, and a copy behavior's regex selector; ordinary ones, and one
// repetition at Go's largest count, are far below it.
func TestRegexPatternBound(t *testing.T) {
	big := strings.Repeat("a{1000}", 11) // 11,000 instructions from 77 bytes
	for _, pred := range []string{
		`{"matches":{"body":"` + big + `"}}`,
		`{"equals":{"body":"x"},"except":"` + big + `"}`,
		`{"or":[{"equals":{"path":"/"}},{"matches":{"query":{"q":["x","` + big + `"]}}}]}`,
	} {
		_, err := CompilePredicate(mustParse(t, pred))
		var e *Error
		require.True(t, errors.As(err, &e), "%s: %v", pred, err)
		require.Equal(t, CodeBadData, e.Code)
		require.Contains(t, e.Message, "over the limit of 10000 for one regular expression", pred)
	}
	_, err := NewStub(mustParse(t, `{"responses":[{"is":{},"behaviors":[{"copy":{"from":"body","into":"${x}","using":{"method":"regex","selector":"`+big+`"}}}]}]}`))
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Contains(t, e.Message, "over the limit of 10000")
	for _, p := range []string{`^/api/v1/customers/\\d+/orders$`, `.{0,1000}`, `[a-z]{1,1000}@[a-z]{1,1000}`, `a{1000}`} {
		_, err := CompilePredicate(mustParse(t, `{"matches":{"body":"`+p+`"}}`))
		require.NoError(t, err, p)
	}
}

// An imposter's patterns are bounded together, before any is compiled:
// found by the issue 26 fuzzing pass, a 1 MB creation of many
// {"matches":{"body":"a{1000}"}} took 3.5 GB of allocations and kept 1.35
// GB. Refusing it now allocates a few MB; what is under the limit still
// compiles.
func TestRegexImposterBound(t *testing.T) {
	creation := func(stubs int, pattern string) *Object {
		var b strings.Builder
		b.WriteString(`{"protocol":"http","stubs":[`)
		for i := range stubs {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"predicates":[{"matches":{"body":"` + pattern + `"}}],"responses":[{"is":{"body":"` + strconv.Itoa(i) + `"}}]}`)
		}
		b.WriteString(`]}`)
		return mustParse(t, b.String()).(*Object)
	}
	// 30,000 stubs of a{1000}: 1.6 MB, 30 million instructions.
	c := creation(30_000, "a{1000}")
	_, alloc, err := allocated(func() (*Imposter, error) { return New(c, 4545) })
	var e *Error
	require.True(t, errors.As(err, &e), "%v", err)
	require.Equal(t, CodeBadData, e.Code)
	require.Contains(t, e.Message, "past the limit of 1048576")
	require.Less(t, alloc, uint64(16<<20), "bytes allocated refusing it")

	// So are patterns in behaviors, legacy _behaviors, not, or and except.
	c = creation(1045, "a{1000}") // 1,047,090 instructions
	stubs, _ := c.Get("stubs")
	c.Set("stubs", append(stubs.([]any), mustParse(t, `{"predicates":[{"not":{"equals":{"path":"/"},"except":"b{1000}"}}],
		"responses":[{"is":{},"_behaviors":{"copy":[{"from":"body","into":"${x}","using":{"method":"regex","selector":"c{1000}"}}]}},
		             {"is":{},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"d{1000}"}},"fromDataSource":{"csv":{"path":"x.csv","keyColumn":"k"}},"into":"${r}"}}]}]}`)))
	require.NoError(t, CheckRegexTotal(creation(1045, "a{1000}")), "1,045 × a{1000} is under the limit")
	err = CheckRegexTotal(c)
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Message, "past the limit")

	// Under it: a thousand stubs of a{1000} (1,002,000 instructions), and
	// ten thousand ordinary path patterns.
	imp, err := New(creation(1000, "a{1000}"), 4545)
	require.NoError(t, err)
	require.Equal(t, 1000, imp.Stubs())
	imp, err = New(creation(10_000, `^/api/v1/customers/\\d+/orders/[a-z0-9-]{36}$`), 4545)
	require.NoError(t, err)
	require.Equal(t, 10_000, imp.Stubs())
}
