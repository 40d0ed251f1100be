// Package consensus is the raft driver: it runs an etcd raft RawNode over
// the journal, applies committed entries to the replicated KV, and answers
// the questions the rest of the core asks of the control plane — the
// committed membership and its index (m_idx), whether this node leads and
// whether it is isolated — and carries client proposals and linearizable
// reads.
//
// Nothing outside this package names an etcd raft type, so a raft upgrade
// is this package's work alone. We run go.etcd.io/raft/v3 v3.6.0: it is the
// line etcd 3.6 runs in production, its messages are value types with a
// deterministic gogoproto encoding (no maps), which the simulator's trace
// hash needs, and v3.7's move to pointer protobuf messages buys us nothing
// yet.
//
// Like all of core/, a Node is a single-threaded state machine: events come
// in (a frame, a timer, a client call, a journal write's completion),
// effects go out through the clock, dial and journal seams and the worker.
// It never blocks: raft runs with asynchronous storage writes, the journal
// stages each append and the worker (Env.Worker) writes and fsyncs it
// beside the loop; an append's responses go out when that completed
// (pump).
package consensus
