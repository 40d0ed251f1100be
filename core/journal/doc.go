// Package journal is the raft log file: one append-only file of checksummed
// records (entry batches, hard states, truncations, snapshots), replayed into
// memory when it is opened. The raft driver in core/consensus adapts it to
// etcd raft's Storage; the journal itself names no raft type, so a raft
// upgrade never reaches it.
//
// # Why one append-only file
//
// Raft promises that an acknowledged entry or vote is on stable storage. A
// design that rewrote the log in place would have a window in which the old
// copy is gone and the new one is not yet synced; appending has none. The
// vote lives in the same file as the entries, so storage writes are ordered
// by construction: the order of the records is the order things happened,
// and a crash keeps a prefix of them. Within one Save the records go out as
// truncate, entries, hard state, so that every prefix a crash can leave is a
// log raft can restart from: a hard state never commits an entry that is not
// before it in the file.
//
// # File format (version 1)
//
// The journal is a record file (core/recfile: magic "FLJRNL", version 1,
// each record length, body and header checksums, then a body), whose
// framing, replay rules and storage seam are shared with the shard log.
// A journal body is a kind byte and a payload. Payloads use unsigned
// varints (uv) and length-prefixed byte strings (bytes = uv(len) ‖ len
// bytes):
//
//	entries   (1): uv(first index) uv(count) { uv(term) type:u8 bytes(data) }*count
//	hardstate (2): uv(term) uv(vote) uv(commit)
//	truncate  (3): uv(from)      drop every entry with index >= from
//	snapshot  (4): uv(index) uv(term) bytes(confstate) bytes(data)
//
// A snapshot record replaces the whole log: entries before and after it are
// gone, and the commit index rises to the snapshot's index if it was lower
// (a snapshot holds only committed state, and raft refuses to restart with a
// commit index below its first index).
//
// # Replay: a torn tail versus corruption
//
// Replay reads records in order until the end of the file or the first bad
// one, by core/recfile's rules: a bad record is a torn tail, which is cut
// (the file is truncated there and the cut synced), only when nothing after
// it can be a record some completed write put there; anything else fails
// Open with ErrCorrupt naming the offset. On top of recfile's rules, a
// record whose checksums hold but whose payload does not decode, or does
// not fit the log (a gap in the indexes, a truncation of committed
// entries, a commit past the last entry, a second vote in one term), is
// corrupt: a record before the tail is never dropped silently, since it
// may hold an acknowledged entry or vote.
//
// Cutting a torn tail is safe by the fault model: a crash keeps only a
// prefix of what was not synced, so a partial record is one whose write
// never completed its sync, and no one was told it was durable.
//
// # Compaction
//
// Compact is the only rewrite. It writes a sibling (name + ".compact")
// holding the snapshot, the entries after it and the hard state, syncs it,
// renames it over the journal and syncs the directory; only then does it
// switch to appending to the new file. A crash before the directory sync
// brings back the old file whole, one after it finds the new one: never a
// mix. Open removes a leftover sibling.
//
// # Errors
//
// A storage error from a write, sync or the directory sync that ends a
// compaction is sticky: the file may end in a partial record, and appending
// after it would turn a torn tail into corruption before the tail. Every
// later write returns ErrFailed; the driver's recovery is to reopen.
// Breaking raft's storage contract (a gap, a rewrite of committed entries, a
// second vote in a term) is a programmer error and panics.
//
// # Staged writes
//
// A write may leave the loop. Stage (and StageSnapshot) checks it, applies
// it to memory and queues its records; Take hands everything queued over
// as one Write (one append, at most one sync: a group commit of every
// stage since the last Take); the Write's Run touches only the file, so a
// worker beside the loop may run it while the loop goes on; Done takes its
// outcome back on the loop. One Write runs at a time. Between a Stage and
// the completion of a synced Write taken after it, memory holds what the
// file may not: the driver must not promise any of it (raft's asynchronous
// storage writes deliver an append's responses only after its write
// completed, which is this contract). Compact needs no Write running, and
// writes whatever is queued with the rest.
//
// A Journal belongs to one node's single-threaded loop and is not safe for
// concurrent use; a Write's Run is the one thing that may run elsewhere.
package journal
