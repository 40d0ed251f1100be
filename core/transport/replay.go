package transport

// window is one sender's recent request numbers within its newest epoch:
// bit i of bits says whether number max-i was seen.
type window struct {
	epoch, max uint64
	bits       []uint64
}

func newWindow(size int) *window { return &window{bits: make([]uint64, size/64)} }

func (w *window) size() uint64 { return uint64(len(w.bits)) * 64 }

// admit records request number seq of epoch, or says why it must be
// dropped: a number seen before is a replay; one from an older epoch, or
// too far below the newest to remember, is stale.
func (w *window) admit(epoch, seq uint64) (cause int, ok bool) {
	switch {
	case epoch < w.epoch:
		return CauseStale, false
	case epoch > w.epoch || w.max == 0:
		// A sender's new boot: its numbering starts again.
		w.epoch, w.max = epoch, seq
		clear(w.bits)
		w.set(0)
		return 0, true
	case seq > w.max:
		w.shift(seq - w.max)
		w.max = seq
		w.set(0)
		return 0, true
	}
	back := w.max - seq
	if back >= w.size() {
		return CauseStale, false
	}
	if w.has(back) {
		return CauseReplay, false
	}
	w.set(back)
	return 0, true
}

func (w *window) has(back uint64) bool { return w.bits[back/64]&(1<<(back%64)) != 0 }
func (w *window) set(back uint64)      { w.bits[back/64] |= 1 << (back % 64) }

// shift moves every bit n places older, forgetting those that fall off.
func (w *window) shift(n uint64) {
	if n >= w.size() {
		clear(w.bits)
		return
	}
	words, bits := int(n/64), n%64
	for i := len(w.bits) - 1; i >= 0; i-- {
		var v uint64
		if j := i - words; j >= 0 {
			v = w.bits[j] << bits
			if bits > 0 && j-1 >= 0 {
				v |= w.bits[j-1] >> (64 - bits)
			}
		}
		w.bits[i] = v
	}
}

// asked is the requests of one family sent to one peer that await a
// reply: a set, with the order they were sent in to forget the oldest at
// the bound.
type asked struct {
	set   map[Nonce]struct{}
	order []Nonce // a ring: next is where the next nonce goes
	next  int
}

func newAsked(bound int) *asked {
	return &asked{set: make(map[Nonce]struct{}, bound), order: make([]Nonce, 0, bound)}
}

func (a *asked) add(n Nonce) {
	if len(a.order) < cap(a.order) {
		a.order = append(a.order, n)
	} else {
		delete(a.set, a.order[a.next]) // forget the oldest
		a.order[a.next] = n
		a.next = (a.next + 1) % len(a.order)
	}
	a.set[n] = struct{}{}
}

// take reports whether n awaits a reply, and stops it awaiting one: one
// reply per request.
func (a *asked) take(n Nonce) bool {
	if a == nil {
		return false
	}
	if _, ok := a.set[n]; !ok {
		return false
	}
	delete(a.set, n) // its slot in order is reused when its turn comes
	return true
}

// owed is the requests of one family received from one peer that are
// owed a reply. A reply answers the newest: a request that never gets
// its answer (the protocol chose not to reply) sinks and is forgotten at
// the bound, instead of pairing every later reply with a request its
// sender has long forgotten.
type owed struct {
	stack []Nonce // a ring of at most cap entries; top is the newest
	top   int     // index of the newest entry, valid when n > 0
	n     int
}

func newOwed(bound int) *owed { return &owed{stack: make([]Nonce, bound)} }

func (o *owed) push(n Nonce) {
	o.top = (o.top + 1) % len(o.stack)
	o.stack[o.top] = n
	o.n = min(o.n+1, len(o.stack))
}

func (o *owed) pop() (Nonce, bool) {
	if o == nil || o.n == 0 {
		return Nonce{}, false
	}
	n := o.stack[o.top]
	o.top = (o.top - 1 + len(o.stack)) % len(o.stack)
	o.n--
	return n, true
}
