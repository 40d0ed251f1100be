package checker

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/dial"
)

// The checkers place keys by rendezvous hashing computed here, from the
// design's formula, and never by package ring: a checker that asked ring
// would agree with whatever ring the nodes run, broken or not. (Every
// mutant of core/ring that the campaign drew survived the simulator that
// way: the nodes and the checkers moved together.) TestRendezvousIsRing
// holds this copy to ring's on the code as written, so the two differ
// only when one of them is broken.

// Class tags of the placement formula (ring.Class): a response cycle's
// key, "s<port>:<stub>", under the sequence class; every other key of the
// flow store under the flow class; proxyOnce's claims under their own.
const (
	classFlow     byte = 1
	classSequence byte = 2
	ClassProxy    byte = 3
)

// classOf is the class a key of the flow store is placed under.
func classOf(key string) byte {
	if len(key) > 0 && key[0] == 's' {
		return classSequence
	}
	return classFlow
}

// Placement is key's placement in class among voters by rendezvous
// hashing: each voter scores xxh64(le64(id) ‖ class ‖ key) with seed 0,
// the highest score first and equal scores to the larger id; the owner
// and at most two successors.
func Placement(voters []dial.NodeID, class byte, key string) []dial.NodeID {
	type scored struct {
		id    dial.NodeID
		score uint64
	}
	all := make([]scored, 0, len(voters))
	buf := make([]byte, 9+len(key))
	buf[8] = class
	copy(buf[9:], key)
	for _, id := range voters {
		binary.LittleEndian.PutUint64(buf, uint64(id))
		all = append(all, scored{id, xxhash.Sum64(buf)})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].id > all[j].id
	})
	out := make([]dial.NodeID, 0, 3)
	for _, s := range all[:min(3, len(all))] {
		out = append(out, s.id)
	}
	return out
}

// OwnerOf is flow's owner among voters (0 when there are none).
func OwnerOf(voters []dial.NodeID, flow string) dial.NodeID {
	if p := Placement(voters, classOf(flow), flow); len(p) > 0 {
		return p[0]
	}
	return 0
}

// OwnerPlacement fails when an operation on a flow took effect at a node
// that owns the flow under no membership applied anywhere by then
// (checker placement). A flow's owner is a pure function of the
// committed membership, so every node that serves it, a deposed owner
// still serving under an older membership included, owns it under one of
// the memberships the record shows applied before the service. services
// is the simulator's record of where and when each operation took effect;
// ms the memberships, each with the first instant any node applied it.
// At most one failure per flow is reported. It returns how many services
// it judged.
func OwnerPlacement(rep Reporter, services []FlowService, ms []MembershipChange, name func(dial.NodeID) string) int {
	owners := map[string][]dial.NodeID{} // flow -> its owner under each of ms
	reported := map[string]bool{}
	judged := 0
	for _, s := range services {
		own, ok := owners[s.Flow]
		if !ok {
			own = make([]dial.NodeID, len(ms))
			for i, m := range ms {
				own[i] = OwnerOf(m.Voters, s.Flow)
			}
			owners[s.Flow] = own
		}
		judged++
		if ownedBy(own, ms, s.Node, s.At) || reported[s.Flow] {
			continue
		}
		reported[s.Flow] = true
		rep.Fail("placement", "flow %s served at %v by %s, which owns it under no membership applied by then (owners: %s)",
			s.Flow, s.At, name(s.Node), ownersText(own, ms, name))
	}
	return judged
}

// ownedBy reports whether node owns the flow under one of ms applied by at.
func ownedBy(own []dial.NodeID, ms []MembershipChange, node dial.NodeID, at time.Duration) bool {
	for i, m := range ms {
		if m.At <= at && own[i] == node {
			return true
		}
	}
	return false
}

func ownersText(own []dial.NodeID, ms []MembershipChange, name func(dial.NodeID) string) string {
	out := ""
	for i, m := range ms {
		if i > 0 {
			out += ", "
		}
		o := "none"
		if own[i] != 0 {
			o = name(own[i])
		}
		out += fmt.Sprintf("%s at m_idx %d from %v", o, m.Index, m.At)
	}
	return out
}

// Push is one replication frame the network's record shows an owner
// sending: the flow's new values, from the owner to a successor.
type Push struct {
	Flow     string
	From, To dial.NodeID
	At       time.Duration
}

