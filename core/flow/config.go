package flow

import (
	"fmt"
	"time"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/shard"
)

// Config is a node's flow-store configuration. Zero fields take defaults.
type Config struct {
	// Permits bounds the stateful calls in flight from this node (the
	// bounded bridge). A call that finds none free is shed at once: a slow
	// owner must not queue up stateful traffic until it starves the
	// stateless traffic sharing the node. Default 64.
	Permits int
	// Deadline bounds every call, from permit to answer. Default 2s.
	Deadline time.Duration
	// AntiEntropy is how often a node pulls, for the flows it
	// replicates, what their owners hold. Default 5s.
	AntiEntropy time.Duration
	// AdoptWait is how long a new owner waits for the previous owner's
	// answer before it adopts from the replicas alone. It must outlast
	// the window in which a deposed owner that cannot be reached may
	// still serve; see CONTRIBUTING.md. Default 1s.
	AdoptWait time.Duration
	// DefaultTTLMs is an entry's lifetime when a set names none.
	// Default 300 000 (5 minutes).
	DefaultTTLMs int64
	// MaxTTLMs bounds the TTL a write may ask for; longer is refused.
	// Tombstones and expired entries are kept this long after they
	// expire (plus a minute for clock skew), which is what makes it safe
	// for every copy to purge them on its own. Default 3 600 000 (1 hour).
	MaxTTLMs      int64
	MaxKeyBytes   int // default 1 KiB
	MaxValueBytes int // default 16 KiB
	// MaxFlowKeys bounds the keys of one flow (tombstones count), so a
	// flow's copy — at most MaxFlowKeys × (MaxKeyBytes + MaxValueBytes) —
	// fits in one frame. Default 128 (about 2.2 MiB at the byte bounds).
	MaxFlowKeys int
	// MaxAEFlows bounds the flows one anti-entropy answer carries; the
	// rest wait for the next round. Default 64.
	MaxAEFlows int
	// AEPartitions is how many groups anti-entropy splits the flows an
	// owner and a replica share into, each compared by one digest before
	// any flow is sent. Every node of a cluster must use the same: a
	// replica's digests are compared partition by partition. Default 64;
	// the simulator draws it small, so a partition holds many flows.
	AEPartitions int
	// MaxMoveFlows bounds the flows one page of a partition move carries
	// (move.go); the rest come in the next pages. Default 64.
	MaxMoveFlows int
	// Shard configures the node's FlowShard (core/shard): the flow cap,
	// the async fsync interval, the writer's bounds. Its GraceMs defaults
	// to MaxTTLMs plus one minute, and its MaxWait to a quarter of the
	// Deadline, the most it may be: an owner holds a request for a
	// barrier (a quarter), then a clock floor's fsync and the write's
	// (a quarter each), and answers within three quarters of the
	// Deadline from when it took it — before its caller, who started the
	// clock earlier, gives up.
	Shard shard.Config

	Bugs bugs.Set
}

// DefaultMaxAEFlows is MaxAEFlows unless set.
const DefaultMaxAEFlows = 64

func (c Config) withDefaults() Config {
	if c.Permits == 0 {
		c.Permits = 64
	}
	if c.Deadline == 0 {
		c.Deadline = 2 * time.Second
	}
	if c.AntiEntropy == 0 {
		c.AntiEntropy = 5 * time.Second
	}
	if c.AdoptWait == 0 {
		c.AdoptWait = time.Second
	}
	if c.DefaultTTLMs == 0 {
		c.DefaultTTLMs = 300_000
	}
	if c.MaxTTLMs == 0 {
		c.MaxTTLMs = 3_600_000
	}
	if c.Shard.GraceMs == 0 {
		c.Shard.GraceMs = c.MaxTTLMs + 60_000
	}
	if c.Shard.MaxWait == 0 {
		c.Shard.MaxWait = c.maxWait()
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = 1 << 10
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = 16 << 10
	}
	if c.MaxFlowKeys == 0 {
		c.MaxFlowKeys = 128
	}
	if c.MaxAEFlows == 0 {
		c.MaxAEFlows = DefaultMaxAEFlows
	}
	if c.AEPartitions == 0 {
		c.AEPartitions = 64
	}
	if c.MaxMoveFlows == 0 {
		c.MaxMoveFlows = 64
	}
	return c
}

