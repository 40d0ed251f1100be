// Command flowload measures a running fenceline cluster through its HTTP
// API: flow set and strong get operations per second and their latency
// percentiles with many concurrent clients, through each flow's owner and
// through a node that is not its owner, a mix of the two (one write in
// five), and the same write forced through a raft proposal (the replicated
// KV), for the ratio.
//
//	go run ./cmd/flowload -nodes 127.0.0.1:2525,127.0.0.2:2525,127.0.0.3:2525
//
// Each line it prints is one measurement:
//
//	set owner clients=64 ops=... ops/s=... p50=... p99=... errors=...
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	nodes    []string
	clients  int
	duration time.Duration
	flows    int
	port     int
	only     string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flowload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "127.0.0.1:2525,127.0.0.2:2525,127.0.0.3:2525", "the cluster's HTTP addresses, comma-separated")
	var c config
	fs.IntVar(&c.clients, "clients", 64, "concurrent clients")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "how long each measurement runs")
	fs.IntVar(&c.flows, "flows", 512, "flows the clients spread over")
	fs.IntVar(&c.port, "port", 4545, "the imposter port the flows belong to")
	fs.StringVar(&c.only, "only", "", "run only the measurements whose name contains this (\"set owner\", \"get\", ...)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	c.nodes = strings.Split(*nodes, ",")
	if len(c.nodes) < 2 || c.clients < 1 || c.flows < 1 || c.duration <= 0 {
		fmt.Fprintln(stderr, "flowload: need at least two -nodes, and positive -clients, -flows and -duration")
		return 2
	}
	res, err := measure(c, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "flowload:", err)
		return 1
	}
	if c.only == "" {
		fmt.Fprintf(stdout, "owner path / raft path (writes): %.1fx\n", res["set owner"].rate()/res["put raft"].rate())
		fmt.Fprintf(stdout, "of the ceiling (a trivial HTTP server on this machine): set via owner %.0f%%, get via owner %.0f%%\n",
			100*res["set owner"].rate()/res["ceiling"].rate(), 100*res["get owner"].rate()/res["ceiling"].rate())
	}
	return 0
}

// result is one measurement.
type result struct {
	ops, errors int
	elapsed     time.Duration
	lat         []time.Duration
}

func (r result) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, DisableCompression: true},
}

// call makes one request and reports whether it succeeded and the flow's
// owner header.
func call(method, url, body string) (ok bool, owner string, err error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return false, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound, resp.Header.Get("Fenceline-Owner"), nil
}

// measure warms every flow up (written once, so its owner has adopted it,
// and its owner learnt), then runs the measurements one after another.
func measure(c config, out io.Writer) (map[string]result, error) {
	ids, err := nodeIDs(c.nodes)
	if err != nil {
		return nil, err
	}
	flowURL := func(node string, f int) string {
		return fmt.Sprintf("http://%s/admin/imposters/%d/flow-state/load-%d/k", node, c.port, f)
	}
	// Warm up every flow at once: a flow's first write waits for its
	// owner to adopt it (AdoptWait, a second, for a flow nobody served).
	owners := make([]int, c.flows) // index into c.nodes
	errs := make(chan error, c.flows)
	sem := make(chan struct{}, c.clients)
	deadline := time.Now().Add(60 * time.Second)
	for f := range c.flows {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			for {
				ok, owner, _ := call("PUT", flowURL(c.nodes[f%len(c.nodes)], f), `{"value": 0}`)
				if ok {
					if owners[f] = slices.Index(ids, owner); owners[f] < 0 {
						errs <- fmt.Errorf("flow %d: owner %q is none of the nodes %v", f, owner, ids)
						return
					}
					errs <- nil
					return
				}
				if time.Now().After(deadline) {
					errs <- errors.New("the cluster did not serve every flow within 60s of warming up")
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	for range c.flows {
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	// The ceiling: the same clients against a server that answers every
	// request at once with a short JSON body, on this machine.
	ln, err := net.Listen("tcp", "127.0.0.9:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}))
	}()
	ceiling := "http://" + ln.Addr().String() + "/"
	res := map[string]result{}
	for _, m := range []struct {
		name string
		req  func(r *rand.Rand) (method, url, body string)
	}{
		{"set owner", func(r *rand.Rand) (string, string, string) {
			f := r.IntN(c.flows)
			return "PUT", flowURL(c.nodes[owners[f]], f), `{"value": 1}`
		}},
		{"set other", func(r *rand.Rand) (string, string, string) {
			f := r.IntN(c.flows)
			return "PUT", flowURL(c.nodes[(owners[f]+1+r.IntN(len(c.nodes)-1))%len(c.nodes)], f), `{"value": 1}`
		}},
		{"get owner", func(r *rand.Rand) (string, string, string) {
			f := r.IntN(c.flows)
			return "GET", flowURL(c.nodes[owners[f]], f), ""
		}},
		{"get other", func(r *rand.Rand) (string, string, string) {
			f := r.IntN(c.flows)
			return "GET", flowURL(c.nodes[(owners[f]+1+r.IntN(len(c.nodes)-1))%len(c.nodes)], f), ""
		}},
		// A stateful imposter reads its flow's state on every request and
		// writes it on a transition: here one request in five is one.
		{"mix owner", func(r *rand.Rand) (string, string, string) {
			f := r.IntN(c.flows)
			if r.IntN(5) == 0 {
				return "PUT", flowURL(c.nodes[owners[f]], f), `{"value": 1}`
			}
			return "GET", flowURL(c.nodes[owners[f]], f), ""
		}},
		{"put raft", func(r *rand.Rand) (string, string, string) {
			return "PUT", fmt.Sprintf("http://%s/_cluster/kv/load-%d", c.nodes[r.IntN(len(c.nodes))], r.IntN(c.flows)), `{"value": 1}`
		}},
		{"ceiling", func(r *rand.Rand) (string, string, string) { return "PUT", ceiling, `{"value": 1}` }},
	} {
		if !strings.Contains(m.name, c.only) {
			continue
		}
		r := runLoad(c, m.req)
		res[m.name] = r
		fmt.Fprintf(out, "%-9s clients=%d ops=%d ops/s=%.0f p50=%v p99=%v errors=%d\n",
			m.name, c.clients, r.ops, r.rate(), r.pct(0.50).Round(10*time.Microsecond), r.pct(0.99).Round(10*time.Microsecond), r.errors)
	}
	return res, nil
}

func runLoad(c config, req func(r *rand.Rand) (string, string, string)) result {
	var mu sync.Mutex
	var total result
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(c.duration)
	for id := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(id), uint64(start.UnixNano())))
			var mine result
			for time.Now().Before(stop) {
				method, url, body := req(r)
				t0 := time.Now()
				ok, _, err := call(method, url, body)
				if ok && err == nil {
					mine.ops++
					mine.lat = append(mine.lat, time.Since(t0))
				} else {
					mine.errors++
				}
			}
			mu.Lock()
			total.ops += mine.ops
			total.errors += mine.errors
			total.lat = append(total.lat, mine.lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	slices.Sort(total.lat)
	return total
}

// nodeIDs reads each node's id from its status.
func nodeIDs(nodes []string) ([]string, error) {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		resp, err := client.Get("http://" + n + "/_cluster/status")
		if err != nil {
			return nil, err
		}
		var st struct {
			ID string `json:"id"`
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(&st); err != nil {
			return nil, fmt.Errorf("status of %s: %w", n, err)
		}
		ids[i] = st.ID
	}
	return ids, nil
}
