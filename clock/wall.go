package clock

import "time"

// Wall is the real clock for a node whose code runs on a single loop
// goroutine. Timer callbacks are not run on the timer's goroutine: they are
// handed to post, which must queue them onto the node's loop. This keeps the
// one rule of core/ (nothing runs concurrently with the node) in real mode.
type Wall struct {
	post   func(func())
	origin time.Time // carries Go's monotonic reading
}

// NewWall returns a wall clock that delivers timer callbacks through post.
// post is called from timer goroutines and must be safe for concurrent use;
// it must not drop a callback (a lost timer wedges the protocol that set
// it), so a bounded mailbox should reserve room for timers or block.
func NewWall(post func(func())) *Wall {
	if post == nil {
		panic("clock: NewWall needs a post function")
	}
	return &Wall{post: post, origin: time.Now()}
}

// Now reads the wall clock.
func (w *Wall) Now() time.Time { return time.Now() }

// Mono is the time since NewWall on Go's monotonic clock.
func (w *Wall) Mono() time.Duration { return time.Since(w.origin) }

// AfterFunc arranges for f to run on the node's loop after d.
func (w *Wall) AfterFunc(d time.Duration, f func()) Timer {
	t := &wallTimer{}
	t.t = time.AfterFunc(d, func() {
		w.post(func() {
			// stopped is read and written only on the loop goroutine: the
			// callback may already sit in the mailbox when Stop is called,
			// and this check is what keeps Stop's promise then.
			if t.stopped {
				return
			}
			t.fired = true
			f()
		})
	})
	return t
}

type wallTimer struct {
	t       *time.Timer
	stopped bool // loop goroutine only
	fired   bool // loop goroutine only
}

func (t *wallTimer) Stop() bool {
	if t.stopped || t.fired {
		return false
	}
	t.stopped = true
	t.t.Stop()
	return true
}
