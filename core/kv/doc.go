// Package kv is the replicated state machine that the raft driver
// (core/consensus) applies committed entries to: a versioned key-value map,
// named leases that carry fencing tokens, transactions guarded on versions,
// and a bounded log of watch events.
//
// # The one rule
//
// Applying an entry is a pure function of (state, entry). The package never
// reads a clock: the proposer stamps wall time into the Command once (AtMs)
// and every replica applies that stamp, so a replica replaying the log hours
// later reaches the state the leader reached. The stamp is clamped so the
// state machine's clock never runs backwards; without the clamp a leader
// whose clock stepped back would grant leases that the next correct clock
// cuts short. Two replicas that applied the same entries hold the same bytes
// (Digest), and the replica-agreement checker compares exactly that.
//
// # Versions
//
// One revision counter counts every change: a put, a delete, a lease grant,
// renewal, release or expiry. Each change takes the next value, each key and
// lease records the version that last changed it, and each change emits
// exactly one watch event carrying that version. Versions are never reused,
// so a key deleted and created again has a new version, a guard on a version
// sees every intervening write, and a lease's grant version works as a
// fencing token.
//
// # Errors
//
// Programmer errors panic (an index that does not advance). Everything an
// entry can get wrong — bytes that do not decode, a key over the limit, a
// lease held by someone else — comes back in Result.Err, identically on every
// replica, because a panic while applying a committed entry would crash every
// replica in turn.
package kv
