package consensus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/dial"
)

// Every normal entry and every conf change context this driver proposes
// starts with a proposal id: the proposing node, a session drawn at its
// boot and a sequence number. The proposer matches applied entries to its
// waiting callers by it. The session is what keeps a restarted node from
// mistaking an entry its previous incarnation proposed (still in flight,
// applied later) for one of its own new proposals.
type propID struct {
	origin  dial.NodeID
	session uint64
	seq     uint64
}

const propIDBytes = 24

// ProposalIDBytes is the proposal id at the head of a normal entry's
// data; the KV command follows it. For the simulator, which garbles
// commands in flight and must leave the id whole.
const ProposalIDBytes = propIDBytes

func (p propID) append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(p.origin))
	b = binary.LittleEndian.AppendUint64(b, p.session)
	return binary.LittleEndian.AppendUint64(b, p.seq)
}

var errEnvelope = errors.New("consensus: malformed entry envelope")

func splitPropID(b []byte) (propID, []byte, error) {
	if len(b) < propIDBytes {
		return propID{}, nil, errEnvelope
	}
	return propID{
		origin:  dial.NodeID(binary.LittleEndian.Uint64(b)),
		session: binary.LittleEndian.Uint64(b[8:]),
		seq:     binary.LittleEndian.Uint64(b[16:]),
	}, b[propIDBytes:], nil
}

// Member is one node of the cluster as membership entries name it.
type Member struct {
	ID   dial.NodeID
	Name string
	Addr string // where peers reach it
	// HTTP is where clients reach it (the real node's API), so that every
	// node learns it from the log; empty for a node that serves none (the
	// simulator's). It travels only when set, so entries without it keep
	// the encoding they always had.
	HTTP string
}

// NewMember names a node; its id comes from its name.
func NewMember(name, addr string) Member {
	return Member{ID: dial.IDFromName(name), Name: name, Addr: addr}
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, errEnvelope
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

// append encodes the member, with its HTTP address when withHTTP.
func (m Member) append(b []byte, withHTTP bool) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(m.ID))
	b = appendString(b, m.Name)
	b = appendString(b, m.Addr)
	if withHTTP {
		b = appendString(b, m.HTTP)
	}
	return b
}

func readMember(b []byte, withHTTP bool) (Member, []byte, error) {
	if len(b) < 8 {
		return Member{}, nil, errEnvelope
	}
	m := Member{ID: dial.NodeID(binary.LittleEndian.Uint64(b))}
	var err error
	if m.Name, b, err = readString(b[8:]); err != nil {
		return Member{}, nil, err
	}
	if m.Addr, b, err = readString(b); err != nil {
		return Member{}, nil, err
	}
	if withHTTP {
		if m.HTTP, b, err = readString(b); err != nil {
			return Member{}, nil, err
		}
	}
	return m, b, nil
}

// A conf change's context is a proposal id and the member: the HTTP
// address follows only when the member has one, or when the change names
// the membership index it was asked for at (at, non-zero), which ends it.
// A context without either is the one this driver always wrote.
func appendContext(id propID, m Member, at uint64) []byte {
	b := m.append(id.append(nil), m.HTTP != "" || at != 0)
	if at != 0 {
		b = binary.LittleEndian.AppendUint64(b, at)
	}
	return b
}

// readContext reads what follows a conf change context's proposal id:
// the member, and the membership index it was asked for at (0: any).
func readContext(b []byte) (Member, uint64, error) {
	m, rest, err := readMember(b, false)
	if err != nil {
		return Member{}, 0, err
	}
	if len(rest) > 0 {
		if m.HTTP, rest, err = readString(rest); err != nil {
			return Member{}, 0, err
		}
	}
	var at uint64
	if len(rest) == 8 {
		if at, rest = binary.LittleEndian.Uint64(rest), nil; at == 0 {
			return Member{}, 0, errEnvelope // written only when not 0
		}
	}
	if len(rest) > 0 {
		return Member{}, 0, errEnvelope
	}
	return m, at, nil
}

// snapshotState is what a raft snapshot carries besides the ConfState: the
// index of the membership entry in force and of the one before it with its
// voters, the names and addresses of every member, and the KV state. A
// newcomer restores all of it; a restarted node too, so that it still
// knows the membership before the one in force, and whom an adoption must
// ask (a restarted new owner that forgot it adopted without asking the
// previous owner, though it was reachable: the simulator found it).
type snapshotState struct {
	mIdx       uint64
	prevMIdx   uint64 // 0: not known
	prevVoters []uint64
	members    map[dial.NodeID]Member
	dedupe     *dedupe
	kv         []byte
}

// Snapshot encodings: version 1 lacks the previous membership; version 2
// lacks the members' HTTP addresses, and is still what a snapshot whose
// members have none is written as.
const (
	snapshotV1     = 1
	snapshotV2     = 2
	snapshotV3HTTP = 3
)

func (s snapshotState) encode() []byte {
	version := byte(snapshotV2)
	for _, m := range s.members { //fenceline:unordered any member with an HTTP address
		if m.HTTP != "" {
			version = snapshotV3HTTP
		}
	}
	b := []byte{version}
	b = binary.AppendUvarint(b, s.mIdx)
	b = binary.AppendUvarint(b, s.prevMIdx)
	b = binary.AppendUvarint(b, uint64(len(s.prevVoters)))
	for _, v := range s.prevVoters {
		b = binary.AppendUvarint(b, v)
	}
	ids := make([]dial.NodeID, 0, len(s.members))
	for id := range s.members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = s.members[id].append(b, version >= snapshotV3HTTP)
	}
	b = s.dedupe.append(b)
	return append(b, s.kv...)
}

// checkSnapshot reads a snapshot a peer sent as restoreSnapshot will:
// the envelope and the KV state inside it.
func checkSnapshot(s *pb.Snapshot) error {
	if s == nil {
		return errEnvelope
	}
	st, err := decodeSnapshotState(s.Data)
	if err != nil {
		return err
	}
	return kv.CheckSnapshot(st.kv)
}

func decodeSnapshotState(b []byte) (snapshotState, error) {
	if len(b) == 0 || b[0] < snapshotV1 || b[0] > snapshotV3HTTP {
		return snapshotState{}, fmt.Errorf("consensus: snapshot of unknown version")
	}
	version := b[0]
	b = b[1:]
	s := snapshotState{members: map[dial.NodeID]Member{}}
	var k int
	if s.mIdx, k = binary.Uvarint(b); k <= 0 {
		return snapshotState{}, errEnvelope
	}
	b = b[k:]
	if version >= 2 {
		if s.prevMIdx, k = binary.Uvarint(b); k <= 0 {
			return snapshotState{}, errEnvelope
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return snapshotState{}, errEnvelope
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return snapshotState{}, errEnvelope
			}
			s.prevVoters, b = append(s.prevVoters, v), b[k:]
		}
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return snapshotState{}, errEnvelope
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		var m Member
		var err error
		if m, b, err = readMember(b, version >= snapshotV3HTTP); err != nil {
			return snapshotState{}, err
		}
		s.members[m.ID] = m
	}
	var err error
	if s.dedupe, b, err = readDedupe(b); err != nil {
		return snapshotState{}, err
	}
	s.kv = b
	return s, nil
}
