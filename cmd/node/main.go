// Command node is a fenceline node on real TCP and disk: the cluster core
// (raft membership and leases, the owned and fenced flow store) behind an
// HTTP API, with peers reached over the authenticated envelope.
//
// With no flags it founds a one-node cluster on loopback, generating its
// cluster keys into its data dir:
//
//	go run ./cmd/node
//	curl -s 127.0.0.1:2525/_cluster/status
//
// A second node joins through any member's HTTP address, with the same
// key files:
//
//	go run ./cmd/node -name n2 -data-dir d2 -peer 127.0.0.2:25525 -http 127.0.0.2:2525 \
//	    -join 127.0.0.1:2525 -control-key-file fenceline-data/control.key -data-key-file fenceline-data/data.key
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/imposterhttp"
	"github.com/fenceline/fenceline/realnet"
)

// The defaults. The HTTP port is mountebank's, so existing test suites
// find the node where they found mb; the peer port is far from it and
// from 4545, where mountebank's users put their imposters.
const (
	defaultHTTP    = "127.0.0.1:2525"
	defaultPeer    = "127.0.0.1:25525"
	defaultDataDir = "fenceline-data"
	defaultName    = "n1"
	// imposterWatch is how often the node looks for configuration
	// changes made through other nodes.
	imposterWatch = 100 * time.Millisecond
)

// config is what the flags say.
type config struct {
	name, dataDir, peer, advertise, http, join string
	controlKeyFile, dataKeyFile                string
	// During a key rotation: keys accepted but never sealed with.
	acceptControlKeyFile, acceptDataKeyFile string
	logFormat                               string
	route                                   imposterhttp.RouteMode
	pprof                                   bool
	shutdownGrace                           time.Duration

	// Exposing the node (access.go, README "Exposing a node").
	apiKey, apiKeyFile       string
	localOnly                bool
	ipWhitelist, origin      string
	tlsCert, tlsKey          string
	insecure                 bool
	imposterHost             string
	imposterPorts            imposterhttp.PortRange
	access                   imposterhttp.Access
	dataRoot                 string
	readTimeout, idleTimeout time.Duration
	egressAllow, egressDeny  []string
	// Injection (README "JavaScript injection").
	allowInjection  bool
	injectionBudget time.Duration
	// Imposters from a file at start (configfile.go).
	configFile string
	noParse    bool
	// A fleet of raft groups (fleet.go, README "A fleet of groups").
	fleet *realnet.FleetSpec
	// addGroup (-fleet-add): the node founds its fleet group, one added
	// to the running fleet, and asks the member at join to add it.
	addGroup bool
}

