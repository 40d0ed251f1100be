package node

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// Resizing a fleet: the control group's leader moves the partitions the
// directory's target puts elsewhere, one batch at a time (core/fleet):
//
//  1. fence: a compare-and-set of the directory marks the batch moving
//     (Directory.Fence), at epoch e. No node serves it from then on by
//     that directory.
//  2. the old group's log fences it too: each node of the fleet, on its
//     publishing turn, proposes into its own data group's log the moves
//     out of its group the directory shows and the log has not fenced
//     (fleet.Fences). An owner whose directory lags stops there, as its
//     group's log is what it must be current with to serve at all.
//  3. copy: the leader has every voter of the old group give its copies,
//     which every voter of the new group writes to disk (core/flow's
//     CopyMove). An old voter answers only once its log has fenced the
//     batch.
//  4. publish: a compare-and-set of the directory gives the batch to the
//     new group (Directory.Publish), at a later epoch; its owners adopt
//     and serve.
//  5. release: each node drops its copies of partitions another group
//     holds (core/flow, in its anti-entropy round).
//
// Every step is read from the directory, the logs and the copy, never
// from memory of an earlier step, so a move resumes after any crash or
// leader change: a new leader finds the batch moving, copies it again
// (a copy is idempotent: it merges by tuple) and publishes it.
//
// A batch's partitions are unavailable from the fence to the publication
// (a 503, partition_moving); the rest of the table is not touched.

// MoveBatch bounds the partitions one move fences at once: the
// unavailable window of each is its batch's copy.
const MoveBatch = 256

// voterIDs is a directory group's voters' ids, in the directory's order.
func voterIDs(g fleet.Group) []dial.NodeID {
	out := make([]dial.NodeID, len(g.Voters))
	for i, m := range g.Voters {
		out[i] = m.ID
	}
	return out
}

// drive is the leader's step of a resize: publish a batch whose copy is
// done, start or go on with its copy, or fence the next batch. It
// reports whether it proposed something (the turn's one thing).
func (p *publisher) drive(d *fleet.Directory, version uint64) bool {
	ps, from, to, era := d.MovingBatch()
	if ps != nil {
		mv := flow.Move{Parts: ps, Era: era, From: voterIDs(d.Group(from)), FromMIdx: d.Group(from).MIdx,
			To: voterIDs(d.Group(to)), ToMIdx: d.Group(to).MIdx}
		if (p.copied != nil && p.copied.Same(mv)) || p.bugs.PublishBeforeCopy {
			next, err := d.Publish(ps)
			if err != nil {
				panic(err) // ps are moving, by movingBatch
			}
			p.propose(kv.Txn([]kv.Guard{kv.VersionIs(DirectoryKey, version)}, []kv.Op{kv.Put(DirectoryKey, next.Encode())}, nil))
			return true
		}
		p.n.Flow.CopyMove(mv, func() { p.copied = &mv })
		return false
	}
	p.n.Flow.StopMove()
	p.copied = nil
	next, _, to := d.Misplaced(MoveBatch)
	if len(next) == 0 {
		return false
	}
	nd, err := d.Fence(next, to)
	if err != nil {
		panic(err) // misplaced partitions are held, not moving, elsewhere than to
	}
	p.propose(kv.Txn([]kv.Guard{kv.VersionIs(DirectoryKey, version)}, []kv.Op{kv.Put(DirectoryKey, nd.Encode())}, nil))
	return true
}

// fence is each node's step for its data group: write into the group's
// own log the moves out of the group the directory shows and the log has
// not fenced, those of one epoch at a time. Every node of the group does
// it, guarded by the version it read, as it publishes memberships: the
// group's leader may be the node whose directory lags. It reports
// whether it proposed.
func (p *publisher) fence(d *fleet.Directory) bool {
	fences := p.view.Fences()
	var need []partition.Partition
	var epoch uint64
	for q := range partition.Count {
		from, _, e, moving := d.Moving(partition.Partition(q))
		if !moving || from != p.cfg.Group || fences.At(partition.Partition(q)) >= e {
			continue
		}
		if need == nil {
			epoch = e
		}
		if e == epoch {
			need = append(need, partition.Partition(q))
		}
	}
	if need == nil {
		return false
	}
	guard := kv.Absent(fleet.FencesKey)
	if e, ok := p.n.Consensus.LocalGet(fleet.FencesKey); ok {
		guard = kv.VersionIs(fleet.FencesKey, e.Version)
	}
	p.inFlight++
	p.n.Consensus.Propose(kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Put(fleet.FencesKey, fences.With(need, epoch).Encode())}, nil),
		func(kv.Result, error) { p.inFlight-- })
	return true
}

