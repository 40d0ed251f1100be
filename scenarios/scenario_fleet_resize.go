package scenarios

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/core/rollout"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "fleet-resize",
		Summary: "a fleet of 2 (or 4) groups of three resized to half as many groups and back while clients on every node call every flow; " +
			"each batch of partitions fenced, copied and published under partitions, loss, crashes and clock skew, " +
			"a crash aimed at a step of a move, and a moving owner cut off from the control group and its own log",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			// 18 of seeds 1..20: the new group serves what it never got.
			{Name: "publish-before-copy", Window: 10, MinCaught: 7},
			// 17 of seeds 1..20, by released: the old group keeps what it gave.
			{Name: "no-release", Window: 10, MinCaught: 7},
			// 6 of seeds 1..40: the owner cut off from its group's log at
			// the fence (lagControl) gave its copy, served on, and the new
			// group served without what it wrote.
			{Name: "move-before-fence", Window: 40, MinCaught: 3},
			// 26 of seeds 1..40, by partition-holder: the owner cut off from
			// the control group served by its directory past its group
			// log's fence.
			{Name: "route-stale-epoch", Window: 40, MinCaught: 13},
			// 6 of seeds 1..40, by move-pages: late duplicates
			// (late_acks) taken for the page in flight.
			{Name: "stale-page-ack", Window: 40, MinCaught: 3},
		},
		Floors:     []Floor{{"flow-ops-ok", 10}, {"cross-group-ops", 4}, {"faults", 4}, {"partitions-moved", 2 * node.MoveBatch}},
		DiskStalls: true,
		Checkers:   plus(fleetCheckers, "resize-complete", "moves-fenced"),
		Run:        runFleetResize,
	})
}

// runFleetResize resizes a fleet of G groups (2, or 4 in a quarter of
// the runs) to G/2 early in the faulted time, and back to G later: every
// partition of the upper half's groups moves to a group of the lower half
// and back, in batches, while clients write to them. With four groups two
// moves run from two groups to two others, and a batch's old and new
// groups are not the whole fleet.
func runFleetResize(run *Run) error {
	k := run.Kernel
	groups := 2
	if k.Stream("knobs/resize/groups").IntN(4) == 0 {
		groups = 4
	}
	f, hot, all, faults := resizingFleet(run, groups, 0)
	shrink := sim.Between(k.Stream("knobs/resize"), 2*time.Second, f.calm/3)
	run.Knob("shrink_at", shrink)
	f.resize(groups/2, shrink)
	f.lagControl(groups/2, shrink, hot)
	// Back to G groups once the record shows every partition in the lower
	// half (seed 202: the control group had no leader for most of the
	// faults, and the shrink had not even committed at the heal).
	f.k.At(shrink, sim.EvCheck, xxhash.Sum64String("grow"), func() {
		f.resizeWhen(groups, "grow", func() bool { return f.placed(groups / 2) }, hot, nil)
	})
	f.aimCrash(k.Stream("knobs/resize/crash"))
	return f.runUnderChaos(faults, hot, all)
}

// resizingFleet builds a fleet of groups groups of three, the last
// added of them added while it runs, for a scenario that resizes it, and
// draws its faults and clocks. A batch's copy comes in pages of one to
// four flows: a batch holds a handful, so most copies take several pages
// (a copy that stopped after its first page survived every seed at 64 a
// page).
func resizingFleet(run *Run, groups, added int) (*fleetHarness, []string, []string, FaultConfig) {
	k := run.Kernel
	pageFlows := 1 + k.Stream("knobs/resize/page").IntN(4)
	run.Knob("move_page_flows", pageFlows)
	f, hot, all := fleetSetupAdding(run, groups, added, 3, flow.Config{MaxMoveFlows: pageFlows})
	faults := DrawFaults(k.Stream("knobs/faults"), len(f.nodes))
	run.Knob("faults", faults)
	DrawClocks(run, f.nodes, 300*time.Millisecond, 100)
	lateAcks(run, f)
	return f, hot, all, faults
}

// lateAcks: in half the runs (knob late_acks), half the new voters'
// acknowledgements of a page arrive twice, the copy 5 to 100 ms after
// the first (netsim.LagIf), when the driver has moved on to later
// pages: it must count an acknowledgement only for the page it names
// (move-pages; planted bug stale-page-ack). The network's own duplicates
// arrive within its latency, too soon to land on a later page.
func lateAcks(run *Run, f *fleetHarness) {
	if !run.HalfTheRuns("late_acks") {
		return
	}
	r := run.Kernel.Stream("net/late-acks")
	h := f.groups[0]
	f.nw.LagIf(func(_, _ dial.NodeID, frame []byte) time.Duration {
		if kind, ok := flow.PeekKind(h.plain(frame)); !ok || kind != flow.FrameIngestAck || r.IntN(2) != 0 {
			return 0
		}
		return sim.Between(r, 5*time.Millisecond, 100*time.Millisecond)
	})
}

// resizeWhen asks for a resize to target groups (named what: knob
// what_at) once ready reports so, checked every 500ms, or 4s after the
// heal if it still does not (the faults held the step before up that
// long), with lagControl aimed at it; then runs next, if any.
func (f *fleetHarness) resizeWhen(target int, what string, ready func() bool, hot []string, next func()) {
	if f.k.Now() < f.calm+4*time.Second && !ready() {
		f.k.After(500*time.Millisecond, sim.EvCheck, xxhash.Sum64String(what), func() { f.resizeWhen(target, what, ready, hot, next) })
		return
	}
	f.run.Knob(what+"_at", f.k.Now())
	f.resize(target, f.k.Now())
	f.lagControl(target, f.k.Now(), hot)
	if next != nil {
		next()
	}
}

