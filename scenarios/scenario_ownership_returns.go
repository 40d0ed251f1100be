package scenarios

import (
	"fmt"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
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
			{Name: "unconfirmed-member", Window: 40, MinCaught: 5},
		},
		Floors:     []Floor{{"flow-ops-ok", 50}, {"membership-changes", 6}},
		DiskStalls: true,
		Checkers:   plus(flowCheckers, "admin-acts"),
		Run:        runOwnershipReturns,
	})
}

func runOwnershipReturns(run *Run) error {
	k := run.Kernel
	const voters, extra = 4, 1
	cfg := flow.Config{}
	h, hot, all, calm := flowSetup(run, voters, extra, cfg)
	r := k.Stream("faults")
	// The operator joins and removes nodes as a real one does, through
	// node.Node.Join and Remove, each attested with the control key at
	// the membership index the member it asks holds (admin-acts).
	op := &operator{k: k, stream: "operator/attest", key: make([]byte, transport.KeySize)}
	for i, rk := 0, k.Stream("operator/control-key"); i < len(op.key); i++ {
		op.key[i] = byte(rk.Uint32())
	}
	h.adminKeys = transport.Keys{Control: op.key}

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
	// done: the record shows n a voter (a join done) or no member (a
	// removal done); the operator moves on only then.
	done := func(n *sim.Machine, join bool) bool {
		rec := h.committed()
		if join {
			return slices.Contains(rec.Voters, n.ID())
		}
		return !rec.Lists(n.ID())
	}
	answered := func(a *checker.AdminAct) func(error) {
		return func(err error) {
			if err == nil {
				a.OKs = append(a.OKs, k.Now())
			}
		}
	}
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
	// change asks, each second until the record shows it done, for n's
	// join (a learner first; the leader promotes it) or its removal,
	// through a live voter, then runs then; it gives up at calm. add
	// makes n a voter and then runs next; remove takes it out and shuts
	// it down.
	change := func(n *sim.Machine, join bool, then func()) {
		what := "remove "
		if join {
			what = "add "
		}
		var current *checker.AdminAct
		var ask func()
		ask = func() {
			if k.Now() >= calm {
				if current != nil {
					current.Abandoned = true
				}
				return
			}
			if join {
				run.Rejoin(n) // with whatever its disk kept from before
			}
			if !join || !h.committed().Lists(n.ID()) {
				if v := via(n); v != nil {
					a := h.adminAct(&current, join, n) // abandoned if the calm comes first
					h.callNode(v, func(nd *node.Node) {
						index := nd.Consensus.Membership().Index
						if join {
							m := consensus.NewMember(n.Name(), n.Name()+":7000")
							nd.Join(m, node.NoGroup, index, op.attest(transport.ActJoin, node.JoinFields(m, index)), answered(a))
							return
						}
						nd.Remove(n.Name(), index, op.attest(transport.ActRemove, node.RemoveFields(n.Name(), index)), answered(a))
					})
				}
			}
			k.After(time.Second, sim.EvClient, xxhash.Sum64String(what+n.Name()), func() {
				if done(n, join) {
					run.Did("membership-changes", 1)
					then()
					return
				}
				ask()
			})
		}
		ask()
	}
	var add, remove func(n *sim.Machine, next func())
	add = func(n *sim.Machine, next func()) {
		change(n, true, func() {
			k.Logf("%s is a voter again", n.Name())
			k.After(pause(), sim.EvClient, xxhash.Sum64String("next"), next)
		})
	}
	remove = func(n *sim.Machine, next func()) {
		change(n, false, func() {
			k.Logf("%s removed", n.Name())
			// A removed node is shut down; its disk stays.
			h.retire(n, 0, func() { k.After(pause(), sim.EvClient, xxhash.Sum64String("next"), next) })
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
