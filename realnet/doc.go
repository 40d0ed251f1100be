// Package realnet is the real-world shell around the pure core: a node's
// loop goroutine with its bounded mailbox, OS files behind the journal's
// File seam, and (as the real-node work lands) TCP behind dial and bbolt
// behind the flow shard. Goroutines, blocking and the wall clock live here,
// never in core/.
package realnet
