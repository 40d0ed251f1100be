package shard

import (
	"container/heap"
	"sort"
)

// This file: the flow cap (evicting least recently used flows), expiry
// and the purge of dead flows, and the deadline heap and LRU list they
// run on.

// enforceCap evicts least recently used flows until the live ones fit.
func (s *Shard[V]) enforceCap() {
	var kept []*flowState[V]
	defer func() {
		// Flows the hook kept (an owner that may not write them now)
		// count again, most recently used, and the cap waits for them.
		for _, f := range kept {
			if s.flows[f.name] == f && !f.inLRU && f.liveUntil > s.NowMs() {
				s.lruPush(f)
				heap.Fix(&s.due, f.hidx)
			}
		}
	}()
	for s.count > s.cfg.MaxFlows && s.head != nil {
		f := s.head
		s.lruRemove(f)
		heap.Fix(&s.due, f.hidx)
		s.stats.Evicted++
		if s.cfg.Bugs.EvictKeys {
			// The planted bug: evict one key, as a per-key cache would,
			// and call the flow handled.
			keys := make([]string, 0, len(f.keys))
			for k := range f.keys {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if len(keys) > 0 {
				delete(f.keys, keys[0])
				delete(f.behindKeys, keys[0])
				if f.onDisk && s.env.Backend != nil {
					s.pending = append(s.pending, Mutation{Flow: f.name, Key: keys[0]})
					s.endUnit()
				}
			}
			continue
		}
		if s.onEvict != nil {
			s.onEvict(f.name)
			kept = append(kept, f)
		} else {
			s.drop(f)
		}
	}
}

// purge moves flows whose last live key has expired out of the LRU, and
// removes flows dead for their grace.
//
// It also keeps the clock floor current: a node that only serves reads
// still records, within PurgeEvery, the time at which it saw entries
// expire, so a restart behind a clock step cannot show them again.
func (s *Shard[V]) purge() {
	now := s.NowMs()
	purged := 0
	for s.due.Len() > 0 && s.due[0].dueAt() <= now && purged < s.cfg.MaxBatch {
		f := s.due[0]
		if f.inLRU {
			s.lruRemove(f)
			heap.Fix(&s.due, f.hidx)
			continue
		}
		s.stats.Purged++
		purged++ // bounded per turn, so one tick never queues without limit
		s.drop(f)
	}
	if s.env.Backend != nil && s.diskFlows > 0 && now > s.floorMs {
		s.pendingSync = true
	}
	if len(s.pending) > 0 || s.pendingSync {
		s.armFlush()
	}
}

// --- deadlines and the LRU ---

// computeDeadlines sets when a flow dies (its last value expires) and
// when it may be purged (the grace after its last entry expired).
func (s *Shard[V]) computeDeadlines(f *flowState[V]) {
	live, last := s.keyDeadlines(f)
	if len(f.keys) == 0 {
		last = s.NowMs()
	}
	f.liveUntil, f.purgeAt = live, last+s.cfg.GraceMs
}

// keyDeadlines is when the flow's last live value expires (0: none is
// live) and when its last entry of any kind does.
func (s *Shard[V]) keyDeadlines(f *flowState[V]) (live, last int64) {
	for _, v := range f.keys { //fenceline:unordered taking maxima
		at, isLive := s.codec.Expiry(v)
		if isLive && at > live {
			live = at
		}
		if at > last {
			last = at
		}
	}
	return live, last
}

// place puts a flow where its deadlines say: counted if live, and in the
// deadline heap.
func (s *Shard[V]) place(f *flowState[V]) {
	if f.liveUntil > s.NowMs() {
		if !f.inLRU {
			s.lruPush(f)
		}
	} else {
		s.lruRemove(f)
	}
	if f.hidx < 0 {
		heap.Push(&s.due, f)
	} else {
		heap.Fix(&s.due, f.hidx)
	}
}

func (s *Shard[V]) touch(f *flowState[V]) {
	if f.inLRU && s.tail != f {
		s.lruRemove(f)
		s.lruPush(f)
	}
}

func (s *Shard[V]) lruPush(f *flowState[V]) {
	f.prev, f.next, f.inLRU = s.tail, nil, true
	if s.tail != nil {
		s.tail.next = f
	} else {
		s.head = f
	}
	s.tail = f
	s.count++
}

func (s *Shard[V]) lruRemove(f *flowState[V]) {
	if !f.inLRU {
		return
	}
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		s.head = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		s.tail = f.prev
	}
	f.prev, f.next, f.inLRU = nil, nil, false
	s.count--
}

// dueHeap orders flows by their next deadline, then name (deterministic).
type dueHeap[V any] []*flowState[V]

func (h dueHeap[V]) Len() int { return len(h) }
func (h dueHeap[V]) Less(i, j int) bool {
	a, b := h[i].dueAt(), h[j].dueAt()
	if a != b {
		return a < b
	}
	return h[i].name < h[j].name
}
func (h dueHeap[V]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *dueHeap[V]) Push(x any) {
	f := x.(*flowState[V])
	f.hidx = len(*h)
	*h = append(*h, f)
}
func (h *dueHeap[V]) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	f.hidx = -1
	return f
}
