package imposter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func mustImposter(t *testing.T, js string) *Imposter {
	t.Helper()
	v, err := Parse(js)
	require.NoError(t, err)
	imp, err := New(v.(*Object), 4545)
	require.NoError(t, err)
	return imp
}

func TestFlowStateKnobs(t *testing.T) {
	imp := mustImposter(t, `{"protocol":"http"}`)
	fs := imp.FlowState()
	require.Equal(t, FlowState{TTLSeconds: 300, Durability: "async", ReadConsistency: "strong", ContextScope: "imposter", Set: map[string]bool{}}, fs)
	require.Equal(t, `{"flowIdSource":{"value":"imposter_port","from":"default"},"ttlSeconds":{"value":300,"from":"default"},"durability":{"value":"async","from":"default"},"readConsistency":{"value":"strong","from":"default"},"contextScope":{"value":"imposter","from":"default"}}`,
		string(Marshal(fs.Value(), 0)))

	imp = mustImposter(t, `{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","ttlSeconds":5,"durability":"sync","readConsistency":"local","contextScope":"tenant","tenant":"acme"}}}`)
	fs = imp.FlowState()
	require.Equal(t, "X-Flow-Id", fs.Header)
	require.Equal(t, 5, fs.TTLSeconds)
	require.Equal(t, "sync", fs.Durability)
	require.Equal(t, "local", fs.ReadConsistency)
	require.Contains(t, string(Marshal(fs.Value(), 0)), `"contextScope":{"value":"tenant","from":"set"},"tenant":{"value":"acme","from":"set"}`)

	for js, want := range map[string]string{
		`{"flowIdSource":"cookie"}`:                     `'_rift.flowState.flowIdSource' must be "imposter_port" or "header:<Name>"`,
		`{"flowIdSource":"header:"}`:                    `'_rift.flowState.flowIdSource' must be`,
		`{"ttlSeconds":0}`:                              `'_rift.flowState.ttlSeconds' must be a whole number of seconds, at least 1`,
		`{"ttlSeconds":1.5}`:                            `ttlSeconds`,
		`{"durability":"fsync"}`:                        `'_rift.flowState.durability' must be one of "sync", "async", "none"`,
		`{"readConsistency":"eventual"}`:                `'_rift.flowState.readConsistency' must be one of "strong", "local"`,
		`{"contextScope":"global"}`:                     `'_rift.flowState.contextScope' must be one of "imposter", "tenant", "fleet"`,
		`{"contextScope":"tenant"}`:                     `'_rift.flowState.tenant' is required with contextScope "tenant"`,
		`{"tenant":"acme"}`:                             `only with it`,
		`{"flowIdSourc":"imposter_port"}`:               `'_rift.flowState.flowIdSourc' is not a flowState field`,
		`{"contextScope":"tenant","tenant":"a:b"}`:      `without ':'`,
		`{"contextScope":"tenant","tenant":""}`:         `non-empty`,
		`{"durability":1}`:                              `durability`,
		`{"flowIdSource":"header:X Flow"}`:              `flowIdSource`,
		`{"readConsistency":"strong","ttlSeconds":"5"}`: `ttlSeconds`,
	} {
		v, err := Parse(`{"protocol":"http","_rift":{"flowState":` + js + `}}`)
		require.NoError(t, err)
		_, err = New(v.(*Object), 4545)
		require.ErrorContains(t, err, want, js)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, CodeBadData, e.Code)
	}
	for _, js := range []string{`{"protocol":"http","_rift":3}`, `{"protocol":"http","_rift":{"flowState":[]}}`} {
		v, _ := Parse(js)
		_, err := New(v.(*Object), 4545)
		require.Error(t, err, js)
	}
}

func TestFlowOfAndScopes(t *testing.T) {
	hdr := func(k, v string) *Request { return &Request{Headers: NewObject().Set(k, v)} }
	imp := mustImposter(t, `{"protocol":"http"}`)
	require.Equal(t, "i4545:4545", imp.FlowOf(hdr("X-Flow-Id", "abc")), "the port by default")

	imp = mustImposter(t, `{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id"}}}`)
	require.Equal(t, "i4545:abc", imp.FlowOf(hdr("x-flow-id", "abc")), "the header, case-insensitively")
	require.Equal(t, "i4545:4545", imp.FlowOf(hdr("X-Flow-Id", "")), "an empty header falls back to the port")
	require.Equal(t, "i4545:4545", imp.FlowOf(&Request{}), "an absent one too")
	require.Equal(t, "i4545:a", imp.FlowOf(&Request{Headers: NewObject().Set("X-Flow-Id", []any{"a", "b"})}), "a repeated header: its first value")

	imp = mustImposter(t, `{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow-Id","contextScope":"fleet"}}}`)
	require.Equal(t, "f:abc", imp.FlowOf(hdr("X-Flow-Id", "abc")))
	imp = mustImposter(t, `{"protocol":"http","_rift":{"flowState":{"contextScope":"tenant","tenant":"acme"}}}`)
	require.Equal(t, "tacme:4545", imp.FlowOf(&Request{}))
}

