// Package fleet is the group directory: which raft group of the fleet
// holds each partition of the table (package partition), since which
// epoch, and who each group's voters are. A node consults it for a key
// its own group does not hold, to name that key's owner in the group that
// does; a node that receives such a request consults it again, to check
// that the caller routed with the assignment it holds.
//
// The directory is versioned by Epoch, which grows with every change. Each
// partition carries the epoch at which it was last assigned: a caller and
// a receiver whose directories differ only in other partitions, or in a
// group's voters, still agree on it, so a change fences only the
// requests it could misroute. The check, at the receiver (Admit):
//
//	holder(p) ≠ receiver's group  → ErrElsewhere  (not this group's key)
//	routed epoch < assigned epoch → ErrStaleEpoch (the caller's directory
//	                                               predates the assignment)
//	routed epoch > assigned epoch → ErrAhead      (the receiver's does)
//
// Each refusal is known not applied, so the caller may route again. None
// of them is ever a local answer: a request that cannot be placed is a
// 503 with the reason, the same fail-closed rule as package routing.
//
// Within a group a key's owner is rendezvous hashing over the group's
// voters (package ring) at the group's membership index, which the
// directory carries too: the caller sends that index, and the owner's own
// m_idx fence (core/flow) refuses it if the group's membership has moved
// since the directory was written. So the directory may lag a group's
// membership without misrouting anything; it only costs 503s until it
// catches up.
//
// A Directory is immutable; changes return a new one.
package fleet

import (
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/dial"
)

// Member is a group's voter as the directory names it: enough for a node
// of another group to reach it (its peer address, for a group-op frame)
// and to add it to the control group (its name).
type Member struct {
	ID   dial.NodeID
	Name string
	Peer string // where peers reach it
	HTTP string // where it serves HTTP (for routing whole requests); may be empty
}

// Group is one raft group as the directory knows it: its voters at its
// committed membership index MIdx.
type Group struct {
	MIdx   uint64
	Voters []Member
}

// MaxVoters bounds one group's voters in a directory: a group is a raft
// group, which stops being useful long before this.
const MaxVoters = 64

// assignment is who holds one partition, and since which epoch.
type assignment struct {
	group int
	epoch uint64
}

// Directory is the fleet's group directory at one epoch.
type Directory struct {
	epoch uint64
	// base is the epoch of the directory's founding (New): a partition
	// never reassigned since sits where the table puts it, since base.
	base   uint64
	groups []Group
	rings  []ring.Ring // each group's voters, as the ring orders them
	held   [partition.Count]assignment
}

// Errors of New and With.
var ErrInvalid = errors.New("fleet: invalid directory")

// Refusals of Admit. Each is known not applied.
var (
	// ErrElsewhere: the receiver's group does not hold the key's
	// partition.
	ErrElsewhere = errors.New("fleet: another group holds the key's partition")
	// ErrStaleEpoch: the caller routed with an assignment older than the
	// receiver's.
	ErrStaleEpoch = errors.New("fleet: routed with a stale directory epoch")
	// ErrAhead: the caller routed with an assignment newer than the
	// receiver's; the receiver cannot vouch for it.
	ErrAhead = errors.New("fleet: routed with a directory epoch this node has not reached")
)

