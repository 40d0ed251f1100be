package imposterhttp

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// body is an imposter's answer's body.
func body(t *testing.T, port int, path string) string {
	t.Helper()
	a := do(t, "GET", at(port, path), "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	return a.body
}

// A stub's response cycle keeps its place as mountebank's does: a stub
// keeps it while it is not replaced (another stub changed, added or
// deleted), and starts again when PUT /stubs replaces every stub, PUT
// /stubs/{i} replaces it, or DELETE /savedProxyResponses rewrites the
// stubs. DELETE /savedRequests leaves it.
func TestCyclesFollowMountebank(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/c"}}],"responses":[{"is":{"body":"A"},"repeat":2},{"is":{"body":"B"}},{"is":{"body":"C"}}]},
		{"predicates":[{"equals":{"path":"/y"}}],"responses":[{"is":{"body":"Y1"}},{"is":{"body":"Y2"}}]}]}`)
	var got []string
	for range 5 {
		got = append(got, body(t, port, "/c"))
	}
	require.Equal(t, []string{"A", "A", "B", "C", "A"}, got, "repeat, then the cycle wraps")

	step := func(method, path, payload, want string) {
		t.Helper()
		a := do(t, method, base+"/imposters/"+itoa(port)+path, payload)
		require.Equal(t, http.StatusOK, a.code, a.body)
		require.Equal(t, want, body(t, port, "/c"), "after %s %s", method, path)
	}
	step("PUT", "/stubs/1", `{"predicates":[{"equals":{"path":"/y"}}],"responses":[{"is":{"body":"Y"}}]}`, "A")                                                    // the other stub replaced: this one goes on
	step("POST", "/stubs", `{"stub":{"responses":[{"is":{"body":"new"}}]}}`, "B")                                                                                  // a stub added
	step("DELETE", "/stubs/2", "", "C")                                                                                                                            // a stub deleted
	step("DELETE", "/savedRequests", "", "A")                                                                                                                      // requests forgotten, cycles kept
	step("PUT", "/stubs/0", `{"predicates":[{"equals":{"path":"/c"}}],"responses":[{"is":{"body":"A"},"repeat":2},{"is":{"body":"B"}},{"is":{"body":"C"}}]}`, "A") // the same stub, replaced: it starts again
	require.Equal(t, "A", body(t, port, "/c"))
	step("DELETE", "/savedProxyResponses", "", "A") // every stub rewritten: every cycle starts again
	require.Equal(t, "A", body(t, port, "/c"))
	step("PUT", "/stubs", `{"stubs":[{"predicates":[{"equals":{"path":"/c"}}],"responses":[{"is":{"body":"A"},"repeat":2},{"is":{"body":"B"}},{"is":{"body":"C"}}]}]}`, "A")
}

func itoa(n int) string { return strconv.Itoa(n) }

func jsonInt(n int) string { return strconv.Itoa(n) }

// testCluster is the members of an in-process cluster of servers that
// share one configuration and one flow store: every member serves every
// imposter on its own host.
type testCluster struct {
	mu      sync.Mutex
	members []Member
	self    uint64
	down    map[uint64]bool
	// servers are every member's server: a rollout is each of them
	// reconciling, as the cluster's rollout waits for.
	servers []*Server
}

func (c *testCluster) Self() uint64 { return c.self }
func (c *testCluster) Members(context.Context) ([]Member, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Member
	for _, m := range c.members {
		if c.down[m.ID] {
			m.HTTP = "127.0.0.1:1" // nobody listens there: the member cannot be asked
		}
		out = append(out, m)
	}
	return out, nil
}
func (c *testCluster) Served(uint64) {}
func (c *testCluster) AwaitRollout(ctx context.Context, _ uint64) ([]string, error) {
	for _, s := range c.servers {
		if s.cluster != c {
			s.caughtUp.Store(true)
			if err := s.reconcile(ctx); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}
func (c *testCluster) Nudges() <-chan struct{} { return nil }

// members starts n servers on 127.0.0.(1+i), each with its admin API,
// sharing cfg and one flow store.
func members(t *testing.T, n int) ([]string, []*testCluster) {
	t.Helper()
	cfg, flows := NewMemoryConfig(), NewMemoryFlows()
	var bases []string
	var all []Member
	var clusters []*testCluster
	var servers []*Server
	for i := range n {
		host := "127.0.0." + jsonInt(1+i)
		s := New(host, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
		s.UseFlows(flows, RoutePerOp)
		s.UseMemberKey(testMemberKey)
		mux := http.NewServeMux()
		s.Register(mux)
		ln, err := net.Listen("tcp", host+":0")
		require.NoError(t, err)
		srv := &http.Server{Handler: mux}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close(); s.Close() })
		c := &testCluster{self: uint64(i + 1), down: map[uint64]bool{}}
		s.UseCluster(c)
		clusters = append(clusters, c)
		servers = append(servers, s)
		all = append(all, Member{ID: uint64(i + 1), Name: "n" + jsonInt(i+1), HTTP: ln.Addr().String()})
		bases = append(bases, "http://"+ln.Addr().String())
	}
	for _, c := range clusters {
		c.members, c.servers = all, servers
	}
	return bases, clusters
}

func atHost(host string, port int, path string) string {
	return "http://" + host + ":" + jsonInt(port) + path
}

// Requests recorded by every member show through any member, once each,
// in the order they came; the count is the cluster's; a reset clears
// every member's; a member that cannot be asked is named.
func TestRecordedRequestsAreTheClusters(t *testing.T) {
	bases, clusters := members(t, 3)
	a := do(t, "POST", bases[0]+"/imposters", `{"protocol":"http","recordRequests":true,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	port := int(a.json["port"].(float64))
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	for i := range 6 {
		a := do(t, "GET", atHost(hosts[i%3], port, "/r"+jsonInt(i)), "")
		require.Equal(t, "ok", a.body)
	}
	paths := func(a answer) []string {
		var out []string
		for _, r := range a.json["requests"].([]any) {
			out = append(out, r.(map[string]any)["path"].(string))
		}
		return out
	}
	want := []string{"/r0", "/r1", "/r2", "/r3", "/r4", "/r5"}
	for _, b := range bases {
		a := do(t, "GET", b+"/imposters/"+jsonInt(port), "")
		require.Equal(t, want, paths(a), "through %s", b)
		require.EqualValues(t, 6, a.json["numberOfRequests"])
		require.Empty(t, a.header.Get(MissingHeader))
		list := do(t, "GET", b+"/imposters", "")
		require.EqualValues(t, 6, list.json["imposters"].([]any)[0].(map[string]any)["numberOfRequests"], "the list counts the cluster's")
	}

	// A member that cannot be asked is named, never left out in silence.
	clusters[0].mu.Lock()
	clusters[0].down[3] = true
	clusters[0].mu.Unlock()
	a = do(t, "GET", bases[0]+"/imposters/"+jsonInt(port), "")
	require.Equal(t, "n3", a.header.Get(MissingHeader))
	require.Equal(t, []string{"/r0", "/r1", "/r3", "/r4"}, paths(a))
	clusters[0].mu.Lock()
	clusters[0].down[3] = false
	clusters[0].mu.Unlock()

	// A reset through one member clears every member's.
	a = do(t, "DELETE", bases[1]+"/imposters/"+jsonInt(port)+"/savedRequests", "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.EqualValues(t, 0, a.json["numberOfRequests"])
	do(t, "GET", atHost(hosts[2], port, "/after"), "")
	for _, b := range bases {
		a := do(t, "GET", b+"/imposters/"+jsonInt(port), "")
		require.Equal(t, []string{"/after"}, paths(a), "through %s", b)
	}
}

// A stub with several responses answers in turn across the cluster: one
// cycle, whichever member takes each request.
func TestCycleIsTheClusters(t *testing.T) {
	bases, _ := members(t, 3)
	a := do(t, "POST", bases[0]+"/imposters", `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"500"}},{"is":{"body":"200"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	port := int(a.json["port"].(float64))
	var seq []string
	for _, h := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.1", "127.0.0.2", "127.0.0.2"} {
		a := do(t, "GET", atHost(h, port, "/"), "")
		seq = append(seq, a.body)
	}
	require.Equal(t, []string{"500", "200", "500", "200", "500"}, seq, "one cycle across members")
}

// The members' records route answers members only: a call without the
// member key's MAC, under another key, or replayed past memberSkew is
// 403 and shows nothing (issue 26: it was open to anyone).
func TestRecordsRouteIsMembersOnly(t *testing.T) {
	bases, _ := members(t, 2)
	a := do(t, "POST", bases[0]+"/imposters", `{"protocol":"http","recordRequests":true,"stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	require.Equal(t, http.StatusCreated, a.code, a.body)
	port := int(a.json["port"].(float64))
	require.Equal(t, "ok", do(t, "GET", at(port, "/secret"), "").body)
	body := `[{"port":` + jsonInt(port) + `,"list":true}]`
	signed, _ := signCall(testMemberKey, "POST", recordsPath, []byte(body), time.Now())
	other, _ := signCall([]byte("another cluster's key, 32 bytes."), "POST", recordsPath, []byte(body), time.Now())
	stale, _ := signCall(testMemberKey, "POST", recordsPath, []byte(body), time.Now().Add(-2*memberSkew))
	for _, h := range []string{"", other, stale, signed + "0"} {
		a := do(t, "POST", bases[1]+recordsPath, body, MemberHeader, h)
		require.Equal(t, http.StatusForbidden, a.code, "header %q", h)
		require.NotContains(t, a.body, "secret")
	}
	a = do(t, "POST", bases[1]+recordsPath, body, MemberHeader, signed)
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.NotEmpty(t, a.header.Get(MemberHeader), "the answer is signed")
}

// During a rotation of the control key a member believes calls under the
// key it accepts as well as its own, and answers each under the key it
// was asked with: members on either key keep gathering each other's
// records.
func TestRecordsDuringAKeyRotation(t *testing.T) {
	bases, _ := members(t, 1)
	require.Equal(t, http.StatusCreated, do(t, "POST", bases[0]+"/imposters", `{"protocol":"http"}`).code)
	s := &Server{}
	s.UseMemberKey([]byte("the next control key's member key"), testMemberKey)
	body := []byte(`[]`)
	sig, nonce := signCall(testMemberKey, "POST", recordsPath, body, time.Now())
	n, signer, err := checkCall(s.memberKeys(), sig, "POST", recordsPath, body, time.Now())
	require.NoError(t, err)
	require.Equal(t, nonce, n)
	require.Equal(t, testMemberKey, signer)
	a := do(t, "POST", bases[0]+recordsPath, string(body), MemberHeader, sig)
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.True(t, answeredBy(s.memberKeys(), a.header.Get(MemberHeader), nonce, []byte(a.body)))
	require.False(t, answeredBy([][]byte{[]byte("a key nobody holds")}, a.header.Get(MemberHeader), nonce, []byte(a.body)))
}
