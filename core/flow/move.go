package flow

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// This file: the copy step of a partition move between groups of a fleet
// (core/fleet says what a move is; core/node fences and publishes).
//
// The node that drives the move (the control group's leader) asks every
// voter of the old group for its copies of the batch's flows, a page at a
// time, and hands each page to every voter of the new group, which writes
// it to disk before it acknowledges. A voter of the old group answers
// only once its group's own log has fenced the batch (fleet.Fences), so
// once every one of them has answered, no owner of the old group serves
// the batch any more, and every write one of them acknowledged is in the
// copy: an owner's copy has every write it served, pushed or not. The
// copy is complete when every old voter's last page is on disk at every
// new voter; the driver publishes then.
//
// A voter that does not answer (down, cut off) holds the move up until it
// does, and the batch's partitions stay unavailable meanwhile: the copy
// never completes without a copy holder, so the move loses nothing.
//
// A copy keeps its tuples. Each holding of a partition writes in a later
// era than the one before (Tuple), so whatever the new group kept from an
// earlier holding of the partition is below every copied value, and the
// new group's own writes are above them.
//
// Every page is bounded (MaxMoveFlows flows, aeAnswerBytes of values), and
// one page per old voter is in flight: the driver holds at most a page
// per voter of the old group.

// Move is one batch of a move: its partitions, moving from the voters
// From (the old group's, at its membership index FromMIdx by the
// directory) to the voters To (the new group's, at ToMIdx), fenced at
// directory epoch Era.
type Move struct {
	Parts    []partition.Partition
	Era      uint64
	From, To []dial.NodeID
	FromMIdx uint64
	ToMIdx   uint64
}

// Same reports whether m and o are the same copy.
func (m Move) Same(o Move) bool {
	return m.Era == o.Era && m.FromMIdx == o.FromMIdx && m.ToMIdx == o.ToMIdx &&
		slices.Equal(m.Parts, o.Parts) && slices.Equal(m.From, o.From) && slices.Equal(m.To, o.To)
}

// mover is the copy of one Move in progress at its driver.
type mover struct {
	mv      Move
	id      uint64
	sources map[dial.NodeID]*moveSource
	done    func()
	retry   clock.Timer
}

// moveSource is the copy from one voter of the old group: its next page
// is asked for after cursor, and the page in hand (page != nil) goes to
// every voter of the new group before the next is asked for.
type moveSource struct {
	cursor string
	seq    uint64 // the page's number, from 1
	page   map[string]map[string]Value
	modes  map[string]shard.Mode
	last   bool // the page in hand is the source's last
	acked  map[dial.NodeID]bool
	done   bool
}

// CopyMove starts copying mv, or goes on with it if it is the copy in
// progress; done runs once, on the loop, when every voter of the old
// group has given its last page and every voter of the new group has it
// on disk. A different Move replaces the one in progress (the directory
// moved on: a leader change, a membership published); its done never
// runs.
func (s *Store) CopyMove(mv Move, done func()) {
	if s.move != nil && s.move.mv.Same(mv) {
		s.move.done = done
		return
	}
	s.StopMove()
	s.nextID++
	m := &mover{mv: mv, id: s.nextID, sources: map[dial.NodeID]*moveSource{}, done: done}
	for _, id := range mv.From {
		m.sources[id] = &moveSource{seq: 1}
	}
	s.move = m
	s.moveRound(m)
}

// StopMove abandons the copy in progress, if any.
func (s *Store) StopMove() {
	if s.move != nil && s.move.retry != nil {
		s.move.retry.Stop()
	}
	s.move = nil
}

// moveRound sends what each source's copy waits for, and again every
// quarter AdoptWait until the copy completes: a voter that was down
// answers once it is back.
func (s *Store) moveRound(m *mover) {
	for _, id := range m.mv.From {
		src := m.sources[id]
		switch {
		case src.done:
		case src.page == nil:
			s.moveSend(id, msg{Kind: FrameMoveAsk, ID: m.id, M: m.mv.Era, Their: m.mv.FromMIdx, Session: src.seq, Flow: src.cursor, Digests: partsOf(m.mv.Parts)})
		default:
			for _, to := range m.mv.To {
				if !src.acked[to] {
					s.moveSend(to, msg{Kind: FrameIngest, ID: m.id, M: m.mv.Era, Their: m.mv.ToMIdx, Session: src.seq, Served: uint64(id),
						Flows: src.page, Modes: src.modes, Digests: partsOf(m.mv.Parts)})
				}
			}
		}
	}
	m.retry = s.env.Clock.AfterFunc(s.cfg.AdoptWait/4, func() {
		if s.move == m {
			s.moveRound(m)
		}
	})
}

