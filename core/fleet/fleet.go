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
//	partition p is moving         → ErrMoving     (between its fence and its
//	                                               publication: no group serves it)
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
// # Moves
//
// A resize (WithTarget) names how many groups should hold the table, and
// each partition the table puts elsewhere for that count moves, in
// batches, as its own unit (core/node drives it):
//
//	Fence(ps, to)  at epoch e1: each p is moving from its group A to B.
//	               No group serves it (Admit: ErrMoving), and group A
//	               writes the fence into its own log (core/node), which
//	               stops an owner of A whose directory lags;
//	copy           A's copies, once A's log fences them, into every
//	               voter of B, in the era e1 (core/flow's Ingest);
//	Publish(ps)    at epoch e2: each p is held by B since e2;
//	release        A drops its copies.
//
// A holding's writes are stamped with its assignment epoch (Era): the
// copies from A (era e1) outrank whatever B kept from an earlier holding,
// and B's own writes (era e2) outrank the copies.
//
// # Groups added to a running fleet
//
// A fleet is founded with a number of groups that divides the table
// (New). More groups are added while it runs (WithNewGroup), holding
// nothing: the partitions the founding placed stay where they are until
// a resize moves them, fenced, copied and published like any other move.
// So a group added is never handed a partition it has no copies of, and
// the founding placement (over the founded groups) stays what every
// unmoved partition's assignment is read against.
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

// MaxGroups bounds a fleet's groups: every node follows the control
// group and greets every group's voters, and a directory of MaxGroups
// groups of MaxVoters voters, with names and addresses of ordinary
// length, still encodes within MaxEncoded.
const MaxGroups = 64

// assignment is who holds one partition, and since which epoch; while
// the partition moves, the group it moves to (to+1; 0: not moving), and
// the epoch is its fence's.
type assignment struct {
	group int
	epoch uint64
	to1   int
}

// Directory is the fleet's group directory at one epoch.
type Directory struct {
	epoch uint64
	// base is the epoch of the directory's founding (New): a partition
	// never reassigned since sits where the table puts it, since base.
	base uint64
	// founded is how many groups the fleet was founded with (New): the
	// table's placement over them is where each partition sits since
	// base until a move takes it elsewhere. Groups after those were added
	// (WithNewGroup) and hold only what moves gave them.
	founded int
	groups  []Group
	rings   []ring.Ring // each group's voters, as the ring orders them
	held    [partition.Count]assignment
	// target is the number of groups the table should be spread over
	// (WithTarget): the table's placement for it is where each partition
	// belongs, and moves until it is there.
	target int
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
	// ErrMoving: the key's partition is moving between groups; nobody
	// serves it until the move publishes it.
	ErrMoving = errors.New("fleet: the key's partition is moving between groups")
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
	d := &Directory{epoch: epoch, base: epoch, founded: len(groups), target: len(groups)}
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
	if len(groups) > MaxGroups {
		return fmt.Errorf("%w: %d groups (at most %d)", ErrInvalid, len(groups), MaxGroups)
	}
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

// HolderOf is Holder of key's partition.
func (d *Directory) HolderOf(key string) (group int, epoch uint64) {
	return d.Holder(partition.Of(key))
}

// Holder is the group that holds partition p, and the epoch it was
// assigned at (while p moves: the group it leaves, and the fence's
// epoch).
func (d *Directory) Holder(p partition.Partition) (group int, epoch uint64) {
	a := d.held[p]
	return a.group, a.epoch
}

// Holds reports whether group holds key's partition (and it is not
// moving).
func (d *Directory) Holds(group int, key string) bool {
	a := d.held[partition.Of(key)]
	return a.group == group && a.to1 == 0
}

// Moving reports whether p is moving: from the group that held it, to
// the group it goes to, fenced at epoch.
func (d *Directory) Moving(p partition.Partition) (from, to int, epoch uint64, ok bool) {
	a := d.held[p]
	return a.group, a.to1 - 1, a.epoch, a.to1 != 0
}

// Era is the era in which the group holding p writes it (core/flow's
// Tuple): 0 while p has never left where the table first put it, else
// the epoch it was assigned (or, while it moves, fenced) at.
func (d *Directory) Era(p partition.Partition) uint64 {
	if a := d.held[p]; a.epoch != d.base {
		return a.epoch
	}
	return 0
}

// EraOf is Era of key's partition.
func (d *Directory) EraOf(key string) uint64 { return d.Era(partition.Of(key)) }

// Target is the number of groups the table should be spread over.
func (d *Directory) Target() int { return d.target }

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
	// Moving: the partition is moving from Group, fenced at Epoch; no
	// group serves it.
	Moving bool
}

// Resolve routes key: its partition's group and epoch, and its owner in
// that group.
func (d *Directory) Resolve(key string) Route {
	a := d.held[partition.Of(key)]
	id, _ := d.rings[a.group].Owner(ring.ClassOf(key), key) // a group has voters
	return Route{Group: a.group, Epoch: a.epoch, MIdx: d.groups[a.group].MIdx, Owner: id, Moving: a.to1 != 0}
}

