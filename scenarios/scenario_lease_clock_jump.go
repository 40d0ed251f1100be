package scenarios

import (
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:       "lease-clock-jump",
		CallBounds: true,
		Summary:    "leases held and lapsing while the leader's clock steps backwards by more than a lease TTL",
		Duration:   30 * time.Second,
		Bugs: []Bug{
			{Name: "no-clock-clamp", Window: 10, MinCaught: 8},
			{Name: "release-keeps", Window: 30, MinCaught: 20},
		},
		Floors:   []Floor{{"kv-ops-ok", 50}, {"lease-grants", 10}, {"leader-steps-back", 2}},
		Checkers: plus(clusterCheckers, "kv-refusals"),
		Run:      runLeaseClockJump,
	})
}

// runLeaseClockJump steps the leader's clock back, again and again, by
// more than the lease TTL while holders take, renew and let the lease
// lapse. The clamp in apply is the defence: applied time never goes back.
func runLeaseClockJump(run *Run) error {
	k := run.Kernel
	const voters = 3
	calm := run.Duration * 7 / 10
	netCfg, disk, kvClients, leaseClients := raftKnobs(run, voters, true, calm)
	ttl := time.Duration(500+k.Stream("knobs/ttl").IntN(1500)) * time.Millisecond
	jumpEvery := sim.Between(k.Stream("knobs/jump"), time.Second, 4*time.Second)
	run.Knob("lease_ttl", ttl)
	run.Knob("jump_every", jumpEvery)
	run.Knob("calm_at", calm)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	DrawClocks(run, c.nodes, 50*time.Millisecond, 50)
	for _, n := range c.nodes {
		n.Start()
	}
	r := k.Stream("faults")
	var jump func()
	jump = func() {
		if k.Now() >= calm {
			return
		}
		ord, back := run.Fault(), ttl+sim.Between(r, ttl/2, 3*ttl)
		for _, n := range c.nodes {
			if cn := c.node(n); cn != nil && cn.BelievesSelfLeader() {
				run.Inject(ord, fmt.Sprintf("clock step %s -%v (leader)", n.Name(), back), func() {
					n.Clock().Step(-back)
					run.Did("leader-steps-back", 1)
				})
				break
			}
		}
		k.After(jumpEvery, sim.EvFault, xxhash.Sum64String("jump"), jump)
	}
	k.After(jumpEvery, sim.EvFault, xxhash.Sum64String("jump"), jump)
	c.startKVClients(kvClients, calm)
	c.startLeaseClients(leaseClients, ttl, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes, 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(nil)
	return nil
}
