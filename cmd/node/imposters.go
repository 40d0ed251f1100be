package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/rollout"
	"github.com/fenceline/fenceline/core/routing"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/imposterhttp"
	"github.com/fenceline/fenceline/realnet"
)

// imposterPrefix is where imposter definitions live in the replicated
// KV, one key per port.
const imposterPrefix = "imposter/"

func imposterKey(port int) string { return imposterPrefix + strconv.Itoa(port) }

// raftConfig keeps imposter definitions in the cluster's replicated KV:
// every change is one raft entry (a transaction guarded by the versions
// it read), so every node applies the same changes in the same order and
// the definitions survive any restart with the log.
type raftConfig struct {
	nd  *realnet.Node
	log *slog.Logger
}

var _ imposterhttp.Config = raftConfig{}

func (c raftConfig) Sync(ctx context.Context) error {
	_, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(struct{}, error)) {
		n.Admin.Barrier(func(err error) { done(struct{}{}, err) })
	})
	return err
}

func (c raftConfig) List(ctx context.Context) ([]imposterhttp.Definition, error) {
	var defs []imposterhttp.Definition
	recs := map[int][]imposterhttp.Recording{}
	err := c.nd.Do(ctx, func(n *node.Node) {
		for _, k := range n.Admin.LocalKeys(imposterPrefix) {
			port, err := strconv.Atoi(strings.TrimPrefix(k, imposterPrefix))
			e, ok := n.Admin.LocalGet(k)
			if err != nil || !ok {
				continue // not written by this code
			}
			// The value is shared with the state: copied before it
			// leaves the loop.
			defs = append(defs, imposterhttp.Definition{Port: port, JSON: slices.Clone(e.Value), Version: e.Version})
		}
		for port, keys := range recordingKeys(n) { //fenceline:unordered collected into a map
			for _, k := range keys {
				if e, ok := n.Admin.LocalGet(proxyonce.KVKey(k)); ok {
					recs[port] = append(recs[port], imposterhttp.Recording{Key: k, JSON: slices.Clone(e.Value), Version: e.Version})
				}
			}
		}
	})
	slices.SortFunc(defs, func(a, b imposterhttp.Definition) int { return a.Port - b.Port })
	for i := range defs {
		rs := recs[defs[i].Port]
		// In the order they were made: every node places them alike.
		slices.SortFunc(rs, func(a, b imposterhttp.Recording) int { return cmp.Compare(a.Version, b.Version) })
		defs[i].Recordings = rs
	}
	return defs, err
}

// recordingKeys lists the proxyOnce recordings' claim keys, by port (a
// key is "<port>:<signature hash>"). It runs on the loop.
func recordingKeys(n *node.Node) map[int][]string {
	out := map[int][]string{}
	prefix := proxyonce.KVKey("")
	for _, k := range n.Admin.LocalKeys(prefix) {
		key := strings.TrimPrefix(k, prefix)
		p, _, _ := strings.Cut(key, ":")
		if port, err := strconv.Atoi(p); err == nil {
			out[port] = append(out[port], key)
		}
	}
	return out
}

func (c raftConfig) Apply(ctx context.Context, ch imposterhttp.Change) (uint64, error) {
	var guards []kv.Guard
	for _, g := range ch.Guards {
		guards = append(guards, kv.VersionIs(imposterKey(g.Port), g.Version))
	}
	var ops []kv.Op
	for _, p := range ch.Delete {
		ops = append(ops, kv.Delete(imposterKey(p)))
	}
	for _, d := range ch.Put {
		ops = append(ops, kv.Put(imposterKey(d.Port), d.JSON))
	}
	var stale []string // the recordings to delete, once the change is in
	res, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(kv.Result, error)) {
		// The recordings to delete are those applied here when the change
		// is proposed; one committed in between stays, recorded for a
		// creation or generation no longer in force, and is never placed.
		all := recordingKeys(n)
		for _, port := range ch.DeleteRecordings {
			for _, k := range all[port] {
				stale = append(stale, proxyonce.KVKey(k))
			}
		}
		if len(ops) == 0 {
			done(kv.Result{Succeeded: true, Revision: n.Admin.Revision()}, nil)
			return
		}
		n.Admin.Propose(kv.Txn(guards, ops, nil), done)
	})
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, kv.ErrInvalid):
		return 0, fmt.Errorf("%w (at most 1 MiB per imposter and 128 imposters per change): %v", imposterhttp.ErrTooLarge, err)
	case err != nil:
		return 0, err
	case !res.Succeeded:
		return 0, imposterhttp.ErrConflict
	}
	rev := res.Revision
	if len(stale) > 0 {
		rev = c.deleteRecordings(ctx, stale, rev)
	}
	return rev, nil
}

