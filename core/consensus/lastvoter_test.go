package consensus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
)

// conf runs a membership call on node i and waits for its answer.
func (c *cluster) conf(i int, call func(n *consensus.Node, done func(error))) error {
	var err error
	answered := false
	c.nodes[i].Exec(func() { call(c.node(i), func(e error) { err, answered = e, true }) })
	for !answered {
		require.True(c.t, c.k.Step(), "the queue ran dry before an answer")
	}
	return err
}

func voterIDs(n *consensus.Node) []dial.NodeID {
	var out []dial.NodeID
	for _, m := range n.Membership().Voters {
		out = append(out, m.ID)
	}
	return out
}

// Removing the last voter is refused before it is proposed (etcd raft
// panics applying it, on every member and on every restart, the entry
// being in the log), and so is making it a learner; the node goes on
// serving.
func TestRemovingTheLastVoterIsRefused(t *testing.T) {
	c := newCluster(t, 11, 2, 0)
	l := c.elect()
	other := 1 - l
	require.NoError(t, c.conf(l, func(n *consensus.Node, done func(error)) { n.RemoveMember(c.nodes[other].ID(), done) }))
	c.nodes[other].Crash() // a removed node is shut down
	c.run(time.Second)
	require.Equal(t, []dial.NodeID{c.nodes[l].ID()}, voterIDs(c.node(l)))
	m := c.node(l).Membership().Index

	err := c.conf(l, func(n *consensus.Node, done func(error)) { n.RemoveMember(c.nodes[l].ID(), done) })
	require.ErrorIs(t, err, consensus.ErrLastVoter)
	require.EqualError(t, err, "consensus: refusing to remove the last voter")
	err = c.conf(l, func(n *consensus.Node, done func(error)) {
		n.AddLearner(consensus.NewMember(c.nodes[l].Name(), ""), done)
	})
	require.ErrorIs(t, err, consensus.ErrLastVoter, "making the last voter a learner leaves no voter either")

	c.run(time.Second)
	require.True(t, c.node(l).IsLeader(), "the last voter still leads")
	res, err := c.propose(l, kv.Put("after", []byte("1")))
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.Equal(t, m, c.node(l).Membership().Index, "no membership change was applied")
	require.Equal(t, []dial.NodeID{c.nodes[l].ID()}, voterIDs(c.node(l)))
}

// A removal of the last voter that is in the log already (written by an
// earlier version, or proposed on a view that was stale by the time it
// committed) applies as nothing, on every restart too: the node neither
// panics nor loses its voter, and its proposer hears ErrLastVoter.
func TestALastVoterRemovalInTheLogAppliesAsNothing(t *testing.T) {
	c := newCluster(t, 12, 1, 0)
	c.start(c.nodes...)
	c.run(2 * time.Second)
	require.Equal(t, 0, c.leader())
	res, err := c.propose(0, kv.Put("before", []byte("1")))
	require.NoError(t, err)
	require.NoError(t, res.Err)
	m := c.node(0).Membership().Index

	err = c.conf(0, func(n *consensus.Node, done func(error)) { n.RemoveUnchecked(c.nodes[0].ID(), done) })
	require.ErrorIs(t, err, consensus.ErrLastVoter, "applied as nothing, and said so")
	require.Equal(t, uint64(1), c.node(0).RefusedConfChanges)
	res, err = c.propose(0, kv.Put("after", []byte("2")))
	require.NoError(t, err, "the node goes on")
	require.NoError(t, res.Err)

	// The entry is still in the journal: a restart applies it again,
	// and again as nothing.
	c.nodes[0].Crash()
	c.start(c.nodes[0])
	c.run(2 * time.Second)
	require.True(t, c.node(0).IsLeader(), "the restarted node leads its group of one")
	require.Equal(t, uint64(1), c.node(0).RefusedConfChanges, "replayed, and refused again")
	require.Equal(t, m, c.node(0).Membership().Index)
	require.Equal(t, []dial.NodeID{c.nodes[0].ID()}, voterIDs(c.node(0)))
	for _, key := range []string{"before", "after"} {
		_, ok := c.node(0).LocalGet(key)
		require.True(t, ok, "%s survived the restart", key)
	}
	res, err = c.propose(0, kv.Put("restarted", []byte("3")))
	require.NoError(t, err)
	require.NoError(t, res.Err)
}

// The leader of two voters asked to remove itself hands leadership to
// the other first, which appends the change and commits it itself. If
// the leader appended it, it would step down on applying it, and the
// other, had it missed the commit (here: the link cut the instant the
// change applies, then the removed node stopped), could be elected only
// with the vote of the node just removed: never (etcd-io/etcd#10563).
func TestRemovingTheLeaderOfTwoHandsOverFirst(t *testing.T) {
	c := newCluster(t, 13, 2, 0)
	l := c.elect()
	other := 1 - l
	leader, survivor := c.nodes[l], c.nodes[other]
	cut := false
	for i := range c.nodes {
		c.node(i).OnMembership(func(ms consensus.Membership) {
			if cut || len(ms.Voters) != 1 {
				return
			}
			// The first node to apply the removal: every frame still on
			// its way between the two is lost.
			cut = true
			c.nw.Block(c.nodes[i].ID(), c.nodes[1-i].ID())
			c.nw.Block(c.nodes[1-i].ID(), c.nodes[i].ID())
		})
	}
	err := c.conf(l, func(n *consensus.Node, done func(error)) { n.RemoveMember(leader.ID(), done) })
	require.True(t, cut)
	// Answered, or not, the removed node is stopped now.
	_ = err
	leader.Crash()
	c.run(5 * time.Second)
	require.True(t, c.node(other).IsLeader(), "the survivor leads alone: %s", c.node(other).Status())
	require.Equal(t, []dial.NodeID{survivor.ID()}, voterIDs(c.node(other)))
	res, err := c.propose(other, kv.Put("alone", []byte("1")))
	require.NoError(t, err)
	require.NoError(t, res.Err)
}
