package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/sim"
)

// The KV's bounds and shapes, attacked (checker kv-refusals).
//
// Every command a proposer takes is validated twice: by the proposer, to
// refuse at once with a clear error, and again by apply, because an entry
// may come from a proposer that did not. The workloads only ever propose
// commands that pass, at the default bounds (a 1 KiB key, a 1 MiB value,
// 128 ops in a txn) that no workload comes near, so no run fed either
// check a command it must refuse, and a validation that let anything
// through, or refused a command at its bound, went unseen: the unit tests
// alone judged them. In half the runs of the consensus scenarios
// (Scenario.CallBounds; knob kv_bounds, its own stream) the cluster runs
// small bounds, which the workloads' own commands fit, and one more client
// proposes, through random nodes, commands that break one rule each and
// commands exactly at a bound:
//
//   - a command that breaks a rule is refused at once, in the call itself,
//     with kv.ErrInvalid: it never reaches the log;
//   - a command at a bound is never refused as invalid (it may be refused
//     otherwise, or time out, like any command).
//
// The commands at a bound write only keys and leases of their own ("b/"),
// which no other client reads.

// kvBounds is the drawn KV configuration, or zero for the defaults.
type kvBounds struct {
	keyBytes, valueBytes, txnOps int
	ttlMs                        int64
}

func (b kvBounds) String() string {
	if b.keyBytes == 0 {
		return "default"
	}
	return fmt.Sprintf("key=%d value=%d txn_ops=%d lease_ttl=%dms", b.keyBytes, b.valueBytes, b.txnOps, b.ttlMs)
}

// drawKVBounds draws the small bounds in half the runs: keys of 12–19
// bytes (the longest any client or probe uses is "scheduler", 9, and
// "probe/n10"), values of 2–7 (the workloads write at most 2), txns of 1–3
// guards and ops (a compare-and-set has one of each), leases of 30–90 s
// at most (the lease clients ask for a few seconds).
func (c *raftCluster) drawKVBounds() {
	r := c.k.Stream("knobs/kv-bounds")
	if r.IntN(2) == 0 {
		c.kvBounds = kvBounds{keyBytes: 12 + r.IntN(8), valueBytes: 2 + r.IntN(6), txnOps: 1 + r.IntN(3), ttlMs: int64(30_000 + r.IntN(60_001))}
		c.cfg.KV.MaxKeyBytes, c.cfg.KV.MaxValueBytes, c.cfg.KV.MaxTxnOps = c.kvBounds.keyBytes, c.kvBounds.valueBytes, c.kvBounds.txnOps
		c.cfg.KV.MaxLeaseTTLMs = c.kvBounds.ttlMs
	}
	c.run.Knob("kv_bounds", c.kvBounds)
}

// kvProbe is one command the bounds client proposes: what it is, and
// whether the bounds forbid it.
type kvProbe struct {
	what    string
	op      kv.Op
	invalid bool
}

