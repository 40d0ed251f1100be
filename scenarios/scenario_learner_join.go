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
		Name:       "learner-join",
		CallBounds: true,
		Summary:    "nodes join as learners under load and are promoted once caught up; founders are removed",
		Duration:   40 * time.Second,
		Bugs: []Bug{
			{Name: "promote-early", Window: 10, MinCaught: 7},
			{Name: "silent-conf-busy", Window: 100, MinCaught: 8},
			// Caught in the third of the runs that garble snapshots
			// (20 of seeds 1..60; halt-cause).
			{Name: "unchecked-snapshot", Window: 60, MinCaught: 10},
		},
		Floors:   []Floor{{"kv-ops-ok", 30}, {"promotions", 2}},
		Checkers: plus(clusterCheckers, "membership", "kv-refusals"),
		Run:      runLearnerJoin,
	})
}

// runLearnerJoin grows a 3-voter cluster by two learners under load; the
// leader promotes each once it has caught up; then a founder is removed.
func runLearnerJoin(run *Run) error {
	k := run.Kernel
	calm := run.Duration * 6 / 10
	netCfg, disk, kvClients, _ := raftKnobs(run, 3, false, calm)
	r := k.Stream("faults")
	joinAt := sim.Between(r, 2*time.Second, 6*time.Second)
	removeAt := joinAt + sim.Between(r, 6*time.Second, 10*time.Second)
	// A joining node is cut off from everyone for a while as it is
	// added, so it is well behind when it first could be promoted: the
	// leader must wait for it to catch up.
	behind := sim.Between(k.Stream("knobs/behind"), 300*time.Millisecond, 1500*time.Millisecond)
	run.Knob("join_at", joinAt)
	run.Knob("joiner_cut_off", behind)
	run.Knob("remove_at", removeAt)
	run.Knob("calm_at", calm)

	// In half the runs the operator asks through the node the KV
	// clients keep busiest (by their own record), waiting up to half a
	// second for one to hold as many of their calls as the run's
	// calls-in-flight bound: its change is then refused at admission
	// now and then, and the refusal must be answered (call-deadline). Its own
	// stream: the draws above are the same.
	viaBusiest := k.Stream("knobs/conf-via").IntN(2) == 0
	run.Knob("conf_via_busiest", viaBusiest)
	all := names(5)
	c := newRaftCluster(run, all, 3, netCfg, disk)
	for _, n := range c.nodes[:3] {
		n.Start()
	}
	// Joins and removals are retried until the membership shows them: a
	// conf change raft refuses (one is already in flight) answers nobody.
	var addLearner func(n *sim.Machine)
	addLearner = func(n *sim.Machine) {
		if !n.Up() {
			n.Start()
		}
		via := c.nodes[r.IntN(3)]
		ask := func(via *sim.Machine) {
			c.confCall(via, "join of "+n.Name(), func(cn *consensus.Node, done func(error)) {
				cn.AddLearner(consensus.NewMember(n.Name(), n.Name()+":7000"), done)
			})
		}
		if viaBusiest {
			c.whenBusy(c.nodes[:3], 500*time.Millisecond, func(b *sim.Machine) { ask(cmp.Or(b, via)) })
		} else {
			ask(via)
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("join "+n.Name()), func() {
			if !c.isMember(n.ID()) {
				addLearner(n)
			}
		})
	}
	cutOff := func(n *sim.Machine) {
		run.Inject(run.Fault(), fmt.Sprintf("cut %s off for %v as it joins", n.Name(), behind), func() {
			for _, id := range k.Nodes() {
				if id != n.ID() {
					c.nw.Block(id, n.ID())
					c.nw.Block(n.ID(), id)
				}
			}
			k.After(behind, sim.EvFault, xxhash.Sum64String("heal "+n.Name()), func() { c.nw.Heal() })
		})
	}
	k.At(joinAt, sim.EvClient, xxhash.Sum64String("join"), func() { addLearner(c.nodes[3]); cutOff(c.nodes[3]) })
	k.At(joinAt+time.Second+behind, sim.EvClient, xxhash.Sum64String("join"), func() { addLearner(c.nodes[4]); cutOff(c.nodes[4]) })
	removed := c.nodes[0]
	var remove func()
	remove = func() {
		via := c.nodes[1+r.IntN(4)]
		ask := func(via *sim.Machine) {
			c.confCall(via, "removal of "+removed.Name(), func(cn *consensus.Node, done func(error)) { cn.RemoveMember(removed.ID(), done) })
		}
		if viaBusiest {
			c.whenBusy(c.nodes[1:], 500*time.Millisecond, func(b *sim.Machine) { ask(cmp.Or(b, via)) })
		} else {
			ask(via)
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("remove"), func() {
			if c.isMember(removed.ID()) {
				remove()
			} else {
				c.retire(removed, 0, nil) // a removed node is shut down
			}
		})
	}
	k.At(removeAt, sim.EvClient, xxhash.Sum64String("remove"), remove)
	c.startKVClients(kvClients, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm+5*time.Second, sim.EvCheck, xxhash.Sum64String("members"), func() {
		ms := c.membership()
		want := fmt.Sprint(all[1:])
		if got := fmt.Sprint(memberNames(ms.Voters)); got != want || len(ms.Learners) != 0 {
			run.Fail("membership", "voters %s learners %d after the joins and removal; want voters %s and no learners", got, len(ms.Learners), want)
		}
	})
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes[1:], 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(nil)
	return nil
}
