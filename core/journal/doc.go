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
//	file   = header record*
//	header = "FLJRNL" version:u16le                      (8 bytes)
//	record = length:u32le bodycrc:u32le headcrc:u32le body  (12 + length bytes)
//	body   = kind:u8 payload
//
// headcrc is CRC-32C over the first 8 bytes (length and bodycrc), bodycrc is
// CRC-32C over the body. The header has its own checksum so that a damaged
// length is caught as damage, instead of sending replay past the end of the
// file where it would look like a torn write. Payloads use unsigned varints
// (uv) and length-prefixed byte strings (bytes = uv(len) ‖ len bytes):
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
// one. A bad record is either a torn tail, which is cut (the file is
// truncated there and the cut synced), or corruption, which fails Open with
// ErrCorrupt naming the offset. The rule is that a bad record is torn only
// when nothing after it can be a record some completed write put there:
//
//	what is wrong at offset off                     verdict
//	fewer than 12 bytes left                        torn
//	header checksum fails                           torn if every byte from off
//	                                                to EOF is zero, else corrupt
//	header holds, body reaches past EOF             torn (whatever the length)
//	header holds, length 0 or over MaxRecordBytes   corrupt
//	body checksum fails                             torn if the record ends exactly
//	                                                at EOF or only zeros follow it,
//	                                                else corrupt
//	checksums hold, payload does not decode, or     corrupt
//	  does not fit the log (a gap in the indexes, a
//	  truncation of committed entries, a commit past
//	  the last entry, a second vote in one term)
//
// A header is checked before its length is believed, so a damaged length is
// never mistaken for a tear, and no declared length is allocated before it
// is known to lie inside the file and under MaxRecordBytes. The zero cases
// are for real file systems, which may grow a file before its data blocks
// reach the disk; a bad last record that ends exactly at EOF is the last
// write landing with garbage in it. Everything else with bytes after it is
// damage a crash cannot cause (a crash keeps a prefix of what was written),
// so a record before the tail is never dropped silently: it may hold an
// acknowledged entry or vote.
//
// Cutting a torn tail is safe by the fault model: a crash keeps only a
// prefix of what was not synced, so a partial record is one whose Save never
// returned after its sync, and no one was told it was durable.
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
// A Journal belongs to one node's single-threaded loop and is not safe for
// concurrent use.
package journal
