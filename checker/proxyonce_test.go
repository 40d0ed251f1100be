package checker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

func TestProxyOnce(t *testing.T) {
	s := time.Second
	call := func(key string, granted time.Duration, failed bool, answer string) UpstreamCall {
		return UpstreamCall{Key: key, Node: "n1", Granted: granted, Start: granted + time.Millisecond, End: granted + 100*time.Millisecond, Failed: failed, Answer: answer}
	}
	owned := func(c UpstreamCall, owner dial.NodeID) UpstreamCall { c.Owner = owner; return c }
	served := func(key, answer string) Served { return Served{Key: key, Node: "n2", At: 10 * s, Answer: answer} }
	final := func(v map[string]string) map[string]map[string]string {
		return map[string]map[string]string{"n1": v, "n2": v}
	}
	for _, tc := range []struct {
		name   string
		calls  []UpstreamCall
		served []Served
		losses []OwnerLoss
		final  map[string]map[string]string
		fails  string
	}{
		{name: "one call, one answer everywhere",
			calls: []UpstreamCall{call("k", s, false, "a")}, served: []Served{served("k", "a"), served("k", "a")},
			final: final(map[string]string{"k": "a"})},
		{name: "two calls with nothing between them",
			calls: []UpstreamCall{call("k", s, false, "a"), call("k", s+500*time.Millisecond, false, "b")},
			final: final(nil), fails: "2 upstream calls, at most 1 allowed"},
		{name: "a failed call frees the claim",
			calls: []UpstreamCall{call("k", s, true, "a"), call("k", 2*s, false, "b")}, served: []Served{served("k", "b")},
			final: final(map[string]string{"k": "b"})},
		{name: "an owner loss between the grants",
			calls:  []UpstreamCall{call("k", s, false, "a"), call("k", 2*s, false, "b")},
			losses: []OwnerLoss{{Key: "k", At: 1500 * time.Millisecond}}, final: final(nil)},
		{name: "a loss before the first grant excuses nothing",
			calls:  []UpstreamCall{call("k", s, false, "a"), call("k", 2*s, false, "b")},
			losses: []OwnerLoss{{Key: "k", At: 500 * time.Millisecond}}, final: final(nil), fails: "at most 1 allowed"},
		{name: "a move before the first grant allows an epoch (an old owner may lag)",
			calls:  []UpstreamCall{owned(call("k", s, false, "a"), 7), call("k", 1100*time.Millisecond, false, "b")},
			losses: []OwnerLoss{{Key: "k", At: 500 * time.Millisecond, Moved: true, From: 7, Window: s}}, final: final(nil)},
		{name: "but only for the old owner's grant within its window",
			calls:  []UpstreamCall{call("k", s, false, "a"), owned(call("k", 1600*time.Millisecond, false, "b"), 7)},
			losses: []OwnerLoss{{Key: "k", At: 500 * time.Millisecond, Moved: true, From: 7, Window: s}}, final: final(nil), fails: "at most 1 allowed"},
		{name: "not for the new owner's grants",
			calls:  []UpstreamCall{owned(call("k", s, false, "a"), 8), owned(call("k", 1100*time.Millisecond, false, "b"), 8)},
			losses: []OwnerLoss{{Key: "k", At: 500 * time.Millisecond, Moved: true, From: 7, Window: s}}, final: final(nil), fails: "at most 1 allowed"},
		{name: "a lapse between the grants",
			calls: []UpstreamCall{call("k", s, false, "a"), call("k", 4*s, false, "b")}, final: final(nil)},
		{name: "two answers served",
			calls:  []UpstreamCall{call("k", s, false, "a"), call("k", 4*s, false, "b")},
			served: []Served{served("k", "a"), served("k", "b")}, final: final(nil), fails: "two answers served"},
		{name: "an answer no call gave",
			calls: []UpstreamCall{call("k", s, false, "a")}, served: []Served{served("k", "z")},
			final: final(nil), fails: "which no upstream call answered"},
		{name: "the answer of a failed call",
			calls: []UpstreamCall{call("k", s, true, "a")}, served: []Served{served("k", "a")},
			final: final(nil), fails: "which no upstream call answered"},
		{name: "a node holds another recording at the end",
			calls: []UpstreamCall{call("k", s, false, "a"), call("k", 4*s, false, "b")}, served: []Served{served("k", "a")},
			final: map[string]map[string]string{"n1": {"k": "a"}, "n2": {"k": "b"}}, fails: "holds \"b\" at the end"},
		{name: "a node lost the recording",
			calls: []UpstreamCall{call("k", s, false, "a")}, served: []Served{served("k", "a")},
			final: map[string]map[string]string{"n1": {"k": "a"}, "n2": {}}, fails: "n2 has no recording at the end"},
	} {
		var rec Record
		ProxyOnce(&rec, tc.calls, tc.served, tc.losses, 2*s, tc.final)
		if tc.fails == "" {
			require.True(t, rec.OK(), "%s: %v", tc.name, rec.Failures)
			continue
		}
		require.Len(t, rec.Failures, 1, tc.name)
		require.Contains(t, rec.Failures[0], tc.fails, tc.name)
	}
}