// Validate reports why a configuration cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.Permits < 1 || c.Deadline <= 0 || c.AntiEntropy <= 0 || c.AdoptWait <= 0 || c.DefaultTTLMs <= 0 ||
		c.MaxKeyBytes < 1 || c.MaxValueBytes < 1 || c.MaxAEFlows < 1 || c.MaxMoveFlows < 1 || c.MaxFlowKeys < 1 || c.AEPartitions < 1 {
		return fmt.Errorf("flow: every bound must be positive: %+v", c)
	}
	if c.AEPartitions > 1<<16 {
		return fmt.Errorf("flow: %d anti-entropy partitions is over the most, 65536: a replica's digests must fit one frame", c.AEPartitions)
	}
	if c.DefaultTTLMs > c.MaxTTLMs {
		return fmt.Errorf("flow: default TTL %dms is over the longest allowed, %dms", c.DefaultTTLMs, c.MaxTTLMs)
	}
	if c.Shard.GraceMs < c.MaxTTLMs {
		return fmt.Errorf("flow: shard grace %dms is under the longest TTL %dms: a purged tombstone could let a stale copy return", c.Shard.GraceMs, c.MaxTTLMs)
	}
	if c.Shard.MaxWait > c.maxWait() {
		return fmt.Errorf("flow: shard MaxWait %v is over a quarter of the deadline %v: an owner could hold a request past its caller's deadline", c.Shard.MaxWait, c.Deadline)
	}
	return c.Shard.Validate()
}

// maxWait is the longest the shard may hold a durability wait: a quarter
// of the Deadline (and never zero, which the shard takes for its own
// default).
func (c Config) maxWait() time.Duration { return max(c.Deadline/4, 1) }

func (c Config) check(req Request) error {
	switch {
	case req.Flow == "":
		return fmt.Errorf("%w: empty flow id", ErrBadRequest)
	case req.Op < OpGet || req.Op > OpSetAll:
		return fmt.Errorf("%w: unknown op %d", ErrBadRequest, req.Op)
	case req.Op != OpGetAll && req.Op != OpClear && req.Op != OpSetAll && req.Key == "":
		return fmt.Errorf("%w: %s needs a key", ErrBadRequest, req.Op)
	case len(req.Key) > c.MaxKeyBytes || len(req.Flow) > c.MaxKeyBytes:
		return fmt.Errorf("%w: key or flow id over %d bytes", ErrBadRequest, c.MaxKeyBytes)
	case len(req.Value) > c.MaxValueBytes || len(req.Expect) > c.MaxValueBytes:
		return fmt.Errorf("%w: value over %d bytes", ErrBadRequest, c.MaxValueBytes)
	case req.TTLMs < 0:
		return fmt.Errorf("%w: negative ttl", ErrBadRequest)
	case req.TTLMs > c.MaxTTLMs:
		return fmt.Errorf("%w: ttl %dms is over the longest allowed, %dms", ErrBadRequest, req.TTLMs, c.MaxTTLMs)
	case !req.Mode.Valid():
		return fmt.Errorf("%w: %w", ErrBadRequest, shard.ErrBadMode)
	case req.Op == OpSetAll && (len(req.Entries) == 0 || len(req.Entries) > c.MaxFlowKeys):
		return fmt.Errorf("%w: set-all takes 1 to %d entries, got %d", ErrBadRequest, c.MaxFlowKeys, len(req.Entries))
	}
	for k, v := range req.Entries { //fenceline:unordered validation only; every entry must pass
		if k == "" || len(k) > c.MaxKeyBytes || len(v) > c.MaxValueBytes {
			return fmt.Errorf("%w: set-all entry key empty or over %d bytes, or value over %d bytes", ErrBadRequest, c.MaxKeyBytes, c.MaxValueBytes)
		}
	}
	return nil
}
