package imposter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newImposter(t *testing.T, creation string) *Imposter {
	t.Helper()
	imp, err := New(mustParse(t, creation).(*Object), 4545)
	require.NoError(t, err)
	return imp
}

func respond(t *testing.T, imp *Imposter, r *Request) Outcome {
	t.Helper()
	out, cyc, err := imp.Respond(r)
	require.NoError(t, err)
	require.Nil(t, cyc, "an imposter that does not share its cycles never asks to step one")
	return out
}

func header(out Outcome, name string) []string {
	for _, h := range out.Headers {
		if h.Name == name {
			return h.Values
		}
	}
	return nil
}

// Recorded requests are bounded in bytes too (issue 26: 10,000 bodies of
// 16 MiB each were kept): past MaxRecordedBytes the oldest go, the count
// still counts every request, and small requests refill the ring after.
func TestRecordedBytesAreBounded(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","recordRequests":true}`)
	big := strings.Repeat("x", 8<<20)
	for i := range 10 {
		respond(t, imp, req("POST", fmt.Sprintf("/big%d", i), big, ""))
	}
	recs := imp.LocalRecords(1).List
	require.Len(t, recs, MaxRecordedBytes/(8<<20)-1, "seven of 8 MiB and their overhead fit in 64 MiB; eight do not")
	p, _ := recs[0].Value.Get("path")
	require.Equal(t, "/big3", p, "the oldest went")
	require.LessOrEqual(t, imp.requests.bytes, MaxRecordedBytes)
	for i := range MaxRecordedRequests {
		respond(t, imp, req("GET", fmt.Sprintf("/%d", i), "", ""))
	}
	recs = imp.LocalRecords(1).List
	require.Len(t, recs, MaxRecordedRequests, "the big ones gave way to the count bound")
	p, _ = recs[0].Value.Get("path")
	require.Equal(t, "/0", p)
	n, _ := imp.Value(PrintOptions{}).Get("numberOfRequests")
	require.Equal(t, float64(10+MaxRecordedRequests), n)
}

// Recorded requests are bounded: past the bound the oldest go, and the
// count still counts every request.
func TestRecordedRequestsAreBounded(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","recordRequests":true}`)
	for i := range MaxRecordedRequests + 5 {
		respond(t, imp, req("GET", fmt.Sprintf("/%d", i), "", ""))
	}
	v := imp.Value(PrintOptions{})
	n, _ := v.Get("numberOfRequests")
	require.Equal(t, float64(MaxRecordedRequests+5), n)
	reqs, _ := v.Get("requests")
	require.Len(t, reqs, MaxRecordedRequests)
	first, _ := reqs.([]any)[0].(*Object).Get("path")
	require.Equal(t, "/5", first, "the five oldest were dropped")
	// What the cluster merges is the same, oldest first, each stamped
	// with this member's count (a ring: dropping the oldest costs
	// nothing, where a shift cost ten thousand copies per request).
	recs := imp.LocalRecords(1).List
	require.Len(t, recs, MaxRecordedRequests)
	for i, r := range recs {
		p, _ := r.Value.Get("path")
		require.Equal(t, fmt.Sprintf("/%d", i+5), p)
		require.Equal(t, uint64(i+6), r.Seq)
	}
	imp.ResetRequests()
	respond(t, imp, req("GET", "/again", "", ""))
	require.Len(t, imp.LocalRecords(1).List, 1)

	quiet := newImposter(t, `{"protocol":"http"}`)
	respond(t, quiet, req("GET", "/", "", ""))
	v = quiet.Value(PrintOptions{})
	n, _ = v.Get("numberOfRequests")
	reqs, _ = v.Get("requests")
	require.Equal(t, float64(1), n, "counted though not recorded")
	require.Empty(t, reqs)
}

