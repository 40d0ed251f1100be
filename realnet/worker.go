package realnet

import (
	"sync"
)

// Worker is shard.Worker for a real node: one goroutine beside the node's
// loop that runs the flow shard's commits (bbolt transactions and their
// fsyncs) in the order they were handed over, and posts each completion
// back to the loop. The loop never waits for the disk; requests that
// arrive during a commit are served and gather into the next one.
//
// The queue has no bound of its own: its one user, the shard's writer,
// keeps at most one commit in flight.
type Worker struct {
	loop *Loop

	mu       sync.Mutex
	idle     *sync.Cond // signalled when nothing is queued or running
	queue    []*job     // handed over, not yet run
	busy     bool       // a job is running
	finished []*job     // run, done not yet called
	closed   bool
	exited   chan struct{}
}

type job struct {
	work func() error
	done func(error)
	err  error
}

// NewWorker starts a worker that posts completions to loop.
func NewWorker(loop *Loop) *Worker {
	w := &Worker{loop: loop, exited: make(chan struct{})}
	w.idle = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// Go queues work; done runs on the loop once it has. It never waits.
func (w *Worker) Go(work func() error, done func(error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return // the node is shutting down: as after a crash, nothing runs
	}
	w.queue = append(w.queue, &job{work: work, done: done})
	w.idle.Broadcast()
}

func (w *Worker) run() {
	defer close(w.exited)
	w.mu.Lock()
	for {
		for len(w.queue) == 0 && !w.closed {
			w.idle.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		j := w.queue[0]
		w.queue = w.queue[1:]
		w.busy = true
		w.mu.Unlock()
		j.err = j.work()
		w.mu.Lock()
		w.busy = false
		w.finished = append(w.finished, j)
		w.idle.Broadcast()
		w.mu.Unlock()
		// Post, not TryPost: a lost completion would leave its waiters
		// unanswered. A stopped loop drops it, as a dead node would.
		_ = w.loop.Post(w.deliver)
		w.mu.Lock()
	}
}

// deliver runs, on the loop, the done of every job that has finished.
func (w *Worker) deliver() {
	w.mu.Lock()
	fin := w.finished
	w.finished = nil
	w.mu.Unlock()
	for _, j := range fin {
		j.done(j.err)
	}
}

// Settle waits, on the loop, until every job handed over has run, and
// calls their dones now, including those of jobs a done hands over.
func (w *Worker) Settle() {
	for {
		w.mu.Lock()
		for len(w.queue) > 0 || w.busy {
			w.idle.Wait()
		}
		n := len(w.finished)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		w.deliver()
	}
}

// Close stops the worker once the job it is running, if any, ends; jobs
// still queued never run. It waits for the goroutine to exit.
func (w *Worker) Close() {
	w.mu.Lock()
	w.closed = true
	w.queue = nil
	w.idle.Broadcast()
	w.mu.Unlock()
	<-w.exited
}
