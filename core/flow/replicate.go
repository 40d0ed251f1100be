package flow

import (
	"encoding/binary"
	"maps"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// push sends an owner's new values to the flow's two successors, fire and
// forget: a lost push is repaired by anti-entropy or adoption.
//
// The push carries the imposter's mode, so a replica writes the copy as
// the owner did: memory only for a none flow, to disk otherwise.
func (s *Store) push(flow string, changed map[string]Value, mode shard.Mode) {
	if len(changed) == 0 {
		return
	}
	// One encoding for both successors: a sent frame is never changed
	// (dial.Sender), so the two sends may share its bytes.
	var frame []byte
	for i, to := range s.ring.Placement(ring.ClassOf(flow), flow).Successors() {
		if i > 0 && s.cfg.Bugs.OnePush {
			break
		}
		s.Pushed++
		if frame == nil {
			frame = encodeFrame(msg{Kind: FramePush, M: s.mIdx, Flow: flow, Entries: changed, Mode: mode})
		}
		_ = s.env.Net.Send(to, frame)
	}
}

// aeAnswerBytes bounds the values in one anti-entropy answer, well under
// dial.MaxFrame with the keys and tuples around them.
const aeAnswerBytes = 1 << 20

func flowBytes(f map[string]Value) int {
	n := 0
	for k, v := range f { //fenceline:unordered summing sizes
		n += len(k) + len(v.Data) + 64
	}
	return n
}

// aePartition is flow's anti-entropy partition: the flows between a
// replica and an owner are split into Config.AEPartitions groups compared
// by digest first, so a quiet cluster exchanges a few dozen numbers per
// pair of nodes, not its data.
func (s *Store) aePartition(flow string) uint32 {
	return uint32(xxhash.Sum64String(flow) % uint64(s.cfg.AEPartitions))
}

// flowDigest covers every key's tuple and tombstone, in key order. Data
// need not be hashed: equal tuples name the same write.
func flowDigest(f map[string]Value) uint64 {
	d := xxhash.New()
	var b [8 + 8 + 8 + 1]byte
	// A flow has a handful of keys: sorted on the stack, not the heap.
	var buf [16]string
	keys := buf[:0]
	for k := range f { // sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := f[k]
		_, _ = d.WriteString(k)
		binary.LittleEndian.PutUint64(b[0:], v.Tuple.MIdx)
		binary.LittleEndian.PutUint64(b[8:], v.Tuple.V)
		binary.LittleEndian.PutUint64(b[16:], uint64(v.Tuple.Origin))
		b[24] = 0
		if v.Tomb {
			b[24] = 1
		}
		_, _ = d.Write(b[:])
		if v.Tuple.Era != 0 {
			// Only then: a fleet's unmoved partitions, and every flow
			// outside a fleet, digest as before eras.
			binary.LittleEndian.PutUint64(b[0:], v.Tuple.Era)
			_, _ = d.Write(b[:8])
		}
	}
	return d.Sum64()
}

// digests computes, over flows (sorted) whose owner is owner and whose
// placement includes replica, one digest per partition.
func (s *Store) digests(flows []string, owner, replica dial.NodeID) (map[uint32]uint64, map[uint32][]string) {
	sums := map[uint32]uint64{}
	members := map[uint32][]string{}
	for _, f := range flows {
		p := s.ring.Placement(ring.ClassOf(f), f)
		if id, _ := p.Owner(); id != owner || !p.Contains(replica) {
			continue
		}
		s.addDigest(sums, f)
		members[s.aePartition(f)] = append(members[s.aePartition(f)], f)
	}
	return sums, members
}

// replicaDigests is digests for every owner at once, with this node as
// the replica: one placement per flow instead of one per flow and owner.
// An owner whose flows this node holds none of gets an empty map.
func (s *Store) replicaDigests(flows []string) map[dial.NodeID]map[uint32]uint64 {
	out := make(map[dial.NodeID]map[uint32]uint64, len(s.voters))
	for _, id := range s.voters {
		out[id] = map[uint32]uint64{}
	}
	for _, f := range flows {
		p := s.ring.Placement(ring.ClassOf(f), f)
		owner, _ := p.Owner()
		if sums := out[owner]; sums != nil && owner != s.env.ID && p.Contains(s.env.ID) {
			s.addDigest(sums, f)
		}
	}
	return out
}

// addDigest folds flow f into its partition's sum. Flows are combined in
// flow-id order, so the owner and the replica reach the same sum.
func (s *Store) addDigest(sums map[uint32]uint64, f string) {
	part := s.aePartition(f)
	sums[part] = sums[part]*1_000_003 + flowDigest(s.sh.Peek(f)) + 1
}

func (s *Store) armAntiEntropy() {
	// Jitter keeps the nodes from pulling in lockstep.
	every := s.cfg.AntiEntropy
	d := every - every/4 + time.Duration(s.env.Rand.Int64N(int64(every/2)+1))
	s.aeTimer = s.env.Clock.AfterFunc(d, func() {
		if s.stopped {
			return
		}
		s.antiEntropy()
		s.armAntiEntropy()
	})
}

// antiEntropy sends, to the owner of every flow this node replicates, the
// digests of what it holds of that owner's flows.
func (s *Store) antiEntropy() {
	if s.cfg.Bugs.NoAntiEntropy {
		return
	}
	s.refresh()
	s.AERounds++
	s.release()
	sums := s.replicaDigests(s.sh.Flows())
	for _, owner := range s.voters {
		if owner == s.env.ID {
			continue
		}
		// Sent even when empty: the owner may hold flows this replica
		// has never seen.
		d := sums[owner]
		if s.cfg.Bugs.AENoDigests {
			d = nil
		}
		_ = s.send(owner, msg{Kind: FrameAE, M: s.mIdx, Digests: d})
	}
}

// release drops this node's copies of flows whose partition the
// directory gives another group, not moving: what a move out of this
// group left behind once it was published (the move's last step). At
// most MaxAEFlows a round. Safe against a directory that lags: the next
// state of a partition held elsewhere is a move that the node takes
// copies in only once its directory shows it (Store.ingestable).
func (s *Store) release() {
	if s.cfg.Bugs.NoRelease {
		return
	}
	if s.env.Fleet == nil {
		return
	}
	d := s.env.Fleet.Directory()
	if d == nil {
		return
	}
	n := 0
	for _, f := range s.sh.Flows() {
		if g, _ := d.HolderOf(f); g == s.env.Fleet.Group() || !d.Holds(g, f) {
			continue
		}
		s.sh.Drop(f)
		s.Released++
		if n++; n >= s.cfg.MaxAEFlows {
			return
		}
	}
}

// prune drops from this replica's copy of a flow every key the owner's
// copy does not hold. The owner answers anti-entropy only with flows it
// has adopted at the membership both work at, whole: its copy is the
// authority, and a key it lacks is one an adoption without every copy
// left behind (or a deposed owner's last push): left alone it would sit on
// this replica forever, invisible to strong reads, visible to local ones
// and to any later adoption that asks this node.
func (s *Store) prune(flow string, owners map[string]Value) {
	var extra []string
	for _, k := range slices.Sorted(maps.Keys(s.sh.Peek(flow))) {
		if _, ok := owners[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 && s.sh.DropKeys(flow, extra) == nil {
		s.Pruned += uint64(len(extra))
	}
}

// answerAntiEntropy sends a replica the flows of every partition whose
// digest differs from the owner's, at most MaxAEFlows per answer.
func (s *Store) answerAntiEntropy(from dial.NodeID, m msg) {
	if m.M != s.mIdx {
		return // the two disagree on who owns what: wait for the next round
	}
	sums, members := s.digests(s.sh.Flows(), s.env.ID, from)
	var differing []string
	for part := uint32(0); part < uint32(s.cfg.AEPartitions); part++ {
		if sums[part] == m.Digests[part] {
			continue
		}
		for _, f := range members[part] {
			if s.adopted[f] == s.mIdx { // only the authority's copy repairs
				differing = append(differing, f)
			}
		}
	}
	// At most MaxAEFlows flows and aeAnswerBytes of values per answer,
	// starting where the last answer stopped, so a long list of differing
	// flows is worked through round by round instead of repeating its head.
	out := map[string]map[string]Value{}
	modes := map[string]shard.Mode{}
	size := 0
	for i := range differing {
		if len(out) >= s.cfg.MaxAEFlows || size >= aeAnswerBytes {
			break
		}
		f := differing[(s.aeCursor+i)%len(differing)]
		out[f] = s.sh.Peek(f)
		if _, mode, _ := s.sh.Meta(f); mode != shard.Async {
			modes[f] = mode
		}
		size += flowBytes(out[f])
	}
	s.aeCursor += len(out)
	if len(out) > 0 {
		_ = s.send(from, msg{Kind: FrameAEResp, M: s.mIdx, Flows: out, Modes: modes})
	}
}