// moveSend sends a move's frame; to this node itself, it is handled on
// the loop a step later, as if it came from the network: the driver is
// always a voter of one of the two groups, and a node does not send
// frames to itself (a real transport has no link to itself).
func (s *Store) moveSend(to dial.NodeID, m msg) {
	if to != s.env.ID {
		_ = s.send(to, m)
		return
	}
	frame := encodeFrame(m)
	s.env.Clock.AfterFunc(0, func() { s.HandleFrame(to, frame) })
}

// partsOf carries a batch's partitions in a frame's digests map.
func partsOf(ps []partition.Partition) map[uint32]uint64 {
	out := make(map[uint32]uint64, len(ps))
	for _, p := range ps {
		out[uint32(p)] = 1
	}
	return out
}

// partsIn reads them back, ascending; false if a key is no partition.
func partsIn(d map[uint32]uint64) ([]partition.Partition, bool) {
	out := make([]partition.Partition, 0, len(d))
	for p := range d { //fenceline:unordered sorted below
		if p >= partition.Count {
			return nil, false
		}
		out = append(out, partition.Partition(p))
	}
	slices.Sort(out)
	return out, len(out) > 0
}

// moveCopy is a source's page, at the driver.
func (s *Store) moveCopy(from dial.NodeID, m msg) {
	mv := s.move
	if mv == nil || m.ID != mv.id || m.Err != "" {
		return // not the copy in progress, or not yet (the source's log has not fenced the batch): asked again next round
	}
	src := mv.sources[from]
	if src == nil || src.done || src.page != nil || m.Session != src.seq {
		return // a duplicate or a late answer
	}
	for f := range m.Flows { //fenceline:unordered validation only: every flow must pass
		if !s.validCopy(f, m.Flows[f], m.Modes[f]) || !slices.Contains(mv.mv.Parts, partition.Of(f)) {
			s.BadFrames++
			return
		}
	}
	src.last = m.Served == 1
	if len(m.Flows) == 0 {
		src.done = src.last
		src.seq++
		s.moveFinish(mv)
		return
	}
	src.page, src.modes, src.acked = m.Flows, m.Modes, map[dial.NodeID]bool{}
	src.cursor = m.Flow
	for _, to := range mv.mv.To {
		s.moveSend(to, msg{Kind: FrameIngest, ID: mv.id, M: mv.mv.Era, Their: mv.mv.ToMIdx, Session: src.seq, Served: uint64(from),
			Flows: src.page, Modes: src.modes, Digests: partsOf(mv.mv.Parts)})
	}
}

// moveAck is a new voter's acknowledgement of a page, at the driver.
func (s *Store) moveAck(from dial.NodeID, m msg) {
	mv := s.move
	if mv == nil || m.ID != mv.id || m.Err != "" || !slices.Contains(mv.mv.To, from) {
		return
	}
	src := mv.sources[dial.NodeID(m.Served)]
	if src == nil || src.page == nil || m.Session != src.seq && !s.cfg.Bugs.StalePageAck {
		return // a late or duplicated acknowledgement: of no page in flight
	}
	src.acked[from] = true
	for _, to := range mv.mv.To {
		if !src.acked[to] {
			return
		}
	}
	src.page, src.modes, src.acked = nil, nil, nil
	src.seq++
	if src.last {
		src.done = true
		s.moveFinish(mv)
		return
	}
	s.moveSend(dial.NodeID(m.Served), msg{Kind: FrameMoveAsk, ID: mv.id, M: mv.mv.Era, Their: mv.mv.FromMIdx, Session: src.seq, Flow: src.cursor, Digests: partsOf(mv.mv.Parts)})
}

// moveFinish completes the copy once every source is done.
func (s *Store) moveFinish(mv *mover) {
	for _, src := range mv.sources { //fenceline:unordered all must be done
		if !src.done {
			return
		}
	}
	s.StopMove()
	mv.done()
}

