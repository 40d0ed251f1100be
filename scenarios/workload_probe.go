package scenarios

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/sim"
)

// probeClients numbers the probes' clients apart from every other flow
// client's.
const probeClients = 2000

// startProbes runs one reader pinned to each node in pinned: it reads a
// key of every flow in turn, round and round, a few milliseconds apart,
// until until, and hands each call, as it saw it answered, to record.
// Every virtual second a flow no client has asked for joins its round. A
// survivor of a removal is then asked for every flow every second or so
// (the closed-loop clients may all be waiting out a lost frame's
// deadline). The reads are not in the flow history: they change nothing,
// and the history's porcupine checks need not pay for them. Their
// operations are named p<node index>/<n> (Run.Op).
func (h *flowHarness) startProbes(pinned []*sim.Machine, flows []string, until time.Duration, record func(checker.FlowCall)) {
	if h.run.ClientsOff {
		return
	}
	for i, n := range pinned {
		client := probeClients + i
		r := h.k.Stream(fmt.Sprintf("workload/probe/%d", i))
		next, fresh := 0, time.Duration(0)
		flows := slices.Clip(flows)
		var probe func()
		probe = func() {
			if h.k.Now() >= until {
				return
			}
			again := func() {
				h.k.After(sim.Between(r, 5*time.Millisecond, 25*time.Millisecond), sim.EvClient, uint64(client), probe)
			}
			// Every second a flow nobody has asked for joins the round: a
			// new user's first request, which its owner must adopt from
			// whoever may hold it, at whatever membership is in force.
			for fresh*time.Second < h.k.Now() {
				fresh++
				flows = append(flows, ring.ImposterKey(8080, fmt.Sprintf("fresh-%d", fresh)))
			}
			f := flows[next%len(flows)]
			next++
			ord, send := opOf(h.run, "p", i)
			if !send {
				again()
				return
			}
			call := h.k.Now()
			h.callFlow(n, uint64(client), uint64(client), flow.Request{Flow: f, Op: flow.OpGet, Key: "a"}, func(_ flow.Response, err error) {
				c := checker.FlowCall{Node: n.ID(), Flow: f, Call: call, Return: h.k.Now(), Served: err == nil,
					Client: client, Index: ord}
				if err != nil {
					c.Refused = flow.Known(err) && !errors.Is(err, errClientDeadline)
					c.Note = err.Error()
				}
				record(c)
				again()
			})
		}
		h.k.At(sim.Between(r, 0, 20*time.Millisecond), sim.EvClient, uint64(client), probe)
	}
}
