package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
)

func init() {
	Register(Scenario{
		Name: "transport-adversary",
		Summary: "every frame sealed in the envelope, and an adversary on every wire replaying, redirecting, " +
			"forging replies and flipping bits, on top of partitions, loss and crashes: nothing it makes gets through",
		Duration: 40 * time.Second,
		Bugs: []Bug{
			{Name: "no-addressing", Window: 10, MinCaught: 8},
			{Name: "bare-replies", Window: 10, MinCaught: 8},
		},
		Floors: []Floor{{"flow-ops-ok", 10}, {"faults", 3}, {"adversary-" + netsim.AttackRedirect, 20},
			{"adversary-" + netsim.AttackReplay, 20}, {"adversary-" + netsim.AttackOldReply, 20},
			{"adversary-" + netsim.AttackForge, 20}, {"adversary-" + netsim.AttackFlip, 20}},
		DiskStalls: true,
		Checkers:   plus(flowCheckers, "adversary"),
		Swarm:      true,
		Run:        runTransportAdversary,
	})
}

// runTransportAdversary is flow-ops with the envelope on and an adversary
// on the wires for the whole run, calm phase included: the cluster must
// stay linearizable and live while it rejects everything the adversary
// makes (checker.AdversaryRejected).
func runTransportAdversary(run *Run) error {
	k := run.Kernel
	voters := 3 + 2*k.Stream("knobs/size").IntN(2)
	h, hot, all, calm := flowSetup(run, voters, 0, flow.Config{})
	kr := k.Stream("knobs/keys")
	keys := transport.Keys{Control: make([]byte, transport.KeySize), Data: make([]byte, transport.KeySize)}
	for i := range transport.KeySize {
		keys.Control[i], keys.Data[i] = byte(kr.Uint32()), byte(kr.Uint32())
	}
	h.seal(keys)
	every := time.Duration(5+k.Stream("knobs/adversary").IntN(45)) * time.Millisecond
	run.Knob("adversary_every", every)
	faults := DrawFaults(k.Stream("knobs/faults"), voters)
	run.Knob("faults", faults)
	DrawClocks(run, h.nodes, 300*time.Millisecond, 100)
	h.adversary = h.nw.StartAdversary(netsim.AdversaryConfig{Every: every, Keep: 512}, run.Duration)
	if err := h.runUnderChaos(faults, hot, all, calm); err != nil {
		return err
	}
	made := 0
	for _, attack := range []string{netsim.AttackRedirect, netsim.AttackReplay, netsim.AttackOldReply, netsim.AttackForge, netsim.AttackFlip} {
		run.Did("adversary-"+attack, h.adversary.Made[attack])
		made += h.adversary.Made[attack]
	}
	checker.AdversaryRejected(run, made, h.admitted, func(id dial.NodeID) string { return h.byID[id].Name() })
	var dropped [len(transport.CauseNames)]uint64
	for _, name := range slices.Sorted(maps.Keys(h.links)) {
		st := h.links[name].Stats()
		for i, n := range st.Dropped {
			dropped[i] += n
		}
	}
	var causes []string
	for i, n := range dropped {
		if n > 0 {
			causes = append(causes, fmt.Sprintf("%s=%d", transport.CauseNames[i], n))
		}
	}
	run.Logf("adversary: made %d frames, %d got through; envelopes dropped (last incarnations): %s",
		made, len(h.admitted), strings.Join(causes, " "))
	return nil
}
