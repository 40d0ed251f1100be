package imposterhttp

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/routing"
)

const orderImposter = `{"protocol":"http","recordRequests":true,
 "_rift":{"flowState":{"flowIdSource":"header:X-Order"}},
 "stubs":[
  {"scenarioName":"order","requiredScenarioState":"Started","newScenarioState":"Paid",
   "predicates":[{"equals":{"path":"/pay"}}],"responses":[{"is":{"body":"paid"}}]},
  {"scenarioName":"order","requiredScenarioState":"Paid",
   "predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"paid"}}]},
  {"predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"new"}}]}]}`

func TestStatefulImposterKeepsStatePerFlow(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, orderImposter)
	require.Equal(t, "new", do(t, "GET", at(port, "/status"), "", "X-Order", "a").body)
	require.Equal(t, "paid", do(t, "GET", at(port, "/pay"), "", "X-Order", "a").body)
	require.Empty(t, do(t, "GET", at(port, "/pay"), "", "X-Order", "a").body, "the gate is closed now")
	require.Equal(t, "paid", do(t, "GET", at(port, "/status"), "", "X-Order", "a").body)
	require.Equal(t, "new", do(t, "GET", at(port, "/status"), "", "X-Order", "b").body, "another flow, its own state")

	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d/scenarios?flowId=a", base, port), "")
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.JSONEq(t, fmt.Sprintf(`{"flowId":"i%d:a","scenarios":[{"name":"order","state":"Paid"}]}`, port), a.body)
	a = do(t, "POST", fmt.Sprintf("%s/imposters/%d/scenarios/reset", base, port), `{"flowId":"a"}`)
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.Equal(t, "new", do(t, "GET", at(port, "/status"), "", "X-Order", "a").body)
	a = do(t, "PUT", fmt.Sprintf("%s/imposters/%d/scenarios/order/state", base, port), `{"state":"Paid"}`)
	require.Equal(t, http.StatusOK, a.code, a.body)
	require.Equal(t, "paid", do(t, "GET", at(port, "/status"), "").body, "no header: the port's flow")
	a = do(t, "POST", fmt.Sprintf("%s/imposters/%d/scenarios/reset", base, port), `{"flowId":3}`)
	require.Equal(t, http.StatusBadRequest, a.code, a.body)
	a = do(t, "GET", base+"/imposters/9/scenarios", "")
	require.Equal(t, http.StatusNotFound, a.code, a.body)
}

// A forwarded request: the owner records the client it names, and the
// stubs never see the loop guard. A client's own header of that name —
// unsigned, signed under another key, or replayed after memberSkew — is
// not believed: the client is who connected (issue 26).
func TestForwardedRequestIsTheClients(t *testing.T) {
	base, s := admin(t)
	port := create(t, base, orderImposter)
	do(t, "GET", at(port, "/status"), "", "X-Order", "a", ForwardedHeader, s.forwardedValue("10.1.2.3:4567", "GET", "/status"))
	other := &Server{memberKey: []byte("another cluster's key, 32 bytes.")}
	old := "10.9.9.9:1;" + strconv.FormatInt(time.Now().Add(-2*memberSkew).UnixMilli(), 10) + ";"
	old += memberMAC(s.memberKey, "forward", "10.9.9.9:1", old[len("10.9.9.9:1;"):len(old)-1], "GET", "/status")
	for _, forged := range []string{"10.6.6.6:1", other.forwardedValue("10.7.7.7:1", "GET", "/status"),
		s.forwardedValue("10.8.8.8:1", "GET", "/elsewhere"), old} {
		do(t, "GET", at(port, "/status"), "", "X-Order", "a", ForwardedHeader, forged)
	}
	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	reqs := a.json["requests"].([]any)
	require.Len(t, reqs, 5)
	req := reqs[0].(map[string]any)
	require.Equal(t, "10.1.2.3:4567", req["requestFrom"])
	require.Equal(t, "10.1.2.3", req["ip"])
	require.NotContains(t, req["headers"], ForwardedHeader)
	for _, r := range reqs[1:] {
		req := r.(map[string]any)
		require.Equal(t, "127.0.0.1", req["ip"], "a forged loop guard names nobody")
		require.NotContains(t, req["headers"], ForwardedHeader)
	}
}

