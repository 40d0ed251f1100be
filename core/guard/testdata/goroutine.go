// Package fixture holds planted violations of the determinism rule, each
// next to the allowed form it is easily confused with. guard_test.go lists
// every planted line; a line marked "allowed" must never be reported.
package fixture

func spawn(f func()) {
	go f()         // planted: no-goroutine
	go func() {}() // planted: no-goroutine

	f() // allowed: calling a function value in the same goroutine
}
