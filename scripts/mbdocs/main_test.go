package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextMatchesVolatileParts(t *testing.T) {
	require.True(t, textMatches("Date: "+volatile, "Date: Wed, 02 Dec 2026"))
	require.True(t, textMatches("a"+volatile+"c"+volatile+"e", "abbbcdde"))
	require.False(t, textMatches("a"+volatile+"c", "abd"))
	require.False(t, textMatches("abc", "abcd"))
	require.True(t, textMatches("abc", "abc"))
}

// A page's answer: the changes applied, markup dropped, entities decoded,
// a volatile value inside or outside a string matching anything, and a
// partial answer needing only what it shows.
func TestPageAnswersCompare(t *testing.T) {
	page := `<testScenario name='s'>
    <step type='http'>
<code class='hidden'>GET /imposters/4545
Host: localhost: <%= port %></code>
        <assertResponse partial='true'>
<pre><code>{ "port": <strong>4545</strong>, "ts": "<volatile>2014</volatile>", "n": <volatile>12</volatile>,
  "to": "<change to='http://localhost:3001'>http://origin.com</change>", "body": "&lt;a&gt;" }</code></pre>
        </assertResponse>
    </step>
</testScenario>`
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.ejs"), []byte(page), 0o600))
	scs, err := load(dir, 2525, "/tmp/x")
	require.NoError(t, err)
	require.Len(t, scs, 1)
	st := scs[0].steps[0]
	require.True(t, st.asserted && st.partial)
	require.Equal(t, "GET /imposters/4545\nHost: localhost: 2525", st.text)

	resp := &http.Response{StatusCode: 200, Header: http.Header{}}
	good := `{"port":4545,"ts":"2026-12-02","n":3,"to":"http://localhost:3001","body":"<a>","extra":true}`
	require.Empty(t, compare(st, resp, []byte(good)))
	bad := `{"port":4546,"ts":"x","n":3,"to":"http://origin.com","body":"<a>"}`
	diffs := compare(st, resp, []byte(bad))
	require.Len(t, diffs, 2, strings.Join(diffs, "\n"))
	st.partial = false
	require.Len(t, compare(st, resp, []byte(good)), 1, "a whole answer documents every key")
}
