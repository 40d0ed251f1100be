// Package ring decides which voter owns a key, and which two voters hold its
// replicas, by rendezvous (highest-random-weight) hashing.
//
// Every voter gets a score for the key,
//
//	score(n, class, key) = xxh64(le64(n) ‖ class ‖ key), seed 0,
//
// and the voter with the highest score owns the key; the next two are its
// replica successors. Equal scores go to the larger node id, so the order is
// total and every node ranks the voters the same way.
//
// Rendezvous hashing is used instead of a token ring because a voter's score
// depends on nothing but that voter and the key. Removing a voter therefore
// moves exactly the keys it owned (each to its first successor), and adding
// one moves exactly the keys it now outscores; no other key changes hands.
// Ownership transfer is not a protocol: each node derives it from the
// committed membership it has applied, so nodes at the same applied index
// agree without exchanging a message. There are no virtual nodes to tune
// either, and a lookup costs one short hash per voter, which is cheap for
// the small voter sets a raft membership has.
//
// The byte layout is a compatibility contract with the reference design: a
// key must land on the same owner in both. The golden test pins it.
package ring

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/dial"
)

// Class separates the key spaces that share the ring: a flow, a sequence and
// a proxyOnce claim with the same key bytes are placed independently.
type Class uint8

// The class tags are part of the hash input, so they are an append-only
// list: never renumber or reuse a tag, only add new ones at the end (and
// teach Known about them). Tag 0 is reserved and never valid, so a zero
// Class left unset by mistake cannot silently place keys.
const (
	ClassFlow     Class = 1 // per-flow state of a stateful stub
	ClassSequence Class = 2 // response sequences
	ClassProxy    Class = 3 // proxyOnce claims, keyed by (port, signature)
)

// Known reports whether c is one of the class tags above.
func (c Class) Known() bool { return c >= ClassFlow && c <= ClassProxy }