// ErrNoDirectory is Resize's answer on a node outside a fleet, or one
// whose control replica holds no directory yet.
var ErrNoDirectory = errors.New("node: no group directory here (not in a fleet, or not caught up yet)")

// ErrResizeRaced is Resize's (and AddGroup's) answer when the directory
// changed between reading it and writing the change: nothing was
// written; ask again.
var ErrResizeRaced = errors.New("node: the directory changed while the resize was written; nothing changed, ask again")

// Resize sets the number of groups the fleet's table should be spread
// over (a power of two, at most the fleet's groups); the control group's
// leader then moves the partitions, a batch at a time. done runs once,
// on the loop, when the target is committed (or refused). Outside a
// fleet, or before this node holds a directory, it is refused.
//
// attestation is the control key's word for the resize (ResizeFields):
// to target, from the directory at epoch (admin.go). The change is
// written only over that very directory (a compare-and-set of the entry
// this node holds at that epoch), so an attestation is good for one
// change of the fleet, wherever it is sent: a resize captured and
// replayed after the operator resized again would otherwise undo the
// later one.
func (n *Node) Resize(target int, epoch uint64, attestation string, done func(error)) {
	d := n.Directory()
	if d == nil {
		n.refuse(done, ErrNoDirectory)
		return
	}
	if err := n.attested(transport.ActResize, ResizeFields(target, epoch), attestation); err != nil {
		n.refuse(done, err)
		return
	}
	if err := atVersion("directory epoch", epoch, d.Epoch()); err != nil && !n.bugs.AnyVersionAdmin {
		n.refuse(done, err)
		return
	}
	e, _ := n.Control.LocalGet(DirectoryKey) // d came from it
	next, err := d.WithTarget(target)
	if err != nil {
		n.refuse(done, err)
		return
	}
	n.proposeDirectory(e.Version, next, done)
}

// ErrGroupNumber is AddGroup's answer when the group asked for is not the
// next the fleet would number, nor one it already added with that
// founder.
var ErrGroupNumber = errors.New("node: the fleet numbers its next group otherwise")

// AddGroup adds group g, founded with gr's voters at gr.MIdx, to the
// running fleet (fleet.Directory.WithNewGroup): g must be the next
// number, Groups(). The group holds nothing until a resize moves
// partitions to it. A group already added as g with gr's first voter
// among its voters answers nil again, so a caller that lost the answer
// may ask again. done runs once, on the loop; a refusal changes nothing.
// attestation is the control key's word for exactly that group
// (AddGroupFields); sent again later it adds nothing, since the number
// is taken.
func (n *Node) AddGroup(g int, gr fleet.Group, attestation string, done func(error)) {
	d := n.Directory()
	if d == nil {
		n.refuse(done, ErrNoDirectory)
		return
	}
	if err := n.attested(transport.ActAddGroup, AddGroupFields(g, gr), attestation); err != nil {
		n.refuse(done, err)
		return
	}
	if len(gr.Voters) > 0 && g < d.Groups() && slices.Contains(voterIDs(d.Group(g)), gr.Voters[0].ID) {
		done(nil) // added already (the group may have published since)
		return
	}
	if g != d.Groups() && !n.bugs.UncheckedAddGroup {
		n.refuse(done, fmt.Errorf("%w: group %d asked for, the fleet's next is %d", ErrGroupNumber, g, d.Groups()))
		return
	}
	e, _ := n.Control.LocalGet(DirectoryKey) // d came from it
	next, err := d.WithNewGroup(gr)
	if err != nil {
		n.refuse(done, err)
		return
	}
	if n.bugs.AddedGroupTakesTable {
		next = takeTable(next)
	}
	n.proposeDirectory(e.Version, next, done)
}

// proposeDirectory writes next over the directory at version, answering
// done once: ErrResizeRaced if the directory changed meanwhile.
func (n *Node) proposeDirectory(version uint64, next *fleet.Directory, done func(error)) {
	n.Control.Propose(kv.Txn([]kv.Guard{kv.VersionIs(DirectoryKey, version)}, []kv.Op{kv.Put(DirectoryKey, next.Encode())}, nil),
		func(r kv.Result, err error) {
			switch {
			case err != nil:
				done(err)
			case r.Err != nil:
				done(r.Err)
			case !r.Succeeded:
				done(ErrResizeRaced)
			default:
				done(nil)
			}
		})
}
