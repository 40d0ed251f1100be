// Package dial is the peer seam: how a node sends a frame to another node by
// id, and how frames that arrive reach the node. The simulator's network
// (netsim) and the TCP transport (realnet) both sit behind it.
//
// The contract is deliberately weak, the way a real network is: a frame that
// Send accepted may still be lost, duplicated, delayed or reordered. Protocols
// above it retry on their own timers. There is no "retry now" answer: a peer
// that misbehaved will not behave on an immediate retry, and treating it as
// retryable turns one broken node into a hot loop against it.
package dial

import (
	"github.com/cespare/xxhash/v2"

	"errors"
	"fmt"
)

// NodeID names a node on the wire. Zero is never a valid id (node ids are
// max(1, xxh64(name))).
type NodeID uint64

func (id NodeID) String() string { return fmt.Sprintf("n%016x", uint64(id)) }

// MaxFrame is the largest frame, in bytes, that any transport carries. A
// receiver checks a declared length against it before allocating.
const MaxFrame = 4 << 20

// ErrUnreachable is the one error a peer can cause: not connected, refused,
// reset, timed out, answered garbage, outbound queue full. Callers treat
// every case alike: the frame may not arrive; try again on your own schedule.
var ErrUnreachable = errors.New("dial: peer unreachable")

// ErrFrameTooLarge means the caller built a frame over MaxFrame. It is the
// sender's bug, not the peer's, so it is not ErrUnreachable.
var ErrFrameTooLarge = errors.New("dial: frame larger than MaxFrame")

// Sender sends frames to peers. Send never blocks and never waits for the
// peer: it queues the frame (or drops it, returning ErrUnreachable when it
// knows at once that the frame cannot go) and returns. The frame's bytes
// belong to the transport after Send; the caller must not change them.
type Sender interface {
	Send(to NodeID, frame []byte) error
}

// Handler receives the frames addressed to one node. It is called on the
// node's loop, one frame at a time. The frame is the handler's to keep.
type Handler interface {
	HandleFrame(from NodeID, frame []byte)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(from NodeID, frame []byte)

// HandleFrame calls f.
func (f HandlerFunc) HandleFrame(from NodeID, frame []byte) { f(from, frame) }

// CheckFrame returns ErrFrameTooLarge, wrapped with the sizes, for a frame
// over MaxFrame. Transports call it first in Send.
func CheckFrame(frame []byte) error {
	if len(frame) > MaxFrame {
		return fmt.Errorf("%w: %d bytes > %d", ErrFrameTooLarge, len(frame), MaxFrame)
	}
	return nil
}

// IDFromName derives a node's id from its name: max(1, xxh64(name)), seed 0.
// Raft ids and the ownership ring both use it, so a node keeps its id (and
// its flows) across restarts and address changes.
func IDFromName(name string) NodeID {
	h := xxhash.Sum64String(name)
	if h == 0 {
		return 1
	}
	return NodeID(h)
}