// ReplicaPlacement fails when an owner pushed a flow's values to a node
// that is not one of the flow's successors under a membership, applied
// anywhere by then, in which the sender owns the flow (checker
// placement): only the owner pushes, and only to the two voters ranked
// after it. At most one failure per flow. It returns how many pushes it
// judged.
func ReplicaPlacement(rep Reporter, pushes []Push, ms []MembershipChange, name func(dial.NodeID) string) int {
	places := placements(ms)
	reported := map[string]bool{}
	for _, p := range pushes {
		if pushedRightly(places(p.Flow), ms, p) || reported[p.Flow] {
			continue
		}
		reported[p.Flow] = true
		rep.Fail("placement", "%s pushed flow %s to %s at %v, which is not its successor under any membership applied by then in which %s owns it",
			name(p.From), p.Flow, name(p.To), p.At, name(p.From))
	}
	return len(pushes)
}

// placements returns a flow's placement under each of ms, computed once
// a flow.
func placements(ms []MembershipChange) func(flow string) [][]dial.NodeID {
	memo := map[string][][]dial.NodeID{}
	return func(flow string) [][]dial.NodeID {
		pl, ok := memo[flow]
		if !ok {
			pl = make([][]dial.NodeID, len(ms))
			for i, m := range ms {
				pl[i] = Placement(m.Voters, classOf(flow), flow)
			}
			memo[flow] = pl
		}
		return pl
	}
}

func pushedRightly(pl [][]dial.NodeID, ms []MembershipChange, p Push) bool {
	for i, m := range ms {
		if m.At > p.At || len(pl[i]) == 0 || pl[i][0] != p.From {
			continue
		}
		for _, id := range pl[i][1:] {
			if id == p.To {
				return true
			}
		}
	}
	return false
}

// ServedWrite is a write that changed its flow (a set, a set-all, an
// increment, a compare-and-set that succeeded), answered as done: the
// node the simulator's record shows served it, and the span of the
// client's call.
type ServedWrite struct {
	Flow             string
	Node             dial.NodeID
	Called, Answered time.Duration
}

// PushedWrites fails when an owner answered a write without pushing the
// flow to each of its successors first (checker replica-push). An owner's
// steps are in a documented order (apply, stamp, write the shard, push to
// the two successors, answer), and a local read at a replica is at most
// one push behind because of it; anti-entropy would repair a replica an
// owner never pushed to, only seconds later, so no state checker sees a
// push skipped. A push counts whatever became of it on the wire (a lost
// frame is the network's doing, a refused one the peer's): the record of
// sends is the owner's act. The successors are the ones of some
// membership applied by the answer in which the serving node owns the
// flow; a write served by a node that owns it under none is placement's
// to judge, not this one's. At most one failure per flow. It returns how
// many writes it judged.
func PushedWrites(rep Reporter, writes []ServedWrite, pushes []Push, ms []MembershipChange, name func(dial.NodeID) string) int {
	type link struct {
		flow     string
		from, to dial.NodeID
	}
	sent := map[link][]time.Duration{} // in the order sent, which is time order
	for _, p := range pushes {
		l := link{p.Flow, p.From, p.To}
		sent[l] = append(sent[l], p.At)
	}
	pushedIn := func(l link, from, to time.Duration) bool {
		at := sent[l]
		i := sort.Search(len(at), func(i int) bool { return at[i] >= from })
		return i < len(at) && at[i] <= to
	}
	places := placements(ms)
	reported := map[string]bool{}
	judged := 0
	for _, w := range writes {
		pls := places(w.Flow)
		owned, pushed := false, false
		var missing []dial.NodeID
		for i, m := range ms {
			pl := pls[i]
			if m.At > w.Answered || len(pl) == 0 || pl[0] != w.Node {
				continue
			}
			owned = true
			missing = missing[:0]
			for _, s := range pl[1:] {
				if !pushedIn(link{w.Flow, w.Node, s}, w.Called, w.Answered) {
					missing = append(missing, s)
				}
			}
			if len(missing) == 0 {
				pushed = true
				break
			}
		}
		if !owned {
			continue
		}
		judged++
		if pushed || reported[w.Flow] {
			continue
		}
		reported[w.Flow] = true
		names := make([]string, len(missing))
		for i, id := range missing {
			names[i] = name(id)
		}
		rep.Fail("replica-push", "%s answered a write on flow %s (called at %v, answered at %v) without pushing it to its successor %v first",
			name(w.Node), w.Flow, w.Called, w.Answered, names)
	}
	return judged
}
