// Package routing decides where a stateful request is served: here, at
// its flow's owner (forwarded once), or nowhere (503). The decision is a
// pure function of five facts (Decide), so every arm is tested without a
// peer, a socket or a clock; who owns a flow is a Directory's answer,
// computed from the committed membership and the fleet's partition table.
//
// It fails closed. The owner's copy of a flow is the only one that
// serializes it: a request answered anywhere else, because the owner was
// unknown or a forward failed, would fork the flow's state on a transient
// fault. So Unknown is a 503 here (the seed this follows routes it
// locally, where a shared database made that safe), a forward that fails
// is a 503, and a forwarded request is never forwarded again.
package routing

import (
	"fmt"

	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// View is where a flow's owner is, from this node.
type View uint8

const (
	// Unknown: no owner can be named (no committed membership, no voters).
	Unknown View = iota
	// Local: this node owns the flow.
	Local
	// Remote: another voter owns it.
	Remote
	// Elsewhere: another group of the fleet holds the flow's partition,
	// and this directory cannot name its owner. Refused, never served
	// here: this group's copy of the flow is not the one that counts.
	Elsewhere
)

func (v View) String() string {
	switch v {
	case Local:
		return "local"
	case Remote:
		return "remote"
	case Elsewhere:
		return "elsewhere"
	}
	return "unknown"
}

// Owner is a directory's answer.
type Owner struct {
	View View
	Node dial.NodeID // the owner (Local: this node); 0 when Unknown
	// Addr is where the owner serves HTTP, from its committed membership
	// entry; empty when the entry has none.
	Addr string
	// MIdx is the membership index the answer was computed at.
	MIdx uint64
}

// Directory names a flow's owner.
type Directory interface {
	OwnerOf(flow string) Owner
}

// Member is a voter as the directory needs it.
type Member struct {
	ID   dial.NodeID
	HTTP string
}

// Fleet is where a node's raft group sits in the fleet's partition table
// (package partition): the fleet has Groups groups, and the node's is
// Group. A flow belongs to the group that holds its partition.
type Fleet struct {
	Groups, Group int
}

// OneGroup is the fleet of one raft group, where every flow is the
// group's: the table is consulted and can never send a flow elsewhere.
var OneGroup = Fleet{Groups: 1, Group: 0}

// Check reports a fleet the table cannot describe: a group count that
// does not divide the table (partition.Compatible), or a group outside it.
func (f Fleet) Check() error {
	if err := partition.Compatible(f.Groups); err != nil {
		return err
	}
	if f.Group < 0 || f.Group >= f.Groups {
		return fmt.Errorf("routing: group %d is not one of the fleet's %d", f.Group, f.Groups)
	}
	return nil
}

// holds reports whether f's group holds key's partition. One group holds
// every partition, with no hash to compute.
func (f Fleet) holds(key string) bool {
	return f.Groups == 1 || partition.GroupOf(key, f.Groups) == f.Group
}

// RingDirectory answers from the fleet's partition table, then from the
// flow ring over one committed membership of the node's group: the same
// ring the flow store serves by, so both name the same owner at the same
// m_idx. Immutable; build a new one when the membership changes.
type RingDirectory struct {
	self  dial.NodeID
	fleet Fleet
	mIdx  uint64
	ring  ring.Ring
	addrs map[dial.NodeID]string
}

// NewRingDirectory builds the directory of node self, of group
// fleet.Group, over the voters of its group's membership entry at mIdx.
// The fleet must pass Check (it comes from a validated configuration);
// NewRingDirectory panics otherwise.
func NewRingDirectory(self dial.NodeID, fleet Fleet, mIdx uint64, voters []Member) *RingDirectory {
	if err := fleet.Check(); err != nil {
		panic(err)
	}
	ids := make([]dial.NodeID, len(voters))
	addrs := make(map[dial.NodeID]string, len(voters))
	for i, m := range voters {
		ids[i] = m.ID
		addrs[m.ID] = m.HTTP
	}
	return &RingDirectory{self: self, fleet: fleet, mIdx: mIdx, ring: ring.New(ids), addrs: addrs}
}

// OwnerOf implements Directory.
func (d *RingDirectory) OwnerOf(flow string) Owner {
	if !d.fleet.holds(flow) {
		return Owner{View: Elsewhere, MIdx: d.mIdx}
	}
	if d.mIdx == 0 {
		return Owner{View: Unknown}
	}
	id, ok := d.ring.Owner(ring.ClassOf(flow), flow)
	switch {
	case !ok:
		return Owner{View: Unknown, MIdx: d.mIdx}
	case id == d.self:
		return Owner{View: Local, Node: id, Addr: d.addrs[id], MIdx: d.mIdx}
	}
	return Owner{View: Remote, Node: id, Addr: d.addrs[id], MIdx: d.mIdx}
}

// Action is what to do with a request.
type Action uint8

const (
	// Serve here: nothing to route, or this node owns the flow. Never a
	// fallback: every arm that serves is one where serving here is right.
	Serve Action = iota + 1
	// Forward the whole request to the owner, once, with the loop guard.
	Forward
	// ServeFenced: a forwarded request found that this node does not own
	// its flow (ownership moved while it travelled). It is served here,
	// but every read and write of its flow goes to the owner through the
	// flow store, which fences it by m_idx; it is never forwarded again.
	ServeFenced
	// Refuse with 503: no owner can be named or reached, or the flow is
	// another group's.
	Refuse
)

func (a Action) String() string {
	switch a {
	case Serve:
		return "serve"
	case Forward:
		return "forward"
	case ServeFenced:
		return "serve-fenced"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Input is everything the decision depends on.
type Input struct {
	// Active: this request would touch flow state and the node routes
	// whole requests to owners. Off, the request is served here and each
	// store call finds the owner by itself.
	Active bool
	// Forwarded: the request carries the loop guard (it was forwarded).
	Forwarded bool
	// HasFlow: a flow id could be computed for it.
	HasFlow bool
	// Owner is the directory's answer for the flow (ignored without one).
	Owner Owner
}

// Decision is an action and, for a refusal, why (the 503's reason).
type Decision struct {
	Action Action
	Reason string
}

// Reasons a request is refused.
const (
	ReasonNoOwner   = "no-owner"
	ReasonNoAddress = "owner-address-unknown"
	// ReasonElsewhere: another group of the fleet holds the flow's
	// partition. Refused even when the request was forwarded here: a
	// node of the wrong group never serves a flow, fenced or not.
	ReasonElsewhere = "partition-elsewhere"
)

// Decide is the routing table.
func Decide(in Input) Decision {
	switch {
	case !in.Active, !in.HasFlow:
		return Decision{Action: Serve} // no flow to route by
	case in.Owner.View == Local:
		return Decision{Action: Serve}
	case in.Owner.View == Elsewhere:
		return Decision{Action: Refuse, Reason: ReasonElsewhere}
	case in.Owner.View == Unknown:
		return Decision{Action: Refuse, Reason: ReasonNoOwner}
	case in.Forwarded:
		return Decision{Action: ServeFenced} // one hop, never two
	case in.Owner.Addr == "":
		return Decision{Action: Refuse, Reason: ReasonNoAddress}
	}
	return Decision{Action: Forward}
}
