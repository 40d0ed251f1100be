package scenarios

import (
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/sim"
)

// kvClient is one closed-loop client: one operation in flight at a time,
// against a random node, on a small key set with a small value domain so
// that A → B → A happens.
type kvClient struct {
	id       int
	lastSeen map[string]kv.Entry
}

var kvKeys = []string{"k1", "k2", "k3"}

// kvValues are the values clients write; the empty one is a value too.
var kvValues = []string{"a", "b", "c", ""}

func (c *raftCluster) startKVClients(count int, until time.Duration) {
	c.kvClients += count
	if c.run.ClientsOff {
		return
	}
	c.startKVBoundsClient(until)
	r := c.k.Stream("workload/kv")
	for i := 0; i < count; i++ {
		cl := &kvClient{id: i, lastSeen: map[string]kv.Entry{}}
		own := c.k.Stream(fmt.Sprintf("workload/kv/%d", i)) // its k-th operation is its own (Run.Op)
		c.k.At(sim.Between(r, 0, 100*time.Millisecond), sim.EvClient, uint64(i), func() { c.kvStep(cl, own, until) })
	}
}

func (c *raftCluster) kvStep(cl *kvClient, r interface{ IntN(int) int }, until time.Duration) {
	if c.k.Now() >= until {
		return
	}
	next := func() {
		c.k.After(time.Duration(r.IntN(30))*time.Millisecond, sim.EvClient, uint64(cl.id), func() { c.kvStep(cl, r, until) })
	}
	n := c.nodes[r.IntN(len(c.nodes))]
	key := kvKeys[r.IntN(len(kvKeys))]
	value := kvValues[r.IntN(len(kvValues))]
	now := c.k.Now()
	a := &answer{}
	var opID int
	giveUp := func() {
		if a.once() {
			c.hist.GiveUp(opID, "client deadline", c.k.Now())
			c.unanswered = append(c.unanswered, unanswered{client: cl.id, key: key, node: n, call: now, gave: c.k.Now(), busy: n.Local() > c.k.Now()})
			next()
		}
	}
	refuse := func(why string) {
		if a.once() {
			c.hist.Refuse(opID, why, c.k.Now())
			next()
		}
	}
	unknownOrRefused := func(err error) {
		if consensus.Unknown(err) {
			if a.once() {
				c.hist.GiveUp(opID, err.Error(), c.k.Now())
				next()
			}
			return
		}
		refuse(err.Error())
	}
	// propose runs one write: an answered one is recorded by applied,
	// which returns what the history keeps of it.
	propose := func(op kv.Op, applied func(kv.Result) linearizability.KVOutput) {
		if !c.call(n, func(cn *consensus.Node) {
			cn.Propose(op, func(res kv.Result, err error) {
				switch {
				case err != nil:
					unknownOrRefused(err)
				case res.Err != nil:
					if c.malformedUnexplained(now, res) {
						c.run.Fail("kv-refusals", "client %d's %v on %q through %s at %v was refused as malformed, though no fault touched its bytes: %v", cl.id, op.Kind, key, n.Name(), now, res.Err)
					}
					refuse(res.Err.Error())
				default:
					if a.once() {
						c.hist.Return(opID, applied(res), c.k.Now())
						next()
					}
				}
			})
		}) {
			refuse("node down")
		}
	}
	pick := r.IntN(20)
	if _, send := opOf(c.run, "kv", cl.id); !send {
		next()
		return
	}
	c.clientsWaiting[n.ID()]++
	a.onDone = func() { c.clientsWaiting[n.ID()]-- }
	switch {
	case pick >= 17:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVDelete}, now)
		propose(kv.Delete(key), func(res kv.Result) linearizability.KVOutput {
			delete(cl.lastSeen, key)
			return linearizability.KVOutput{Found: res.Found, Version: res.Version}
		})
	case pick < 7:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVPut, Value: value}, now)
		propose(kv.Put(key, []byte(value)), func(res kv.Result) linearizability.KVOutput {
			cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
			return linearizability.KVOutput{Version: res.Version}
		})
	case pick < 13:
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVGet}, now)
		ok := c.call(n, func(cn *consensus.Node) {
			cn.Read(key, func(e kv.Entry, found bool, err error) {
				if err != nil {
					unknownOrRefused(err)
					return
				}
				if a.once() {
					out := linearizability.KVOutput{Found: found}
					if found {
						out.Value, out.Version = string(e.Value), e.Version
						cl.lastSeen[key] = e
					}
					c.hist.Return(opID, out, c.k.Now())
					next()
				}
			})
		})
		if !ok {
			refuse("node down")
		}
	default:
		seen := cl.lastSeen[key]
		opID = c.hist.Call(cl.id, key, linearizability.KVInput{Op: linearizability.KVCas, Expect: seen.Version, Value: value}, now)
		guard := kv.VersionIs(key, seen.Version)
		guard.Value = seen.Value // what the value-guard bug compares instead
		if seen.Version == 0 && r.IntN(2) == 0 {
			guard = kv.Absent(key) // the other way to say "absent"
		}
		propose(kv.Txn([]kv.Guard{guard}, []kv.Op{kv.Put(key, []byte(value))}, nil), func(res kv.Result) linearizability.KVOutput {
			out := linearizability.KVOutput{Succeeded: res.Succeeded}
			if res.Succeeded {
				out.Version = res.Version
				cl.lastSeen[key] = kv.Entry{Value: []byte(value), Version: res.Version}
			}
			return out
		})
	}
	if !a.done {
		c.k.After(c.clientDeadline, sim.EvClient, uint64(opID), giveUp)
	}
}