// Admit is the receiver's check of a request for key that a caller
// routed to group with epoch: nil if this directory agrees that group
// holds the key's partition since exactly that epoch.
func (d *Directory) Admit(group int, key string, epoch uint64) error {
	p := partition.Of(key)
	a := d.held[p]
	switch {
	case a.to1 != 0:
		return fmt.Errorf("%w: partition %d, from group %d to %d since epoch %d", ErrMoving, p, a.group, a.to1-1, a.epoch)
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
	n := &Directory{epoch: d.epoch + 1, base: d.base, founded: d.founded, held: d.held, target: d.target}
	if err := n.setGroups(groups); err != nil {
		return nil, err
	}
	return n, nil
}

// WithNewGroup returns the directory at the next epoch with one more
// group, gr, numbered Groups(): a group added to the running fleet. It
// holds no partition; a resize moves partitions to it (WithTarget), each
// fenced, copied and published, so it is never handed state it has not
// been given. gr is its founding membership, as its voters committed it.
func (d *Directory) WithNewGroup(gr Group) (*Directory, error) {
	groups := append(append(make([]Group, 0, len(d.groups)+1), d.groups...), gr)
	n := &Directory{epoch: d.epoch + 1, base: d.base, founded: d.founded, held: d.held, target: d.target}
	if err := n.setGroups(groups); err != nil {
		return nil, err
	}
	return n, nil
}

// Founded is how many groups the fleet was founded with; the groups
// numbered from it on were added (WithNewGroup).
func (d *Directory) Founded() int { return d.founded }

// WithTarget returns the directory at the next epoch whose table should
// be spread over target groups: a resize. It moves nothing itself; the
// moves follow (Misplaced).
func (d *Directory) WithTarget(target int) (*Directory, error) {
	if err := partition.Compatible(target); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if target > len(d.groups) {
		return nil, fmt.Errorf("%w: %d groups wanted, the fleet has %d", ErrInvalid, target, len(d.groups))
	}
	n := *d
	n.epoch = d.epoch + 1
	n.target = target
	return &n, nil
}

// Misplaced returns up to limit partitions, ascending, that are not where
// the table puts them for the target, are not moving, and sit in the
// same group as the first such, and the group the table puts them in: the
// next batch to move. None when every partition is in place.
func (d *Directory) Misplaced(limit int) (ps []partition.Partition, from, to int) {
	from, to = -1, -1
	for p := range d.held {
		a, want := d.held[p], partition.Partition(p).Group(d.target)
		if a.to1 != 0 || a.group == want {
			continue
		}
		if from < 0 {
			from, to = a.group, want
		}
		if a.group == from && want == to {
			ps = append(ps, partition.Partition(p))
			if len(ps) == limit {
				break
			}
		}
	}
	return ps, from, to
}

// MovingBatch is the batch the directory shows moving: the partitions
// moving from the group, to the group and since the epoch of the lowest
// moving partition (ascending); none if nothing moves.
func (d *Directory) MovingBatch() (ps []partition.Partition, from, to int, epoch uint64) {
	for p, a := range d.held {
		if a.to1 == 0 {
			continue
		}
		if ps == nil {
			from, to, epoch = a.group, a.to1-1, a.epoch
		}
		if a.group == from && a.to1-1 == to && a.epoch == epoch {
			ps = append(ps, partition.Partition(p))
		}
	}
	return ps, from, to, epoch
}

// Fence returns the directory at the next epoch with each of ps moving
// to group to, fenced at that epoch: the first step of their move. Each
// must be held, not moving, by a group other than to.
func (d *Directory) Fence(ps []partition.Partition, to int) (*Directory, error) {
	if to < 0 || to >= len(d.groups) {
		return nil, fmt.Errorf("%w: no group %d in a fleet of %d", ErrInvalid, to, len(d.groups))
	}
	n := *d
	n.epoch = d.epoch + 1
	for _, p := range ps {
		if int(p) >= partition.Count {
			return nil, fmt.Errorf("%w: no partition %d", ErrInvalid, p)
		}
		switch a := d.held[p]; {
		case a.to1 != 0:
			return nil, fmt.Errorf("%w: partition %d is already moving", ErrInvalid, p)
		case a.group == to:
			return nil, fmt.Errorf("%w: partition %d is group %d's already", ErrInvalid, p, to)
		}
		n.held[p] = assignment{group: d.held[p].group, epoch: n.epoch, to1: to + 1}
	}
	return &n, nil
}

// Publish returns the directory at the next epoch with each of ps, which
// must be moving, held by the group it moves to since that epoch: the
// step that ends their move.
func (d *Directory) Publish(ps []partition.Partition) (*Directory, error) {
	n := *d
	n.epoch = d.epoch + 1
	for _, p := range ps {
		if int(p) >= partition.Count || d.held[p].to1 == 0 {
			return nil, fmt.Errorf("%w: partition %d is not moving", ErrInvalid, p)
		}
		n.held[p] = assignment{group: d.held[p].to1 - 1, epoch: n.epoch}
	}
	return &n, nil
}
