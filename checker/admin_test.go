package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/dial"
)

// spareRecord is a group of three that takes n4 as a learner at 3s,
// promotes it at 4s, and removes it at 9s.
var spareRecord = []MembershipChange{
	{Index: 1, Voters: []dial.NodeID{1, 2, 3}},
	{Index: 7, Voters: []dial.NodeID{1, 2, 3}, Learners: []dial.NodeID{4}, At: 3 * time.Second},
	{Index: 12, Voters: []dial.NodeID{1, 2, 3, 4}, At: 4 * time.Second},
	{Index: 30, Voters: []dial.NodeID{1, 2, 3}, At: 9 * time.Second},
}

func TestAdminActs(t *testing.T) {
	name := func(id dial.NodeID) string { return map[dial.NodeID]string{1: "n1", 2: "n2", 3: "n3", 4: "n4"}[id] }
	join := AdminAct{Join: true, Node: 4, Asked: time.Second, OKs: []time.Duration{3 * time.Second, 5 * time.Second}}
	remove := AdminAct{Node: 4, Asked: 8 * time.Second, OKs: []time.Duration{9 * time.Second}}
	// n4 joined again at 12s, learner at 13s, voter at 14s.
	again := append(slices.Clone(spareRecord),
		MembershipChange{Index: 40, Voters: []dial.NodeID{1, 2, 3}, Learners: []dial.NodeID{4}, At: 13 * time.Second},
		MembershipChange{Index: 44, Voters: []dial.NodeID{1, 2, 3, 4}, At: 14 * time.Second})
	rejoin := AdminAct{Join: true, Node: 4, Asked: 12 * time.Second, OKs: []time.Duration{13 * time.Second}}
	for _, c := range []struct {
		what   string
		acts   []AdminAct
		record []MembershipChange
		fails  string // "" for a pass
	}{
		{"joined, promoted, removed, each answered once done", []AdminAct{join, remove}, spareRecord, ""},
		{"joined and promoted", []AdminAct{join}, spareRecord[:3], ""},
		{"joined, removed, joined again", []AdminAct{join, remove, rejoin}, again, ""},
		{"refused all along (no answer of nil), and landed", []AdminAct{{Join: true, Node: 4, Asked: time.Second}}, spareRecord[:3], ""},
		{"a join answered before it was applied",
			[]AdminAct{{Join: true, Node: 4, Asked: time.Second, OKs: []time.Duration{2 * time.Second}}}, spareRecord[:3],
			"admin-acts: join of n4 answered done at 2s, when the newest membership recorded did not say so"},
		{"a removal answered before it was applied",
			[]AdminAct{join, {Node: 4, Asked: 8 * time.Second, OKs: []time.Duration{8500 * time.Millisecond}}}, spareRecord,
			"admin-acts: removal of n4 answered done at 8.5s, when the newest membership recorded did not say so"},
		{"a join answered by what an earlier join did",
			[]AdminAct{join, remove, {Join: true, Node: 4, Asked: 12 * time.Second, OKs: []time.Duration{12500 * time.Millisecond}}}, again,
			"admin-acts: join of n4 answered done at 12.5s, when the newest membership recorded did not say so"},
		{"a join that never landed", []AdminAct{join}, spareRecord[:1],
			"admin-acts: join of n4 answered done at 3s, when the newest membership recorded did not say so"},
		{"a learner never promoted", []AdminAct{{Join: true, Node: 4, Asked: time.Second}}, spareRecord[:2],
			"admin-acts: the join of n4 asked at 1s had not landed at the run's end (membership index 7)"},
		{"a removal that never landed", []AdminAct{join, {Node: 4, Asked: 8 * time.Second}}, spareRecord[:3],
			"admin-acts: the removal of n4 asked at 8s had not landed at the run's end (membership index 12)"},
		{"a node removed that never voted",
			[]AdminAct{{Join: true, Node: 4, Asked: time.Second}, {Node: 4, Asked: 8 * time.Second}},
			[]MembershipChange{spareRecord[0], spareRecord[1], {Index: 30, Voters: []dial.NodeID{1, 2, 3}, At: 9 * time.Second}},
			"admin-acts: the join of n4 asked at 1s had not landed by 8s, when the next act on it was asked"},
		{"a removal that had not landed when the join after it was asked",
			[]AdminAct{join, {Node: 4, Asked: 8 * time.Second}, {Join: true, Node: 4, Asked: 8500 * time.Millisecond}}, again,
			"admin-acts: the removal of n4 asked at 8s had not landed by 8.5s, when the next act on it was asked"},
	} {
		t.Run(c.what, func(t *testing.T) {
			var rec Record
			require.Equal(t, len(c.acts), AdminActs(&rec, c.acts, c.record, 10*time.Second, 30*time.Second, name))
			if c.fails == "" {
				require.True(t, rec.OK(), "%v %v", rec.Failures, rec.Unsure)
				return
			}
			require.Contains(t, rec.Failures, c.fails)
		})
	}
	var rec Record
	require.Zero(t, AdminActs(&rec, []AdminAct{join}, nil, 10*time.Second, 30*time.Second, name))
	require.Equal(t, []string{"admin-acts: no membership recorded to judge 1 acts by"}, rec.Unsure)

	// A run that ended too soon after the calm cannot say the act did not
	// land; what its answers said is judged all the same.
	rec = Record{}
	early := AdminAct{Join: true, Node: 4, Asked: time.Second, OKs: []time.Duration{2 * time.Second}}
	require.Equal(t, 1, AdminActs(&rec, []AdminAct{early}, spareRecord[:1], 10*time.Second, 15*time.Second, name))
	require.Equal(t, []string{"admin-acts: join of n4 answered done at 2s, when the newest membership recorded did not say so"}, rec.Failures)
	require.Equal(t, []string{"admin-acts: the join of n4 asked at 1s: the run ended at 15s, under 10s after it and the calm at 10s"}, rec.Unsure)
}
