package node

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
)

// Admin acts: a join, a removal, a resize, an added group. Each is the
// control key's word (transport.Attestation), checked here, on the node's
// loop, by the node's clock, so that the simulator judges the very check
// the real node makes, in this order:
//
//  1. the attestation: the control key's (or, amid a rotation, the one
//     still accepted) for exactly this act and these fields, made within
//     AttestValidity, and not one this node has taken before (its nonce
//     is remembered as long as it could pass, at most MaxAttestations);
//  2. the version: each act names the version of what it changes (the
//     membership index for a join or a removal, the directory epoch for
//     a resize; an added group its number), and is taken only while the
//     node holds that very version. A nonce remembered here is no
//     defence on another node, or on this one after a restart; the
//     version is: sent again anywhere once the cluster has changed, a
//     captured act does nothing;
//  3. the act itself, proposed to the group that decides it.

// MaxAttestations bounds the attestations a node remembers (each for
// AttestValidity plus twice AttestSkew, 7 minutes): admin acts are an
// operator's, a few a day. Past it, a good attestation is refused with
// transport.ErrAttestGuardFull until some are forgotten; only holders of
// the control key can make attestations that get that far.
const MaxAttestations = 1024

// ErrNotAttested is an admin act's answer when its attestation is not the
// control key's word for exactly that act, now, or was taken before: it
// wraps the reason (transport.ErrAttestation, ErrAttestationExpired,
// ErrAttestationUsed). Nothing is proposed.
var ErrNotAttested = errors.New("node: the act is not attested by this cluster's control key")

// ErrAttestationStale is an admin act's answer when its attestation was
// made against an older version of what it changes than this node holds
// (a membership index, a directory epoch): the cluster changed since.
// Attest again at the version this node holds (Version names it).
var ErrAttestationStale = errors.New("node: the act was attested against an older version than this node holds")

// ErrAttestationAhead is an admin act's answer when its attestation names
// a newer version than this node has applied yet: ask again, here once
// it has caught up, or elsewhere.
var ErrAttestationAhead = errors.New("node: the act was attested against a newer version than this node has applied; ask again")

// VersionError is ErrAttestationStale or ErrAttestationAhead with the
// version the act named (At) and the one this node holds (Now).
type VersionError struct {
	Err     error
	At, Now uint64
	What    string // "membership index", "directory epoch"
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%v: attested against %s %d, this node holds %d", e.Err, e.What, e.At, e.Now)
}

func (e *VersionError) Unwrap() error { return e.Err }

// attested checks text as the control key's attestation of act with
// fields, by this node's clock, and takes its nonce (step 1).
func (n *Node) attested(act string, fields []string, text string) error {
	if n.bugs.UnattestedAdmin {
		return nil
	}
	now := n.clk.Now()
	a, err := transport.ParseAttestation(text)
	if err == nil {
		err = n.adminKeys.CheckAttestation(act, fields, a, now)
	}
	if err == nil {
		err = n.attestations.Admit(a, now)
	}
	switch {
	case errors.Is(err, transport.ErrAttestGuardFull):
		return err // a good attestation, refused for now: ask again
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotAttested, err)
	}
	return nil
}

// atVersion is step 2: nil when the act was attested at the version this
// node holds.
func atVersion(what string, at, now uint64) error {
	switch {
	case at < now:
		return &VersionError{ErrAttestationStale, at, now, what}
	case at > now:
		return &VersionError{ErrAttestationAhead, at, now, what}
	}
	return nil
}

// JoinFields are what an attestation of a join vouches for: the node's
// name and addresses, and the membership index it is added to.
func JoinFields(m consensus.Member, index uint64) []string {
	return []string{m.Name, m.Addr, m.HTTP, strconv.FormatUint(index, 10)}
}

// RemoveFields are what an attestation of a removal vouches for: the name
// removed, and the membership index it is removed from.
func RemoveFields(name string, index uint64) []string {
	return []string{name, strconv.FormatUint(index, 10)}
}

// ResizeFields are what an attestation of a resize vouches for: the
// target, and the epoch of the directory it is made against.
func ResizeFields(target int, epoch uint64) []string {
	return []string{strconv.Itoa(target), strconv.FormatUint(epoch, 10)}
}

// AddGroupFields are what an attestation of an added group vouches for:
// its founder's name and addresses, its number and its founding
// membership index.
func AddGroupFields(g int, gr fleet.Group) []string {
	var f fleet.Member
	if len(gr.Voters) > 0 {
		f = gr.Voters[0]
	}
	return []string{f.Name, f.Peer, f.HTTP, strconv.Itoa(g), strconv.FormatUint(gr.MIdx, 10)}
}

// ErrWrongGroup is a join's or a removal's answer when it was asked of a
// member of another group than the node's: in a fleet, a node joins and
// leaves its own group's raft group, through a member of it.
var ErrWrongGroup = errors.New("node: asked of a member of another group")