// recordingsPerTxn bounds the recordings one cleanup entry deletes: a
// transaction takes at most kv.DefaultMaxTxnOps operations.
const recordingsPerTxn = 100

// deleteRecordings deletes recordings the change left out of force, in
// entries of recordingsPerTxn, and returns the revision after the last
// that applied. It is best effort: what it leaves is never placed again
// (it belongs to a creation or generation no longer in force), and the
// port's next deletion takes it.
func (c raftConfig) deleteRecordings(ctx context.Context, keys []string, rev uint64) uint64 {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), recordingsPerTxn)]
		keys = keys[len(batch):]
		ops := make([]kv.Op, len(batch))
		for i, k := range batch {
			ops[i] = kv.Delete(k)
		}
		res, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(kv.Result, error)) {
			n.Admin.Propose(kv.Txn(nil, ops, nil), done)
		})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			c.log.Warn("recordings left to delete", "count", len(batch)+len(keys), "err", err)
			return rev
		}
		rev = res.Revision
	}
	return rev
}

// AddRecording stores a proxy recording next to the imposter's
// definition, put only if its key is absent: one raft entry.
func (c raftConfig) AddRecording(ctx context.Context, _ int, key string, b []byte) error {
	k := proxyonce.KVKey(key)
	res, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(kv.Result, error)) {
		n.Admin.Propose(kv.Txn([]kv.Guard{kv.Absent(k)}, []kv.Op{kv.Put(k, b)}, nil), done)
	})
	if err == nil {
		err = res.Err
	}
	return err
}

func (c raftConfig) Revision(ctx context.Context) (uint64, error) {
	var rev uint64
	err := c.nd.Do(ctx, func(n *node.Node) { rev = n.Admin.Revision() })
	return rev, err
}

// clusterFlows is the flow store and directory stateful imposters use:
// each call goes through the node's loop, into the bounded bridge.
type clusterFlows struct {
	nd *realnet.Node
	// dir is the directory at the membership shape it was built for;
	// touched only on the node's loop.
	dir   *routing.RingDirectory
	shape [3]uint64
}

var _ imposterhttp.Flows = (*clusterFlows)(nil)

func (f *clusterFlows) Do(ctx context.Context, req flow.Request) (flow.Response, error) {
	resp, _, err := doFlow(ctx, f.nd, req)
	return resp, err
}

// doFlow runs one flow operation through the node's loop and returns the
// answer and the flow's owner at this node's membership. A call refused
// because the owner has not adopted the flow yet is made again after
// flow.RetryPause's pause, until ctx ends.
func doFlow(ctx context.Context, nd *realnet.Node, req flow.Request) (flow.Response, dial.NodeID, error) {
	for attempt := 0; ; attempt++ {
		var owner dial.NodeID // written on the loop before the answer
		resp, err := realnet.Await(ctx, nd, func(c *node.Node, done func(flow.Response, error)) {
			owner, _ = c.Flow.Owner(req.Flow)
			c.Flow.Do(req, done)
		})
		switch {
		case errors.Is(err, realnet.ErrBusy):
			err = fmt.Errorf("%w: %w (%w)", flow.ErrUnavailable, flow.ErrShed, err) // never reached the store
		}
		if pause, again := flow.RetryPause(err, attempt); again {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return resp, owner, err
			case <-t.C:
			}
			continue
		}
		return resp, owner, err
	}
}

func (f *clusterFlows) OwnerOf(ctx context.Context, key string) (routing.Owner, error) {
	var o routing.Owner
	err := f.nd.Do(ctx, func(c *node.Node) {
		if g, inFleet := c.FleetGroup(); inFleet {
			d := c.Directory()
			if d == nil {
				return // no directory yet: Unknown, a 503
			}
			if !d.Holds(g, key) {
				o = otherGroupOwner(d, key)
				return
			}
			// A flow of this node's group: its owner by the group's own
			// committed membership, which the directory may lag.
		}
		if shape := c.Consensus.MembershipShape(); f.dir == nil || shape != f.shape {
			ms := c.Consensus.Membership()
			voters := make([]routing.Member, len(ms.Voters))
			for i, m := range ms.Voters {
				voters[i] = routing.Member{ID: m.ID, HTTP: m.HTTP}
			}
			f.dir, f.shape = routing.NewRingDirectory(c.Consensus.ID(), routing.OneGroup, ms.Index, voters), shape
		}
		o = f.dir.OwnerOf(key)
	})
	if errors.Is(err, realnet.ErrBusy) {
		err = fmt.Errorf("%w: %w (%w)", flow.ErrUnavailable, flow.ErrShed, err)
	}
	return o, err
}