// failingFlows is a store that refuses everything, as an isolated owner
// does.
type failingFlows struct{ owner routing.Owner }

func (f failingFlows) Do(context.Context, flow.Request) (flow.Response, error) {
	return flow.Response{}, fmt.Errorf("%w: %w", flow.ErrUnavailable, flow.ErrIsolated)
}
func (f failingFlows) OwnerOf(context.Context, string) (routing.Owner, error) { return f.owner, nil }

func TestStatefulRequestFailsClosed(t *testing.T) {
	base, s := admin(t)
	port := create(t, base, orderImposter)
	plain := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"stateless"}}]}]}`)

	s.UseFlows(failingFlows{owner: routing.Owner{View: routing.Local}}, RoutePerOp)
	a := do(t, "GET", at(port, "/status"), "", "X-Order", "a")
	require.Equal(t, http.StatusServiceUnavailable, a.code, "the state cannot be read: no guess")
	require.Equal(t, "isolated", a.header.Get(UnavailableHeader))
	require.Equal(t, "stateless", do(t, "GET", at(plain, "/"), "").body, "a stateless imposter never asks the store")

	// Forwarding: no owner is a 503; an owner whose address is unknown
	// too; a forward that fails too — never a local answer.
	s.UseFlows(failingFlows{owner: routing.Owner{View: routing.Unknown}}, RouteForward)
	a = do(t, "GET", at(port, "/status"), "", "X-Order", "a")
	require.Equal(t, http.StatusServiceUnavailable, a.code)
	require.Equal(t, routing.ReasonNoOwner, a.header.Get(UnavailableHeader))
	s.UseFlows(failingFlows{owner: routing.Owner{View: routing.Remote, Node: 2}}, RouteForward)
	a = do(t, "GET", at(port, "/status"), "", "X-Order", "a")
	require.Equal(t, routing.ReasonNoAddress, a.header.Get(UnavailableHeader))
	s.UseFlows(failingFlows{owner: routing.Owner{View: routing.Remote, Node: 2, Addr: "127.0.0.9:1"}}, RouteForward) // nothing listens there
	a = do(t, "GET", at(port, "/status"), "", "X-Order", "a")
	require.Equal(t, http.StatusServiceUnavailable, a.code)
	require.Equal(t, "forward_failed", a.header.Get(UnavailableHeader))
	// A forwarded request that finds another owner is served here, its
	// store calls fenced at the owner (which refuses them here).
	a = do(t, "GET", at(port, "/status"), "", "X-Order", "a", ForwardedHeader, s.forwardedValue("127.0.0.1:9", "GET", "/status"))
	require.Equal(t, "isolated", a.header.Get(UnavailableHeader), "never forwarded twice")
	a = do(t, "GET", at(port, "/status"), "", "X-Order", "a", ForwardedHeader, "127.0.0.1:9")
	require.Equal(t, "forward_failed", a.header.Get(UnavailableHeader), "a client's own loop guard is not believed")
}

// ScopedFlow names a flow as its imposter scopes it, for the node's
// flow-state routes.
func TestScopedFlowFollowsTheImposter(t *testing.T) {
	base, s := admin(t)
	port := create(t, base, `{"protocol":"http","_rift":{"flowState":{"contextScope":"fleet"}}}`)
	key, ok := s.ScopedFlow(port, "x")
	require.True(t, ok)
	require.Equal(t, "f:x", key)
	_, ok = s.ScopedFlow(port+1, "x")
	require.False(t, ok, "no imposter there")
}
