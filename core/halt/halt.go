// Package halt is how a node stops on purpose: fail-stop, the only safe
// answer to some errors. After an fsync fails, the kernel may have dropped
// the very bytes it was asked to make durable and will report the next
// fsync as a success; a node that retries and carries on acknowledges
// writes that a crash will take back. So a node's code that meets such an
// error calls Stop, which unwinds the node's current step with a Halt, and
// the driver stops the node: the simulator crashes it (a checker holds
// every node that saw a failed fsync to having stopped within that step),
// and the real node exits, to be restarted from what its disk holds.
package halt

import "fmt"

// Halt is the panic value Stop raises; drivers recover it.
type Halt struct{ Reason error }

func (h Halt) Error() string { return "node halted: " + h.Reason.Error() }

// Stop stops the node: it never returns.
func Stop(reason error) {
	panic(Halt{Reason: reason})
}

// Stopf is Stop with a formatted reason.
func Stopf(format string, args ...any) {
	Stop(fmt.Errorf(format, args...))
}
