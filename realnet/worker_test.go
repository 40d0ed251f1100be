package realnet

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Work runs off the loop, in order, and each done comes back on the loop;
// the loop keeps taking callbacks while the work runs.
func TestWorkerRunsBesideTheLoopInOrder(t *testing.T) {
	loop := NewLoop(64)
	defer loop.Stop()
	w := NewWorker(loop)
	defer w.Close()

	release := make(chan struct{})
	var order []int // touched only on the loop
	var onLoop atomic.Int32
	finished := make(chan struct{})
	require.NoError(t, loop.Post(func() {
		w.Go(func() error { <-release; return nil }, func(err error) { order = append(order, 1) })
		w.Go(func() error { return errors.New("disk") }, func(err error) {
			require.EqualError(t, err, "disk")
			order = append(order, 2)
			close(finished)
		})
	}))
	// The first work blocks; the loop is free meanwhile.
	ran := make(chan struct{})
	require.NoError(t, loop.Post(func() { onLoop.Add(1); close(ran) }))
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop waited for the disk")
	}
	close(release)
	<-finished
	done := make(chan []int)
	require.NoError(t, loop.Post(func() { done <- append([]int(nil), order...) }))
	require.Equal(t, []int{1, 2}, <-done)
}

// Settle, on the loop, waits for every job and runs the dones at once,
// including work that a done hands over.
func TestWorkerSettle(t *testing.T) {
	loop := NewLoop(64)
	defer loop.Stop()
	w := NewWorker(loop)
	defer w.Close()
	got := make(chan []string, 1)
	require.NoError(t, loop.Post(func() {
		var seen []string
		w.Go(func() error { time.Sleep(20 * time.Millisecond); return nil }, func(error) {
			seen = append(seen, "first")
			w.Go(func() error { return nil }, func(error) { seen = append(seen, "second") })
		})
		w.Settle()
		got <- seen
	}))
	require.Equal(t, []string{"first", "second"}, <-got)
}

// After Close, queued work never runs, as after a crash.
func TestWorkerClosedRunsNothing(t *testing.T) {
	loop := NewLoop(4)
	defer loop.Stop()
	w := NewWorker(loop)
	w.Close()
	var ran atomic.Bool
	w.Go(func() error { ran.Store(true); return nil }, func(error) {})
	time.Sleep(10 * time.Millisecond)
	require.False(t, ran.Load())
}
