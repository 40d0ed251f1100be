package consensus

import (
	"encoding/binary"
	"sort"

	"github.com/fenceline/fenceline/dial"
)

// A forwarded proposal can reach the leader twice: a duplicated frame, or
// a retrying transport. Raft appends each copy, so without a check the
// same put would apply twice and take two versions, and a duplicated
// AddLearner that lands after the learner's promotion would demote a voter.
// dedupe is replicated state (every replica applies the same entries in
// the same order, so every replica keeps the same table, and snapshots
// carry it): it remembers which proposal ids each session has applied.
//
// Bounds: a session remembers the last dedupeWindow sequence numbers below
// its highest; an id older than that counts as applied (it is older than
// any proposal still waiting: those time out long before). At most
// dedupeSessions sessions are kept; past it the one applied least recently
// is forgotten, and its stragglers apply as new.
const (
	dedupeWindow   = 4096
	dedupeSessions = 1024
)

type sessionKey struct {
	origin  dial.NodeID
	session uint64
}

type sessionSeen struct {
	maxSeq    uint64
	seen      [dedupeWindow / 64]uint64 // bit (seq % window) set: applied
	lastIndex uint64                    // raft index of the last entry applied from it
}

type dedupe struct {
	sessions map[sessionKey]*sessionSeen
}

func newDedupe() *dedupe { return &dedupe{sessions: map[sessionKey]*sessionSeen{}} }

// firstTime records id as applied at index and reports whether this is its
// first application.
func (d *dedupe) firstTime(id propID, index uint64) bool {
	key := sessionKey{id.origin, id.session}
	s := d.sessions[key]
	if s == nil {
		if len(d.sessions) >= dedupeSessions {
			d.evictOldest()
		}
		s = &sessionSeen{}
		d.sessions[key] = s
	}
	s.lastIndex = index
	if s.maxSeq >= dedupeWindow && id.seq <= s.maxSeq-dedupeWindow {
		return false
	}
	for s.maxSeq < id.seq {
		// Sliding the window forward clears the bits of the seqs that
		// now fall in it.
		s.maxSeq++
		s.clear(s.maxSeq)
	}
	if s.has(id.seq) {
		return false
	}
	s.set(id.seq)
	return true
}

func (s *sessionSeen) has(seq uint64) bool {
	b := seq % dedupeWindow
	return s.seen[b/64]&(1<<(b%64)) != 0
}
func (s *sessionSeen) set(seq uint64) {
	b := seq % dedupeWindow
	s.seen[b/64] |= 1 << (b % 64)
}
func (s *sessionSeen) clear(seq uint64) {
	b := seq % dedupeWindow
	s.seen[b/64] &^= 1 << (b % 64)
}

func (d *dedupe) sortedKeys() []sessionKey {
	keys := make([]sessionKey, 0, len(d.sessions))
	for k := range d.sessions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].origin != keys[j].origin {
			return keys[i].origin < keys[j].origin
		}
		return keys[i].session < keys[j].session
	})
	return keys
}

func (d *dedupe) evictOldest() {
	var victim sessionKey
	var oldest uint64
	first := true
	for _, k := range d.sortedKeys() {
		if s := d.sessions[k]; first || s.lastIndex < oldest {
			victim, oldest, first = k, s.lastIndex, false
		}
	}
	delete(d.sessions, victim)
}

func (d *dedupe) append(b []byte) []byte {
	keys := d.sortedKeys()
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		s := d.sessions[k]
		b = binary.LittleEndian.AppendUint64(b, uint64(k.origin))
		b = binary.LittleEndian.AppendUint64(b, k.session)
		b = binary.LittleEndian.AppendUint64(b, s.maxSeq)
		b = binary.LittleEndian.AppendUint64(b, s.lastIndex)
		for _, w := range s.seen {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	return b
}

func readDedupe(b []byte) (*dedupe, []byte, error) {
	n, k := binary.Uvarint(b)
	const per = 32 + dedupeWindow/8
	if k <= 0 || n > dedupeSessions || uint64(len(b)-k) < n*per {
		return nil, nil, errEnvelope
	}
	b = b[k:]
	d := newDedupe()
	for i := uint64(0); i < n; i++ {
		key := sessionKey{dial.NodeID(binary.LittleEndian.Uint64(b)), binary.LittleEndian.Uint64(b[8:])}
		s := &sessionSeen{maxSeq: binary.LittleEndian.Uint64(b[16:]), lastIndex: binary.LittleEndian.Uint64(b[24:])}
		b = b[32:]
		for w := range s.seen {
			s.seen[w] = binary.LittleEndian.Uint64(b)
			b = b[8:]
		}
		d.sessions[key] = s
	}
	return d, b, nil
}
