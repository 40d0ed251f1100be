package consensus

import (
	"errors"
	"fmt"
	"time"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
)

// Config is one node's consensus configuration.
type Config struct {
	Name string // the node's name; its id is dial.IDFromName(Name)
	Addr string // where peers reach it, carried in membership entries

	// Bootstrap lists the voters of a new cluster. Every founding node
	// passes the same list (itself included). A node that joins an
	// existing cluster passes none and waits to be added as a learner.
	// Ignored when the journal already holds state.
	Bootstrap []Member

	TickInterval   time.Duration // raft's logical clock; default 10ms
	HeartbeatTicks int           // default 3
	// ElectionTicks must be at least five heartbeats: under that, one GC
	// pause or slow disk that lands on a heartbeat starts an election, and
	// the cluster spends its life electing. Default 30.
	ElectionTicks int
	// IsolationTicks is D-17's isolation window, in ticks (measured as
	// that much monotonic time): a follower that has not heard its
	// leader, or a leader that has not heard a quorum, for this long is
	// isolated and refuses to serve as an owner. Default three halves of
	// ElectionTicks. It must be at least ElectionTicks: raft times a
	// follower out between one and two election timeouts after it last
	// heard its leader, so with a window of 1.5 timeouts the survivors of
	// a leader's death usually elect a new one before an owner among them
	// counts as isolated (the first of two followers times out within
	// 1.5 timeouts three times in four), and its flows do not pause. A
	// new owner's AdoptWait must outlast the window (core/flow).
	IsolationTicks int

	// ProposalTimeout bounds how long a proposal or read waits to be
	// applied; past it the caller gets ErrTimeout (unknown outcome).
	// Default 2s.
	ProposalTimeout time.Duration
	// MaxPending bounds proposals plus reads in flight from this node;
	// past it calls are refused at once with ErrBusy. Default 1024.
	MaxPending int
	// ExpiryTick is how often a leader proposes a kv tick so that lapsed
	// leases expire on a quiet cluster. Default 250ms.
	ExpiryTick time.Duration
	// SnapshotEntries is how many applied entries past the last snapshot
	// trigger a new one (and a journal compaction). Default 1000.
	SnapshotEntries uint64
	// PromoteLag: a learner is promoted to voter once its match index is
	// within this many entries of the leader's last index. Default 8.
	PromoteLag uint64
	// MaxVoters, when positive, bounds the voters the leader promotes
	// learners to: at the bound a caught-up learner stays a learner (it
	// applies every entry, and votes in nothing), and is promoted once a
	// voter leaves. A fleet's control group, which every node follows,
	// keeps its quorum small this way. Zero: every caught-up learner is
	// promoted. Voters added otherwise (a bootstrap) are not bounded.
	MaxVoters int
	// MaxReadyRounds bounds the rounds of raft's Ready one turn of the
	// node handles; past it the node finishes the rest on its next turn
	// (a zero-delay timer), so its other events get their turn and no
	// loop inside one event runs without end. Default 64: a turn needs a
	// few rounds (a Ready's applied entries and their responses make the
	// next one), so the default is never reached in a healthy node.
	MaxReadyRounds int

	KV      kv.Config
	Journal journal.Config
	Bugs    bugs.Set
	// JournalName is the journal's file name in the node's FS
	// (DefaultJournalName if empty).
	JournalName string
}

// DefaultJournalName is the journal's file name when Config leaves it
// empty.
const DefaultJournalName = "raft.journal"

// ErrBadConfig wraps every configuration refusal.
var ErrBadConfig = errors.New("consensus: bad configuration")

func (c Config) withDefaults() Config {
	if c.TickInterval == 0 {
		c.TickInterval = 10 * time.Millisecond
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 3
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 30
	}
	if c.IsolationTicks == 0 {
		c.IsolationTicks = c.ElectionTicks * 3 / 2
	}
	if c.ProposalTimeout == 0 {
		c.ProposalTimeout = 2 * time.Second
	}
	if c.MaxPending == 0 {
		c.MaxPending = 1024
	}
	if c.ExpiryTick == 0 {
		c.ExpiryTick = 250 * time.Millisecond
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 1000
	}
	if c.PromoteLag == 0 {
		c.PromoteLag = 8
	}
	if c.MaxReadyRounds == 0 {
		c.MaxReadyRounds = 64
	}
	if c.JournalName == "" {
		c.JournalName = DefaultJournalName
	}
	return c
}

// Validate reports why a configuration cannot run.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: a node needs a name", ErrBadConfig)
	case c.TickInterval <= 0 || c.HeartbeatTicks <= 0 || c.ElectionTicks <= 0:
		return fmt.Errorf("%w: tick interval, heartbeat and election ticks must be positive", ErrBadConfig)
	case c.ElectionTicks < 5*c.HeartbeatTicks:
		return fmt.Errorf("%w: election timeout of %d ticks is under five heartbeats (%d ticks each): "+
			"a single pause that lands on a heartbeat would start an election", ErrBadConfig, c.ElectionTicks, c.HeartbeatTicks)
	case c.IsolationTicks < c.ElectionTicks:
		return fmt.Errorf("%w: an isolation window of %d ticks is under the election timeout (%d ticks): "+
			"every leader's death would pause its followers' flows", ErrBadConfig, c.IsolationTicks, c.ElectionTicks)
	case c.MaxVoters < 0:
		return fmt.Errorf("%w: max voters %d is negative", ErrBadConfig, c.MaxVoters)
	case c.ProposalTimeout <= 0 || c.MaxPending <= 0 || c.ExpiryTick <= 0 || c.MaxReadyRounds <= 0:
		return fmt.Errorf("%w: proposal timeout, max pending, expiry tick and max ready rounds must be positive", ErrBadConfig)
	}
	seen := map[string]bool{}
	for _, m := range c.Bootstrap {
		if m.Name == "" || m.ID == 0 || seen[m.Name] {
			return fmt.Errorf("%w: bootstrap member %q is unnamed, has no id or is listed twice", ErrBadConfig, m.Name)
		}
		seen[m.Name] = true
	}
	if len(c.Bootstrap) > 0 && !seen[c.Name] {
		return fmt.Errorf("%w: bootstrap list does not include this node (%s)", ErrBadConfig, c.Name)
	}
	return nil
}
