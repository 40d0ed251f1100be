package scenarios

import (
	"cmp"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:       "journal-crash",
		BootFaults: true,
		CallBounds: true,
		Summary:    "power cuts in the middle of journal appends and compactions, torn tails, restarts",
		Duration:   30 * time.Second,
		Bugs: []Bug{
			{Name: "journal-trust-tail", Window: 150, MinCaught: 10},
			{Name: "tear-damage", Window: 60, MinCaught: 12},
			{Name: "body-vouches", Window: 60, MinCaught: 12},
		},
		Floors:   []Floor{{"kv-ops-ok", 25}, {"power-cuts", 2}, {"compactions", 5}},
		Checkers: plus(clusterCheckers, "kv-refusals"),
		Run:      runJournalCrash,
	})
}

// runJournalCrash cuts power in the middle of disk work: between any two
// steps of an append, a sync or a compaction. Snapshots are taken every
// few entries so compactions are frequent.
func runJournalCrash(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	calm := run.Duration * 7 / 10
	netCfg, disk, kvClients, _ := raftKnobs(run, voters, false, calm)
	disk.TornWriteProb = 1
	run.Knob("disk", diskKnob(disk)+" (torn overridden)")
	snapEvery := uint64(10 + k.Stream("knobs/snap").IntN(40))
	cutEvery := sim.Between(k.Stream("knobs/cut"), 200*time.Millisecond, 2*time.Second)
	run.Knob("snapshot_entries", snapEvery)
	run.Knob("power_cut_every", cutEvery)
	run.Knob("calm_at", calm)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	c.cfg.SnapshotEntries = snapEvery
	for _, n := range c.nodes {
		n.Start()
	}
	r := k.Stream("faults")
	var cut func()
	cut = func() {
		if k.Now() >= calm {
			return
		}
		// A cut armed but not yet landed counts as down: the node will
		// go at its next few disk operations, and it comes back a drawn
		// pause after it went.
		ord := run.Fault()
		n := c.nodes[r.IntN(len(c.nodes))]
		ops := 1 + r.IntN(12)
		pause := sim.Between(r, 300*time.Millisecond, 2*time.Second)
		if n.Up() && downOrArmed(c.nodes) < (voters-1)/2 {
			run.Inject(ord, fmt.Sprintf("power cut %s after %d disk ops (back %v after)", n.Name(), ops, pause), func() {
				n.Disk().CutPowerAfter(ops)
				restartAfterCut(k, n, pause, calm)
			})
		}
		k.After(cutEvery, sim.EvFault, xxhash.Sum64String("cut"), cut)
	}
	k.After(cutEvery, sim.EvFault, xxhash.Sum64String("cut"), cut)
	k.At(calm, sim.EvFault, xxhash.Sum64String("calm"), func() {
		for _, n := range c.nodes {
			n.Disk().CancelPowerCut()
			if !n.Up() {
				n.Start()
			}
		}
		c.checkLiveness(c.nodes, 5*time.Second, nil)
	})
	c.startKVClients(kvClients, calm)
	c.startChecks(50 * time.Millisecond)
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	cuts, compactions := 0, 0
	for _, n := range c.nodes {
		cuts += int(n.Disk().PowerCuts)
		compactions += n.Disk().Renamed(cmp.Or(c.cfg.JournalName, consensus.DefaultJournalName))
	}
	run.Did("power-cuts", cuts)
	// The scenario is about cuts in the middle of compactions too: a run
	// whose nodes never compacted (a snapshot never asked for) judged
	// none, and a node whose log only grew passed. Counted from the
	// disks' record: each compaction renames a new journal over the old.
	run.Did("compactions", compactions)
	c.faults = fmt.Sprintf("power-cuts=%d", cuts)
	c.finish(nil)
	return nil
}
