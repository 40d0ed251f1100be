package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -configfile loads a templated set of imposters at start; save writes
// them to a file -configfile takes back; replay drops the proxies.
func TestConfigFileSaveAndReplay(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"imposters.ejs": `{"imposters": [<% include http.ejs %>, <% include proxy.ejs %>]}`,
		"http.ejs":      `{"protocol": "http", "port": 4640, "stubs": [{"responses": [{"is": {"body": "<%- stringify('body.txt') %>"}}]}]}`,
		"proxy.ejs":     `{"protocol": "http", "port": 4641, "stubs": [{"responses": [{"proxy": {"to": "http://127.0.0.6:4640"}}]}]}`,
		"body.txt":      "line one\n\"two\"\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	p := single(t, "k", "-configfile", filepath.Join(dir, "imposters.ejs"))
	require.Eventually(t, func() bool {
		code, body, _ := callAs("GET", "http://127.0.0.6:4640/", "", "")
		return code == http.StatusOK && body == "line one\n\"two\""
	}, 15*time.Second, 50*time.Millisecond, p.log())
	code, body, _ := callAs("GET", "http://127.0.0.6:4641/x", "", "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "line one\n\"two\"", body, "proxied, and recorded")

	saved := filepath.Join(dir, "saved.json")
	out, err := exec.Command(bin, "save", "-via", p.http, "-apikey", "k", "-savefile", saved).CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(saved)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"port": 4640`)
	assert.Contains(t, string(b), `"proxy": {`)

	out, err = exec.Command(bin, "replay", "-via", p.http, "-apikey", "k").CombinedOutput()
	require.NoError(t, err, string(out))
	_, body, _ = callAs("GET", "http://"+p.http+"/imposters/4641?replayable=true", "", "", apiKeyHeader, "k")
	assert.NotContains(t, body, `"proxy"`, "replay removes the proxies")
	assert.Contains(t, body, `line one`, "and keeps the recording")
	code, body, _ = callAs("GET", "http://127.0.0.6:4641/x", "", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "line one\n\"two\"", body)

	// The saved file starts a node again, as mb save's does (the node
	// holding the port is stopped first).
	p.kill()
	q := single(t, "", "-configfile", saved)
	require.Eventually(t, func() bool {
		code, body, _ := callAs("GET", "http://127.0.0.6:4640/", "", "")
		return code == http.StatusOK && body == "line one\n\"two\""
	}, 15*time.Second, 50*time.Millisecond, q.log())
}

// A file that does not render to imposters stops the node before it
// starts (2); imposters the cluster refuses stop it after (1).
func TestBadConfigFiles(t *testing.T) {
	bin := nodeBinary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.ejs")
	require.NoError(t, os.WriteFile(bad, []byte(`{"imposters": [<% include missing.ejs %>]}`), 0o644))
	cmd := exec.Command(bin, "-http", "127.0.0.6:2525", "-peer", "127.0.0.6:25525", "-data-dir", filepath.Join(dir, "d1"), "-configfile", bad)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(out))
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(out), "-configfile: ")
	assert.Contains(t, string(out), "missing.ejs")

	refused := filepath.Join(dir, "refused.json")
	require.NoError(t, os.WriteFile(refused, []byte(`{"protocol": "http", "port": 4642, "stubs": [{"responses": [{"inject": "c => ({})"}]}]}`), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err = exec.CommandContext(ctx, bin, "-http", "127.0.0.6:2525", "-peer", "127.0.0.6:25525", "-data-dir", filepath.Join(dir, "d2"), "-configfile", refused).CombinedOutput()
	require.NoError(t, ctx.Err(), "the node kept running with refused -configfile imposters")
	require.ErrorAs(t, err, &exit, string(out))
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "-allowInjection")
}
