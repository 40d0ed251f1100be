package realnet

import (
	"errors"
	"sync"
)

// ErrMailboxFull is returned by TryPost when the mailbox is at its limit.
var ErrMailboxFull = errors.New("realnet: node mailbox full")

// ErrStopped is returned by posts to a loop that has stopped.
var ErrStopped = errors.New("realnet: node loop stopped")

// Loop runs a node's code on one goroutine, draining a bounded mailbox: the
// real-mode counterpart of the simulator's event queue. Everything that
// touches the node — frames, timer callbacks, client calls — is posted here,
// so the node's code never runs concurrently with itself.
type Loop struct {
	mailbox chan func()
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewLoop starts a loop whose mailbox holds at most capacity callbacks.
func NewLoop(capacity int) *Loop {
	if capacity < 1 {
		panic("realnet: a mailbox needs room for at least one callback")
	}
	l := &Loop{
		mailbox: make(chan func(), capacity),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go l.run()
	return l
}

func (l *Loop) run() {
	defer close(l.done)
	for {
		select {
		case f := <-l.mailbox:
			f()
		case <-l.stop:
			return
		}
	}
}

// TryPost queues f, or returns ErrMailboxFull at once if the mailbox is at
// its limit. Use it for what a peer sends: a full mailbox sheds load the
// way a lossy network would, and the protocol's own retries recover.
func (l *Loop) TryPost(f func()) error {
	select {
	case <-l.stop:
		return ErrStopped
	default:
	}
	select {
	case l.mailbox <- f:
		return nil
	default:
		return ErrMailboxFull
	}
}

// Post queues f, waiting for room. Use it for what must not be lost, such
// as timer callbacks (clock.NewWall takes l.PostTimer): a lost timer wedges
// the protocol that set it. It returns ErrStopped if the loop stops first.
func (l *Loop) Post(f func()) error {
	// Checked first: with room in the mailbox, the select below could
	// pick the send over a closed stop channel.
	select {
	case <-l.stop:
		return ErrStopped
	default:
	}
	select {
	case l.mailbox <- f:
		return nil
	case <-l.stop:
		return ErrStopped
	}
}

// PostTimer is Post for clock.NewWall; after Stop, timer callbacks are
// dropped, since nothing runs on a stopped node.
func (l *Loop) PostTimer(f func()) { _ = l.Post(f) }

// Stop ends the loop after the callback it is running, and waits for it.
// Callbacks still queued are dropped.
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