// NoGroup is Join's group for a node started outside a fleet.
const NoGroup = -1

// Join adds m to this node's raft group as a learner (the leader promotes
// it once it has caught up), attested for the membership at index; group
// is the fleet's data group m was started for (NoGroup outside a fleet),
// which must be this node's. A node that is a member already is answered
// nil, whatever the index (a joiner asking again, its answer lost), once
// this node has confirmed with a quorum that it still is: a member far
// behind may list a node removed since. done runs once, on the loop.
func (n *Node) Join(m consensus.Member, group int, index uint64, attestation string, done func(error)) {
	if err := n.attested(transport.ActJoin, JoinFields(m, index), attestation); err != nil {
		n.refuse(done, err)
		return
	}
	// Checked after the attestation: a stranger learns nothing of the
	// fleet's groups from the answer.
	switch mine, inFleet := n.FleetGroup(); {
	case inFleet && group == NoGroup:
		n.refuse(done, fmt.Errorf("%w: this node is of group %d of a fleet; the joiner was started outside a fleet", ErrWrongGroup, mine))
		return
	case !inFleet && group != NoGroup:
		n.refuse(done, fmt.Errorf("%w: this node is in no fleet; the joiner was started for group %d of one", ErrWrongGroup, group))
		return
	case inFleet && group != mine:
		n.refuse(done, fmt.Errorf("%w: this node is of group %d; the joiner was started for group %d: join through a member of that group", ErrWrongGroup, mine, group))
		return
	}
	if !n.Consensus.Membership().Lists(m.ID) {
		n.addLearner(m, index, done)
		return
	}
	if n.bugs.UnconfirmedMember {
		done(nil)
		return
	}
	n.Consensus.Barrier(func(err error) {
		switch {
		case err != nil:
			done(err) // no answer from a quorum: ask again
		case n.Consensus.Membership().Lists(m.ID):
			done(nil)
		default:
			n.addLearner(m, index, done) // removed since
		}
	})
}

// addLearner is Join's act, for a node this one does not list: taken at
// index only (step 2, and again where it applies).
func (n *Node) addLearner(m consensus.Member, index uint64, done func(error)) {
	if err := atVersion("membership index", index, n.Consensus.Membership().Index); err != nil && !n.bugs.AnyVersionAdmin {
		n.refuse(done, err)
		return
	}
	n.Consensus.AddLearnerAt(m, index, n.adminAnswer(index, done))
}

// Remove removes the member named from this node's raft group, attested
// for the membership at index. done runs once, on the loop, once this
// node has applied the removal (consensus.Node.RemoveMember).
func (n *Node) Remove(name string, index uint64, attestation string, done func(error)) {
	if err := n.attested(transport.ActRemove, RemoveFields(name, index), attestation); err != nil {
		n.refuse(done, err)
		return
	}
	// In a fleet, a node is removed through a member of its own group: a
	// removal proposed in another group removes nothing there.
	if other := n.otherGroupOf(dial.IDFromName(name)); other != "" {
		n.refuse(done, fmt.Errorf("%w: %s %s: remove it through a member of its group", ErrWrongGroup, name, other))
		return
	}
	if err := atVersion("membership index", index, n.Consensus.Membership().Index); err != nil && !n.bugs.AnyVersionAdmin {
		n.refuse(done, err)
		return
	}
	n.Consensus.RemoveMemberAt(dial.IDFromName(name), index, n.adminAnswer(index, done))
}

// adminAnswer is the answer a join or a removal attested at index gets
// once its proposal is applied here (or has failed). One that applied as
// nothing, its index no longer in force by then (another change
// committed first, or it was asked of a member far behind), is answered
// as attested at an older index than this node holds: its asker attests
// again at the index the answer names.
func (n *Node) adminAnswer(index uint64, done func(error)) func(error) {
	if n.bugs.EarlyAdminAnswer {
		done(nil)
		return func(error) {}
	}
	return func(err error) {
		if errors.Is(err, consensus.ErrMembershipMoved) {
			err = &VersionError{ErrAttestationStale, index, n.Consensus.Membership().Index, "membership index"}
		}
		done(err)
	}
}

// refuse answers an admin act refused before anything was proposed:
// done(err), but for the planted bug.
func (n *Node) refuse(done func(error), err error) {
	if n.bugs.SilentAdminRefusal {
		return
	}
	done(err)
}

// otherGroupOf says, in a fleet, that id is a voter of another group than
// this node's, by the directory, and which: "" when it is not (outside a
// fleet, a member of this group, or named by no group).
func (n *Node) otherGroupOf(id dial.NodeID) string {
	mine, inFleet := n.FleetGroup()
	d := n.Directory()
	if !inFleet || d == nil || n.Consensus.Membership().Lists(id) {
		return ""
	}
	if g, _, named := d.Member(id); named && g != mine {
		return fmt.Sprintf("is a voter of group %d; this node is of group %d", g, mine)
	}
	return ""
}