func (c Class) String() string {
	switch c {
	case ClassFlow:
		return "flow"
	case ClassSequence:
		return "sequence"
	case ClassProxy:
		return "proxy"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// mustBeKnown panics on an unknown class. The class always comes from one of
// the constants above, never from input, so an unknown one is a programmer
// error; returning an error would push a can't-happen branch into every
// caller on the request path.
func mustBeKnown(c Class) {
	if !c.Known() {
		panic(fmt.Sprintf("ring: unknown class tag %d (0 is reserved; known: 1 flow, 2 sequence, 3 proxy)", uint8(c)))
	}
}

// Replicas is the most voters a Placement names: the owner and two
// successors.
const Replicas = 3

const (
	// prefixLen is le64(node id) followed by the class tag byte.
	prefixLen = 8 + 1
	// msgBufLen bounds the stack buffer that holds prefix ‖ key. Keys that
	// fit are hashed in one xxhash.Sum64 call; longer ones are streamed
	// through a Digest. Both give the same score; the buffer is only the
	// fast path for the short keys flows actually use.
	msgBufLen = 256
)

// message holds the bytes hashed for one (class, key) and any voter: the key
// is copied once, and only the eight id bytes change from voter to voter.
// It lives on the caller's stack; a lookup allocates nothing.
type message struct {
	buf  [msgBufLen]byte
	n    int    // bytes of buf in use; 0 when key is streamed instead
	tag  byte   // class tag
	long string // the key, when it does not fit in buf
}

func (m *message) init(class Class, key string) {
	m.tag = byte(class)
	if len(key) > msgBufLen-prefixLen {
		m.long = key
		return
	}
	m.buf[8] = m.tag
	m.n = prefixLen + copy(m.buf[prefixLen:], key)
}

func (m *message) score(id dial.NodeID) uint64 {
	if m.n == 0 {
		var prefix [prefixLen]byte
		binary.LittleEndian.PutUint64(prefix[:8], uint64(id))
		prefix[8] = m.tag
		var d xxhash.Digest
		d.Reset()
		d.Write(prefix[:])
		d.WriteString(m.long)
		return d.Sum64()
	}
	binary.LittleEndian.PutUint64(m.buf[:8], uint64(id))
	return xxhash.Sum64(m.buf[:m.n])
}

// outranks reports whether (s1, id1) places before (s2, id2): the higher
// score first, and on equal scores the larger id, so the ranking is a total
// order that does not depend on the order voters were listed in.
func outranks(s1 uint64, id1 dial.NodeID, s2 uint64, id2 dial.NodeID) bool {
	return s1 > s2 || (s1 == s2 && id1 > id2)
}

// Placement is where one key lives: its owner and up to two successors, in
// rank order (highest score first). It has fewer than Replicas members only
// when the ring has fewer voters. The zero Placement is empty. Placements
// are plain values; two are == when they name the same members in the same
// order.
type Placement struct {
	nodes [Replicas]dial.NodeID
	n     int // members in use; 0 <= n <= Replicas
}

// top keeps the Replicas best-ranked voters seen so far, with their scores,
// while a Placement is computed.
type top struct {
	nodes  [Replicas]dial.NodeID
	scores [Replicas]uint64 // scores[i] is nodes[i]'s score
	n      int
}

// offer ranks id in if it outranks a member or there is room; whoever falls
// off the end is not a replica.
func (t *top) offer(id dial.NodeID, s uint64) {
	if t.n == Replicas && !outranks(s, id, t.scores[Replicas-1], t.nodes[Replicas-1]) {
		return // the common case once three voters are in: not a replica
	}
	i := min(t.n, Replicas-1) // the slot the newcomer takes if it outranks no one above
	for i > 0 && outranks(s, id, t.scores[i-1], t.nodes[i-1]) {
		t.nodes[i], t.scores[i] = t.nodes[i-1], t.scores[i-1]
		i--
	}
	t.nodes[i], t.scores[i] = id, s
	t.n = min(t.n+1, Replicas)
}

// Len is the number of members: min(Replicas, voters).
func (p Placement) Len() int { return p.n }

// Owner returns the member that serializes the key's operations; ok is false
// when the ring had no voters.
func (p Placement) Owner() (id dial.NodeID, ok bool) {
	if p.n == 0 {
		return 0, false
	}
	return p.nodes[0], true
}

// Successors returns the replicas the owner pushes each write to, in rank
// order; the first is the key's owner once the current owner is removed. The
// slice is a fresh copy.
func (p Placement) Successors() []dial.NodeID {
	if p.n <= 1 {
		return nil
	}
	return slices.Clone(p.nodes[1:p.n])
}

// Nodes returns every member in rank order, owner first, as a fresh slice.
func (p Placement) Nodes() []dial.NodeID { return slices.Clone(p.nodes[:p.n]) }

// Contains reports whether id holds a copy of the key (owner or successor).
func (p Placement) Contains(id dial.NodeID) bool {
	return slices.Contains(p.nodes[:p.n], id)
}

func (p Placement) String() string {
	return fmt.Sprint(p.nodes[:p.n])
}

// Ring is the set of voters of one committed membership, ready to place
// keys. Build it from the voter list of the membership entry in force (at
// m_idx) so that every node that applied that entry places every key the
// same way; learners are not voters and own nothing. A crashed voter stays
// in the ring and keeps its keys; only a committed removal takes them away.
//
// A Ring is immutable after New and safe to share by value. The zero Ring
// has no voters.
type Ring struct {
	// voters is sorted ascending without duplicates and never written after
	// New, so copies of a Ring may share it.
	voters []dial.NodeID
}

// New builds the ring for a voter list. Order and duplicates in the input do
// not matter: a membership read from different sources must give the same
// ring. The input is copied. An empty list is allowed and owns nothing.
//
// New panics on node id 0, which no node has (ids are max(1, xxh64(name))):
// a zero there means the caller built the list wrong.
func New(voters []dial.NodeID) Ring {
	v := slices.Clone(voters)
	slices.Sort(v)
	v = slices.Compact(v)
	if len(v) > 0 && v[0] == 0 {
		panic("ring: node id 0 in voter list (ids are never zero)")
	}
	if len(v) == 0 {
		return Ring{}
	}
	return Ring{voters: slices.Clip(v)}
}

// Len is the number of distinct voters.
func (r Ring) Len() int { return len(r.voters) }

// Voters returns the voters in ascending id order, as a fresh slice.
func (r Ring) Voters() []dial.NodeID { return slices.Clone(r.voters) }

// Owner returns the voter that owns key in class; ok is false when the ring
// has no voters. It panics on an unknown class. It does not allocate.
func (r Ring) Owner(class Class, key string) (owner dial.NodeID, ok bool) {
	mustBeKnown(class)
	if len(r.voters) == 0 {
		return 0, false
	}
	var m message
	m.init(class, key)
	var best uint64
	for i, id := range r.voters {
		if s := m.score(id); i == 0 || outranks(s, id, best, owner) {
			owner, best = id, s
		}
	}
	return owner, true
}

// Placement returns key's owner and successors in class. It panics on an
// unknown class. It does not allocate.
func (r Ring) Placement(class Class, key string) Placement {
	mustBeKnown(class)
	var m message
	m.init(class, key)
	var t top
	for _, id := range r.voters {
		t.offer(id, m.score(id))
	}
	return Placement{nodes: t.nodes, n: t.n}
}
