package scenarios

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name: "fleet-grow",
		Summary: "a fleet founded with 1 or 2 groups of three grows by as many new groups, added while it runs, " +
			"is resized onto them and back while clients on every node call every flow; " +
			"under partitions, loss, crashes and clock skew, a crash aimed at a step of a move",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			// 20 of seeds 1..20, by moves-fenced (and flow-linearizability
			// in 13 of them): an added group handed its share of the table
			// with no move serves flows it holds no copy of.
			{Name: "added-group-takes-table", Window: 10, MinCaught: 8},
			// 20 of seeds 1..20, by admin-refusals: the adversary asks
			// for a group out of turn before each real addition.
			{Name: "unchecked-add-group", Window: 10, MinCaught: 8},
			// 20 and 19 of seeds 1..20, by admin-refusals.
			{Name: "unattested-admin", Window: 10, MinCaught: 8},
			{Name: "any-version-admin", Window: 10, MinCaught: 7},
			// 20 of seeds 1..20, by admin-acts: every run has a spare
			// that joins (and, in three in four, is removed again).
			{Name: "early-admin-answer", Window: 10, MinCaught: 8},
			// 20 of seeds 1..20, by admin-refusals (a request never
			// answered) or, where the unanswered request held up a real
			// one, by what that then left undone.
			{Name: "silent-admin-refusal", Window: 10, MinCaught: 8},
			// 15 of seeds 1..40, by admin-acts and admin-refusals: the
			// runs whose spare is removed again with a founder held behind
			// (join_replay_behind), to which its join is then replayed.
			{Name: "proposal-time-version", Window: 40, MinCaught: 11},
			// fleet-resize's, on moves into and out of groups that were
			// added: 20 of seeds 1..20, 15 of 40 (25 of 40 before every
			// run had a spare and half founded their added groups alone).
			// (move-before-fence, 4 of 40 here before that, is pinned in
			// fleet-resize only: CI's time.)
			{Name: "publish-before-copy", Window: 10, MinCaught: 7},
			{Name: "route-stale-epoch", Window: 40, MinCaught: 12},
		},
		Floors:     []Floor{{"flow-ops-ok", 10}, {"cross-group-ops", 4}, {"faults", 4}, {"groups-added", 1}, {"admin-refusals", 8}, {"admin-acts", 1}, {"partitions-moved", 2 * node.MoveBatch}},
		DiskStalls: true,
		Checkers:   plus(fleetCheckers, "resize-complete", "moves-fenced", "admin-refusals"),
		Run:        runFleetGrow,
	})
}

// runFleetGrow founds a fleet of G groups (1, or 2 in half the runs)
// and adds G more while it runs: their nodes start early in the faulted
// time, each founding its own raft group, and a member of the fleet is
// asked to add each (node.Node.AddGroup), in order. Once all are added
// the fleet is resized to 2G groups, moving half of every founded
// group's partitions into the added groups, and back to G once that is
// done (or 4s after the heal): the added groups take partitions only
// through moves, and give them back the same way. In half the runs each
// added group is founded by one node, whose two others join it (knob
// added_founded_alone); every run has a spare that joins a founded group
// under the adversary's attacks, and in three in four is removed again.
func runFleetGrow(run *Run) error {
	k := run.Kernel
	founded := 1
	if k.Stream("knobs/grow/groups").IntN(2) == 0 {
		founded = 2
	}
	f, hot, all, faults := resizingFleet(run, 2*founded, founded)
	addAt := sim.Between(k.Stream("knobs/grow"), 2*time.Second, f.calm/4)
	run.Knob("add_at", addAt)
	f.addGroups(addAt)
	// Onto the added groups once the record shows them all in the
	// directory; back once every partition is in place.
	f.k.At(addAt, sim.EvCheck, xxhash.Sum64String("grow"), func() {
		f.resizeWhen(2*founded, "grow", func() bool { return f.latest.Groups() == 2*founded }, hot, func() {
			f.k.After(500*time.Millisecond, sim.EvCheck, xxhash.Sum64String("shrink"), func() {
				f.resizeWhen(founded, "shrink", func() bool { return f.placed(2 * founded) }, hot, nil)
			})
		})
	})
	f.aimCrash(k.Stream("knobs/resize/crash"))
	return f.runUnderChaos(faults, hot, all)
}
