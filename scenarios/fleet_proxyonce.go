package scenarios

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// fleetProbe holds a healed fleet to proxyOnce's promise across groups
// (checker fleet-records-once): a proxy records once for the whole
// fleet, not once per group. Its claims and recordings live in the
// control group, which every node follows (core/node's Node.Admin), so a
// fresh signature asked for through every member of every group at one
// instant is called upstream once, and every node serves that one
// recording. A fleet whose claims lived in each data group would grant
// one claim per group at that instant, and its groups would serve
// different recordings of one request (planted bug group-claims).
//
// It is judged from the simulator's record: the grants and answers each
// node's service gave the probe's callers, the instants the control
// group's memberships first applied (a claim's owner on the control
// ring may change with them, and a new owner may grant again), and the
// network's record of the probe's frames lost (a call that failed where
// one was lost is forgiven, as in proxyonce-live).
type fleetProbe struct {
	f      *fleetHarness
	key    string
	start  time.Duration
	wins   []probeWin
	served map[string]string // node → the recording it served
	failed []probeWin        // node, instant, error
	lost   map[dial.NodeID]bool
	// ctlChanges are the instants a control group membership was first
	// applied by some node, with its index.
	ctlChanges []time.Duration
	ctlIndex   uint64
}

type probeWin struct {
	id   dial.NodeID
	node string
	at   time.Duration
	err  error
}

func newFleetProbe(f *fleetHarness) *fleetProbe {
	p := &fleetProbe{f: f, key: proxyonce.KeyOf(4545, []byte("fleet-probe")), served: map[string]string{}, lost: map[dial.NodeID]bool{}}
	plain := f.groups[0].plain // every group's frames are sealed with the same keys
	f.nw.Watch(func(s netsim.Sending) {
		if p.start == 0 {
			return
		}
		frame := plain(s.Frame)
		if s.Meant != nil {
			frame = s.Meant // garbled on the wire: lost, by the simulator's record
		}
		if len(frame) == 0 || frame[0] != proxyonce.FramePrefix {
			return
		}
		info, err := proxyonce.DecodeFrame(frame)
		if err != nil || info.Key != p.key {
			return
		}
		if s.Fate == netsim.Lost || s.Meant != nil {
			p.lost[s.From], p.lost[s.To] = true, true
		}
	})
	return p
}

// controlApplied records a control group membership a node applied,
// the first time any node applies its index.
func (p *fleetProbe) controlApplied(index uint64) {
	if index > p.ctlIndex {
		p.ctlIndex = index
		p.ctlChanges = append(p.ctlChanges, p.f.k.Now())
	}
}

// run asks for the probe's signature through every member of every
// group that is up, at one instant; a call refused at a bound is made
// again until fleetProbeRetry has passed, and so is one that failed.
func (p *fleetProbe) run() {
	f, k := p.f, p.f.k
	p.start = k.Now()
	until := k.Now() + fleetProbeRetry
	for _, h := range f.groups {
		for _, n := range f.members(h) {
			if !n.Up() {
				continue
			}
			inc := n.Incarnation()
			alive := func() bool { return n.Up() && n.Incarnation() == inc }
			fail := func(err error) {
				if alive() {
					p.failed = append(p.failed, probeWin{id: n.ID(), node: n.Name(), at: k.Now(), err: err})
				}
			}
			var try func()
			try = func() {
				if !alive() {
					return
				}
				n.Exec(func() {
					svc := f.nd[n.Name()].ProxyOnce
					svc.Acquire(p.key, func(ans proxyonce.Answer, err error) {
						k.Logf("fleet probe through %s: won=%v err=%v", n.Name(), ans.Won, err)
						switch {
						case err != nil && k.Now() < until:
							// Asked again, as a client answered 503 would
							// (a frame of the call lost, a grant lost and
							// the claim lapsed).
							k.After(50*time.Millisecond, sim.EvCheck, xxhash.Sum64String("fleet probe "+n.Name()), try)
						case err != nil:
							fail(err)
						case !ans.Won:
							p.served[n.Name()] = string(ans.Recorded)
						default:
							p.wins = append(p.wins, probeWin{node: n.Name(), at: k.Now()})
							answer := p.key + "#" + n.Name() // the upstream answers at once
							var record func()
							record = func() {
								if !alive() {
									return
								}
								svc.Record(p.key, ans.Token, []byte(answer), func(err error) {
									k.Logf("fleet probe recorded through %s: err=%v", n.Name(), err)
									switch {
									case err != nil && k.Now() < until && !errors.Is(err, proxyonce.ErrStale) && !errors.Is(err, proxyonce.ErrAlreadyRecorded):
										// Unknown or refused: the claim still holds
										// (it lapses after a minute), so recording
										// again with its token is what a winner does.
										k.After(50*time.Millisecond, sim.EvCheck, xxhash.Sum64String("fleet probe record "+n.Name()), func() { n.Exec(record) })
									case err != nil:
										fail(err)
									default:
										p.served[n.Name()] = answer
									}
								})
							}
							record()
						}
					})
				})
			}
			try()
		}
	}
}