// startLeaseClients runs holders that take, renew and release one lease
// from random nodes, recording what each came to believe it held.
func (c *raftCluster) startLeaseClients(count int, ttl time.Duration, until time.Duration) {
	c.leaseClients += count
	if c.run.ClientsOff {
		return
	}
	r := c.k.Stream("workload/lease")
	for i := 0; i < count; i++ {
		holder := fmt.Sprintf("h%d", i+1)
		own := c.k.Stream("workload/lease/" + holder) // its k-th operation is its own (Run.Op)
		c.k.At(sim.Between(r, 0, 200*time.Millisecond), sim.EvClient, xxhash.Sum64String(holder), func() {
			c.leaseStep(holder, own, ttl, until, nil)
		})
	}
}

const leaseName = "scheduler"

// leaseStep makes one lease call. With boundary set, it is a renewal
// through that node, made exactly a TTL after the call that last granted
// the lease through it: the node stamps it with the tenure's deadline, to
// the millisecond unless a clock moved, and it must find the lease lapsed.
func (c *raftCluster) leaseStep(holder string, r interface{ IntN(int) int }, ttl, until time.Duration, boundary *sim.Machine) {
	if c.k.Now() >= until {
		return
	}
	next := func(d time.Duration) {
		c.k.After(d, sim.EvClient, xxhash.Sum64String(holder), func() { c.leaseStep(holder, r, ttl, until, nil) })
	}
	n := c.nodes[r.IntN(len(c.nodes))]
	ttlMs := ttl.Milliseconds()
	var op kv.Op
	kind := checker.LeaseRelease
	pick := r.IntN(10)
	// Every draw the call may need is made now, whatever becomes of it,
	// so the holder's k-th call is the same however the others fare.
	pace := ttl / 3
	probe, pause := r.IntN(4) == 0, time.Duration(r.IntN(int(pace)+1))
	// After one grant in eight the holder goes quiet for one and a half
	// to two TTLs, as a holder that crashed and came back does: its lease
	// must lapse, and the others' acquires be granted (lease-lapse).
	quiet, quietFor := r.IntN(8) == 0, ttl+ttl/2+time.Duration(r.IntN(int(ttl/2)+1))
	if _, send := c.run.Op("l" + holder); !send {
		next(pace)
		return
	}
	switch {
	case boundary != nil:
		n = boundary
		op, kind = kv.LeaseRenew(leaseName, holder, ttlMs), checker.LeaseRenew
		c.run.Did("boundary-renewals", 1)
	case pick < 5:
		op, kind = kv.LeaseAcquire(leaseName, holder, ttlMs), checker.LeaseAcquire
	case pick < 8:
		op, kind = kv.LeaseRenew(leaseName, holder, ttlMs), checker.LeaseRenew
	default:
		op = kv.LeaseRelease(leaseName, holder)
	}
	// From the moment it asks to release, the holder no longer counts on
	// the lease, whatever becomes of the request: the call is its record.
	c.leaseCalls = append(c.leaseCalls, checker.LeaseCall{Holder: holder, Lease: leaseName, Kind: kind, Node: n.Name(), TTL: ttl, Call: c.k.Now()})
	call := len(c.leaseCalls) - 1
	a := &answer{}
	ok := c.call(n, func(cn *consensus.Node) {
		cn.Propose(op, func(res kv.Result, err error) {
			if !a.once() {
				return
			}
			lc := &c.leaseCalls[call]
			if !consensus.Unknown(err) {
				lc.Answered, lc.Answer = true, c.k.Now()
				lc.NotApplied = err != nil
			}
			var held *kv.Refusal
			if err == nil && kind == checker.LeaseAcquire && errors.As(res.Err, &held) {
				lc.RefusedFor = held.Holder
			}
			lc.Released = err == nil && res.Err == nil && kind == checker.LeaseRelease
			if err == nil && res.Err == nil && kind != checker.LeaseRelease {
				lc.Granted, lc.Token = true, res.Lease.Token
				checker.LeaseAnswer(c.run, *lc, res.Lease)
				if probe {
					// Probe the deadline itself, not somewhere before it.
					at := lc.Call + ttl
					c.k.At(at, sim.EvClient, xxhash.Sum64String(holder), func() { c.leaseStep(holder, r, ttl, until, n) })
					return
				}
				if quiet {
					next(quietFor)
					return
				}
			}
			if errors.Is(err, consensus.ErrBusy) {
				// Refused at once for the calls in flight: a holder
				// tries again soon, as one whose lease is at stake does
				// (at one call in flight, six KV clients otherwise left
				// the holders too few grants to judge).
				next(pause / 16)
				return
			}
			next(pause)
		})
	})
	if !ok {
		a.once()
		// The node is down: refused, known not applied.
		c.leaseCalls[call].Answered, c.leaseCalls[call].Answer, c.leaseCalls[call].NotApplied = true, c.k.Now(), true
		next(pace)
		return
	}
	c.k.After(c.clientDeadline, sim.EvClient, xxhash.Sum64String(holder), func() {
		if a.once() {
			next(pace)
		}
	})
}

// grants counts the grants and renewals clients were told of.
func (c *raftCluster) grants() int {
	n := 0
	for _, lc := range c.leaseCalls {
		if lc.Granted {
			n++
		}
	}
	return n
}