// answerMoveAsk is an old voter's answer to the driver: its next page of
// the batch's flows after the cursor, once its group's log has fenced
// the batch at the move's epoch, and only at the membership the driver's
// directory names (a voter the directory has not caught up with might
// hold copies the driver would not ask anyone else for).
func (s *Store) answerMoveAsk(from dial.NodeID, m msg) {
	ps, ok := partsIn(m.Digests)
	if !ok {
		s.BadFrames++
		return
	}
	out := msg{Kind: FrameMoveCopy, ID: m.ID, M: m.M, Session: m.Session}
	switch {
	case s.env.Fleet == nil:
		out.Err = "no fleet"
	case !s.cfg.Bugs.MoveBeforeFence && !s.env.Fleet.Fences().Covers(ps, m.M):
		out.Err = "not fenced yet"
	case m.Their != s.mIdx:
		out.Err = "membership " + strconv.FormatUint(s.mIdx, 10)
	}
	if out.Err != "" {
		s.moveSend(from, out)
		return
	}
	out.Flows, out.Modes = map[string]map[string]Value{}, map[string]shard.Mode{}
	size, last := 0, ""
	out.Served = 1
	for _, f := range s.sh.Flows() { // sorted
		if f <= m.Flow || !slices.Contains(ps, partition.Of(f)) {
			continue
		}
		if len(out.Flows) >= s.cfg.MaxMoveFlows || size >= aeAnswerBytes {
			out.Served = 0 // more after this page
			break
		}
		out.Flows[f] = s.sh.Peek(f)
		if _, mode, _ := s.sh.Meta(f); mode != shard.Async {
			out.Modes[f] = mode
		}
		size += flowBytes(out.Flows[f])
		last = f
	}
	out.Flow = last
	s.moveSend(from, out)
}

// ingest is a new voter taking a page of a move: it writes each flow's
// copy, merged with its own by tuple, to disk (synced, whatever the
// imposter's mode but none: a page acknowledged is a page the move may
// count on), then acknowledges. It takes a page only while its directory
// says the batch moves to its group, fenced at the move's epoch: once the
// move is published its owners serve the partitions, and a late page
// must not change what they serve.
func (s *Store) ingest(from dial.NodeID, m msg) {
	ps, ok := partsIn(m.Digests)
	if !ok {
		s.BadFrames++
		return
	}
	for f := range m.Flows { //fenceline:unordered validation only: every flow must pass
		if !s.validCopy(f, m.Flows[f], m.Modes[f]) || !slices.Contains(ps, partition.Of(f)) {
			s.BadFrames++
			return
		}
	}
	ack := msg{Kind: FrameIngestAck, ID: m.ID, Session: m.Session, Served: m.Served}
	if err := s.ingestable(ps, m.M, m.Their); err != nil {
		ack.Err = err.Error()
		s.moveSend(from, ack)
		return
	}
	flows := slices.Sorted(func(yield func(string) bool) {
		for f := range m.Flows { //fenceline:unordered sorted
			if !yield(f) {
				return
			}
		}
	})
	pending := len(flows) + 1
	failed := false
	settle := func(err error) {
		failed = failed || err != nil
		if pending--; pending == 0 {
			if failed {
				ack.Err = "disk"
			}
			s.moveSend(from, ack)
		}
	}
	for _, f := range flows {
		mode := m.Modes[f]
		if mode == 0 {
			mode = shard.Async
		}
		local := s.sh.Peek(f)
		changed := map[string]Value{}
		for k, v := range m.Flows[f] { //fenceline:unordered fills changed, key by key
			if cur, ok := local[k]; !ok || cur.Tuple.Less(v.Tuple) {
				changed[k] = v
			}
		}
		write := shard.Sync
		if mode == shard.None {
			write = shard.None
		}
		if len(changed) > 0 {
			if err := s.sh.Put(f, changed, s.metaFor(f), write); err != nil {
				settle(err)
				continue
			}
			s.Merged += uint64(len(changed))
		}
		if len(local) == 0 && len(changed) == 0 {
			settle(nil)
			continue
		}
		s.sh.WhenDurable(f, settle)
	}
	settle(nil)
}

// ingestable is the new voter's check before it takes a page.
func (s *Store) ingestable(ps []partition.Partition, era, mIdx uint64) error {
	if s.env.Fleet == nil {
		return fmt.Errorf("not in a fleet")
	}
	d := s.env.Fleet.Directory()
	if d == nil {
		return fmt.Errorf("no directory yet")
	}
	for _, p := range ps {
		if _, to, e, moving := d.Moving(p); !moving || to != s.env.Fleet.Group() || e != era {
			return fmt.Errorf("partition %d is not moving here at epoch %d", p, era)
		}
	}
	if mIdx != s.mIdx {
		return fmt.Errorf("membership %d", s.mIdx)
	}
	return nil
}