// otherGroupOwner names the owner of a flow another group of the fleet
// holds, by the directory: the owner among that group's voters at the
// membership index the directory names, where a forward sends the whole
// request. A directory that lags the group's membership sends it to a
// node that is no longer the owner, which serves it through its own flow
// store (each state call then goes to the owner it knows, or is fenced):
// a slower path, never a second copy.
func otherGroupOwner(d *fleet.Directory, key string) routing.Owner {
	r := d.Resolve(key)
	_, m, _ := d.Member(r.Owner) // the owner is one of its group's voters
	return routing.Owner{View: routing.Remote, Node: r.Owner, MIdx: r.MIdx, Addr: m.HTTP}
}

// raftClaims is proxyOnce's claim protocol across the cluster
// (core/proxyonce): the signature's owner on the ring serializes its
// claims, and a recording is a raft entry, put only if absent, next to the
// imposter's definition.
type raftClaims struct{ nd *realnet.Node }

var _ imposterhttp.Claims = raftClaims{}

func (c raftClaims) Acquire(ctx context.Context, key string) (proxyonce.Answer, error) {
	return realnet.Await(ctx, c.nd, func(n *node.Node, done func(proxyonce.Answer, error)) { n.ProxyOnce.Acquire(key, done) })
}

func (c raftClaims) Record(ctx context.Context, key string, t proxyonce.Token, recording []byte) error {
	_, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(struct{}, error)) {
		n.ProxyOnce.Record(key, t, recording, func(err error) { done(struct{}{}, err) })
	})
	return err
}

func (c raftClaims) Release(key string, t proxyonce.Token) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.nd.Do(ctx, func(n *node.Node) { n.ProxyOnce.Release(key, t) }) // a lost release lapses
}

// nodeCluster is the cluster as the imposter server sees it: the
// committed membership, and the rollout service (core/rollout) that an
// admin change waits on until every member serves it.
type nodeCluster struct {
	nd *realnet.Node
	// waited observes each rollout's wait, by whether every member
	// confirmed ("true") or not; nil: not measured.
	waited *prometheus.HistogramVec
	// nudges wakes the server's watch when a change waits for this node
	// (buffered: one pending nudge is enough).
	nudges chan struct{}
}

var _ imposterhttp.Cluster = (*nodeCluster)(nil)

func newNodeCluster(ctx context.Context, nd *realnet.Node) (*nodeCluster, error) {
	c := &nodeCluster{nd: nd, nudges: make(chan struct{}, 1)}
	err := nd.Do(ctx, func(n *node.Node) {
		n.OnBehind(func(uint64) {
			select {
			case c.nudges <- struct{}{}:
			default:
			}
		})
	})
	return c, err
}

func (c *nodeCluster) Self() uint64 { return uint64(c.nd.ID()) }

func (c *nodeCluster) Members(ctx context.Context) ([]imposterhttp.Member, error) {
	var out []imposterhttp.Member
	err := c.nd.Do(ctx, func(n *node.Node) {
		ms := n.Admin.Membership()
		for _, m := range append(slices.Clone(ms.Voters), ms.Learners...) {
			out = append(out, imposterhttp.Member{ID: uint64(m.ID), Name: m.Name, HTTP: m.HTTP})
		}
	})
	slices.SortFunc(out, func(a, b imposterhttp.Member) int { return cmp.Compare(a.ID, b.ID) })
	return out, err
}

// servedTimeout bounds the report of what this node serves: a loop too
// busy to take it for a second makes a rollout wait for the next one.
const servedTimeout = time.Second

func (c *nodeCluster) Served(rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), servedTimeout)
	defer cancel()
	_ = c.nd.Do(ctx, func(n *node.Node) { n.Rollout.Served(rev) })
}

func (c *nodeCluster) AwaitRollout(ctx context.Context, rev uint64) ([]string, error) {
	start := time.Now()
	var names map[dial.NodeID]string
	res, err := realnet.Await(ctx, c.nd, func(n *node.Node, done func(rollout.Result, error)) {
		ms := n.Admin.Membership()
		names = map[dial.NodeID]string{}
		for _, m := range append(slices.Clone(ms.Voters), ms.Learners...) {
			names[m.ID] = m.Name
		}
		n.Rollout.Await(rev, done)
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res.Missing))
	for i, id := range res.Missing {
		out[i] = names[id]
		if out[i] == "" {
			out[i] = id.String()
		}
	}
	if c.waited != nil {
		c.waited.WithLabelValues(strconv.FormatBool(len(out) == 0)).Observe(time.Since(start).Seconds())
	}
	return out, nil
}

func (c *nodeCluster) Nudges() <-chan struct{} { return c.nudges }