// Every response type and field falls back as mountebank's postProcess
// does.
func TestResponses(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","defaultResponse":{"statusCode":404,"headers":{"X-D":"d"},"body":"default","_mode":"text"},"stubs":[
		{"predicates":[{"equals":{"path":"/empty"}}],"responses":[{"is":{}}]},
		{"predicates":[{"equals":{"path":"/zero"}}],"responses":[{"is":{"statusCode":0,"body":0}}]},
		{"predicates":[{"equals":{"path":"/number"}}],"responses":[{"is":{"statusCode":200,"body":123}}]},
		{"predicates":[{"equals":{"path":"/array"}}],"responses":[{"is":{"body":[1,{"a":2}]}}]},
		{"predicates":[{"equals":{"path":"/headers"}}],"responses":[{"is":{"headers":{"X-Num":5,"X-Bool":true,"Connection":"keep-alive"}}}]},
		{"predicates":[{"equals":{"path":"/fault"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"},{"fault":"RANDOM_DATA_THEN_CLOSE"}]}
	]}`)
	out := respond(t, imp, req("GET", "/empty", "", ""))
	require.Equal(t, 404, out.StatusCode)
	require.Equal(t, "default", string(out.Body))
	require.Equal(t, []string{"d"}, header(out, "X-D"))
	require.Equal(t, []string{"close"}, header(out, "Connection"))

	out = respond(t, imp, req("GET", "/zero", "", ""))
	require.Equal(t, 404, out.StatusCode, "falsy fields fall back")
	require.Equal(t, "default", string(out.Body))

	out = respond(t, imp, req("GET", "/number", "", ""))
	require.Equal(t, 200, out.StatusCode)
	require.Equal(t, "123", string(out.Body))

	out = respond(t, imp, req("GET", "/array", "", ""))
	require.Equal(t, "[\n    1,\n    {\n        \"a\": 2\n    }\n]", string(out.Body))

	out = respond(t, imp, req("GET", "/headers", "", ""))
	require.Equal(t, []string{"5"}, header(out, "X-Num"))
	require.Equal(t, []string{"true"}, header(out, "X-Bool"))
	require.Equal(t, []string{"keep-alive"}, header(out, "Connection"), "a given Connection stays")
	require.Nil(t, header(out, "X-D"), "stub headers replace the default's")

	require.Equal(t, FaultReset, respond(t, imp, req("GET", "/fault", "", "")).Fault)
	require.Equal(t, FaultRandom, respond(t, imp, req("GET", "/fault", "", "")).Fault)
}

func TestBehaviors(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/xml"}}],"responses":[{"is":{"body":"x=${X} x1=${X}[1]"},"behaviors":[
			{"copy":{"from":"body","into":"${X}","using":{"method":"xpath","selector":"//b:v","ns":{"b":"urn:b"}}}},
			{"wait":25},{"wait":5}]}]},
		{"predicates":[{"equals":{"path":"/keys"}}],"responses":[{"is":{"body":{"id":"${ID}","${ID}":"key"}},"behaviors":[
			{"copy":{"from":{"query":"id"},"into":"${ID}","using":{"method":"regex","selector":"\\d+"}}}]}]},
		{"predicates":[{"equals":{"path":"/object"}}],"responses":[{"is":{"body":"q=${Q}"},"behaviors":[
			{"copy":{"from":"query","into":"${Q}","using":{"method":"regex","selector":".+"}}}]}]},
		{"predicates":[{"equals":{"path":"/absent"}}],"responses":[{"is":{"body":"h=${H}"},"behaviors":[
			{"copy":{"from":{"headers":"X-None"},"into":"${H}","using":{"method":"regex","selector":".*"}}}]}]}
	]}`)
	out := respond(t, imp, req("POST", "/xml", "", `<a xmlns:b="urn:b"><b:v>one</b:v><b:v>two</b:v></a>`))
	require.Equal(t, "x=one x1=two", string(out.Body))
	require.Equal(t, 30*time.Millisecond, out.Wait, "waits add up")

	out = respond(t, imp, req("GET", "/keys", "id=42", ""))
	require.Equal(t, "{\n    \"42\": \"key\",\n    \"id\": \"42\"\n}", string(out.Body),
		"tokens are replaced in keys too, and an index-like key prints first")
	out = respond(t, imp, req("GET", "/object", "id=42", ""))
	require.Equal(t, "q=[object Object]", string(out.Body), "a whole object reads as JavaScript prints it")

	out = respond(t, imp, req("GET", "/absent", "", ""))
	require.Equal(t, "h=undefined", string(out.Body), "an absent field reads as the text undefined, as in mountebank")
}

// In a cluster, only a stub with more than one distinct response to cycle
// through is stepped at its cycle's owner: one response, repeated or not,
// never pays for it.
func TestOnlyCyclingStubsShareTheirCycle(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/one"}}],"responses":[{"is":{"body":"x"},"repeat":3}]},
		{"predicates":[{"equals":{"path":"/two"}}],"responses":[{"is":{"body":"a"}},{"is":{"body":"b"},"repeat":2}]}]}`)
	imp.Clustered("scope", false)
	out, cyc, err := imp.Respond(req("GET", "/one", "", ""))
	require.NoError(t, err)
	require.Nil(t, cyc)
	require.Equal(t, "x", string(out.Body))
	_, cyc, err = imp.Respond(req("GET", "/two", "", ""))
	require.NoError(t, err)
	require.NotNil(t, cyc)
	for n, want := range []string{"a", "b", "b", "a"} {
		out, err := imp.RespondAt(req("GET", "/two", "", ""), cyc, int64(n+1))
		require.NoError(t, err)
		require.Equal(t, want, string(out.Body), "place %d", n+1)
	}
}

// A match made outside the lock (Candidates, Find) answers with the stub
// it found while the stubs stay as they were; once they change, the
// answer matches again under the lock, so a request never gets a stub
// that is no longer there.
func TestAMatchOutsideTheLockHoldsOnlyWhileTheStubsDo(t *testing.T) {
	imp := newImposter(t, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"path":"/a"}}],"responses":[{"is":{"body":"a"}}]},
		{"responses":[{"is":{"body":"any"}}]}]}`)
	r := req("GET", "/a", "", "")
	c := imp.Candidates()
	found := c.Find(r)
	require.Equal(t, 0, found)
	out, _, err := imp.RespondFound(r, c, found)
	require.NoError(t, err)
	require.Equal(t, "a", string(out.Body))

	c = imp.Candidates()
	found = c.Find(r)
	v, err := Parse(`{"predicates":[{"equals":{"path":"/a"}}],"responses":[{"is":{"body":"first"}}]}`)
	require.NoError(t, err)
	st, err := NewStub(v.(*Object))
	require.NoError(t, err)
	imp.InsertStub(st, 0) // an admin call, between the match and the answer
	out, _, err = imp.RespondFound(r, c, found)
	require.NoError(t, err)
	require.Equal(t, "first", string(out.Body), "matched again: the new stub comes first")
	body, _ := c.stubs[found].responses[0].is.Get("body")
	require.Equal(t, "a", body, "the snapshot itself was not changed under its readers")
}

