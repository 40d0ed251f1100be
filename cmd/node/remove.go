package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
// of exactly that removal from the membership at index I (made now, good
// once, for 5 minutes: transport.AttestValidity, clocks allowed to
// disagree by a minute either way, and only while the membership is at
// I), in the X-Fenceline-Attestation header of
// DELETE /_cluster/members/n3?index=I. It attests at -index (0 unless
// given) and again at the index a member answers with (409 stale), as
// `node resize` does with epochs. With -print it only prints the
// attestation, for another client, and needs -index (the status's
// m_idx):
//
//	curl -X DELETE -H "X-Fenceline-Attestation: $(node remove -print -index 7 -control-key-file control.key n3)" \
//	    'http://127.0.0.1:2525/_cluster/members/n3?index=7'
//
// Ask a member that stays: its 200 means it has applied the removal, and
// only then may the removed member be stopped (in a group of two, the
// member that stays may need the removed one's vote to learn that the
// removal committed; stopped sooner, it strands the survivor).
//
// `node resize` sets how many groups a fleet's partitions are spread over
// (README, "Resizing a fleet"), the same way:
//
//	node resize -control-key-file control.key -via 127.0.0.1:8001 1
//
// calls PUT /_cluster/fleet/target at -via with {"groups": 1, "epoch": E}
// and the control key's attestation of exactly that resize of the
// directory at epoch E. A resize is written only over the directory it
// was attested against, so an attestation captured and sent again once
// the fleet has changed changes nothing, on any member. The command
// first attests at -epoch (0 unless given); a member whose directory is
// at a later epoch answers 409 with it, and the command attests again at
// that epoch (one that has not caught up answers 503, and is asked
// again), up to five times in all. With
// -print, give -epoch (the status's fleet.directory.epoch). Its 200 means
// the target is committed; the control group's leader then moves the
// partitions, a batch at a time, which GET /_cluster/status shows
// (fleet.moving, fleet.misplaced).
//
// Without -control-key-file either reads <data-dir>/control.key (never
// generating one). Exit status: 0 done (or printed), 1 the member refused
// or could not be reached, 2 a mistake in the command.
//
// main.go's run dispatches to them (see runAdmin).

// adminTimeout bounds an operator's call.
const adminTimeout = 15 * time.Second

// adminCall is an operator's act that needs the control key's
// attestation: `node remove` and `node resize`.
type adminCall struct {
	cmd   string // the subcommand
	usage string // its arguments, for the usage line
	act   string // transport.Act*
	// fields reads the act's fields from the positional arguments.
	fields func(args []string) ([]string, error)
	// request is the call for those fields: method, path, JSON body (nil
	// for none).
	request func(fields []string) (method, path string, body []byte)
	// version names what the act is attested against, the last of its
	// fields: "epoch" (a resize: the directory's) or "index" (a removal:
	// the membership's). A member that holds a later one refuses the act
	// as stale and answers with it (staleRefusal).
	version string
}

var removeCall = adminCall{cmd: "remove", usage: "NAME", act: transport.ActRemove,
	fields: func(args []string) ([]string, error) {
		if len(args) != 1 || args[0] == "" {
			return nil, errors.New("name exactly one member to remove")
		}
		return args, nil
	},
	request: func(f []string) (string, string, []byte) {
		return http.MethodDelete, "/_cluster/members/" + url.PathEscape(f[0]) + "?index=" + f[1], nil
	},
	version: "index"}

