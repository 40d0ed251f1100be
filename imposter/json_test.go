package imposter

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Values print as JavaScript's JSON.stringify prints them.
func TestMarshalLikeJavaScript(t *testing.T) {
	for _, tc := range []struct{ in, compact, pretty string }{
		{`{"b":1,"a":2}`, `{"b":1,"a":2}`, "{\n  \"b\": 1,\n  \"a\": 2\n}"},
		{`{"b":1,"2":2,"10":3,"1":4,"01":5}`, `{"1":4,"2":2,"10":3,"b":1,"01":5}`, ""},
		{`{"a":1,"a":2,"b":3}`, `{"a":2,"b":3}`, ""},
		{`[1.0, 1.5, -0, 1e21, 1e-7, 123456789012345680000, 0.000001]`, `[1,1.5,0,1e+21,1e-7,123456789012345680000,0.000001]`, ""},
		{`{"s":"<&>\u2028é\u0001\"\\\n"}`, `{"s":"<&>` + "\u2028" + `é\u0001\"\\\n"}`, ""},
		{`{"e":{},"a":[]}`, `{"e":{},"a":[]}`, "{\n  \"e\": {},\n  \"a\": []\n}"},
		{`[true,false,null]`, `[true,false,null]`, "[\n  true,\n  false,\n  null\n]"},
	} {
		v, err := Parse(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.compact, string(Marshal(v, 0)), tc.in)
		if tc.pretty != "" {
			require.Equal(t, tc.pretty, string(Marshal(v, 2)), tc.in)
		}
	}
	require.Equal(t, "null", string(Marshal(math.Inf(1), 0)))
}

func TestParseRejectsWhatJSONParseRejects(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `"\x01"`, `tru`, `{"a":1} x`, `'a'`, `NaN`, `"unterminated`} {
		_, err := Parse(bad)
		require.ErrorIs(t, err, ErrSyntax, "%q", bad)
	}
	deep := ""
	for range maxDepth + 2 {
		deep += "["
	}
	_, err := Parse(deep)
	require.ErrorIs(t, err, ErrSyntax, "nesting is bounded")
}

// Parse agrees with encoding/json on every value it accepts, and
// Marshal's output parses back to the same value.
func TestParseAgreesWithEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapidValue(t, 0)
		text := string(Marshal(v, rapid.SampledFrom([]int{0, 2, 4}).Draw(t, "indent")))
		got, err := Parse(text)
		require.NoError(t, err, text)
		require.Equal(t, string(Marshal(v, 0)), string(Marshal(got, 0)))
		var std any
		require.NoError(t, json.Unmarshal([]byte(text), &std), text)
	})
}

func rapidValue(t *rapid.T, depth int) any {
	kind := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth > 3 {
		kind %= 4
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "b")
	case 2:
		return float64(rapid.Int32().Draw(t, "n"))
	case 3:
		return rapid.String().Draw(t, "s")
	case 4:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = rapidValue(t, depth+1)
		}
		return a
	default:
		o := NewObject()
		for range rapid.IntRange(0, 4).Draw(t, "keys") {
			o.Set(rapid.StringMatching(`[a-z0-9]{0,3}`).Draw(t, "k"), rapidValue(t, depth+1))
		}
		return o
	}
}