// A response's repeat is a count, not an expansion: a hundred responses
// repeated a million times each (a 2 KB creation that allocated 4.4 GB
// when each repetition was an entry) compile to a hundred runs, and the
// cycle serves each in turn for its count.
func TestRepeatIsACountNotAnExpansion(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"is":{"body":"r%d"},"repeat":1000000}`, i)
	}
	imp := newImposter(t, `{"protocol":"http","stubs":[{"responses":[`+b.String()+`]}]}`)
	require.Len(t, imp.stubs[0].cycle.runs, 100)
	require.Equal(t, 100*1000000, imp.stubs[0].cycle.len())
	small := newImposter(t, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"a"},"repeat":3},{"is":{"body":"b"}},{"is":{"body":"c"},"repeat":2}]}]}`)
	var got []string
	for range 8 {
		got = append(got, string(respond(t, small, req("GET", "/", "", "")).Body))
	}
	require.Equal(t, []string{"a", "a", "a", "b", "c", "c", "a", "a"}, got)
}

// A query string or form body is read into at most MaxQueryKeys pairs,
// as node's querystring.parse reads 1,000 for mountebank: the rest is left
// out, and a form body of a hundred thousand distinct keys costs what a
// thousand do.
func TestQueryKeysAreBounded(t *testing.T) {
	var b strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&b, "k%d=v&", i)
	}
	q := ParseQuery(b.String())
	require.Equal(t, MaxQueryKeys, q.Len())
	v, _ := q.Get("k999")
	require.Equal(t, "v", v)
	_, ok := q.Get("k1000")
	require.False(t, ok)
}
