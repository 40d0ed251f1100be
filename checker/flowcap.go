package checker

import "strconv"

// FlowCap holds every node to its cap on live flows, from samples of each
// node's live count taken every interval. The shard writer enforces the
// cap at its next turn, so a sample may land between a step that made
// many flows live at once (an anti-entropy answer, say) and that turn,
// which a node busy in fsyncs takes a little later: a node over the cap
// (plus Slack) in one sample is noise; over it in two samples in a row, an
// interval apart (far longer than the writer's turn takes to come), is a
// broken cap.
type FlowCap struct {
	Cap, Slack int
	MaxLive    int             // the most live flows any sample saw
	over       map[string]bool // per node: over at its last sample
}

// Sample records that node held live flows at this sample.
func (c *FlowCap) Sample(rep Reporter, node string, live int) {
	if c.over == nil {
		c.over = map[string]bool{}
	}
	c.MaxLive = max(c.MaxLive, live)
	over := live > c.Cap+c.Slack
	if over && c.over[node] {
		rep.Fail("flow-cap", "%s holds %d live flows; the cap is %d", node, live, c.Cap)
	}
	c.over[node] = over
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
