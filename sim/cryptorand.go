package sim

import (
	cryptorand "crypto/rand"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/fenceline/fenceline/core/halt"
	"github.com/fenceline/fenceline/dial"
)

// etcd raft draws its randomized election timeout from crypto/rand.Reader
// (raft.go globalRand) and offers no hook. In a simulated run that draw must
// come from the seed, or no seed replays. InstallCryptoRand points the
// process-wide reader at a switch that the kernel aims at the stream of the
// node it is stepping, so node i's elections depend on node i's stream only.
//
// The reader is process-wide: seeds that run in parallel must run in
// separate processes (simrun -j does), and tests that install it must not
// call t.Parallel. Real nodes never call this.

type randSwitch struct {
	cur    *rand.Rand // the node being stepped
	global *rand.Rand // draws made outside any node (scenario setup)
}

func (s *randSwitch) Read(p []byte) (int, error) {
	r := s.cur
	if r == nil {
		r = s.global
	}
	for i := 0; i < len(p); {
		v := r.Uint64()
		for j := 0; j < 8 && i < len(p); j++ {
			p[i] = byte(v)
			v >>= 8
			i++
		}
	}
	return len(p), nil
}

// InstallCryptoRand routes crypto/rand.Reader through the kernel for the
// duration of a run. It returns the function that restores the previous
// reader; call it when the run ends.
func (k *Kernel) InstallCryptoRand() (restore func()) {
	prev := cryptorand.Reader
	k.rand = &randSwitch{global: k.Stream("crypto/global")}
	cryptorand.Reader = k.rand
	return func() {
		cryptorand.Reader = prev
		k.rand = nil
	}
}

// call runs f as node n: crypto/rand draws come from n's stream, and a
// power cut that n's disk raises inside f crashes n right there, as if the
// machine lost power mid-function. Every call into a node's code goes
// through here or through receive.
func (k *Kernel) call(n *Machine, f func()) {
	prev := k.enter(n)
	defer k.leave(n, prev)
	f()
	k.stepDone(n)
}

// receive is call for a frame's delivery to n's handler, without a
// closure per frame.
func (k *Kernel) receive(n *Machine, from dial.NodeID, frame []byte) {
	prev := k.enter(n)
	defer k.leave(n, prev)
	n.handler.HandleFrame(from, frame)
	k.stepDone(n)
}

// Checked is a node whose bookkeeping can be checked between steps: the
// kernel calls CheckInvariants after every checkEvery-th step the node
// takes, and an error is the node's bug (a panic, as OnNodePanic sees it). It must
// only read: no clock, no timer, no draw.
type Checked interface {
	CheckInvariants() error
}

// checkEvery is how often a node's invariants are checked: after every
// 16th step it takes, and so at most 15 steps after one broke them (a
// broken structure stays broken). Every step would cost a run ten times
// its time; one in 16, about an eighth more.
const checkEvery = 16

// stepDone ends a step of n: a failed fsync it carried on past is
// reported, and its invariants are checked.
func (k *Kernel) stepDone(n *Machine) {
	if n.stepCost > 0 {
		n.busyUntil = n.Local() + n.stepCost
	}
	if n.exiting {
		return
	}
	k.carriedOn(n)
	if n.steps++; n.steps%checkEvery != 0 {
		return
	}
	if c, ok := n.handler.(Checked); ok && n.up {
		if err := c.CheckInvariants(); err != nil {
			panic(fmt.Sprintf("invariant broken after a step: %v", err))
		}
	}
}

// enter makes n the running node and returns the one it interrupts.
func (k *Kernel) enter(n *Machine) (prev *Machine) {
	if k.rand != nil {
		k.rand.cur = n.crypto
	}
	// The node starts this call when it is done with its earlier ones:
	// a node busy in an fsync takes the event after it (see busyUntil).
	prev = k.cur
	k.cur = n
	n.busyUntil = max(n.busyUntil, k.now)
	return prev
}

// leave, deferred by call and receive, gives the kernel back to prev and
// turns what n's code raised into what a machine does: a power cut or a
// halt crashes n, a panic crashes n when the run tolerates panics.
func (k *Kernel) leave(n, prev *Machine) {
	k.cur = prev
	if k.rand != nil {
		k.rand.cur = nil
		if prev != nil {
			k.rand.cur = prev.crypto
		}
	}
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(powerCut); ok {
		k.Logf("%s power cut mid-operation", n.name)
		n.Crash()
		return
	}
	if h, ok := r.(halt.Halt); ok {
		// The node stopped itself, as it must after a storage
		// failure: fail-stop, not a bug.
		k.Logf("%s halted: %v", n.name, h.Reason)
		n.Crash()
		n.Halts++
		if k.onHalt != nil {
			k.onHalt(n, h.Reason)
		}
		return
	}
	if k.onPanic == nil {
		panic(r)
	}
	// The node's process died of its own bug; the machine lives.
	k.Logf("%s panicked: %v", n.name, r)
	n.Crash()
	k.onPanic(n, r)
}

// carriedOn reports a node that saw an fsync or a write fail and carried on.
func (k *Kernel) carriedOn(n *Machine) {
	if n.up && n.disk.failedIO == n.inc {
		n.disk.failedIO = 0
		if k.onCarriedOn != nil {
			k.onCarriedOn(n)
		}
	}
}

var _ io.Reader = (*randSwitch)(nil)