// errUsage marks a mistake in how the node was started: exit code 2.
var errUsage = errors.New("usage")

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	// A mistake gets one line (run prints it); -h gets the flags.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.name, "name", defaultName, "the node's name; its id is max(1, xxh64(name)), so keep it across restarts")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir, "where the journal, the flow store and generated keys live")
	fs.StringVar(&c.peer, "peer", defaultPeer, "address to listen on for peers, and to advertise to them")
	fs.StringVar(&c.advertise, "advertise-peer", "", "peer address to advertise, if peers reach this node elsewhere than -peer (a proxy, a NAT)")
	fs.StringVar(&c.http, "http", defaultHTTP, "address of the HTTP API")
	fs.StringVar(&c.join, "join", "", "HTTP address of a member to join through (otherwise the node founds a cluster)")
	fs.StringVar(&c.controlKeyFile, "control-key-file", "", "the control key (32 bytes, raw or 64 hex digits); default: <data-dir>/control.key, generated if absent")
	fs.StringVar(&c.dataKeyFile, "data-key-file", "", "the data key; default: <data-dir>/data.key, generated if absent")
	fs.StringVar(&c.acceptControlKeyFile, "accept-control-key-file", "", "during a key rotation: a second control key, accepted but never used to seal (README, \"Rotating the cluster's keys\")")
	fs.StringVar(&c.acceptDataKeyFile, "accept-data-key-file", "", "during a key rotation: a second data key, accepted but never used to seal")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.Func("route", "how a stateful request reaches its flow's owner: per-op (each state read and write is one call to the owner) or forward (the whole request, once) (default per-op)", func(v string) (err error) {
		c.route, err = imposterhttp.ParseRouteMode(v)
		return err
	})
	fs.BoolVar(&c.pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on the HTTP address (for measuring; off by default)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 5*time.Second, "how long SIGTERM waits for calls in flight")
	// Flags spelled as mountebank spells them keep its users' scripts.
	fs.StringVar(&c.apiKey, "apikey", "", "the API key every call to the HTTP API must send in the x-api-key header (mountebank's); prefer -apikey-file, which ps does not show")
	fs.StringVar(&c.apiKeyFile, "apikey-file", "", "a file whose first line is the API key")
	fs.BoolVar(&c.localOnly, "localOnly", false, "take connections to the HTTP API and the imposters from loopback addresses only (mountebank's)")
	fs.StringVar(&c.ipWhitelist, "ipWhitelist", "*", "pipe-delimited addresses or CIDR networks the HTTP API and the imposters take connections from; loopback always (mountebank's)")
	fs.BoolVar(&c.allowInjection, "allowInjection", false, "run the JavaScript imposters carry (inject, decorate, wait functions...) and shellTransform commands: remote code execution by design, as in mountebank; beyond loopback it needs an API key")
	fs.DurationVar(&c.injectionBudget, "injection-budget", 5*time.Second, "how long one injected function (its asynchronous answer included) or timer may run before it is stopped")
	fs.StringVar(&c.configFile, "configfile", "", "load the imposters this file defines at start, in place of the cluster's (mountebank's --configfile: an EJS template rendering to {\"imposters\": [...]})")
	fs.BoolVar(&c.noParse, "noParse", false, "take -configfile as JSON, without rendering it as a template")
	fs.StringVar(&c.origin, "origin", "", "a web origin (scheme://host:port) allowed to call the HTTP API from a browser")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve the HTTP API over TLS with this PEM certificate (with -tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the PEM private key of -tls-cert")
	fs.BoolVar(&c.insecure, "insecure", false, "serve the HTTP API beyond loopback without an API key (refused otherwise)")
	fs.StringVar(&c.imposterHost, "imposter-host", "", "host the imposters listen on (default: the HTTP API's host)")
	fs.DurationVar(&c.readTimeout, "http-read-timeout", defaultReadTimeout, "how long the HTTP API waits for a whole call, body included; a slower one is closed")
	fs.DurationVar(&c.idleTimeout, "http-idle-timeout", defaultIdleTimeout, "how long the HTTP API keeps an idle keep-alive connection")
	fs.StringVar(&c.dataRoot, "data-root", "", "the directory lookup behaviors read their CSV files under, relative paths from it (default: the directory the node started in)")
	list := func(dst *[]string) func(string) error {
		return func(v string) error {
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" {
					*dst = append(*dst, e)
				}
			}
			return nil
		}
	}
	fs.Func("egress-allow", "comma-separated upstreams proxies may reach (CIDR networks, addresses, host names, *.domain); none: any not denied", list(&c.egressAllow))
	fs.Func("egress-deny", "comma-separated upstreams proxies may not reach; added to loopback, link-local and the node's own addresses when -http is beyond loopback", list(&c.egressDeny))
	var founders string
	group := -1
	fs.StringVar(&founders, "fleet-founders", "", "run in a fleet of raft groups: each group's founder, in group order, as NAME=PEER=HTTP, comma-separated; every node of the fleet gets the same list (README, \"A fleet of groups\")")
	fs.IntVar(&group, "fleet-group", -1, "the node's group in the fleet (with -fleet-founders): a founder founds it, any other node joins it (-join a member of it); a group numbered from the founders' count on is one added to the running fleet (-fleet-add)")
	fs.BoolVar(&c.addGroup, "fleet-add", false, "found -fleet-group as a group added to the running fleet: the node founds the group's raft group alone and asks the member at -join, of any group, to add it (with the control key); the group's other nodes then join through this one")
	c.imposterPorts = imposterhttp.PortRange{Lo: 1024, Hi: 65535}
	fs.Func("imposter-ports", "ports imposters may listen on, LO-HI; ports below 1024 only when the range names them (default 1024-65535)", func(v string) (err error) {
		c.imposterPorts, err = imposterhttp.ParsePortRange(v)
		return err
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "usage: node [flags]")
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return c, err
		}
		return c, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		return c, fmt.Errorf("%w: -log-format %q: want text or json", errUsage, c.logFormat)
	}
	for flagName, addr := range map[string]string{"-peer": c.peer, "-http": c.http, "-advertise-peer": c.advertise} {
		if addr == "" && flagName == "-advertise-peer" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return c, fmt.Errorf("%w: %s %q: %v", errUsage, flagName, addr, err)
		}
	}
	if c.name == "" {
		return c, fmt.Errorf("%w: -name must not be empty", errUsage)
	}
	if c.shutdownGrace <= 0 || c.readTimeout <= 0 || c.idleTimeout <= 0 {
		return c, fmt.Errorf("%w: -shutdown-grace, -http-read-timeout and -http-idle-timeout must be positive", errUsage)
	}
	var err error
	if _, err := imposterhttp.ParseEgress(c.egressAllow, c.egressDeny); err != nil {
		return c, fmt.Errorf("%w: -egress-allow/-egress-deny: %v", errUsage, err)
	}
	if c.access, err = imposterhttp.ParseAccess(c.localOnly, c.ipWhitelist); err != nil {
		return c, fmt.Errorf("%w: -%v", errUsage, err)
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return c, fmt.Errorf("%w: -tls-cert and -tls-key go together", errUsage)
	}
	if c.apiKey, err = readAPIKey(c.apiKey, c.apiKeyFile); err != nil {
		return c, fmt.Errorf("%w: %v", errUsage, err)
	}
	httpHost, _, _ := net.SplitHostPort(c.http)
	if c.imposterHost == "" {
		c.imposterHost = httpHost
	}
	if ip := net.ParseIP(c.imposterHost); c.route == imposterhttp.RouteForward && c.imposterHost != httpHost && (ip == nil || !ip.IsUnspecified()) {
		// A forward reaches the owner's imposter at the owner's HTTP
		// host (the address its membership entry gives).
		return c, fmt.Errorf("%w: -route forward reaches imposters at the members' HTTP hosts: -imposter-host must be -http's host or every interface", errUsage)
	}
	// Secure by default: an API anyone on the network can call, without
	// a key, is what the operator asked for explicitly or not at all.
	if c.apiKey == "" && !c.insecure && !loopbackHost(c.http) {
		return c, fmt.Errorf("%w: -http %s is reachable beyond loopback and no API key is set: give -apikey-file (see README, \"Exposing a node\"), or -insecure to serve it open", errUsage, c.http)
	}
	// Injection runs whatever an API caller sends: beyond loopback only
	// for a caller who holds the key, never open (-insecure or not).
	if c.allowInjection && c.apiKey == "" && !loopbackHost(c.http) {
		return c, fmt.Errorf("%w: -allowInjection with -http %s reachable beyond loopback needs an API key (-apikey-file): injected JavaScript and shellTransform run whatever a caller of the API sends", errUsage, c.http)
	}
	if c.injectionBudget <= 0 {
		return c, fmt.Errorf("%w: -injection-budget must be positive", errUsage)
	}
	if c.fleet, err = parseFleet(founders, group, c.addGroup, c); err != nil {
		return c, fmt.Errorf("%w: %v", errUsage, err)
	}
	return c, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the node's life: 0 after a clean shutdown, 2 for a mistake in