// fleetProxyLapse is how long a claim in a fleet-routing run holds
// unrecorded: three claim deadlines (2s), so that a winner whose Record
// was lost on its way records again with its token before the claim
// lapses (at 2s, as in the proxyOnce scenarios, a Record that timed out
// always came back stale: fleet-routing seed 484), and short enough that
// a grant lost on its way blocks the signature for a few seconds only.
const fleetProxyLapse = 6 * time.Second

// fleetProbeRetry is how long a probe's caller asks again after a
// refusal or a call answered unknown, and its winner records again: a
// few calls' deadlines (2s), so that a control group electing after the
// heal, a first frame dropped, or a grant lost on its way is outlasted:
// the claim lapses in fleetProxyLapse, and a caller told it lost waits up
// to proxyWait (6s) for a recording that never comes, and asks again
// only then. Long enough for two grants lost in a row, on a network that
// loses up to one frame in ten in calm too (fleet-grow seed 40: both the
// owner's grants, at 26.0s and 32.1s, were lost, and the second lapsed
// at 38.1s). The probe runs 8s after the heal of a 40s run whose heal is
// at 18s, so its last try is a second before the run's end.
const fleetProbeRetry = 13 * time.Second

// judge is checker fleet-records-once.
func (p *fleetProbe) judge() {
	run := p.f.run
	if p.start == 0 {
		run.Undecided("fleet-records-once", "the probe never ran")
		return
	}
	if len(p.served) == 0 {
		run.Undecided("fleet-records-once", "no node served the probe's signature (%d failed)", len(p.failed))
		return
	}
	answers := map[string][]string{}
	for _, node := range slices.Sorted(maps.Keys(p.served)) {
		answers[p.served[node]] = append(answers[p.served[node]], node)
	}
	if len(answers) > 1 {
		var parts []string
		for _, a := range slices.Sorted(maps.Keys(answers)) {
			parts = append(parts, fmt.Sprintf("%s served by %v", a, answers[a]))
		}
		run.Fail("fleet-records-once", "one signature asked for at %v served %d recordings: %s", p.start, len(answers), strings.Join(parts, "; "))
	}
	// Two claims granted within one lapse of each other, with no change of
	// the control group's membership between (which may move the claim's
	// owner), were granted beside each other. The grants are seen when
	// they reach their callers, which a claim's deadline bounds; the
	// margin is the drift the checkers of claims allow (proxyonce).
	for i := 1; i < len(p.wins); i++ {
		prev, w := p.wins[i-1], p.wins[i]
		moved := slices.ContainsFunc(p.ctlChanges, func(at time.Duration) bool { return at > prev.at-proxyDeadline && at <= w.at })
		if !moved && w.at-prev.at < fleetProxyLapse*99/100-proxyDeadline {
			run.Fail("fleet-records-once", "claims for one signature granted to %s at %v and to %s at %v, within one lapse (%v), with no change of the control group's membership between",
				prev.node, prev.at, w.node, w.at, fleetProxyLapse)
		}
	}
	for _, fl := range p.failed {
		if p.lost[fl.id] || errors.Is(fl.err, proxyonce.ErrWaited) && len(p.lost) > 0 {
			continue
		}
		run.Fail("fleet-records-once", "a call for a fresh signature through %s, %v after the faults healed, got %v", fl.node, p.start-p.f.calm, fl.err)
	}
	run.Did("probe-answers", len(p.served))
}
