package clock

import (
	"sort"
	"time"
)

// Manual is a clock that moves only when told. Tests use it to run a core
// part's timers by hand, one step at a time; nothing in it reads the wall
// clock or starts a goroutine. It is not safe for concurrent use.
type Manual struct {
	now    time.Time
	mono   time.Duration // moved by Advance only
	seq    uint64
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	seq     uint64 // arming order breaks ties between equal deadlines
	f       func()
	stopped bool
}

func (t *manualTimer) Stop() bool {
	was := !t.stopped
	t.stopped = true
	return was
}

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's reading.
func (c *Manual) Now() time.Time { return c.now }

// Mono is how far Advance has moved the clock in all.
func (c *Manual) Mono() time.Duration { return c.mono }

// Set steps the clock's reading to t, forward or back, and runs no timer:
// a wall-clock step, which moves Now but not pending timers' deadlines.
func (c *Manual) Set(t time.Time) { c.now = t }

// AfterFunc arranges for f to run once Advance reaches now+d.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.seq++
	t := &manualTimer{at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock on by d and runs every timer due by then in
// deadline order (ties in arming order), each with Now at its deadline,
// including timers that those arm if they fall due within d.
func (c *Manual) Advance(d time.Duration) {
	end := c.now.Add(d)
	for {
		live := c.timers[:0]
		for _, t := range c.timers {
			if !t.stopped {
				live = append(live, t)
			}
		}
		c.timers = live
		sort.Slice(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		t.stopped = true
		if t.at.After(c.now) {
			c.mono += t.at.Sub(c.now)
			c.now = t.at
		}
		t.f()
	}
	if end.After(c.now) {
		c.mono += end.Sub(c.now)
		c.now = end
	}
}
