package realnet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

var nodeKeys = transport.Keys{Control: GenerateKey(), Data: GenerateKey()}

func openTestNode(t *testing.T, name, dir, peer string, bootstrap bool) *Node {
	n, err := OpenNode(NodeConfig{Name: name, DataDir: dir, PeerAddr: peer, Keys: nodeKeys, Bootstrap: bootstrap})
	require.NoError(t, err)
	return n
}

func flowDo(t *testing.T, n *Node, req flow.Request) (flow.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return Await(ctx, n, func(core *node.Node, done func(flow.Response, error)) { core.Flow.Do(req, done) })
}

// flowRetry runs req through n, retrying for up to ten seconds while the
// answer is a refusal a settling cluster gives (not adopted yet, fenced
// by an owner at another membership index): those certainly did not
// apply. Any other answer ends it.
func flowRetry(t *testing.T, n *Node, req flow.Request) (resp flow.Response, err error) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err = flowDo(t, n, req)
		settling := errors.Is(err, flow.ErrNotAdopted) || errors.Is(err, flow.ErrFenced)
		if !settling || time.Now().After(deadline) {
			return resp, err
		}
	}
}

// Three real nodes on loopback, sealed, on TCP and bbolt: one founds the
// cluster, two join as learners and are promoted; a flow written through
// one is read through the others; a node closed and reopened keeps its
// sync writes and rejoins.
func TestThreeNodesOnLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	start := time.Now()
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	peers := []string{"127.0.0.1:0", "127.0.0.2:0", "127.0.0.3:0"}
	n1 := openTestNode(t, "n1", dirs[0], peers[0], true)
	defer func() { _ = n1.Close() }()
	require.Eventually(t, func() bool {
		var leader bool
		_ = n1.Do(context.Background(), func(c *node.Node) { leader = c.Consensus.IsLeader() })
		return leader
	}, 5*time.Second, 10*time.Millisecond, "a one-node cluster elects itself")

	others := []*Node{}
	for i, name := range []string{"n2", "n3"} {
		n := openTestNode(t, name, dirs[i+1], peers[i+1], false)
		defer func() { _ = n.Close() }()
		others = append(others, n)
		require.NoError(t, n.Introduce(context.Background(), map[dial.NodeID]string{n1.ID(): n1.PeerAddr()}))
		// An addition that times out may have been applied (a busy
		// machine: n2's promotion holds the next change back): ask again
		// until the membership names it.
		var last error
		added := assert.Eventually(t, func() bool {
			var member bool
			_ = n1.Do(context.Background(), func(c *node.Node) {
				ms := c.Consensus.Membership()
				for _, m := range append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...) {
					member = member || m.Name == name
				}
			})
			if member {
				return true
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, last = Await(ctx, n1, func(c *node.Node, done func(struct{}, error)) {
				c.Consensus.AddLearner(consensus.NewMember(name, n.PeerAddr()), func(err error) { done(struct{}{}, err) })
			})
			return false
		}, 20*time.Second, 10*time.Millisecond, "add %s", name)
		if !added {
			t.Fatalf("%s never became a member; the last addition answered %v", name, last)
		}
	}
	require.Eventually(t, func() bool {
		var voters int
		_ = n1.Do(context.Background(), func(c *node.Node) { voters = len(c.Consensus.Membership().Voters) })
		return voters == 3
	}, 10*time.Second, 20*time.Millisecond, "both learners promoted: %s", func() string {
		var out string
		for _, n := range append([]*Node{n1}, others...) {
			_ = n.Do(context.Background(), func(c *node.Node) {
				out += fmt.Sprintf("\n%s: %s link=%+v tcp=%+v", n.cfg.Name, c.Consensus.Status(), c.Link.Stats(), n.TCPStats())
			})
		}
		return out
	}())

	t.Logf("promoted at %v", time.Since(start))
	all := append([]*Node{n1}, others...)
	// Twenty flows at once, each set through one node and read through
	// the next. A new owner adopts each flow before it serves it (asking
	// the previous owners, waiting out AdoptWait for a silent one), so
	// the first tries answer "not adopted yet"; a node that has not yet
	// applied the last promotion is fenced by an owner that has. Both
	// are refusals of a request that certainly did not apply, and are
	// retried, as a client of the engine retries its 503s.
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := fmt.Sprintf("i4545:user-%d", i)
			set := flow.Request{Flow: f, Op: flow.OpSet, Key: "k", Value: []byte("v"), Mode: shard.Sync}
			if _, errs[i] = flowRetry(t, all[i%3], set); errs[i] != nil {
				return
			}
			resp, err := flowRetry(t, all[(i+1)%3], flow.Request{Flow: f, Op: flow.OpGet, Key: "k"})
			if err == nil && string(resp.Value) != "v" {
				err = fmt.Errorf("read %q", resp.Value)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Logf("flow %d via %s: %v", i, all[i%3].cfg.Name, err)
			for _, n := range all {
				_ = n.Do(context.Background(), func(c *node.Node) {
					owner, _ := c.Flow.Owner(fmt.Sprintf("i4545:user-%d", i))
					t.Logf("  %s: owner %v link=%+v", n.cfg.Name, owner, c.Link.Stats())
				})
			}
		}
	}
	for i, err := range errs {
		require.NoError(t, err, "flow %d", i)
	}
	t.Logf("20 flows written and read at %v", time.Since(start))
	st := n1.TCPStats()
	require.Positive(t, st.FramesIn)
	require.Zero(t, st.AuthFailed)

	// Close n3 and reopen it from its dir: it comes back a voter.
	require.NoError(t, others[1].Close())
	n3, err := OpenNode(NodeConfig{Name: "n3", DataDir: dirs[2], PeerAddr: others[1].PeerAddr(), Keys: nodeKeys})
	require.NoError(t, err)
	defer func() { _ = n3.Close() }()
	require.Eventually(t, func() bool {
		resp, err := flowDo(t, n3, flow.Request{Flow: "i4545:user-0", Op: flow.OpGet, Key: "k"})
		return err == nil && string(resp.Value) == "v"
	}, 10*time.Second, 50*time.Millisecond)
}
