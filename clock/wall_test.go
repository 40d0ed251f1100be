package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loop is a minimal single-goroutine mailbox, as a real node runs.
type loop struct{ in chan func() }

func (l *loop) post(f func()) { l.in <- f }

func TestWallCallbacksRunOnTheLoop(t *testing.T) {
	l := &loop{in: make(chan func(), 16)}
	w := NewWall(l.post)
	ran := false
	w.AfterFunc(time.Millisecond, func() { ran = true })
	select {
	case f := <-l.in:
		require.False(t, ran, "callback must not run before the loop runs it")
		f()
		require.True(t, ran)
	case <-time.After(5 * time.Second):
		t.Fatal("timer never posted its callback")
	}
}

func TestWallStopAfterPostStillCancels(t *testing.T) {
	l := &loop{in: make(chan func(), 16)}
	w := NewWall(l.post)
	ran := false
	tm := w.AfterFunc(time.Millisecond, func() { ran = true })
	var f func()
	select {
	case f = <-l.in:
	case <-time.After(5 * time.Second):
		t.Fatal("timer never posted its callback")
	}
	// The callback is queued on the loop but has not run: Stop must win.
	require.True(t, tm.Stop())
	f()
	require.False(t, ran, "a stopped timer's queued callback ran")
	require.False(t, tm.Stop(), "second Stop must report false")
}

func TestWallStopBeforeFire(t *testing.T) {
	l := &loop{in: make(chan func(), 16)}
	w := NewWall(l.post)
	tm := w.AfterFunc(time.Hour, func() { t.Error("stopped timer fired") })
	require.True(t, tm.Stop())
	require.False(t, tm.Stop())
}

func TestNewWallNeedsPost(t *testing.T) {
	require.Panics(t, func() { NewWall(nil) })
}
