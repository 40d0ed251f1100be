package checker

import (
	"time"

	"github.com/fenceline/fenceline/dial"
)

// AdversaryFrame is one frame an adversary without the keys made, that a
// node's envelope let through to the node: the simulator saw the node take
// it while delivering it.
type AdversaryFrame struct {
	Attack string // what the adversary did (redirect, replay, forge, ...)
	To     dial.NodeID
	At     time.Duration
}

// AdversaryRejected holds the envelope to its promise: nothing an
// adversary without the keys makes gets through — not a request captured
// on its way to another node, not one replayed, not an old or made-up
// reply, not a frame with a bit flipped. made is how many frames the
// adversary delivered; a run in which it made none proves nothing.
func AdversaryRejected(rep Reporter, made int, admitted []AdversaryFrame, name func(dial.NodeID) string) {
	if made == 0 {
		rep.Undecided("adversary", "the adversary delivered no frame")
		return
	}
	for i, f := range admitted {
		if i == 10 {
			rep.Fail("adversary", "... and %d more adversary frames got through", len(admitted)-10)
			return
		}
		rep.Fail("adversary", "%s took a frame the adversary made (%s) at %v", name(f.To), f.Attack, f.At)
	}
}