// how it was started (one clear line on stderr), 1 for a failure after.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "remove" {
		return runAdmin(removeCall, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "resize" {
		return runAdmin(resizeCall, args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == "save" || args[0] == "replay") {
		return runSave(args[1:], args[0] == "save", stdout, stderr)
	}
	c, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	configBody, err := renderConfigFile(c)
	if err != nil {
		fmt.Fprintln(stderr, "node: -configfile:", err)
		return 2
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if c.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h)

	keys, err := loadKeys(c)
	if err != nil {
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	var tlsCfg *tls.Config
	if c.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			fmt.Fprintln(stderr, "node: -tls-cert/-tls-key:", err)
			return 2
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	// The HTTP listener first: the address it got goes into the node's
	// membership entry, where the rest of the cluster reads it (with
	// https:// when the API serves TLS).
	ln, err := net.Listen("tcp", c.http)
	if err != nil {
		fmt.Fprintf(stderr, "node: listen for HTTP on %s: %v\n", c.http, err)
		return 2
	}
	httpAddr := ln.Addr().String()
	if tlsCfg != nil {
		httpAddr = "https://" + httpAddr
	}
	// A node that ran before with this data dir lost the requests its
	// imposters recorded: reads of them say so.
	_, statErr := os.Stat(filepath.Join(c.dataDir, "raft"))
	restarted := statErr == nil
	if err := keepFleet(c, restarted); err != nil {
		_ = ln.Close()
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	nd, err := realnet.OpenNode(realnet.NodeConfig{Name: c.name, DataDir: c.dataDir, PeerAddr: c.peer, Advertise: c.advertise,
		HTTP: httpAddr, Keys: keys, Bootstrap: c.join == "" || c.addGroup, Fleet: c.fleet, Log: log})
	if err != nil {
		_ = ln.Close()
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	api := newAPI(nd, keys, c.name, ln.Addr().String(), log)
	// mountebank's API on the same address; imposters listen on
	// -imposter-host (by default the same host).
	// Imposter definitions are cluster configuration: this node serves
	// what it applied from the log, following every change (its own
	// admin calls reconcile at once; the watch catches the others').
	imposters := imposterhttp.New(c.imposterHost, log, raftConfig{nd: nd, log: log})
	defer imposters.Close()
	if c.dataRoot != "" {
		if err := imposters.UseDataRoot(c.dataRoot); err != nil {
			fmt.Fprintln(stderr, "node: -data-root:", err)
			return 2
		}
	}
	egress, err := egressPolicy(c, ln.Addr(), nd.PeerAddr())
	if err != nil {
		fmt.Fprintln(stderr, "node:", err)
		return 2
	}
	imposters.UseEgress(egress)
	if c.allowInjection {
		imposters.AllowInjection(c.injectionBudget)
		log.Warn("running with -allowInjection: imposters may run JavaScript and shell commands that API callers send (README, \"JavaScript injection\")")
	}
	imposters.UseAccess(c.access)
	imposters.UsePorts(c.imposterPorts)
	if keys.AcceptControl != nil {
		imposters.UseMemberKey(memberKey(keys.Control), memberKey(keys.AcceptControl))
	} else {
		imposters.UseMemberKey(memberKey(keys.Control))
	}
	if !loopbackHost(c.http) {
		imposters.Exposed()
	}
	imposters.UseFlows(&clusterFlows{nd: nd}, c.route)
	imposters.UseClaims(raftClaims{nd})
	cluster, err := newNodeCluster(context.Background(), nd)
	if err != nil {
		_ = ln.Close()
		_ = nd.Close()
		fmt.Fprintln(stderr, "node:", err)
		return 1
	}
	cluster.waited = api.rollout
	imposters.UseCluster(cluster)
	imposters.SetRestarted(restarted)
	imposters.Register(api.mux)
	api.imposters = imposters
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go func() {
		// The imposters the configuration holds are served once this
		// node has caught up with it; then the watch follows it.
		imposters.Start(watchCtx)
		imposters.Watch(watchCtx, imposterWatch)
	}()
	if c.pprof {
		api.servePprof()
	}
	api.guard = newGuard(c.apiKey, c.access, c.origin, log)
	limited := newLimitListener(ln, c.access, maxAdminConns, maxAdminConnsPerIP)
	api.conns = limited
	srv := &http.Server{Handler: api.guard.wrap(api), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: c.readTimeout,
		WriteTimeout: adminWriteTimeout, IdleTimeout: c.idleTimeout, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	served := make(chan error, 1)
	if c.tlsCert != "" {
		srv.TLSConfig = tlsCfg
		go func() { served <- srv.ServeTLS(limited, "", "") }()
	} else {
		go func() { served <- srv.Serve(limited) }()
	}
	log.Info("serving", "http", ln.Addr().String(), "peer", nd.PeerAddr())

	if c.addGroup {
		if err := addToFleet(context.Background(), nd, keys, c.name, nd.Advertised(), httpAddr, c.join, c.fleet.Group, log); err != nil {
			log.Error("adding the group to the fleet failed", "via", c.join, "group", c.fleet.Group, "err", err)
			_ = srv.Close()
			_ = nd.Close()
			return 1
		}
	} else if c.join != "" {
		var group *int
		if c.fleet != nil {
			group = &c.fleet.Group
		}
		if err := joinCluster(context.Background(), nd, keys, c.name, nd.Advertised(), httpAddr, c.join, group, log); err != nil {
			log.Error("join failed", "via", c.join, "err", err)
			_ = srv.Close()
			_ = nd.Close()
			return 1
		}
	}

	loaded := make(chan error, 1)
	if configBody != nil {
		base := "http://" + ln.Addr().String()
		if tlsCfg != nil {
			base = "https://" + ln.Addr().String()
		}
		go func() { loaded <- loadConfigFile(context.Background(), base, c.apiKey, configBody, log) }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	exit := 0
wait:
	for {
		select {
		case s := <-sig:
			log.Info("shutting down", "signal", s.String())
			break wait
		case err := <-served:
			log.Error("HTTP server stopped", "err", err)
			break wait
		case err := <-loaded:
			if err == nil {
				log.Info("loaded the -configfile imposters", "file", c.configFile)
				continue
			}
			log.Error("-configfile", "err", err)
			exit = 1
			break wait
		}
	}
	// Stop taking calls, let those in flight finish within the grace,
	// then close the node: the shard written and fsynced, the journal
	// closed.
	ctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if err := nd.Close(); err != nil {
		log.Error("close", "err", err)
		return 1
	}
	log.Info("stopped")
	return exit
}

// loadKeys reads the key files, or the data dir's keys, generating them
// (mode 0600) when neither file is named and the dir has none.
func loadKeys(c config) (transport.Keys, error) {
	var k transport.Keys
	var err error
	if k.Control, err = loadKey(c.controlKeyFile, c.dataDir, "control.key"); err != nil {
		return k, err
	}
	if k.Data, err = loadKey(c.dataKeyFile, c.dataDir, "data.key"); err != nil {
		return k, err
	}
	if err := loadAcceptedKeys(c.acceptControlKeyFile, c.acceptDataKeyFile, &k); err != nil {
		return k, err
	}
	return k, nil
}
