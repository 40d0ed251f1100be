package scenarios

import (
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/rollout"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "fleet-resize",
		Summary: "a fleet of 2 groups of three resized to 1 group and back to 2 while clients on every node call every flow; " +
			"each batch of partitions fenced, copied and published under partitions, loss, crashes and clock skew",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			// 17 of seeds 1..20: the new group serves what it never got.
			{Name: "publish-before-copy", Window: 20, MinCaught: 12},
			// 8 of seeds 1..40: the owner cut off from its group's log at
			// the fence (lagControl) gave its copy, served on, and the new
			// group served without what it wrote.
			{Name: "move-before-fence", Window: 40, MinCaught: 4},
			// 23 of seeds 1..40, by partition-holder: the owner cut off from
			// the control group served by its directory past its group
			// log's fence.
			{Name: "route-stale-epoch", Window: 40, MinCaught: 12},
		},
		Floors:   []Floor{{"flow-ops-ok", 10}, {"cross-group-ops", 4}, {"faults", 4}, {"partitions-moved", 2 * node.MoveBatch}},
		Checkers: plus(fleetCheckers, "resize-complete"),
		Run:      runFleetResize,
	})
}

// runFleetResize resizes a fleet of two groups to one group early in the
// faulted time, and back to two later: every partition of group 1 moves
// to group 0 and back, in batches, while clients write to them.
func runFleetResize(run *Run) error {
	k := run.Kernel
	f, hot, all := fleetSetup(run, 2, 3, flow.Config{})
	faults := DrawFaults(k.Stream("knobs/faults"), len(f.nodes))
	run.Knob("faults", faults)
	DrawClocks(run, f.nodes, 300*time.Millisecond, 100)
	shrink := sim.Between(k.Stream("knobs/resize"), 2*time.Second, f.calm/3)
	run.Knob("shrink_at", shrink)
	f.resize(1, shrink)
	f.lagControl(1, shrink, hot)
	// Back to two groups once the record shows every partition in group
	// 0, or at the heal if the faults held the shrink up that long.
	var grow func()
	grow = func() {
		if f.k.Now() < f.calm && !f.placed(1) {
			f.k.After(500*time.Millisecond, sim.EvCheck, xxhash.Sum64String("grow"), grow)
			return
		}
		run.Knob("grow_at", f.k.Now())
		f.resize(2, f.k.Now())
		f.lagControl(0, f.k.Now(), hot)
	}
	f.k.At(shrink, sim.EvCheck, xxhash.Sum64String("grow"), grow)
	return f.runUnderChaos(faults, hot, all)
}

// lagControl aims two faults at the move's fence, at the founding owner
// of one of group g's hot flows (g: the group the resize moves
// partitions out of):
//
//   - from at, for controlLag, it hears nothing of the control group, so
//     its directory lags while its own group's log runs on: only the
//     fence its group's log holds stops it serving what moves away
//     (fleet.Fences). An owner that trusted its directory's epoch would
//     serve on beside the new group (route-stale-epoch);
//   - when the record first shows a batch moving out of g, for dataLag,
//     it hears nothing of its own group's log either: it serves on
//     within its isolation window (D-17) without the log's fence, and a
//     copy taken from it then misses what it serves after
//     (move-before-fence). The move must wait for its answer, which it
//     gives only once its log has fenced the batch.
func (f *fleetHarness) lagControl(g int, at time.Duration, hot []string) {
	ks := f.k.Stream("knobs/resize/lag")
	h := f.groups[g]
	var owners []dial.NodeID
	for _, fl := range hot {
		if r := f.dir.Resolve(fl); r.Group == g {
			owners = append(owners, r.Owner)
		}
	}
	lagged := f.k.Machine(owners[ks.IntN(len(owners))])
	until := at + controlLag
	f.run.Knob("control_lag", fmt.Sprintf("%s %v..%v", lagged.Name(), at, until))
	var dataFrom time.Duration = -1
	f.onFence = func(from int) {
		if from == g && dataFrom < 0 && f.k.Now() >= at {
			dataFrom = f.k.Now()
			f.run.Knob("data_lag", fmt.Sprintf("%s %v..%v", lagged.Name(), dataFrom, dataFrom+dataLag))
		}
	}
	prev := f.lagging
	f.lagging = func(to dial.NodeID, frame []byte) bool {
		if to == lagged.ID() {
			now := f.k.Now()
			p := h.plain(frame)
			switch {
			case len(p) == 0:
			case p[0] == node.ControlFramePrefix:
				if now >= at && now < until {
					return true
				}
			case p[0] != flow.FramePrefix && p[0] != proxyonce.FramePrefix && p[0] != rollout.FramePrefix:
				// The data group's raft.
				if dataFrom >= 0 && now >= dataFrom && now < dataFrom+dataLag {
					return true
				}
			}
		}
		return prev != nil && prev(to, frame)
	}
	f.nw.DropIf(func(_, to dial.NodeID, frame []byte) bool { return f.lagging(to, frame) })
}

// controlLag is how long lagControl cuts a node off from the control
// group: several batches' moves. dataLag is how long it cuts it off from
// its own group's log: past its isolation window.
const (
	controlLag = 4 * time.Second
	dataLag    = time.Second
)