// lagControl aims two faults at the move's fence, at the owner of one
// of the hot flows that the resize to target groups asked at at moves
// (in the group it leaves), until the heal:
//
//   - from at until controlLag after the record shows that flow's
//     partition moving (its batch fenced), it hears nothing of the
//     control group, so its directory lags while its own group's log
//     runs on: only the fence its group's log holds stops it serving
//     what moves away (fleet.Fences). An owner that trusted its
//     directory's epoch would serve on beside the new group
//     (route-stale-epoch);
//   - for dataLag from that fence, it hears nothing of its own group's
//     log either: it
//     serves on within its isolation window (D-17) without the log's
//     fence, and a copy taken from it then misses what it serves after
//     (move-before-fence). The move must wait for its answer, which it
//     gives only once its log has fenced the batch.
func (f *fleetHarness) lagControl(target int, at time.Duration, hot []string) {
	ks := f.k.Stream("knobs/resize/lag")
	// The hot flows this resize moves, by the newest directory the
	// record holds (a shrink the faults held up moved only some).
	var moving []string
	for _, fl := range hot {
		if f.latest.Resolve(fl).Group != partition.GroupOf(fl, target) {
			moving = append(moving, fl)
		}
	}
	if len(moving) == 0 {
		return
	}
	hf := moving[ks.IntN(len(moving))]
	r := f.latest.Resolve(hf)
	g := r.Group
	h := f.groups[g]
	lagged := f.k.Machine(r.Owner)
	var from time.Duration = -1
	f.fenced = append(f.fenced, func(d *fleet.Directory) {
		if old, _, _, moving := d.Moving(partition.Of(hf)); moving && old == g && from < 0 && f.k.Now() >= at {
			from = f.k.Now()
			f.run.Knob("lagged", fmt.Sprintf("%s (owner of %s) from %v: control %v, its log %v", lagged.Name(), hf, from, controlLag, dataLag))
		}
	})
	prev := f.lagging
	f.lagging = func(to dial.NodeID, frame []byte) bool {
		if now := f.k.Now(); to == lagged.ID() && now >= at {
			p := h.plain(frame)
			switch {
			case len(p) == 0:
			case p[0] == node.ControlFramePrefix:
				// Until controlLag past the fence, at most maxLag, and
				// never past the heal.
				if (from < 0 || now < from+controlLag) && now < at+maxLag && now < f.calm {
					return true
				}
			case p[0] != flow.FramePrefix && p[0] != proxyonce.FramePrefix && p[0] != rollout.FramePrefix:
				// The data group's raft.
				if from >= 0 && now < from+dataLag && now < f.calm {
					return true
				}
			}
		}
		return prev != nil && prev(to, frame)
	}
	f.nw.DropIf(func(_, to dial.NodeID, frame []byte) bool { return f.lagging(to, frame) })
}

// controlLag is how long lagControl cuts a node off from the control
// group: past its batch's move. dataLag is how long it cuts it off from
// its own group's log: past its isolation window.
// maxLag bounds the first.
const (
	controlLag = 4 * time.Second
	dataLag    = time.Second
	maxLag     = 12 * time.Second
)

// moveSteps are the steps of a batch's move a crash is aimed at, and
// moveRoles whom it crashes: the control group's leader (the move's
// driver), a voter of the group the batch leaves, one of the group it
// goes to.
var (
	moveSteps = []string{"fence", "copy", "ingest", "publish"}
	moveRoles = []string{"driver", "old voter", "new voter"}
)

// aimCrash draws a step of a move, which of the resize's first batches,
// and a role, and crashes that role's node the moment the record shows
// that step (if the faults still run): over the seeds, a crash at every
// step of a move, of every node a move depends on. The move must resume
// (resize-complete) and lose nothing.
func (f *fleetHarness) aimCrash(r *rand.Rand) {
	step, role, nth := moveSteps[r.IntN(len(moveSteps))], moveRoles[r.IntN(len(moveRoles))], r.IntN(3)
	f.run.Knob("aimed_crash", fmt.Sprintf("%s at the %s of batch %d", role, step, nth))
	ord := f.run.AimedFault()
	seen := 0
	f.onStep = func(s string, from, to int, at dial.NodeID) {
		if s != step || f.chaos == nil || f.k.Now() >= f.calm {
			return
		}
		if seen++; seen != nth+1 {
			return
		}
		var victim *sim.Machine
		switch role {
		case "driver":
			for _, n := range f.nodes {
				if nd := f.nd[n.Name()]; n.Up() && nd != nil && nd.Control.IsLeader() {
					victim = n
				}
			}
		case "old voter", "new voter":
			g := from
			if role == "new voter" {
				g = to
			}
			if at != 0 && f.member[at] == g {
				victim = f.k.Machine(at) // the node the step's frame went to
			} else if ms := f.members(f.groups[g]); len(ms) > 0 {
				victim = ms[r.IntN(len(ms))]
			}
		}
		if victim == nil || !victim.Up() {
			return
		}
		f.run.Inject(ord, fmt.Sprintf("crash %s, the move's %s, at the %s of batch %d", victim.Name(), role, step, nth), func() {
			f.chaos.CrashAt(victim, f.k.Now())
		})
	}
	f.watchMoves()
}
