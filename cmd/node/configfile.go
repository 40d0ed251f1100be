package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fenceline/fenceline/configfile"
	"github.com/fenceline/fenceline/imposter"
)

// Imposters from a file, as mountebank's --configfile, mb save and mb
// replay:
//
//	node -configfile imposters.ejs [-noParse]   # load them at start
//	node save [-via ADDR] [-savefile F] [-removeProxies]
//	node replay [-via ADDR]
//
// -configfile renders the file (configfile: EJS 2 templates, includes,
// stringify) before the node starts — a file that does not render to
// imposters is a mistake in how the node was started (exit 2) — and,
// once the node serves its API, puts them in place of whatever the
// cluster holds (PUT /imposters through its own API), as mountebank
// starts with exactly the file's imposters. The cluster refusing them
// (a 400: a definition that does not compile) stops the node (exit 1).
// save writes GET /imposters?replayable=true (indented by two, as mb
// save) to a file that -configfile loads; replay puts the imposters back
// without their proxies (removeProxies), switching from record to replay.

// configLoadWait bounds how long a node retries putting its -configfile
// imposters while the cluster cannot take them (no leader yet: 503).
const configLoadWait = 60 * time.Second

// loadConfigFile puts body (PUT /imposters) through the node's own API at
// base, retrying while the answer is a 503 or no answer; nil once done.
func loadConfigFile(ctx context.Context, base, apiKey string, body []byte, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, configLoadWait)
	defer cancel()
	client := apiClient(base)
	for {
		code, text, err := apiCall(ctx, client, http.MethodPut, base+"/imposters", apiKey, body)
		switch {
		case err == nil && code/100 == 2:
			return nil
		case err == nil && code != http.StatusServiceUnavailable:
			return fmt.Errorf("the cluster refused the -configfile imposters (%d): %s", code, strings.TrimSpace(text))
		}
		log.Debug("configfile: the cluster cannot take the imposters yet; retrying", "code", code, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the -configfile imposters were not taken within %v (last: %d %v)", configLoadWait, code, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apiClient calls a node's API; a node's own TLS certificate is its
// operator's, not checked here (the call goes to loopback or the
// operator's address).
func apiClient(base string) *http.Client {
	tr := &http.Transport{}
	if strings.HasPrefix(base, "https://") {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the node's own API
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func apiCall(ctx context.Context, c *http.Client, method, url, apiKey string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set(apiKeyHeader, apiKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	return resp.StatusCode, string(b), err
}

// runSave is `node save` (save) and `node replay` (!save).
func runSave(args []string, save bool, stdout, stderr io.Writer) int {
	name := "replay"
	if save {
		name = "save"
	}
	fs := flag.NewFlagSet("node "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	via := fs.String("via", defaultHTTP, "HTTP address of any member (http:// assumed; https:// may be given)")
	keyFile := fs.String("apikey-file", "", "a file whose first line is the API key")
	apiKey := fs.String("apikey", "", "the API key (prefer -apikey-file)")
	saveFile := fs.String("savefile", "mb.json", "the file to write (save)")
	removeProxies := fs.Bool("removeProxies", false, "leave the proxies out, as GET /imposters?removeProxies=true (save)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "usage: node %s [flags]\n", name)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "node %s: %v %v\n", name, err, fs.Args())
		return 2
	}
	key, err := readAPIKey(*apiKey, *keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "node %s: %v\n", name, err)
		return 2
	}
	base := *via
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := apiClient(base)
	query := "?replayable=true"
	if *removeProxies || !save {
		query += "&removeProxies=true"
	}
	code, text, err := apiCall(ctx, client, http.MethodGet, base+"/imposters"+query, key, nil)
	if err != nil || code != http.StatusOK {
		fmt.Fprintf(stderr, "node %s: GET /imposters from %s: %d %v %s\n", name, base, code, err, strings.TrimSpace(text))
		return 1
	}
	if save {
		v, err := imposter.Parse(text)
		if err != nil {
			fmt.Fprintf(stderr, "node save: the answer is not JSON: %v\n", err)
			return 1
		}
		if err := os.WriteFile(*saveFile, imposter.Marshal(v, 2), 0o644); err != nil {
			fmt.Fprintf(stderr, "node save: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "saved to %s\n", *saveFile)
		return 0
	}
	code, out, err := apiCall(ctx, client, http.MethodPut, base+"/imposters", key, []byte(text))
	if err != nil || code/100 != 2 {
		fmt.Fprintf(stderr, "node replay: PUT /imposters to %s: %d %v %s\n", base, code, err, strings.TrimSpace(out))
		return 1
	}
	fmt.Fprintln(stdout, "replaying: the imposters are back without their proxies")
	return 0
}

// renderConfigFile reads -configfile before the node starts.
func renderConfigFile(c config) ([]byte, error) {
	if c.configFile == "" {
		return nil, nil
	}
	return configfile.Load(c.configFile, c.noParse)
}
