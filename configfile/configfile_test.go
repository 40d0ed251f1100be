package configfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
}

// mountebank's documented example (docs/cli/configFiles): includes,
// stringify with and without data, an injected function kept in a file.
func TestTheDocumentedExample(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"templates/imposters.ejs": "{\n  \"imposters\": [\n    <% include originServer.ejs %>,\n    <% include proxyServer.ejs %>\n  ]\n}\n",
		"templates/originServer.ejs": `{
  "port": 5555,
  "protocol": "http",
  "name": "origin",
  "stubs": [
    {
      "predicates": [{ "contains": { "headers": { "Content-Type": "xml" } } }],
      "responses": [{ "is": { "body": "<%- stringify('originXMLResponse.ejs', { value: 'first' }) %>" }}]
    },
    {
      "responses": [{ "inject": "<%- stringify('originServerResponse.ejs') %>" }]
    }
  ]
}`,
		"templates/originXMLResponse.ejs":    "<rootNode>\n  <childNode><%= data.value %></childNode>\n</rootNode>\n",
		"templates/originServerResponse.ejs": "(request, state, logger) => {\n    state.requests = (state.requests || 0) + 1;\n    return { body: JSON.stringify({ count: state.requests }) };\n}\n",
		"templates/proxyServer.ejs":          `{ "port": 4546, "protocol": "http", "name": "proxy", "stubs": [{ "responses": [{ "inject": "<%- stringify('counter.ejs') %>" }] }] }`,
		"templates/counter.ejs":              "function (request, state) {\n    return { body: \"count \" + (state.n || 0) };\n}",
	})
	body, err := Load(filepath.Join(dir, "templates/imposters.ejs"), false)
	require.NoError(t, err)
	var got struct {
		Imposters []map[string]any `json:"imposters"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got.Imposters, 2)
	assert.Equal(t, "origin", got.Imposters[0]["name"])
	stubs := got.Imposters[0]["stubs"].([]any)
	is := stubs[0].(map[string]any)["responses"].([]any)[0].(map[string]any)["is"].(map[string]any)
	assert.Equal(t, "<rootNode>\n  <childNode>first</childNode>\n</rootNode>", is["body"])
	inject := stubs[1].(map[string]any)["responses"].([]any)[0].(map[string]any)["inject"].(string)
	assert.True(t, strings.HasPrefix(inject, "(request, state, logger) => {\n"), inject)
	assert.Equal(t, "proxy", got.Imposters[1]["name"])
}

func TestForms(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"one.json":  `{"protocol": "http", "port": 4545}`,
		"loop.ejs":  `{"imposters": [<% for (var i = 0; i < 3; i++) { %><%- i ? ',' : '' %>{"protocol": "http", "port": <%= 4000 + i %>}<% } %>]}<%# a comment %>`,
		"raw.json":  `{"imposters": [{"protocol": "http", "port": 1, "name": "<%= not rendered %>"}]}`,
		"bad.ejs":   `{"imposters": [`,
		"self.ejs":  `<% include self.ejs %>`,
		"throw.ejs": `<% throw new Error("no") %>`,
	})
	body, err := Load(filepath.Join(dir, "one.json"), false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"imposters": [{"protocol": "http", "port": 4545}]}`, string(body), "one imposter, the outer array left off")
	body, err = Load(filepath.Join(dir, "loop.ejs"), false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"imposters": [{"protocol": "http", "port": 4000}, {"protocol": "http", "port": 4001}, {"protocol": "http", "port": 4002}]}`, string(body))
	body, err = Load(filepath.Join(dir, "raw.json"), true)
	require.NoError(t, err)
	assert.Contains(t, string(body), `<%= not rendered %>`, "-noParse")

	_, err = Load(filepath.Join(dir, "bad.ejs"), false)
	assert.ErrorContains(t, err, "is not JSON after rendering")
	_, err = Load(filepath.Join(dir, "self.ejs"), false)
	assert.ErrorContains(t, err, "more than 32 deep")
	_, err = Load(filepath.Join(dir, "throw.ejs"), false)
	assert.ErrorContains(t, err, "no")
	_, err = Load(filepath.Join(dir, "missing.ejs"), false)
	assert.Error(t, err)
}
