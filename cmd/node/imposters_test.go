package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// call sends a request with an optional JSON body and returns the status
// and body; a transport error is status 0 with the error as the body.
func call(method, url, body string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// imposterView is the part of GET /imposters/{port} these tests read.
type imposterView struct {
	Port             int    `json:"port"`
	NumberOfRequests int    `json:"numberOfRequests"`
	BindError        string `json:"bindError"`
	Stubs            []any  `json:"stubs"`
}

func getImposter(t *testing.T, node string, port int) (int, imposterView) {
	t.Helper()
	code, body := call("GET", fmt.Sprintf("http://%s/imposters/%d", node, port), "")
	var v imposterView
	if code == http.StatusOK {
		require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	}
	return code, v
}

// host is a node's HTTP host: its imposters listen there.
func host(p *proc) string { h, _, _ := net.SplitHostPort(p.http); return h }

// TestImpostersAreClusterConfiguration: an imposter created, changed and
// deleted through any node is served by every node, on each node's own
// host, as soon as the admin call answers; a GET through any node shows
// the committed configuration and every node's recorded requests; the
// whole cluster's restart keeps it; a node that cannot bind the port says
// so while the others serve.
func TestImpostersAreClusterConfiguration(t *testing.T) {
	ps := cluster(t)
	code, body := call("POST", "http://"+ps[0].http+"/imposters",
		`{"protocol":"http","port":4545,"recordRequests":true,"stubs":[{"predicates":[{"equals":{"path":"/hello"}}],"responses":[{"is":{"body":"world"}}]}]}`)
	require.Equal(t, http.StatusCreated, code, body)

	hello := func(p *proc) string {
		_, b := call("GET", "http://"+host(p)+":4545/hello", "")
		return b
	}
	for _, p := range ps {
		// No read first: the creation's answer promised every member
		// serves it.
		require.Equal(t, "world", hello(p), "%s serves it", p.name)
		code, v := getImposter(t, p.http, 4545)
		require.Equal(t, http.StatusOK, code, "%s knows the imposter", p.name)
		require.Len(t, v.Stubs, 1)
	}
	for _, p := range ps {
		_, v := getImposter(t, p.http, 4545)
		require.Equal(t, 3, v.NumberOfRequests, "%s counts every member's requests", p.name)
	}

	// A stub change through n2 reaches every node before it answers; the
	// recorded requests stay (the change is in place).
	code, body = call("PUT", "http://"+ps[1].http+"/imposters/4545/stubs",
		`{"stubs":[{"responses":[{"is":{"body":"changed"}}]}]}`)
	require.Equal(t, http.StatusOK, code, body)
	for _, p := range ps {
		require.Equal(t, "changed", hello(p), "%s serves the change", p.name)
	}
	_, v := getImposter(t, ps[0].http, 4545)
	require.Equal(t, 6, v.NumberOfRequests, "the members kept their records across the change")

	// The whole cluster restarts: the configuration is in the log.
	for _, p := range ps {
		p.kill()
	}
	for _, p := range ps {
		p.start()
	}
	require.Eventually(t, func() bool {
		code, v := getImposter(t, ps[2].http, 4545)
		return code == http.StatusOK && len(v.Stubs) == 1
	}, 15*time.Second, 100*time.Millisecond, "the imposter survives the cluster's restart")
	for _, p := range ps {
		require.Eventually(t, func() bool { return hello(p) == "changed" }, 5*time.Second, 50*time.Millisecond, "%s serves it again", p.name)
	}

	// n2 cannot bind 4646 (something else holds it there): the creation
	// through n1 succeeds, n2 reports why it does not serve, the others
	// serve, and n2 takes the port once it is free.
	squatter, err := net.Listen("tcp", host(ps[1])+":4646")
	require.NoError(t, err)
	code, body = call("POST", "http://"+ps[0].http+"/imposters", `{"protocol":"http","port":4646,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	require.Equal(t, http.StatusCreated, code, body)
	_, v = getImposter(t, ps[1].http, 4646)
	require.Contains(t, v.BindError, "address already in use")
	_, metrics := call("GET", "http://"+ps[1].http+"/metrics", "")
	require.Contains(t, metrics, `fenceline_imposters{state="unbound"} 1`)
	for _, p := range []*proc{ps[0], ps[2]} {
		_, v = getImposter(t, p.http, 4646)
		require.Empty(t, v.BindError, p.name)
		_, b := call("GET", "http://"+host(p)+":4646/", "")
		require.Equal(t, "ok", b, p.name)
	}
	require.NoError(t, squatter.Close())
	require.Eventually(t, func() bool {
		_, b := call("GET", "http://"+host(ps[1])+":4646/", "")
		return b == "ok"
	}, 5*time.Second, 50*time.Millisecond, "n2 binds the port once it is free")

	// Creating a port the configuration holds is mountebank's conflict.
	code, body = call("POST", "http://"+ps[2].http+"/imposters", `{"protocol":"http","port":4545}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "Port 4545 is already in use")

	// A deletion through n3 stops the imposter everywhere.
	code, body = call("DELETE", "http://"+ps[2].http+"/imposters/4545", "")
	require.Equal(t, http.StatusOK, code, body)
	for _, p := range ps {
		code, _ := getImposter(t, p.http, 4545)
		require.Equal(t, http.StatusNotFound, code, p.name)
		c, _ := call("GET", "http://"+host(p)+":4545/hello", "")
		require.Equal(t, 0, c, "%s closed the port", p.name)
	}
}

// scenarioImposter is an order's life: pay, then ship, with a status
// that depends on the state, one flow per X-Order header.
const scenarioImposter = `{"protocol":"http","port":4545,
 "_rift":{"flowState":{"flowIdSource":"header:X-Order","durability":"sync"}},
 "stubs":[
  {"scenarioName":"order","requiredScenarioState":"Started","newScenarioState":"Paid",
   "predicates":[{"equals":{"path":"/pay"}}],"responses":[{"is":{"body":"paid"}}]},
  {"scenarioName":"order","requiredScenarioState":"Paid","newScenarioState":"Shipped",
   "predicates":[{"equals":{"path":"/ship"}}],"responses":[{"is":{"body":"shipped"}}]},
  {"scenarioName":"order","requiredScenarioState":"Paid",
   "predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"paid, not shipped"}}]},
  {"scenarioName":"order","requiredScenarioState":"Shipped",
   "predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"shipped"}}]},
  {"predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"headers":{"x-lower":"kept","X-Order-Seen":"yes"},"body":"new"}}]}]}`

// order calls the scenario imposter through a node, for an order.
func order(p *proc, id, path string) (int, string, string) {
	req, _ := http.NewRequest("GET", "http://"+host(p)+":4545"+path, nil)
	req.Header.Set("X-Order", id)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Fenceline-Unavailable")
}

// runOrder takes order id through scenarioImposter's steps, step k
// through at(k): each answer is the one a single server gives.
func runOrder(t *testing.T, id string, at func(k int) *proc) {
	t.Helper()
	steps := []struct{ path, want string }{
		{"/status", "new"}, {"/ship", ""}, {"/pay", "paid"}, {"/pay", ""},
		{"/status", "paid, not shipped"}, {"/ship", "shipped"}, {"/status", "shipped"},
	}
	for k, st := range steps {
		code, body, why := order(at(k), id, st.path)
		require.Equal(t, http.StatusOK, code, "order %s step %d %s through %s: %s %s", id, k, st.path, at(k).name, body, why)
		require.Equal(t, st.want, body, "order %s step %d %s through %s", id, k, st.path, at(k).name)
	}
}

// TestScenariosAcrossTheCluster: a scenario's state lives in its flow,
// owned by one node, so every node serves the same state, whichever way
// requests reach the owner; the admin routes read, set and reset it.
func TestScenariosAcrossTheCluster(t *testing.T) {
	for _, route := range []string{"per-op", "forward"} {
		t.Run(route, func(t *testing.T) {
			ps := clusterWith(t, nil, "-route", route)
			code, body := call("POST", "http://"+ps[0].http+"/imposters", scenarioImposter)
			require.Equal(t, http.StatusCreated, code, body)
			for _, p := range ps {
				getImposter(t, p.http, 4545) // in force on every node
			}
			// Each order's steps go through a different node each time.
			for i, id := range []string{"a", "b", "c", "d"} {
				runOrder(t, id, func(k int) *proc { return ps[(i+k)%3] })
			}
			// Through every node, so through the owner and forwarded to
			// it: the stub's header names and order, as written.
			for _, p := range ps {
				c, err := net.Dial("tcp", host(p)+":4545")
				require.NoError(t, err)
				_, err = io.WriteString(c, "GET /status HTTP/1.1\r\nHost: x\r\nX-Order: fresh\r\nConnection: close\r\n\r\n")
				require.NoError(t, err)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				got, _ := io.ReadAll(c)
				_ = c.Close()
				require.Contains(t, string(got), "HTTP/1.1 200 OK\r\nx-lower: kept\r\nX-Order-Seen: yes\r\n", "through %s", p.name)
			}
			code, body = call("GET", "http://"+ps[1].http+"/imposters/4545/scenarios?flowId=a", "")
			require.Equal(t, http.StatusOK, code, body)
			require.JSONEq(t, `{"flowId":"i4545:a","scenarios":[{"name":"order","state":"Shipped"}]}`, body)
			code, body = call("GET", "http://"+ps[2].http+"/imposters/4545/scenarios?flowId=zz", "")
			require.Equal(t, http.StatusOK, code, body)
			require.JSONEq(t, `{"flowId":"i4545:zz","scenarios":[{"name":"order","state":"Started"}]}`, body)

			code, body = call("PUT", "http://"+ps[2].http+"/imposters/4545/scenarios/order/state", `{"state":"Paid","flowId":"a"}`)
			require.Equal(t, http.StatusOK, code, body)
			_, body, _ = order(ps[0], "a", "/status")
			require.Equal(t, "paid, not shipped", body, "the state set through n3 is what n1 serves")
			code, body = call("POST", "http://"+ps[1].http+"/imposters/4545/scenarios/reset", `{"flowId":"a"}`)
			require.Equal(t, http.StatusOK, code, body)
			_, body, _ = order(ps[2], "a", "/status")
			require.Equal(t, "new", body)

			code, body = call("PUT", "http://"+ps[0].http+"/imposters/4545/scenarios/nope/state", `{"state":"X"}`)
			require.Equal(t, http.StatusNotFound, code, body)
			code, body = call("PUT", "http://"+ps[0].http+"/imposters/4545/scenarios/order/state", `{"state":3}`)
			require.Equal(t, http.StatusBadRequest, code, body)

			// The knobs, resolved, in the imposter's view.
			_, body = call("GET", "http://"+ps[1].http+"/imposters/4545", "")
			require.Contains(t, body, `"flowIdSource": {`)
			var v struct {
				Rift struct {
					FlowState map[string]struct {
						Value any    `json:"value"`
						From  string `json:"from"`
					} `json:"flowState"`
				} `json:"_rift"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &v))
			require.Equal(t, "header:X-Order", v.Rift.FlowState["flowIdSource"].Value)
			require.Equal(t, "set", v.Rift.FlowState["durability"].From)
			require.Equal(t, "default", v.Rift.FlowState["ttlSeconds"].From)

			// A bad knob is a 400 naming the field, and nothing is created.
			code, body = call("POST", "http://"+ps[0].http+"/imposters", `{"protocol":"http","port":4546,"_rift":{"flowState":{"durability":"fsync"}}}`)
			require.Equal(t, http.StatusBadRequest, code)
			require.Contains(t, body, `'_rift.flowState.durability' must be one of \"sync\", \"async\", \"none\"`)
		})
	}
}

// TestRemovingTheLeader: the leader removed from the voters steps down
// and the two left elect one of themselves, which leads with a quorum
// and takes writes. (Left to itself, etcd raft's leader goes on leading a
// group it is no voter of: a cluster that answers nothing.)
func TestRemovingTheLeader(t *testing.T) {
	ps := cluster(t)
	var leader *proc
	require.Eventually(t, func() bool {
		for _, p := range ps {
			if st := p.status(); st != nil && st.IsLeader {
				leader = p
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond)
	var other *proc
	for _, p := range ps {
		if p != leader {
			other = p
			break
		}
	}
	code, body := removeMember(t, other.http, filepath.Join(other.dir, "control.key"), leader.name)
	require.Equal(t, http.StatusOK, code, body)
	require.Eventually(t, func() bool {
		for _, p := range ps {
			if st := p.status(); p != leader && st != nil && st.IsLeader && len(st.Voters) == 2 {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "a remaining node leads the two voters with a quorum")
	code, body = call("PUT", "http://"+other.http+"/_cluster/kv/after-removal", `{"value":"x"}`)
	require.Equal(t, http.StatusOK, code, body)
}

// TestProxyOnceAcrossTheCluster: many concurrent first requests for the
// same new signatures, through all three nodes, against an origin that
// counts its calls. The origin is called exactly once per signature; every
// caller gets the recorded answer or a 503; afterwards every node replays
// every recording from the configuration, and the origin hears nothing.
func TestProxyOnceAcrossTheCluster(t *testing.T) { checkProxyOnce(t, cluster(t)) }

// checkProxyOnce is TestProxyOnceAcrossTheCluster's check on the nodes ps
// (three of one group, or a fleet's).
func checkProxyOnce(t *testing.T, ps []*proc) {
	var mu sync.Mutex
	calls := map[string]int{}
	origin := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		mu.Unlock()
		time.Sleep(50 * time.Millisecond) // slow enough that the first calls overlap
		fmt.Fprintf(w, "origin says %s", r.URL.Path)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = origin.Serve(ln) }()
	t.Cleanup(func() { _ = origin.Close() })

	code, body := call("POST", "http://"+ps[0].http+"/imposters", fmt.Sprintf(`{"protocol":"http","port":4747,"stubs":[{"responses":[{"proxy":{
		"to":"http://%s","mode":"proxyOnce","predicateGenerators":[{"matches":{"path":true}}]}}]}]}`, ln.Addr()))
	require.Equal(t, http.StatusCreated, code, body)
	for _, p := range ps {
		code, _ := getImposter(t, p.http, 4747)
		require.Equal(t, http.StatusOK, code)
	}
	const signatures, perNode = 8, 6
	type result struct {
		path string
		code int
		body string
		took time.Duration
	}
	results := make(chan result, signatures*perNode*len(ps))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for s := range signatures {
		for _, p := range ps {
			for range perNode {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					path := fmt.Sprintf("/sig-%d", s)
					began := time.Now()
					c, b := call("GET", "http://"+host(p)+":4747"+path, "")
					results <- result{path, c, b, time.Since(began)}
				}()
			}
		}
	}
	close(start)
	wg.Wait()
	close(results)
	served := map[string]int{}
	var slowest time.Duration
	for r := range results {
		slowest = max(slowest, r.took)
		switch r.code {
		case http.StatusOK:
			require.Equal(t, "origin says "+r.path, r.body)
			served[r.path]++
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("%s answered %d: %s", r.path, r.code, r.body)
		}
	}
	for _, p := range ps {
		for _, line := range strings.Split(p.log(), "\n") {
			if strings.Contains(line, "proxyOnce") {
				t.Logf("%s: %s", p.name, line)
			}
		}
	}
	mu.Lock()
	for s := range signatures {
		path := fmt.Sprintf("/sig-%d", s)
		require.Equal(t, 1, calls[path], "the origin heard %s once", path)
		require.NotZero(t, served[path], "someone got %s's answer", path)
	}
	mu.Unlock()
	t.Logf("first requests: %d signatures × %d callers; answered per signature: %v; slowest %v", signatures, len(ps)*perNode, served, slowest)

	// Every node replays every recording; the origin hears nothing more.
	for _, p := range ps {
		require.Eventually(t, func() bool {
			_, v := getImposter(t, p.http, 4747)
			return len(v.Stubs) == signatures+1
		}, 5*time.Second, 50*time.Millisecond, "%s holds every recording", p.name)
		for s := range signatures {
			path := fmt.Sprintf("/sig-%d", s)
			c, b := call("GET", "http://"+host(p)+":4747"+path, "")
			require.Equal(t, http.StatusOK, c, b)
			require.Equal(t, "origin says "+path, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range signatures {
		require.Equal(t, 1, calls[fmt.Sprintf("/sig-%d", s)])
	}
}