var resizeCall = adminCall{cmd: "resize", usage: "GROUPS", act: transport.ActResize,
	fields: func(args []string) ([]string, error) {
		if len(args) != 1 {
			return nil, errors.New("give the number of groups, once")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is no number of groups (a power of two from 1 to the fleet's groups)", args[0])
		}
		return []string{strconv.Itoa(n)}, nil
	},
	request: func(f []string) (string, string, []byte) {
		return http.MethodPut, "/_cluster/fleet/target", []byte(`{"groups":` + f[0] + `,"epoch":` + f[1] + `}`)
	},
	version: "epoch"}

// staleRounds bounds how often an admin call attests again at the
// version a member answered with, while the cluster changes under it.
const staleRounds = 5

// runAdmin is `node remove ARGS` or `node resize ARGS`; run calls it when
// its first argument names one.
func runAdmin(c adminCall, args []string, stdout, stderr io.Writer) int {
	name := "node " + c.cmd
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var keyFile, dataDir, via string
	var printOnly bool
	var version uint64
	fs.StringVar(&keyFile, "control-key-file", "", "the cluster's control key (32 bytes, raw or 64 hex digits); default: <data-dir>/control.key")
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "where to find control.key without -control-key-file")
	fs.StringVar(&via, "via", defaultHTTP, "HTTP address of any member")
	fs.BoolVar(&printOnly, "print", false, "print the attestation (for the X-Fenceline-Attestation header) instead of calling the member")
	switch c.version {
	case "epoch":
		fs.Uint64Var(&version, "epoch", 0, "the directory epoch to attest against (the status's fleet.directory.epoch); without it the member answers with its own, and the command attests again")
	case "index":
		fs.Uint64Var(&version, "index", 0, "the membership index to attest against (the status's m_idx); without it the member answers with its own, and the command attests again")
	}
	usage := func() {
		fmt.Fprintf(stderr, "usage: %s [-control-key-file F | -data-dir D] [-via ADDR | -print] %s\n", name, c.usage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	fields, err := c.fields(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if keyFile == "" {
		keyFile = filepath.Join(dataDir, "control.key")
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "%s: control key: %v\n", name, err)
		return 2
	}
	control, err := parseKey(keyFile, b)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if printOnly {
		if c.version != "" && version == 0 {
			fmt.Fprintf(stderr, "%s: -print needs -%s (read it from the status)\n", name, c.version)
			return 2
		}
		att, err := attest(transport.Keys{Control: control}, c.act, c.withVersion(fields, version)...)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		fmt.Fprintln(stdout, att.String())
		return 0
	}
	code, answer, err := askAdmin(c, control, via, fields, version)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if code != http.StatusOK {
		fmt.Fprintf(stderr, "%s: %s answered %d: %s\n", name, via, code, answer)
		return 1
	}
	fmt.Fprintln(stdout, answer)
	return 0
}

// withVersion is fields with the version the act is attested against
// appended, for an act that names one.
func (c adminCall) withVersion(fields []string, version uint64) []string {
	if c.version == "" {
		return fields
	}
	return append(slices.Clip(fields), strconv.FormatUint(version, 10))
}

// askAdmin asks the member at via for the act with fields, attested at
// version (for an act that names one): attested at an older version than
// the member's, again at the member's; at a newer one than it has seen,
// again once it has caught up; up to staleRounds in all. It returns the
// last answer.
func askAdmin(c adminCall, control []byte, via string, fields []string, version uint64) (int, string, error) {
	for round := 1; ; round++ {
		f := c.withVersion(fields, version)
		att, err := attest(transport.Keys{Control: control}, c.act, f...)
		if err != nil {
			return 0, "", err
		}
		method, path, body := c.request(f)
		code, answer, err := askAttested(via, method, path, body, att)
		if err != nil || code == http.StatusOK || c.version == "" || round == staleRounds {
			return code, answer, err
		}
		var r staleRefusal
		if json.Unmarshal([]byte(answer), &r) != nil {
			return code, answer, nil
		}
		now := r.Epoch
		if c.version == "index" {
			now = r.Index
		}
		switch {
		case code == http.StatusConflict && r.Reason == "stale" && now > version:
			version = now
		case code == http.StatusServiceUnavailable && r.Reason == "behind":
			time.Sleep(200 * time.Millisecond)
		default:
			return code, answer, nil
		}
	}
}

// askAttested calls method path at via with the attestation and body.
func askAttested(via, method, path string, body []byte, att transport.Attestation) (int, string, error) {
	target := via
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	target = strings.TrimSuffix(target, "/") + path
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set(attestationHeader, att.String())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