// New returns the directory at epoch of a fleet of len(groups) groups,
// each partition assigned to partition.Group(len(groups)) since epoch:
// the table's own placement, where no partition has moved.
func New(epoch uint64, groups []Group) (*Directory, error) {
	if epoch == 0 {
		return nil, fmt.Errorf("%w: epoch 0 (epochs start at 1)", ErrInvalid)
	}
	if err := partition.Compatible(len(groups)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	d := &Directory{epoch: epoch, base: epoch}
	if err := d.setGroups(groups); err != nil {
		return nil, err
	}
	for p := range d.held {
		d.held[p] = assignment{group: partition.Partition(p).Group(len(groups)), epoch: epoch}
	}
	return d, nil
}

// setGroups checks and copies groups into d: at least one voter in each
// group, every voter named, no node in two groups or twice in one, a
// membership index with each group.
func (d *Directory) setGroups(groups []Group) error {
	seen := map[dial.NodeID]int{}
	d.groups = make([]Group, len(groups))
	d.rings = make([]ring.Ring, len(groups))
	for g, gr := range groups {
		if len(gr.Voters) > MaxVoters {
			return fmt.Errorf("%w: group %d has %d voters (at most %d)", ErrInvalid, g, len(gr.Voters), MaxVoters)
		}
		if len(gr.Voters) == 0 {
			// A group with no voters could hold partitions nobody serves:
			// every group the directory names has at least one.
			return fmt.Errorf("%w: group %d has no voters", ErrInvalid, g)
		}
		if gr.MIdx == 0 {
			return fmt.Errorf("%w: group %d names voters at membership index 0", ErrInvalid, g)
		}
		ids := make([]dial.NodeID, len(gr.Voters))
		for i, m := range gr.Voters {
			if m.ID == 0 {
				return fmt.Errorf("%w: group %d: voter %d has no id", ErrInvalid, g, i)
			}
			if at, dup := seen[m.ID]; dup {
				return fmt.Errorf("%w: node %v is a voter of groups %d and %d (a node belongs to one group)", ErrInvalid, m.ID, at, g)
			}
			seen[m.ID] = g
			ids[i] = m.ID
		}
		d.groups[g] = Group{MIdx: gr.MIdx, Voters: append([]Member(nil), gr.Voters...)}
		d.rings[g] = ring.New(ids)
	}
	return nil
}

// Epoch is the directory's version.
func (d *Directory) Epoch() uint64 { return d.epoch }

// Groups is the number of groups.
func (d *Directory) Groups() int { return len(d.groups) }

// Group returns group g's entry (a copy).
func (d *Directory) Group(g int) Group {
	gr := d.groups[g]
	return Group{MIdx: gr.MIdx, Voters: append([]Member(nil), gr.Voters...)}
}

// Member finds node id among the groups' voters: its group and its
// entry; false if no group names it.
func (d *Directory) Member(id dial.NodeID) (int, Member, bool) {
	for g, gr := range d.groups {
		for _, m := range gr.Voters {
			if m.ID == id {
				return g, m, true
			}
		}
	}
	return 0, Member{}, false
}

// Holder is the group that holds partition p, and the epoch it was
// assigned at.
func (d *Directory) Holder(p partition.Partition) (group int, epoch uint64) {
	a := d.held[p]
	return a.group, a.epoch
}

// Holds reports whether group holds key's partition.
func (d *Directory) Holds(group int, key string) bool {
	return d.held[partition.Of(key)].group == group
}

// Route is where a key is served, by the directory.
type Route struct {
	// Group holds the key's partition, assigned at Epoch: the epoch the
	// request is routed with.
	Group int
	Epoch uint64
	// Owner is the key's owner among the group's voters at MIdx (every
	// group has one).
	Owner dial.NodeID
	MIdx  uint64
}

// Resolve routes key: its partition's group and epoch, and its owner in
// that group.
func (d *Directory) Resolve(key string) Route {
	a := d.held[partition.Of(key)]
	id, _ := d.rings[a.group].Owner(ring.ClassOf(key), key) // a group has voters
	return Route{Group: a.group, Epoch: a.epoch, MIdx: d.groups[a.group].MIdx, Owner: id}
}

// Admit is the receiver's check of a request for key that a caller
// routed to group with epoch: nil if this directory agrees that group
// holds the key's partition since exactly that epoch.
func (d *Directory) Admit(group int, key string, epoch uint64) error {
	p := partition.Of(key)
	a := d.held[p]
	switch {
	case a.group != group:
		return fmt.Errorf("%w: partition %d is group %d's, not %d's", ErrElsewhere, p, a.group, group)
	case epoch < a.epoch:
		return fmt.Errorf("%w: partition %d assigned at %d, routed at %d", ErrStaleEpoch, p, a.epoch, epoch)
	case epoch > a.epoch:
		return fmt.Errorf("%w: partition %d assigned at %d here, routed at %d", ErrAhead, p, a.epoch, epoch)
	}
	return nil
}

// WithGroup returns the directory at the next epoch with group g's
// entry replaced: a group published a newer committed membership. No
// partition is reassigned, so no partition's epoch moves: requests in
// flight stay admissible, and the owner's m_idx fence refuses any that
// routed by the old voters.
func (d *Directory) WithGroup(g int, gr Group) (*Directory, error) {
	if g < 0 || g >= len(d.groups) {
		return nil, fmt.Errorf("%w: no group %d in a fleet of %d", ErrInvalid, g, len(d.groups))
	}
	if gr.MIdx <= d.groups[g].MIdx {
		// A group publishes a membership it committed after the last one.
		return nil, fmt.Errorf("%w: group %d's membership index does not advance (%d, then %d)", ErrInvalid, g, d.groups[g].MIdx, gr.MIdx)
	}
	groups := make([]Group, len(d.groups))
	copy(groups, d.groups)
	groups[g] = gr
	n := &Directory{epoch: d.epoch + 1, base: d.base, held: d.held}
	if err := n.setGroups(groups); err != nil {
		return nil, err
	}
	return n, nil
}

// Assign returns the directory at the next epoch with partition p held
// by group g since that epoch: the publish step of a partition's move.
// Only p's epoch moves, so only requests for p routed by the old
// directory are refused.
func (d *Directory) Assign(p partition.Partition, g int) (*Directory, error) {
	if g < 0 || g >= len(d.groups) {
		return nil, fmt.Errorf("%w: no group %d in a fleet of %d", ErrInvalid, g, len(d.groups))
	}
	if int(p) >= partition.Count {
		return nil, fmt.Errorf("%w: no partition %d", ErrInvalid, p)
	}
	n := *d
	n.epoch = d.epoch + 1
	n.held[p] = assignment{group: g, epoch: n.epoch}
	return &n, nil
}
