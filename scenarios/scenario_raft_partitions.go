package scenarios

import (
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/sim"
)

func init() {
	Register(Scenario{
		Name:       "raft-partitions",
		CallBounds: true,
		Summary:    "3 or 5 voters; KV and lease clients on every node; partitions of every shape, loss, reordering, crashes, clock skew and steps",
		Duration:   30 * time.Second,
		Bugs: []Bug{
			{Name: "value-guard", Window: 10, MinCaught: 8},
			{Name: "silent-timeout", Window: 30, MinCaught: 5},
			{Name: "release-any", Window: 10, MinCaught: 8},
			{Name: "expire-late", Window: 50, MinCaught: 14},
			{Name: "stopped-lease-clock", Window: 50, MinCaught: 15},
			{Name: "bound-plus-one", Window: 30, MinCaught: 8},
			{Name: "empty-branch-malformed", Window: 30, MinCaught: 12},
		},
		Floors:   []Floor{{"kv-ops-ok", 15}, {"lease-grants", 3}, {"faults", 3}},
		Checkers: plus(clusterCheckers, "kv-refusals"),
		Swarm:    true,
		Run:      runRaftPartitions,
	})
}

func runRaftPartitions(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	calm := run.Duration * 6 / 10
	netCfg, disk, kvClients, leaseClients := raftKnobs(run, voters, true, calm)
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	ttl := 2 * time.Second
	run.Knob("faults", faults)
	run.Knob("calm_at", calm)
	run.Knob("lease_ttl", ttl)

	c := newRaftCluster(run, names(voters), voters, netCfg, disk)
	DrawClocks(run, c.nodes, 500*time.Millisecond, 200)
	for _, n := range c.nodes {
		n.Start()
	}
	chaos := StartChaos(run, c.nw, c.nodes, faults, calm)
	c.startKVClients(kvClients, calm)
	c.startLeaseClients(leaseClients, ttl, calm)
	c.startChecks(50 * time.Millisecond)
	k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { c.checkLiveness(c.nodes, 5*time.Second, nil) })
	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	c.finish(chaos)
	return nil
}
