package checker

import (
	"sort"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// Contact is one raft frame the network delivered: to whom, from whom,
// when, and whether only a leader sends its kind (entries, heartbeat,
// snapshot) or it answers a leader (Ack).
type Contact struct {
	To, From   dial.NodeID
	At         time.Duration
	FromLeader bool
	Ack        bool
}

// D17 holds every owner-side service to the isolated-owner rule, judged
// directly from the network's record (checker d17): a node may serve a
// flow as its owner only if, within window before it, it heard a leader
// (a heartbeat, entries or a snapshot reached it), or, leading itself, it
// heard answers from a quorum of the voters of a membership in force
// within the window. window is the
// isolation window in true time, with room for the nodes' drift and a
// tick.
//
// It is generous where the network's record cannot tell (any leader will
// do, not only the one the node followed), so a failure means the node had
// certainly lost touch: an owner cut off alone, or with a minority that
// has no leader, that went on serving its side.
func D17(rep Reporter, services []FlowService, contacts []Contact, ms []MembershipChange, window time.Duration, name func(dial.NodeID) string) {
	c := NewContacts(contacts, ms, window)
	reported := map[dial.NodeID]bool{}
	for _, s := range services {
		if reported[s.Node] || c.InTouch(s.Node, s.At) {
			continue
		}
		reported[s.Node] = true
		rep.Fail("d17", "%s served flow %s at %v having heard no leader, and no quorum, within the %v before: an isolated owner serving",
			name(s.Node), s.Flow, s.At, window)
	}
}

// Contacts answers, from the network's record, whether a node was in
// touch with its cluster at an instant by the isolated-owner rule: within
// the window before, it heard a leader, or, counting itself, answers from
// a quorum of the voters of a membership in force in the window. A node
// out of touch must not serve as an owner (D17), nor write as one (an
// eviction over the flow cap waits for it).
type Contacts struct {
	byTo   map[dial.NodeID][]Contact // each in time order
	ms     []MembershipChange        // by index
	window time.Duration
}

// NewContacts indexes contacts (the record of raft frames delivered) and
// ms (the memberships) for questions about window.
func NewContacts(contacts []Contact, ms []MembershipChange, window time.Duration) *Contacts {
	c := &Contacts{byTo: map[dial.NodeID][]Contact{}, window: window}
	for _, x := range contacts {
		c.byTo[x.To] = append(c.byTo[x.To], x)
	}
	for _, cs := range c.byTo { //fenceline:unordered sorting each list in place
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].At < cs[j].At })
	}
	c.ms = append([]MembershipChange(nil), ms...)
	sort.Slice(c.ms, func(i, j int) bool { return c.ms[i].Index < c.ms[j].Index })
	return c
}

// InTouch reports whether node was in touch at t.
func (c *Contacts) InTouch(node dial.NodeID, t time.Duration) bool {
	return c.InTouchSince(node, t, t-c.window)
}

// InTouchSince is InTouch counting only what node heard from since on: a
// node that came up at since knows nothing it heard before.
func (c *Contacts) InTouchSince(node dial.NodeID, t, since time.Duration) bool {
	cs := c.byTo[node]
	since = max(since, t-c.window)
	from := sort.Search(len(cs), func(i int) bool { return cs[i].At >= since })
	heard := map[dial.NodeID]bool{}
	for _, x := range cs[from:] {
		if x.At > t {
			break
		}
		if x.FromLeader {
			return true
		}
		if x.Ack {
			heard[x.From] = true
		}
	}
	return quorumHeard(c.ms, node, t, c.window, heard)
}

// quorumHeard reports whether node, counting itself, heard answers from a
// majority of the voters of some membership in force during [t-window, t].
// Any of them will do: a leader cut off just before a change that removes
// it commits cannot know of the change, and keeps counting the voters it
// had (the change needs a new leader, which needs the old one's followers
// to have timed out first).
func quorumHeard(ms []MembershipChange, node dial.NodeID, t, window time.Duration, heard map[dial.NodeID]bool) bool {
	for i, m := range ms {
		if m.At > t {
			break
		}
		if i+1 < len(ms) && ms[i+1].At <= t-window {
			continue // replaced before the window began
		}
		n := 0
		for _, v := range m.Voters {
			if v == node || heard[v] {
				n++
			}
		}
		if n > len(m.Voters)/2 {
			return true
		}
	}
	return false
}
