package kv_test

import (
	"fmt"

	"github.com/fenceline/fenceline/core/kv"
)

// Example shows the lease transcript of seed 001: one winner, refusals that
// name it, and expiry as an event of its own.
func Example() {
	s, _ := kv.New(kv.Config{})
	index := uint64(0)
	apply := func(atMs int64, op kv.Op) kv.Result {
		index++
		data, _ := kv.EncodeCommand(kv.Command{AtMs: atMs, Op: op})
		return s.Apply(index, data)
	}
	res := apply(1000, kv.LeaseAcquire("scheduler", "rk-01", 60_000))
	fmt.Printf("rk-01 granted, token %d, until %d\n", res.Lease.Token, res.Lease.DeadlineMs)
	for _, who := range []string{"rk-02", "rk-03"} {
		fmt.Printf("%s refused: %v\n", who, apply(2000, kv.LeaseAcquire("scheduler", who, 60_000)).Err)
	}
	apply(61_000, kv.Tick()) // the leader's quiet-cluster tick
	res = apply(61_001, kv.LeaseAcquire("scheduler", "rk-02", 60_000))
	fmt.Printf("rk-02 granted, token %d\n", res.Lease.Token)
	evs, _ := s.EventsSince(0, 0)
	for _, ev := range evs {
		fmt.Printf("v%d %s %s %q holder %s\n", ev.Version, ev.Space, ev.Kind, ev.Key, ev.Holder)
	}
	// Output:
	// rk-01 granted, token 1, until 61000
	// rk-02 refused: lease "scheduler" held by rk-01 until 61000
	// rk-03 refused: lease "scheduler" held by rk-01 until 61000
	// rk-02 granted, token 3
	// v1 lease put "scheduler" holder rk-01
	// v2 lease expired "scheduler" holder rk-01
	// v3 lease put "scheduler" holder rk-02
}