const scenarioImposter = `{"protocol":"http","stubs":[
	{"scenarioName":"order","requiredScenarioState":"Started","newScenarioState":"Paid",
	 "predicates":[{"equals":{"path":"/pay"}}],"responses":[{"is":{"body":"paid"}}]},
	{"scenarioName":"order","requiredScenarioState":"Paid","newScenarioState":"Shipped",
	 "predicates":[{"equals":{"path":"/ship"}}],"responses":[{"is":{"body":"shipped"}}]},
	{"scenarioName":"order","requiredScenarioState":"Paid",
	 "predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"awaiting shipment"}}]},
	{"scenarioName":"order","newScenarioState":"Started",
	 "predicates":[{"equals":{"path":"/reset"}}],"responses":[{"is":{"body":"reset"}}]},
	{"predicates":[{"equals":{"path":"/status"}}],"responses":[{"is":{"body":"nothing yet"}}]}
]}`

func TestScenarioGatesAndTransitions(t *testing.T) {
	imp := mustImposter(t, scenarioImposter)
	require.True(t, imp.Stateful())
	require.Equal(t, []string{"order"}, imp.Scenarios())
	get := func(path string, states States) (string, *Transition) {
		out, _, tr, err := imp.RespondIn(&Request{Method: "GET", Path: path}, "i4545:4545", states)
		require.NoError(t, err)
		return string(out.Body), tr
	}
	body, tr := get("/status", nil)
	require.Equal(t, "nothing yet", body, "absent reads as Started: the Paid gate is closed")
	require.Nil(t, tr)

	body, tr = get("/pay", nil)
	require.Equal(t, "paid", body)
	require.Equal(t, &Transition{Flow: "i4545:4545", Scenario: "order", Gated: true, From: "Started", FromAbsent: true, To: "Paid"}, tr)

	body, tr = get("/pay", States{"order": "Started"})
	require.Equal(t, "paid", body)
	require.Equal(t, &Transition{Flow: "i4545:4545", Scenario: "order", Gated: true, From: "Started", To: "Paid"}, tr, "present: compare with the value")

	body, _ = get("/ship", nil)
	require.Empty(t, body, "a closed gate: no stub matches, the default response")
	body, tr = get("/ship", States{"order": "Paid"})
	require.Equal(t, "shipped", body)
	require.Equal(t, "Paid", tr.From)
	body, tr = get("/status", States{"order": "Paid"})
	require.Equal(t, "awaiting shipment", body)
	require.Nil(t, tr, "a gate without a move changes nothing")

	body, tr = get("/reset", States{"order": "Shipped"})
	require.Equal(t, "reset", body)
	require.Equal(t, &Transition{Flow: "i4545:4545", Scenario: "order", To: "Started"}, tr, "no gate: a plain set")

	v := imp.Value(PrintOptions{})
	_, ok := v.Get("_rift")
	require.True(t, ok, "a stateful imposter shows its knobs")
	v = imp.Value(PrintOptions{Replayable: true})
	_, ok = v.Get("_rift")
	require.False(t, ok, "the replayable view keeps only what was given")
	require.False(t, mustImposter(t, `{"protocol":"http"}`).Stateful())
	_, ok = mustImposter(t, `{"protocol":"http"}`).Value(PrintOptions{}).Get("_rift")
	require.False(t, ok, "mountebank's view of a plain imposter is unchanged")
}

func TestScenarioFieldsValidated(t *testing.T) {
	for stub, want := range map[string]string{
		`{"scenarioName":3,"responses":[{"is":{}}]}`:                         `'scenarioName' must be a non-empty string`,
		`{"scenarioName":"","responses":[{"is":{}}]}`:                        `'scenarioName' must be a non-empty string`,
		`{"requiredScenarioState":"A","responses":[{"is":{}}]}`:              `need 'scenarioName'`,
		`{"newScenarioState":"A","responses":[{"is":{}}]}`:                   `need 'scenarioName'`,
		`{"scenarioName":"s","newScenarioState":[],"responses":[{"is":{}}]}`: `'newScenarioState' must be a non-empty string`,
	} {
		v, err := Parse(stub)
		require.NoError(t, err)
		_, err = NewStub(v)
		require.ErrorContains(t, err, want, stub)
	}
}
