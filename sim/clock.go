package sim

import (
	"encoding/binary"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/clock"
)

// Clock is one node's view of time, as on a real machine:
//
//   - the wall reading (Now) is Epoch + offset + the node's monotonic time;
//   - monotonic time runs at (1 + drift) times true (virtual) time;
//   - a step (an NTP correction, a VM restore) moves the wall reading only:
//     pending timers, which Go runs on the monotonic clock, are not moved;
//   - drift changes both the wall reading's rate and how long a timer takes.
//
// A node's clock belongs to its machine, so it survives the node's crashes.
type Clock struct {
	n        *Machine
	offset   time.Duration // initial skew plus every step so far
	ppm      int64         // drift in parts per million; > -1e6
	monoBase time.Duration // monotonic reading at trueBase
	trueBase time.Duration // kernel time of the last drift change
	// history is the clock's record for checkers: from each entry's true
	// instant on (until the next), the offset is offset + (t-at)*ppm/1e6.
	history []clockPiece
}

// clockPiece is one stretch of a clock's history.
type clockPiece struct {
	at, offset time.Duration
	ppm        int64
}

func (p clockPiece) offsetAt(t time.Duration) time.Duration {
	return p.offset + time.Duration(int64(t-p.at)*p.ppm/1_000_000)
}

// record notes the clock's offset and rate from now on.
func (c *Clock) record() {
	// A change lands at the node's local time: a node busy in fsyncs has
	// already read its clock, in the step it is busy in, at instants up
	// to its local time, with the clock as it was.
	p := clockPiece{at: c.n.Local(), offset: c.Offset(), ppm: c.ppm}
	if n := len(c.history); n > 0 && c.history[n-1].at == p.at {
		c.history[n-1] = p
		return
	}
	c.history = append(c.history, p)
}

var _ clock.Clock = (*Clock)(nil)

func (c *Clock) mono() time.Duration {
	elapsed := c.n.Local() - c.trueBase
	return c.monoBase + elapsed + time.Duration(int64(elapsed)*c.ppm/1_000_000)
}

// Mono is the node's monotonic reading: true time since the clock began,
// stretched by its drift, never moved by a step.
func (c *Clock) Mono() time.Duration { return c.mono() }

// Now is the node's wall reading.
func (c *Clock) Now() time.Time { return Epoch.Add(c.offset + c.mono()) }

// AfterFunc runs f on the node after d of the node's monotonic time. The
// timer belongs to the node's current incarnation: a crash cancels it.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if d < 0 {
		d = 0
	}
	// True delay = d / (1 + drift), rounded up so a timer never fires
	// early by the node's own clock. A later drift change does not move a
	// pending timer; the error is at most the change times the delay.
	trueDelay := time.Duration((int64(d)*1_000_000 + (1_000_000 + c.ppm) - 1) / (1_000_000 + c.ppm))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(d))
	h := c.n.k.atNode(c.n.Local()+trueDelay, EvTimer, c.n, xxhash.Sum64(b[:]), f)
	return c.n.k.newTimer(h)
}

// simTimer is a timer's Handle behind a pointer, so that it is a
// clock.Timer without an allocation of its own: a Handle is two words,
// and an interface holding it would allocate for every timer.
type simTimer struct{ h Handle }

func (t *simTimer) Stop() bool { return t.h.Cancel() }

// timerChunk is how many timers one allocation of the kernel's holds.
const timerChunk = 256

// newTimer returns a timer for h, from a chunk of timers allocated
// together. A timer is never reused (whoever holds it may Stop it at any
// time); a chunk is freed once no timer in it is held.
func (k *Kernel) newTimer(h Handle) *simTimer {
	if len(k.timers) == 0 {
		k.timers = make([]simTimer, timerChunk)
	}
	t := &k.timers[0]
	k.timers = k.timers[1:]
	t.h = h
	return t
}

// Step moves the wall reading by delta (negative: backwards).
func (c *Clock) Step(delta time.Duration) {
	c.offset += delta
	c.record()
}

// SetDrift changes the clock's rate from now on.
func (c *Clock) SetDrift(ppm int64) {
	if ppm <= -1_000_000 {
		panic("sim: a clock cannot stop or run backwards")
	}
	c.monoBase = c.mono()
	c.trueBase = c.n.Local()
	c.ppm = ppm
	c.record()
}

// Offset is the wall reading minus true time (skew plus drift so far).
func (c *Clock) Offset() time.Duration { return c.Now().Sub(Epoch.Add(c.n.Local())) }

// Drift is the current drift in parts per million.
func (c *Clock) Drift() int64 { return c.ppm }

// OffsetAt is the offset the clock had at true instant t (t <= now), from
// its record: what the simulator knows, not what the node reads.
func (c *Clock) OffsetAt(t time.Duration) time.Duration {
	i := sort.Search(len(c.history), func(i int) bool { return c.history[i].at > t }) - 1
	if i < 0 {
		return 0 // before any step or drift: no offset
	}
	return c.history[i].offsetAt(t)
}

// OffsetRange is the least and the largest offset the clock had at any
// instant of [from, to]. A step makes both its old and new values count.
func (c *Clock) OffsetRange(from, to time.Duration) (lo, hi time.Duration) {
	lo, hi = c.OffsetAt(from), c.OffsetAt(from)
	see := func(o time.Duration) { lo, hi = min(lo, o), max(hi, o) }
	see(c.OffsetAt(to))
	for i, p := range c.history {
		if p.at <= from || p.at > to {
			continue
		}
		if i > 0 {
			see(c.history[i-1].offsetAt(p.at)) // just before the change
		}
		see(p.offset)
	}
	return lo, hi
}