// kvProbes are the commands the bounds client draws from, for bounds b.
func kvProbes(b kvBounds, n int) []kvProbe {
	key := func(size int) string { // a key of its own, size bytes long
		k := fmt.Sprintf("b/%d/", n)
		return k + strings.Repeat("k", max(size-len(k), 0))
	}
	val := func(size int) []byte { return []byte(strings.Repeat("v", size)) }
	guards := func(count int) []kv.Guard {
		g := make([]kv.Guard, count)
		for i := range g {
			g[i] = kv.Absent(fmt.Sprintf("b/g%d", i))
		}
		return g
	}
	puts := func(count int) []kv.Op {
		o := make([]kv.Op, count)
		for i := range o {
			o[i] = kv.Put(fmt.Sprintf("b/p%d", i), val(1))
		}
		return o
	}
	half := b.txnOps / 2
	return []kvProbe{
		// At a bound: the largest of each.
		{"a key and a value at their bounds", kv.Put(key(b.keyBytes), val(b.valueBytes)), false},
		{"a txn of as many guards and ops as its bound", kv.Txn(guards(b.txnOps), puts(b.txnOps-half), puts(half)), false},
		{"a value guard of a value at its bound", kv.Txn([]kv.Guard{kv.ValueIs(key(b.keyBytes), val(b.valueBytes))}, nil, puts(1)), false},
		{"a lease at the longest TTL, name and holder at their bounds", kv.LeaseAcquire(key(b.keyBytes), strings.Repeat("h", b.keyBytes), b.ttlMs), false},
		{"a renewal at the longest TTL", kv.LeaseRenew(key(b.keyBytes), "h", b.ttlMs), false},
		{"a delete of a key at its bound", kv.Delete(key(b.keyBytes)), false},
		// Past a bound, by one.
		{"a value one byte past its bound", kv.Put(key(4), val(b.valueBytes+1)), true},
		{"a key one byte past its bound", kv.Put(key(b.keyBytes+1), val(1)), true},
		{"a delete of a key past its bound", kv.Delete(key(b.keyBytes + 1)), true},
		{"a txn of one guard past its bound", kv.Txn(guards(b.txnOps+1), puts(1), nil), true},
		{"a txn of one op past its bound", kv.Txn(guards(1), puts(b.txnOps-half), puts(half+1)), true},
		{"a txn whose guard key is past its bound", kv.Txn([]kv.Guard{kv.Absent(key(b.keyBytes + 1))}, puts(1), nil), true},
		{"a txn whose guard value is past its bound", kv.Txn([]kv.Guard{kv.ValueIs(key(4), val(b.valueBytes+1))}, puts(1), nil), true},
		{"a txn whose op's key is past its bound", kv.Txn(guards(1), []kv.Op{kv.Put(key(b.keyBytes+1), val(1))}, nil), true},
		{"a txn whose op's value is past its bound", kv.Txn(guards(1), nil, []kv.Op{kv.Put(key(4), val(b.valueBytes+1))}), true},
		{"a lease one millisecond past the longest TTL", kv.LeaseAcquire(key(4), "h", b.ttlMs+1), true},
		{"a renewal one millisecond past the longest TTL", kv.LeaseRenew(key(4), "h", b.ttlMs+1), true},
		{"a lease name past its bound", kv.LeaseAcquire(key(b.keyBytes+1), "h", 1000), true},
		{"a holder past its bound", kv.LeaseAcquire(key(4), strings.Repeat("h", b.keyBytes+1), 1000), true},
		// Shapes no bound allows.
		{"an empty key", kv.Put("", val(1)), true},
		{"an empty lease holder", kv.LeaseRelease(key(4), ""), true},
		{"a lease of no time", kv.LeaseAcquire(key(4), "h", 0), true},
		{"a lease of negative time", kv.LeaseRenew(key(4), "h", -1), true},
		{"a put naming a holder", kv.Op{Kind: kv.OpPut, Key: key(4), Value: val(1), Holder: "h"}, true},
		{"a delete carrying a value", kv.Op{Kind: kv.OpDelete, Key: key(4), Value: val(1)}, true},
		{"a release carrying a TTL", kv.Op{Kind: kv.OpLeaseRelease, Key: key(4), Holder: "h", TTLMs: 1000}, true},
		{"a lease inside a txn", kv.Txn(guards(1), []kv.Op{kv.LeaseAcquire(key(4), "h", 1000)}, nil), true},
		{"an absent guard carrying a version", kv.Txn([]kv.Guard{{Kind: kv.GuardAbsent, Key: key(4), Version: 3}}, puts(1), nil), true},
		{"a value guard carrying a version", kv.Txn([]kv.Guard{{Kind: kv.GuardValueIs, Key: key(4), Version: 3, Value: val(1)}}, puts(1), nil), true},
		{"a guard of no kind", kv.Txn([]kv.Guard{{Key: key(4)}}, puts(1), nil), true},
		{"an op of no kind", kv.Op{Key: key(4)}, true},
		{"an op of an unknown kind", kv.Op{Kind: kv.OpKind(200), Key: key(4)}, true},
		{"a put carrying a txn's branches", kv.Op{Kind: kv.OpPut, Key: key(4), Value: val(1), OnSuccess: puts(1)}, true},
	}
}

// startKVBoundsClient runs the bounds client until until, when the run
// drew small bounds: one command every 20–80 ms through a random node,
// each answer judged as it comes.
func (c *raftCluster) startKVBoundsClient(until time.Duration) {
	if c.kvBounds.keyBytes == 0 || c.run.ClientsOff {
		return
	}
	const client = 1 << 20 // no other client has this id
	r := c.k.Stream("workload/kv-bounds")
	var refused, accepted, other int
	var step func()
	step = func() {
		if c.k.Now() >= until {
			c.run.Logf("kv-refusals: %d commands past a rule refused at once, %d at a bound taken, %d answered otherwise", refused, accepted, other)
			c.run.Did("kv-refused", refused)
			return
		}
		c.k.After(sim.Between(r, 20*time.Millisecond, 80*time.Millisecond), sim.EvClient, client, step)
		probes := kvProbes(c.kvBounds, r.IntN(1000))
		p := probes[r.IntN(len(probes))]
		n := c.nodes[r.IntN(len(c.nodes))]
		call := c.k.Now()
		inCall := true
		c.call(n, func(cn *consensus.Node) {
			cn.Propose(p.op, func(res kv.Result, err error) {
				invalid := errors.Is(err, kv.ErrInvalid) || errors.Is(res.Err, kv.ErrInvalid)
				switch {
				case p.invalid && inCall && err != nil && errors.Is(err, kv.ErrInvalid):
					refused++
				case p.invalid:
					why := "it was taken"
					switch {
					case !inCall:
						why = fmt.Sprintf("it was answered at %v, not in the call (err %v, result %v): it reached the log", c.k.Now(), err, res.Err)
					case err != nil:
						why = fmt.Sprintf("it was refused with %v", err)
					case res.Err != nil:
						why = fmt.Sprintf("its result was %v", res.Err)
					}
					c.run.Fail("kv-refusals", "%s (%s) proposed through %s at %v breaks the KV's bounds (%v), yet %s", p.what, p.op.Kind, n.Name(), call, c.kvBounds, why)
				case c.malformedUnexplained(call, res):
					c.run.Fail("kv-refusals", "%s (%s) proposed through %s at %v was refused as malformed, though no fault touched its bytes: %v", p.what, p.op.Kind, n.Name(), call, res.Err)
				case invalid:
					c.run.Fail("kv-refusals", "%s (%s) proposed through %s at %v is within the KV's bounds (%v), yet was refused as invalid: err %v, result %v", p.what, p.op.Kind, n.Name(), call, c.kvBounds, err, res.Err)
				case err == nil && res.Err == nil:
					accepted++
				default:
					other++
				}
			})
			inCall = false
		})
	}
	c.k.After(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, client, step)
}
