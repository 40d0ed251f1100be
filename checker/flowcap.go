package checker

import (
	"strconv"
	"time"

	"github.com/fenceline/fenceline/dial"
)

// FlowCap holds every node to its cap on live flows, from samples of each
// node's live count taken every interval. The shard writer enforces the
// cap at its next turn, so a sample may land between a step that made
// many flows live at once (an anti-entropy answer, say) and that turn,
// which a node busy in fsyncs takes a little later: a node over the cap
// (plus Slack) in one sample is noise; over it in two samples in a row, an
// interval apart (far longer than the writer's turn takes to come), is a
// broken cap. An owner evicts a flow by writing it dead, which it may do
// only as it may serve, so a node out of touch with its cluster (by the
// isolated-owner rule, from the network's record) keeps the flows it
// owns and the cap waits for it: a node restarted with more live flows
// on its disk than the cap holds them until it hears a leader. Samples
// taken out of touch are not judged.
type FlowCap struct {
	Cap, Slack int
	MaxLive    int // the most live flows any sample saw
	samples    []capSample
}

type capSample struct {
	node dial.NodeID
	at   time.Duration
	live int
}

// Sample records that node held live flows at at.
func (c *FlowCap) Sample(node dial.NodeID, at time.Duration, live int) {
	c.MaxLive = max(c.MaxLive, live)
	c.samples = append(c.samples, capSample{node, at, live})
}

// Judge fails (checker flow-cap) for each node over the cap by more
// than Slack in two of its samples in a row while in touch (inTouch, by
// the record), once per node. It returns how many samples it judged.
func (c *FlowCap) Judge(rep Reporter, inTouch func(node dial.NodeID, at time.Duration) bool, name func(dial.NodeID) string) int {
	over := map[dial.NodeID]bool{} // per node: over, and judged, at its last sample
	reported := map[dial.NodeID]bool{}
	judged := 0
	for _, s := range c.samples {
		if !inTouch(s.node, s.at) {
			over[s.node] = false
			continue
		}
		judged++
		o := s.live > c.Cap+c.Slack
		if o && over[s.node] && !reported[s.node] {
			reported[s.node] = true
			rep.Fail("flow-cap", "%s holds %d live flows at %v; the cap is %d", name(s.node), s.live, s.at, c.Cap)
		}
		over[s.node] = o
	}
	return judged
}

// SetAllVersion decodes a get-all of a flow that clients write only by
// set-all, every key of keys set to the write's version in one operation:
// the version (0 for an absent flow), or torn when the keys disagree,
// some are missing, or a value is not a positive version. A torn read
// saw part of one write: a flow that is not whole.
func SetAllVersion(all map[string][]byte, keys []string) (version int, torn bool) {
	if len(all) == 0 {
		return 0, false
	}
	if len(all) != len(keys) {
		return 0, true
	}
	first := string(all[keys[0]])
	for _, k := range keys[1:] {
		if string(all[k]) != first {
			return 0, true
		}
	}
	v, err := strconv.Atoi(first)
	if err != nil || v <= 0 {
		return 0, true
	}
	return v, false
}
