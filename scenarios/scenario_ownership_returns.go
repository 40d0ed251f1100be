package scenarios

import (
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/sim"
)

// ownership-returns moves ownership back as well as forward, which a
// cluster that only ever grows and sheds founders never does: a node is
// added and removed again, so its flows go back to their earlier owners;
// added once more, with its old disk; a founder is removed and comes back,
// also with its old disk; and a founder is cut off while two membership
// changes commit, so it catches up on both at once (often from a
// snapshot) while it owns flows; and cut off again while the spare goes in
// and out, so it owns its flows again across two memberships it never
// saw. Every flow op is checked as in flow-ops;
// the record-based loss checker forgives only where a handover could not
// happen.

func init() {
	Register(Scenario{
		Name:     "ownership-returns",
		Summary:  "a node added, removed and added again; a founder removed and re-added with its old disk; a founder cut off across two membership changes, twice",
		Duration: 80 * time.Second,
		Bugs: []Bug{
			{Name: "stale-adoption", Window: 60, MinCaught: 3},
			{Name: "unconfirmed-owner", Window: 60, MinCaught: 4},
		},
		Floors:   []Floor{{"flow-ops-ok", 50}, {"membership-changes", 6}},
		Checkers: flowCheckers,
		Run:      runOwnershipReturns,
	})
}

func runOwnershipReturns(run *Run) error {
	k := run.Kernel
	const voters, extra = 4, 1
	cfg := flow.Config{}
	h, hot, all, calm := flowSetup(run, voters, extra, cfg)
	r := k.Stream("faults")
	for _, n := range h.nodes[:voters] {
		n.Start()
	}
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.startChecks(100 * time.Millisecond)

	spare := h.nodes[voters]
	founder := h.nodes[r.IntN(voters)]
	var lagger *sim.Machine
	for lagger == nil || lagger == founder {
		lagger = h.nodes[r.IntN(voters)]
	}
	pause := func() time.Duration { return sim.Between(r, 1500*time.Millisecond, 3*time.Second) }
	run.Knob("returns", fmt.Sprintf("spare %s; founder %s removed and re-added; %s cut off across two changes", spare.Name(), founder.Name(), lagger.Name()))

	voter := func(n *sim.Machine) bool {
		for _, m := range h.membership().Voters {
			if m.ID == n.ID() {
				return true
			}
		}
		return false
	}
	member := func(n *sim.Machine) bool { return h.isMember(n.ID()) }
	// via is a live voter other than the ones named.
	via := func(not ...*sim.Machine) *sim.Machine {
		for _, i := range r.Perm(len(h.nodes)) {
			n := h.nodes[i]
			ok := n.Up() && voter(n)
			for _, x := range not {
				ok = ok && n != x
			}
			if ok {
				return n
			}
		}
		return nil
	}
	// add makes n a voter (a learner first; the leader promotes it) and
	// then runs next; remove takes it out and shuts it down. Each retries
	// until the membership shows it, and gives up at calm.
	var add, remove func(n *sim.Machine, next func())
	add = func(n *sim.Machine, next func()) {
		if k.Now() >= calm {
			return
		}
		run.Rejoin(n) // with whatever its disk kept from before
		if !member(n) {
			if v := via(n); v != nil {
				h.call(v, func(cn *consensus.Node) {
					cn.AddLearner(consensus.NewMember(n.Name(), n.Name()+":7000"), func(error) {})
				})
			}
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("add "+n.Name()), func() {
			if voter(n) {
				k.Logf("%s is a voter again", n.Name())
				run.Did("membership-changes", 1)
				k.After(pause(), sim.EvClient, xxhash.Sum64String("next"), next)
				return
			}
			add(n, next)
		})
	}
	remove = func(n *sim.Machine, next func()) {
		if k.Now() >= calm {
			return
		}
		if v := via(n); v != nil {
			h.call(v, func(cn *consensus.Node) { cn.RemoveMember(n.ID(), func(error) {}) })
		}
		k.After(time.Second, sim.EvClient, xxhash.Sum64String("remove "+n.Name()), func() {
			if !member(n) {
				k.Logf("%s removed", n.Name())
				run.Did("membership-changes", 1)
				// A removed node is shut down; its disk stays.
				h.retire(n, 0, func() { k.After(pause(), sim.EvClient, xxhash.Sum64String("next"), next) })
				return
			}
			remove(n, next)
		})
	}
	isolate := func(n *sim.Machine) {
		h.isolate(n, "cut "+n.Name()+" off")
		// Its own clients keep writing to it on its side: what it takes
		// in before it stops (D-17) reaches no one else, and comes back
		// with it, a copy the new owners' adoptions never saw.
		h.startOwnedClients(n, 6, calm)
	}
	// behind: the lagger cut off again, this time while the spare goes in
	// and out, so the flows the spare took from it come back to it across
	// two memberships it never saw, the spare having served them between.
	// Hearing its leader again ends D-17's stop at once, before it has
	// applied either change: it must not serve at the membership it was
	// cut off in (planted bug unconfirmed-owner). Its own clients start
	// at the heal: writes it took while cut off would be a loss the spare's
	// adoption accepts, which this episode is not about.
	behind := func() {
		// Three changes take 9 s at most without retries; none may be
		// left in flight at calm (a removal then would take a member
		// the liveness probe reads through).
		if k.Now()+12*time.Second > calm {
			return
		}
		run.Did("behind", 1)
		remove(spare, func() {
			h.isolate(lagger, "cut "+lagger.Name()+" off again")
			add(spare, func() {
				// The spare writes the flows it took, the lagger's among
				// them, so that a lagger serving its old copy shows it.
				h.startOwnedClients(spare, 4, calm)
				remove(spare, func() {
					h.nw.Heal()
					k.Logf("fault heal: %s catches up on two membership changes, owning again what it owned", lagger.Name())
					h.startOwnedClients(lagger, 6, calm)
				})
			})
		})
	}
	// The script: spare in, out, in again; the lagger cut off while the
	// spare goes out and in once more; a founder out and back; the lagger
	// behind.
	k.At(sim.Between(r, 2*time.Second, 4*time.Second), sim.EvClient, xxhash.Sum64String("script"), func() {
		add(spare, func() {
			remove(spare, func() {
				add(spare, func() {
					isolate(lagger)
					remove(spare, func() {
						add(spare, func() {
							h.nw.Heal()
							k.Logf("fault heal: %s catches up on two membership changes", lagger.Name())
							remove(founder, func() { add(founder, behind) })
						})
					})
				})
			})
		})
	})
	return h.settleMembers(calm, member, hot)
}
