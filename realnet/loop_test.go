package realnet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
)

func TestLoopRunsCallbacksInOrderOnOneGoroutine(t *testing.T) {
	l := NewLoop(16)
	defer l.Stop()
	var got []int
	done := make(chan struct{})
	for i := 0; i < 10; i++ {
		require.NoError(t, l.Post(func() { got = append(got, i) }))
	}
	require.NoError(t, l.Post(func() { close(done) }))
	<-done
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got)
}

func TestTryPostShedsAtTheLimit(t *testing.T) {
	l := NewLoop(2)
	defer l.Stop()
	block := make(chan struct{})
	started := make(chan struct{})
	require.NoError(t, l.Post(func() { close(started); <-block }))
	<-started // the loop is busy; the mailbox is empty
	require.NoError(t, l.TryPost(func() {}))
	require.NoError(t, l.TryPost(func() {}))
	require.ErrorIs(t, l.TryPost(func() {}), ErrMailboxFull, "the third callback finds the mailbox at its limit")
	close(block)
}

func TestStopDropsQueuedAndRefusesNew(t *testing.T) {
	l := NewLoop(4)
	l.Stop()
	require.ErrorIs(t, l.TryPost(func() {}), ErrStopped)
	require.ErrorIs(t, l.Post(func() {}), ErrStopped)
	l.Stop() // twice is fine
}

func TestWallClockTimersRunOnTheLoop(t *testing.T) {
	l := NewLoop(4)
	defer l.Stop()
	c := clock.NewWall(l.PostTimer)
	fired := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(fired) })
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire through the loop")
	}
}

func TestNewLoopNeedsCapacity(t *testing.T) {
	require.Panics(t, func() { NewLoop(0) })
}
