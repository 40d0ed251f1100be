package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/transport"
)

// `node remove` removes a member from the cluster, as an operator does:
//
//	node remove -control-key-file control.key -via 127.0.0.1:2525 n3
//
// asks the member at -via (any member's HTTP address; http:// is assumed,
// https:// may be given) to remove n3, with the control key's attestation
// of exactly that removal (made now, good once, for 5 minutes:
// transport.AttestValidity, clocks allowed to disagree by a minute either
// way), in the X-Fenceline-Attestation header of
// DELETE /_cluster/members/n3. With -print it only prints the attestation,
// for another client:
//
//	curl -X DELETE -H "X-Fenceline-Attestation: $(node remove -print -control-key-file control.key n3)" \
//	    http://127.0.0.1:2525/_cluster/members/n3
//
// Ask a member that stays: its 200 means it has applied the removal, and
// only then may the removed member be stopped (in a group of two, the
// member that stays may need the removed one's vote to learn that the
// removal committed; stopped sooner, it strands the survivor).
//
// Without -control-key-file it reads <data-dir>/control.key (never
// generating one). Exit status: 0 removed (or printed), 1 the member
// refused or could not be reached, 2 a mistake in the command.
//
// main.go's run dispatches to it (see runRemove).

// removeTimeout bounds the removal call.
const removeTimeout = 15 * time.Second

// runRemove is `node remove ARGS`; run calls it when its first argument
// is "remove".
func runRemove(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("node remove", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var keyFile, dataDir, via string
	var printOnly bool
	fs.StringVar(&keyFile, "control-key-file", "", "the cluster's control key (32 bytes, raw or 64 hex digits); default: <data-dir>/control.key")
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "where to find control.key without -control-key-file")
	fs.StringVar(&via, "via", defaultHTTP, "HTTP address of any member")
	fs.BoolVar(&printOnly, "print", false, "print the attestation (for the X-Fenceline-Attestation header) instead of calling the member")
	usage := func() {
		fmt.Fprintln(stderr, "usage: node remove [-control-key-file F | -data-dir D] [-via ADDR | -print] NAME")
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return 0
		}
		fmt.Fprintln(stderr, "node remove:", err)
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintln(stderr, "node remove: name exactly one member to remove")
		return 2
	}
	name := fs.Arg(0)
	if keyFile == "" {
		keyFile = filepath.Join(dataDir, "control.key")
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		fmt.Fprintln(stderr, "node remove: control key:", err)
		return 2
	}
	control, err := parseKey(keyFile, b)
	if err != nil {
		fmt.Fprintln(stderr, "node remove:", err)
		return 2
	}
	att, err := attest(transport.Keys{Control: control}, transport.ActRemove, name)
	if err != nil {
		fmt.Fprintln(stderr, "node remove:", err)
		return 2
	}
	if printOnly {
		fmt.Fprintln(stdout, att.String())
		return 0
	}
	code, answer, err := askToRemove(via, name, att)
	if err != nil {
		fmt.Fprintln(stderr, "node remove:", err)
		return 1
	}
	if code != http.StatusOK {
		fmt.Fprintf(stderr, "node remove: %s answered %d: %s\n", via, code, answer)
		return 1
	}
	fmt.Fprintln(stdout, answer)
	return 0
}

// askToRemove calls DELETE /_cluster/members/NAME at via with the
// attestation.
func askToRemove(via, name string, att transport.Attestation) (int, string, error) {
	target := via
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	target = strings.TrimSuffix(target, "/") + "/_cluster/members/" + url.PathEscape(name)
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set(attestationHeader, att.String())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
