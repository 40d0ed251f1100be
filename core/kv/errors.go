package kv

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed marks an entry whose bytes do not decode to a Command.
	// Every replica decodes the same bytes the same way, so every replica
	// reports it and none changes anything but its applied index.
	ErrMalformed = errors.New("kv: malformed command")
	// ErrInvalid marks a Command that decodes but breaks a bound of the
	// Config or a rule of its shape (a key too long, a TTL of zero, a lease
	// op inside a transaction).
	ErrInvalid = errors.New("kv: invalid command")
	// ErrLeaseHeld is matched by every *Refusal.
	ErrLeaseHeld = errors.New("kv: lease held by another holder")
	// ErrNotHeld marks a renewal or release of a lease nobody holds
	// (never granted, released, or expired).
	ErrNotHeld = errors.New("kv: lease not held")
	// ErrCompacted means the event log no longer reaches back to the
	// version asked for: the watcher must resynchronise from a read or a
	// snapshot, then watch from that state's version.
	ErrCompacted = errors.New("kv: events compacted")
	// ErrBadSnapshot marks snapshot bytes Restore will not accept.
	ErrBadSnapshot = errors.New("kv: bad snapshot")
)

// Refusal is the answer to a lease op by someone other than the holder. It
// names the holder and when the lease lapses, because blind backoff would
// make a wedged holder indistinguishable from a busy cluster.
type Refusal struct {
	// Name is the lease.
	Name string
	// Holder holds it now.
	Holder string
	// UntilMs is its deadline in applied time: it lapses at the first
	// entry applied at or after UntilMs unless the holder renews.
	UntilMs int64
}

// Error reads like `lease "scheduler" held by n2 until 12345`.
func (r *Refusal) Error() string {
	return fmt.Sprintf("lease %q held by %s until %d", r.Name, r.Holder, r.UntilMs)
}

// Is makes errors.Is(err, ErrLeaseHeld) true for a refusal.
func (r *Refusal) Is(target error) bool { return target == ErrLeaseHeld }
