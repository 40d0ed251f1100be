// Package node composes one cluster node from the core's parts: the raft
// driver (control plane) and the flow store (data plane), sharing one
// clock, one peer seam and one disk. It routes each arriving frame to its
// part by the frame's first byte.
package node

import (
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Rand is the seeded source a node's parts draw from.
type Rand interface {
	Uint64() uint64
	Int64N(n int64) int64
}

// Env is what a node is handed.
type Env struct {
	Clock clock.Clock
	Net   dial.Sender
	FS    recfile.FS
	Rand  Rand
	// Shard is the flow store's disk. Nil: a shard log (FlowLog) on FS,
	// as the simulator runs it; the real node hands in bbolt.
	Shard shard.Backend
}

// FlowLog is the flow shard's file on FS when no backend is handed in:
// apart from the raft journal, so their fsyncs never contend.
const FlowLog = "flow.log"

// Config configures both parts.
type Config struct {
	Consensus consensus.Config
	Flow      flow.Config
}

// Node is one cluster node.
type Node struct {
	Consensus *consensus.Node
	Flow      *flow.Store
	BadFrames uint64
	// Quarantined, when set, says the flow shard's log was found damaged
	// at boot and where it was moved; the node started with an empty
	// shard. The binary logs it; an operator may inspect the file.
	Quarantined string
}

// Open boots the node: the consensus part from its journal, then the flow
// store, which asks the consensus part for membership and isolation.
func Open(cfg Config, env Env) (*Node, error) {
	cn, err := consensus.Open(cfg.Consensus, consensus.Env{Clock: env.Clock, Net: env.Net, FS: env.FS, Rand: env.Rand})
	if err != nil {
		return nil, err
	}
	epoch, err := nextEpoch(env.FS)
	if err != nil {
		cn.Stop()
		return nil, fmt.Errorf("node: boot epoch: %w", err)
	}
	backend, quarantined := env.Shard, ""
	if backend == nil {
		if backend, quarantined, err = openShardLog(env.FS, epoch); err != nil {
			cn.Stop()
			return nil, fmt.Errorf("node: flow shard: %w", err)
		}
	}
	fs, err := flow.New(cfg.Flow, flow.Env{ID: cn.ID(), Epoch: epoch, Clock: env.Clock, Net: env.Net, Ctl: control{cn}, Rand: env.Rand, Backend: backend})
	if err != nil {
		cn.Stop()
		_ = backend.Close() // the store's error is the one worth reporting
		return nil, fmt.Errorf("node: flow store: %w", err)
	}
	return &Node{Consensus: cn, Flow: fs, Quarantined: quarantined}, nil
}

// openShardLog opens the flow shard's log. A log damaged before its tail
// (shard.ErrCorrupt: bytes no crash leaves) is never read as data and
// never deleted: it is renamed aside, under the boot epoch so no earlier
// one is overwritten, and the node starts with an empty shard. That loses
// no flow the cluster still holds — every flow has two more copies, and a
// restarted owner re-adopts from them, as after any long partition — where
// refusing to boot would take this node's third of the copies away for
// good. The returned note says what happened, for the operator.
func openShardLog(fs recfile.FS, epoch uint64) (*shard.Log, string, error) {
	l, err := shard.OpenLog(fs, FlowLog)
	if !errors.Is(err, shard.ErrCorrupt) {
		return l, "", err
	}
	aside := fmt.Sprintf("%s.corrupt-%d", FlowLog, epoch)
	if rerr := fs.Rename(FlowLog, aside); rerr != nil {
		return nil, "", fmt.Errorf("%w (moving it aside failed: %v)", err, rerr)
	}
	if serr := fs.SyncDir(); serr != nil {
		return nil, "", fmt.Errorf("%w (moving it aside failed: %v)", err, serr)
	}
	l, oerr := shard.OpenLog(fs, FlowLog)
	return l, fmt.Sprintf("%v: moved to %s; starting with an empty shard", err, aside), oerr
}

// HandleFrame routes a frame to the part it is for.
func (n *Node) HandleFrame(from dial.NodeID, frame []byte) {
	if len(frame) == 0 {
		n.BadFrames++
		return
	}
	switch frame[0] {
	case flow.FramePrefix:
		n.Flow.HandleFrame(from, frame)
	default:
		n.Consensus.HandleFrame(from, frame)
	}
}

// Stop stops both parts.
func (n *Node) Stop() {
	n.Flow.Stop()
	n.Consensus.Stop()
}

// control answers the flow store's questions from the consensus part.
type control struct{ cn *consensus.Node }

func (c control) Membership() flow.Membership {
	ms := c.cn.Membership()
	ids := make([]dial.NodeID, len(ms.Voters))
	for i, m := range ms.Voters {
		ids[i] = m.ID
	}
	return flow.Membership{Index: ms.Index, Voters: ids, PrevIndex: ms.PrevIndex, PrevVoters: ms.PrevVoters}
}

func (c control) IsIsolated() bool { return c.cn.IsIsolated() }
