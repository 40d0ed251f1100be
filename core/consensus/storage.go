package consensus

import (
	"errors"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/core/journal"
)

// storage adapts the journal to raft.Storage. The journal speaks its own
// types so that it, like everything outside this package, never names a
// raft type. snapPending reports that a snapshot this node wants is not
// yet written (Node.snapshotPending).
type storage struct {
	j           *journal.Journal
	snapPending func() bool
}

var _ raft.Storage = storage{}

func (s storage) InitialState() (pb.HardState, pb.ConfState, error) {
	hs := s.j.HardState()
	var cs pb.ConfState
	if snap := s.j.Snapshot(); len(snap.Meta.ConfState) > 0 {
		if err := cs.Unmarshal(snap.Meta.ConfState); err != nil {
			return pb.HardState{}, pb.ConfState{}, err
		}
	}
	return pb.HardState{Term: hs.Term, Vote: hs.Vote, Commit: hs.Commit}, cs, nil
}

func (s storage) Entries(lo, hi, maxSize uint64) ([]pb.Entry, error) {
	ents, err := s.j.Entries(lo, hi, maxSize)
	if err != nil {
		return nil, raftErr(err)
	}
	out := make([]pb.Entry, len(ents))
	for i, e := range ents {
		out[i] = pb.Entry{Index: e.Index, Term: e.Term, Type: pb.EntryType(e.Type), Data: e.Data}
	}
	return out, nil
}

func (s storage) Term(i uint64) (uint64, error) {
	t, err := s.j.Term(i)
	return t, raftErr(err)
}

func (s storage) LastIndex() (uint64, error) { return s.j.LastIndex(), nil }

func (s storage) FirstIndex() (uint64, error) { return s.j.FirstIndex(), nil }

// Snapshot is the journal's snapshot, which a leader sends a follower
// whose next entries it no longer holds. While a newer one waits to be
// written it is temporarily unavailable: raft then sends nothing and
// tries again at the follower's next heartbeat answer. Every membership
// change asks for a snapshot that carries it (apply), and a newcomer
// refuses one whose membership does not name it: sent the old one while
// the leader's disk was busy, a newcomer answered each at once, and each
// answer drew it again (imposter-scenarios seed 26, a leader's disk
// stalled as it sent a membership change: 200,000 frames in a second).
func (s storage) Snapshot() (pb.Snapshot, error) {
	if s.snapPending != nil && s.snapPending() {
		return pb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	snap := s.j.Snapshot()
	var cs pb.ConfState
	if len(snap.Meta.ConfState) > 0 {
		if err := cs.Unmarshal(snap.Meta.ConfState); err != nil {
			return pb.Snapshot{}, err
		}
	}
	return pb.Snapshot{
		Data:     snap.Data,
		Metadata: pb.SnapshotMetadata{Index: snap.Meta.Index, Term: snap.Meta.Term, ConfState: cs},
	}, nil
}

func raftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, journal.ErrCompacted):
		return raft.ErrCompacted
	case errors.Is(err, journal.ErrUnavailable):
		return raft.ErrUnavailable
	}
	return err
}

func toJournal(ents []pb.Entry) []journal.Entry {
	out := make([]journal.Entry, len(ents))
	for i, e := range ents {
		out[i] = journal.Entry{Index: e.Index, Term: e.Term, Type: uint8(e.Type), Data: e.Data}
	}
	return out
}

func snapToJournal(s pb.Snapshot) (journal.Snapshot, error) {
	cs, err := s.Metadata.ConfState.Marshal()
	if err != nil {
		return journal.Snapshot{}, err
	}
	return journal.Snapshot{
		Meta: journal.SnapshotMeta{Index: s.Metadata.Index, Term: s.Metadata.Term, ConfState: cs},
		Data: s.Data,
	}, nil
}
