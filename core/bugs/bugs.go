// Package bugs is the one table of planted bugs. Each bug turns one
// defence off, so that the simulator can prove its checkers notice the
// defence is gone: a checker that never fails on its planted bug proves
// nothing. The table names each bug once; `simrun -list` and `-bug`, the
// scenarios' catch-rate pins, the planted-bug tests and CI all read it.
//
// A switch is a field of Set, which every core package's configuration
// carries as its Bugs: checking one on the production path is a field
// read, nothing more. All of them are false outside the simulator and
// tests.
//
// Adding a bug: a field in Set, with its doc comment saying what the
// defence is and how the bug breaks it, and a line in Table naming it;
// then the code that consults the field, and a pin in the scenario that
// catches it.
package bugs

import (
	"fmt"
	"sort"
)

// Set is a set of planted bugs, one switch each.
type Set struct {
	// --- core/transport: the envelope.

	// NoAddressing makes a receiver skip the check that a request is
	// addressed to it: a request captured on its way to one member opens
	// at any other, whose replay window has not seen its number.
	NoAddressing bool
	// BareReplies sends replies in the clear and has receivers accept a
	// bare reply as it stands, without a seal or a request it answers:
	// anything on the path can answer a vote request with "granted".
	BareReplies bool

	// --- core/kv: the replicated state machine and its leases.

	// NoClockClamp makes apply trust a command's AtMs as it is, so the
	// applied clock moves backwards when a proposer's clock did. Leases
	// granted in that window get deadlines the cluster's time has already
	// passed, and the next entry from a correct clock cuts them short
	// while their holders still believe they hold them.
	NoClockClamp bool
	// ValueGuard makes a VersionIs guard compare the value the client
	// observed instead of the version, so a key that went A -> B -> A
	// between the read and the transaction passes the guard.
	ValueGuard bool
	// ReleaseAny lets any holder release a lease, so a node back from a
	// partition drops the lease its successor holds.
	ReleaseAny bool
	// ExpireLate expires a lease only once applied time is past its
	// deadline, not at it: an entry applied exactly at the deadline still
	// finds the lease held, and a renewal there succeeds.
	ExpireLate bool
	// StoppedLeaseClock stops applied time at the first command's stamp:
	// no lease ever lapses, so a holder that goes away keeps the lease
	// for ever. Nothing is ever held twice, so only a check that a lapsed
	// lease is free sees it.
	StoppedLeaseClock bool
	// ReleaseKeeps answers a release as done and leaves the lease held:
	// the holder's tenure runs to its deadline while its successor is
	// refused, which no two beliefs overlapping can show.
	ReleaseKeeps bool

	// --- core/journal: the raft log on disk.

	// JournalTrustTail makes replay accept a torn last record instead of
	// cutting it: when a record's header is whole but its body was cut
	// short by a crash, the missing bytes are read as zeros, the checksum
	// is not checked, and whatever decodes is kept: every entry whose
	// index, term and type survived, the last of them with its data
	// zero-padded. The record is then rewritten whole, so the garbage is
	// durable. Raft ends up holding an entry with the right index and term
	// and the wrong data, which no later append repairs.
	JournalTrustTail bool
	// RecfileTearDamage makes the journal's replay read a bad record with
	// whole records after it as a torn tail (core/recfile's tornIfZeros
	// always tears): damage no crash leaves is cut away with every record
	// after it, acknowledged or not, instead of refused.
	RecfileTearDamage bool
	// RecfileNoHoleCheck makes the journal's replay never look for a
	// hole under a bad record (core/recfile's HoleIn): a crash that kept a
	// later block of the unsynced tail and lost an earlier one reads as
	// damage, and the node never boots again.
	RecfileNoHoleCheck bool
	// RecfileBodyVouches makes the journal's replay believe a record
	// header whose own checksum fails when the body it describes checks
	// out: a damaged header is read as data and the node comes up on it.
	RecfileBodyVouches bool

	// --- core/consensus: etcd raft, membership and D-17.

	// PromoteEarly promotes a learner to voter as soon as it joins,
	// before it has caught up: the quorum grows by a node still replaying
	// the log.
	PromoteEarly bool
	// NoVoteSync writes a hard state that changes nothing but the term
	// and vote without syncing it, though raft says it must: a crash then
	// forgets a vote already sent.
	NoVoteSync bool
	// AckBeforeAppend delivers an asynchronous storage append's responses
	// (votes, append acknowledgements) when it is handed to the journal,
	// not when its write completed: a crash then forgets what a peer was
	// told is durable.
	AckBeforeAppend bool
	// TickWindow measures the isolation window (D-17) and the leader's
	// quorum check by counting ticks, as if each tick came on time: a loop
	// held up by fsyncs runs its ticks late, so the window stretches past
	// its bound in true time.
	TickWindow bool
	// StaleMembership lets a node whose log holds a committed membership
	// change it has not yet applied (its own disk behind the quorum that
	// committed it) count voters, and owners, by the membership before
	// it: a leader removed while its disk stalls goes on serving the
	// flows that moved away.
	StaleMembership bool
	// StaleSnapshot lets a leader send the journal's last snapshot while
	// the one carrying its newest membership waits to be written (its
	// disk busy): a newcomer refuses a snapshot that does not name it,
	// and the two trade it back and forth as fast as the wire goes.
	StaleSnapshot bool
	// UncheckedSnapshot lets a snapshot from a peer reach raft without
	// its data being read first: one whose bytes do not decode (cut
	// short, or with bytes after its end) is written to the journal as
	// raft installs it, and then fails to restore: the node halts, and
	// halts again at every boot, the snapshot being on its disk.
	UncheckedSnapshot bool
	// RemoveLastVoter lets a membership change that leaves no voter
	// through: RemoveMember proposes the removal of the only voter, and
	// apply hands it to etcd raft, which panics ("removed all voters") on
	// every member, and again on every restart, the entry being in the
	// log: one request bricks the cluster.
	RemoveLastVoter bool
	// RemoveLeaderOfTwo lets the leader of a group of two voters append
	// its own removal instead of handing leadership to the other voter
	// first: it commits the change, applies it and steps down, and if the
	// other voter missed the commit it can be elected only with the
	// removed node's vote, which a longer log, or its being stopped,
	// withholds for ever. It switches off lead-own-removal's hand-over
	// too, which would otherwise hand leadership over just after the
	// append.
	RemoveLeaderOfTwo bool
	// SilentTimeout: a proposal or read whose ProposalTimeout passes is
	// forgotten without an answer, where ErrTimeout was due: the caller
	// waits out its own deadline, an unknown outcome either way.
	SilentTimeout bool
	// SendBeforeDurable: the leader of two voters sends the other the
	// entries after that voter's removal before its own copy is written,
	// as raft allows elsewhere: a crash then leaves the removed voter's
	// log the longer, and the survivor may never get its vote.
	SendBeforeDurable bool
	// SilentConfBusy: a membership change refused at admission (the
	// calls-in-flight bound, ErrBusy) is dropped without an answer: the
	// operator waits out its own deadline.
	SilentConfBusy bool
	// LeadOwnRemoval lets a node elected leader of two voters, with a
	// change that removes it waiting in its log (appended by the leader
	// before it), lead it through instead of handing leadership over: a
	// proposal it appends meanwhile leaves its log longer than the other
	// voter's, which then never gets its vote.
	LeadOwnRemoval bool

	// --- core/flow: the owner path, adoption and replication.

	// NoFence: the owner skips its membership-index checks: the caller's
	// m_idx against its own, and the fence a newer owner set when it
	// adopted the flow.
	NoFence bool
	// NoD17: the owner serves while isolated.
	NoD17 bool
	// UnconfirmedOwner: an owner back in contact with a leader (from a
	// partition, a restart, a leader change) serves at once, before it
	// has confirmed that the membership it holds is current: a node that
	// missed two membership changes serves a flow at the membership under
	// which it owned it, after a newer owner served it meanwhile.
	UnconfirmedOwner bool
	// LocalFallback: a request the owner cannot be sent is served from
	// the local copy instead of failing.
	LocalFallback bool
	// GroupBlind: a node of a fleet of several groups takes its group for
	// the whole fleet: it neither sends a flow another group holds to
	// that group (core/fleet) nor refuses one as its owner, and serves it
	// in its own group, beside the holder's copy.
	GroupBlind bool
	// GroupClaims: in a fleet, proxyOnce's claims and recordings live in
	// each node's data group instead of the control group: each group
	// grants its own claim for a signature and records its own answer,
	// so the fleet calls the origin once per group.
	GroupClaims bool
	// KeepRemovedFollower: a node removed from its data group stays a
	// member of the fleet's control group, counting in its quorum.
	KeepRemovedFollower bool
	// RouteStaleEpoch: an owner serves a partition by the directory
	// epoch it holds even after its group's own log has fenced a move of
	// it: a request routed with the old epoch is served in the old group
	// while the new group serves the partition too.
	RouteStaleEpoch bool
	// MoveBeforeFence: a group answers a move's copy before its own log
	// has fenced the partition, so an owner whose directory lags keeps
	// serving writes the copy never sees.
	MoveBeforeFence bool
	// PublishBeforeCopy: a move publishes its partitions at the new group
	// as soon as the directory fences them, without copying them there.
	PublishBeforeCopy bool
	// StalePageAck makes a move's driver take any new voter's
	// acknowledgement as one of the page in flight, whatever page it
	// names: a late or duplicated acknowledgement of an earlier page
	// counts for a page that voter may never have received.
	StalePageAck bool
	// AddedGroupTakesTable: a group added to a running fleet is handed
	// its share of the table at once (the target set to the new count
	// and every partition the table puts there published to it), with
	// no move: no fence, no copy.
	AddedGroupTakesTable bool
	// UncheckedAddGroup: a node adds a group to the fleet under
	// whatever number it is asked for, taking it as the next: a request
	// out of turn (or for a number another founder holds) is accepted.
	UncheckedAddGroup bool
	// UnattestedAdmin: a node takes an admin act (a join, a removal, a
	// resize, an added group) without checking its attestation: anyone
	// who can reach a node can change the cluster.
	UnattestedAdmin bool
	// AnyVersionAdmin: a node takes an admin act whatever version of
	// what it changes the act was attested against (a resize over the
	// directory it holds, a join or a removal at any membership index):
	// one captured and sent again after a later change undoes it.
	AnyVersionAdmin bool
	// EarlyAdminAnswer: a node answers a join or a removal done as soon
	// as it has proposed it, before it has applied it: an operator told
	// so acts on a change the group may still lose.
	EarlyAdminAnswer bool
	// SilentAdminRefusal: a node that refuses an admin act (a join, a
	// removal, a resize, an added group) before proposing it never
	// answers: its asker waits until it gives up, told nothing.
	SilentAdminRefusal bool
	// UnconfirmedMember: a node asked to join a node it lists answers nil
	// at once, by its own applied membership, which may be far behind: a
	// node removed since is told it is in.
	UnconfirmedMember bool
	// ProposalTimeVersion: a membership change asked for at a membership
	// index applies whatever membership is in force by then: the index
	// is checked only where the change was asked, which may be a member
	// far behind.
	ProposalTimeVersion bool
	// UnpublishedMembership: no node of a fleet publishes its group's
	// new memberships to the directory: callers from other groups route
	// by the group's founding voters and m_idx for good.
	UnpublishedMembership bool
	// SilentBusy: a proxyOnce call refused at a bound (calls in flight,
	// losers waiting on one signature) gets no answer: its caller waits
	// until it gives up instead of a 503 at once.
	SilentBusy bool
	// LoserRefused: a proxyOnce call that loses its claim is answered
	// "unavailable" at once instead of waiting for the winner's
	// recording: safe, and answered, but no caller but the winner is
	// ever served a new signature.
	LoserRefused bool
	// UnconfirmedClaim: a proxyOnce owner grants claims without first
	// confirming with a quorum that its membership is current, and while
	// isolated (D-17).
	UnconfirmedClaim bool
	// ModuloOwner: a flow's owner is the voter its hash picks modulo the
	// voters' count, not the top of its rendezvous placement: every node
	// agrees on it, but a membership change moves flows between voters
	// that stay, and the owner pushes to successors that rank after
	// another voter.
	ModuloOwner bool
	// SilentRefusal: an owner that refuses a request (fenced, not the
	// owner, isolated, not adopted...) sends no answer; proxyOnce's claim
	// owner too. Nothing applied, so no state checker minds: the caller
	// waits out its deadline and reports an unknown outcome where a 503
	// was due at once.
	SilentRefusal bool
	// NoAdoption: a new owner serves before adopting.
	NoAdoption bool
	// OnePush: an owner pushes a write to its first successor only. The
	// second's copy lags until anti-entropy repairs it, seconds later,
	// so every state checker still passes: a local read there is many
	// pushes behind.
	OnePush bool
	// LenientFrames: a flow frame that fails to decode (cut short, or
	// with bytes after its end) is taken as far as it was read instead
	// of refused whole: a request, a copy or an answer nobody sent.
	LenientFrames bool
	// NoAntiEntropy: replicas never pull.
	NoAntiEntropy bool
	// KeyCounter: a write's counter starts from the key's previous tuple
	// or the incarnation's floor, not from every counter the incarnation
	// issued: a key written again after its flow left the shard (evicted,
	// or purged after its grace) gets the tuple its earlier write had.
	KeyCounter bool
	// NoRelease: a node keeps its copies of the flows its group gave
	// another group: a move's last step never comes, and its disk fills
	// with partitions it no longer serves.
	NoRelease bool
	// RepairToDisk: a copy that arrives to repair another (an
	// anti-entropy answer, an adoption's answer) is written async
	// whatever its mode: a none flow's repaired copy reaches the disk,
	// and a restart brings it back though every copy was down.
	RepairToDisk bool
	// BoundPlusOne: the KV takes a Put whose value is one byte past its
	// bound, on the proposer and in apply alike.
	BoundPlusOne bool
	// EmptyBranchMalformed: the KV's apply refuses, as malformed, a txn
	// whose failure branch is empty, as a decoder that took an empty
	// list for one cut short would: every compare-and-set is refused.
	EmptyBranchMalformed bool
	// LateSendRefusal: a proxyOnce request the network refuses at once
	// is left to its deadline: the caller learns of it late, as an
	// unknown outcome, though it certainly did not apply.
	LateSendRefusal bool
	// StopForgetsLocal: a store's Stop answers the calls it sent to
	// owners but not those it serves itself: an orderly stop leaves
	// their callers to their deadlines, as a crash would.
	StopForgetsLocal bool
	// StopForgetsWaiters: the claim service's Stop answers the calls in
	// flight but not the losers waiting on a recording, which learn of
	// it only at their next poll: never, in a process that exits.
	StopForgetsWaiters bool
	// AENoDigests: a replica pulls without its digests, so each owner
	// answers every round with every flow it holds placed on the replica.
	// Merging a copy already held changes nothing: every state checker
	// passes while a quiet cluster sends its data round after round.
	AENoDigests bool
	// NoAdoptWait: a new owner that cannot reach the previous owner adopts
	// from the replicas at once, trusting D-17 alone to have stopped the
	// previous owner.
	NoAdoptWait bool
	// AdoptRefusedCopy makes a new owner serve a flow whose re-stamped
	// copy the shard refused (the writer's queue full), claiming it
	// served it at this m_idx, and count an answer to its adoption as
	// heard when the shard refused the copy it carried (stopped or
	// failed): on the next request it takes its own claim for the
	// authority and serves tuples a copy it never heard from may
	// outrank, or the previous owner's answer completes the adoption at
	// once with its copy missing.
	AdoptRefusedCopy bool
	// RefusedAnswer makes a new owner's shard refuse an adoption
	// answer's copy while its writer's queue is full (Put, not
	// PutReplica): the adoption asks again, and a source removed and
	// stopped meanwhile never answers again, so a write only it held is
	// lost.
	RefusedAnswer bool
	// NoPrune: a replica merges the owner's anti-entropy copy but keeps
	// the keys the owner does not hold, so what a lossy adoption left
	// behind stays on the replica forever.
	NoPrune bool
	// StaleAdoption: a node keeps its adoption of a flow when it stops
	// owning it, and takes any adoption, however old, as leave to serve:
	// when ownership comes back to it, it serves its old copy without
	// asking the owner it had in between.
	StaleAdoption bool
	// WaitForRemoved: an adoption that has waited out AdoptWait still
	// waits for at least one copy, even when every node it asked has left
	// the membership. A voter left alone by removals asks only the removed
	// node, which never answers (stopped, or dropped by the transport as a
	// stranger), and answers 503 not-adopted for every flow it did not
	// already serve, for ever.
	WaitForRemoved bool
	// NoFloorWait: a read that hides an expired entry answers before the
	// clock floor on disk covers the expiry, so a crash and a clock
	// stepped back can show the entry again.
	NoFloorWait bool
	// ReadExpired: a read shows an entry past its expiry, as if only the
	// purge (after the flow's grace) took expired entries away.
	ReadExpired bool
	// NoReadopt: a restarted owner serves the flows its disk says it
	// served at this membership without pulling from their successors, so
	// the async writes its crash lost stay lost.
	NoReadopt bool

	// --- core/shard: the flow shard's writer, cap and expiry.

	// AckBeforeSync: WhenDurable answers at once, so a sync write is
	// acknowledged before its fsync.
	AckBeforeSync bool
	// AckAtSubmit: the writer counts a batch durable when it hands it to
	// the disk rather than when the disk says its fsync completed, so a
	// sync write is acknowledged while its fsync is still in flight.
	AckAtSubmit bool
	// WaitRefused: a wait the writer cannot answer at once (a sync
	// write's fsync, a clock floor not yet on disk) is answered with
	// ErrClosed, as if the writer had stopped: the caller answers that the
	// disk failed while the disk is well, and the node lives on.
	WaitRefused bool
	// UntimedWaits: the writer holds a durability wait for as long as
	// the disk takes, MaxWait ignored: on a stalled disk an owner holds
	// its sync requests past their callers' deadlines.
	UntimedWaits bool
	// EarlyCut: the writer cuts a durability wait at a tenth of MaxWait:
	// the owner answers that its disk was slow while the disk is well.
	EarlyCut bool
	// AbandonSlowAdoption: an adoption whose fsync the shard's MaxWait
	// cut gives up, though it may have re-stamped the flow: the next one
	// takes the previous owner's late answer below those tuples.
	AbandonSlowAdoption bool
	// RefusedPush: a replica whose writer's queue is full refuses the
	// owner's push, as it refuses a client's write, though the owner has
	// answered its client and counts this copy among the write's holders.
	RefusedPush bool
	// ForgetBehind: the writer takes a flow behind off its list when the
	// queue has room without queuing its unit: a successor's copy of a
	// push that met a full queue stays in its memory only, and a crash of
	// that successor, however long after, takes it.
	ForgetBehind bool
	// CloseUnsettled: Close returns without waiting for the writer's last
	// commit, so an orderly shutdown exits with it unwritten: what the
	// node took in its last fsync interval is lost, as in a crash.
	CloseUnsettled bool
	// EvictKeys: over the cap, the writer evicts one key of the least
	// recently used flow instead of the whole flow.
	EvictKeys bool
	// DiskCountDrift: dropping a flow the backend holds leaves the count
	// of such flows as it was, so the shard's bookkeeping drifts from its
	// flows. Nothing a client sees changes (a count too high only keeps
	// the clock floor's fsyncs coming); the invariants the simulator
	// checks between a node's steps see it.
	DiskCountDrift bool
	// NoExpiryClamp: NowMs is the node's clock as it is, so a clock
	// stepped back shows entries that had expired again.
	NoExpiryClamp bool
	// NoFloorRecovery: recovery ignores the clock floor on disk, so a node
	// that comes back with its clock behind starts its clamp there and
	// shows entries that had expired.
	NoFloorRecovery bool
	// RetryFailedSync: a failed write or fsync is taken as passing
	// trouble: the writer keeps its waiters and tries again at its next
	// turn, instead of stopping the node. After a failed fsync the disk
	// may have dropped what it held, and the retry reports success for
	// bytes that are gone.
	RetryFailedSync bool

	// --- scenarios/scenario_selftest.go: the toy protocol that checks the
	// simulator itself.

	// SelftestAckBeforeSync acknowledges a put before its fsync completes.
	SelftestAckBeforeSync bool
	// SelftestNoGossip never gossips: records stay where they were written.
	SelftestNoGossip bool
	// SelftestTrustTail makes replay ignore checksums: a torn record is
	// read as data.
	SelftestTrustTail bool

	// --- core/proxyonce: the claim protocol.

	// NoClaim skips the claim: a node that misses the recording calls
	// upstream at once, as every other node that missed it does.
	NoClaim bool
	// RecordBeforeCommit has the owner answer a recording, and end its
	// claim, when it proposes the entry rather than when it commits: a
	// request arriving in between finds neither a claim nor a recording.
	RecordBeforeCommit bool
	// StaleToken lets any token record, a lapsed or older one included,
	// and the recording overwrite what is there.
	StaleToken bool
	// OwnRecordRefused makes an owner answer a recording that finds its
	// key already recorded as having lost to another, even when what is
	// recorded is this very answer (a duplicate of the recording's frame
	// got there first): the caller is told its recording failed though
	// its answer is the one in place.
	OwnRecordRefused bool

	// --- imposter: stateful stubs over the flow store.

	// GateLocalRead has a scenario gate read this node's copy of the flow
	// instead of asking its owner: a replica one push behind, or a node
	// cut off from the owner, answers from a state the flow has left.
	GateLocalRead bool
	// ForwardFallback answers a request whose forward to the flow's owner
	// failed here, from this node's copy, instead of refusing it (503):
	// the fallback that forks a flow on a transient fault.
	ForwardFallback bool
	// LocalState has an imposter's injected JavaScript keep its state on
	// the member that runs it, as one mountebank process does, instead of
	// reading it from the cluster and writing it back with a
	// compare-and-set: each member counts on its own.
	LocalState bool

	// --- one server: the cluster behind one address (core/rollout,
	// imposter).

	// AnswerBeforeReconciled has a member confirm an admin change's
	// rollout once it has applied the change, not once its shell serves
	// it: the change is answered while a member still serves the old
	// definition, or has not bound the new port.
	AnswerBeforeReconciled bool
	// LocalRecordsOnly answers a recorded-requests read from the asked
	// member's own records alone, as if it were the only server.
	LocalRecordsOnly bool
	// LocalCycle advances a stub's response cycle on the member that took
	// the request instead of at the cycle's owner: every member runs its
	// own cycle.
	LocalCycle bool
}

// Bug is one line of the table: the bug's name, what it breaks in a few
// words, and its switch.
type Bug struct {
	Name, Summary string
	on            func(*Set) *bool
}

// Table is every planted bug, in the order of Set's fields.
var Table = []Bug{
	{"no-addressing", "a request opens at any node, not only the one it is addressed to", func(s *Set) *bool { return &s.NoAddressing }},
	{"bare-replies", "replies travel in the clear and are accepted without a seal or a request they answer", func(s *Set) *bool { return &s.BareReplies }},
	{"no-clock-clamp", "apply trusts a command's AtMs as is: applied time can go back", func(s *Set) *bool { return &s.NoClockClamp }},
	{"value-guard", "transactions compare values instead of versions (A → B → A passes)", func(s *Set) *bool { return &s.ValueGuard }},
	{"release-any", "any holder may release a lease", func(s *Set) *bool { return &s.ReleaseAny }},
	{"expire-late", "a lease lapses only after its deadline, not at it: a renewal at the deadline succeeds", func(s *Set) *bool { return &s.ExpireLate }},
	{"stopped-lease-clock", "applied time stops at the first command: no lease ever lapses", func(s *Set) *bool { return &s.StoppedLeaseClock }},
	{"release-keeps", "a release is answered as done and the lease stays held", func(s *Set) *bool { return &s.ReleaseKeeps }},
	{"journal-trust-tail", "journal replay accepts a torn record", func(s *Set) *bool { return &s.JournalTrustTail }},
	{"tear-damage", "journal replay cuts a damaged record and every record after it as a torn tail instead of refusing it", func(s *Set) *bool { return &s.RecfileTearDamage }},
	{"no-hole-check", "journal replay takes a hole a crash left in its torn tail for damage, and refuses to boot", func(s *Set) *bool { return &s.RecfileNoHoleCheck }},
	{"body-vouches", "journal replay believes a record header whose checksum fails when its body checks out", func(s *Set) *bool { return &s.RecfileBodyVouches }},
	{"promote-early", "a learner is promoted to voter as soon as it joins, before it has caught up", func(s *Set) *bool { return &s.PromoteEarly }},
	{"no-vote-sync", "a hard state that changes only the term and vote is written without an fsync", func(s *Set) *bool { return &s.NoVoteSync }},
	{"ack-before-append", "a raft append's responses (votes, append acknowledgements) go out when it is staged, before its journal write completes", func(s *Set) *bool { return &s.AckBeforeAppend }},
	{"tick-window", "the isolation window (D-17) is counted in ticks, which a loop held up by fsyncs runs late", func(s *Set) *bool { return &s.TickWindow }},
	{"stale-membership", "a node whose log holds a committed membership change it has not applied counts voters and owners by the membership before it", func(s *Set) *bool { return &s.StaleMembership }},
	{"stale-snapshot", "a leader sends its last written snapshot while the one carrying its newest membership waits for its disk: a newcomer refuses it, and the two trade it in a storm", func(s *Set) *bool { return &s.StaleSnapshot }},
	{"unchecked-snapshot", "a snapshot from a peer is installed without its data read first: one that does not decode is written to the journal and halts the node, at every boot", func(s *Set) *bool { return &s.UncheckedSnapshot }},
	{"remove-last-voter", "a membership change that leaves no voter is proposed and applied: etcd raft panics on every member, and on every restart", func(s *Set) *bool { return &s.RemoveLastVoter }},
	{"silent-timeout", "a proposal or read whose ProposalTimeout passes is forgotten without an answer: the caller waits out its own deadline", func(s *Set) *bool { return &s.SilentTimeout }},
	{"send-before-durable", "the leader of two sends the voter it removes entries before writing them itself: after a crash the removed voter's log is the longer and the survivor may never elect", func(s *Set) *bool { return &s.SendBeforeDurable }},
	{"silent-conf-busy", "a membership change refused at admission (too many calls in flight) is dropped without an answer: the operator waits out its own deadline", func(s *Set) *bool { return &s.SilentConfBusy }},
	{"lead-own-removal", "a node elected leader of two with its own removal waiting in its log leads it through instead of handing leadership over: the survivor may never elect", func(s *Set) *bool { return &s.LeadOwnRemoval }},
	{"remove-leader-of-two", "the leader of two voters appends its own removal instead of handing leadership over first: the survivor may never elect", func(s *Set) *bool { return &s.RemoveLeaderOfTwo }},
	{"no-fence", "the owner skips its membership-index checks", func(s *Set) *bool { return &s.NoFence }},
	{"no-d17", "an owner serves while isolated", func(s *Set) *bool { return &s.NoD17 }},
	{"unconfirmed-owner", "an owner back in contact with a leader serves before confirming its membership is current", func(s *Set) *bool { return &s.UnconfirmedOwner }},
	{"local-fallback", "a request the owner cannot be sent is served from the local copy", func(s *Set) *bool { return &s.LocalFallback }},
	{"group-blind", "a node takes its raft group for the whole fleet: another group's flows are served in its own group", func(s *Set) *bool { return &s.GroupBlind }},
	{"group-claims", "in a fleet, proxyOnce's claims and recordings live in each data group, not the control group: a signature is recorded once per group", func(s *Set) *bool { return &s.GroupClaims }},
	{"keep-removed-follower", "a node removed from its data group stays a member (a voter) of the fleet's control group", func(s *Set) *bool { return &s.KeepRemovedFollower }},
	{"route-stale-epoch", "an owner serves a partition by its directory's epoch after its group's log fenced a move of it", func(s *Set) *bool { return &s.RouteStaleEpoch }},
	{"move-before-fence", "a group answers a partition move's copy before its own log fences the partition", func(s *Set) *bool { return &s.MoveBeforeFence }},
	{"publish-before-copy", "a partition move publishes the new group as holder as soon as it is fenced, without copying the partition there", func(s *Set) *bool { return &s.PublishBeforeCopy }},
	{"stale-page-ack", "a move's driver counts a new voter's acknowledgement of any page as one of the page in flight", func(s *Set) *bool { return &s.StalePageAck }},
	{"added-group-takes-table", "a group added to a running fleet is handed its share of the table at once, with no fence and no copy", func(s *Set) *bool { return &s.AddedGroupTakesTable }},
	{"unchecked-add-group", "a node adds a group to the fleet under whatever number it is asked for, out of turn too", func(s *Set) *bool { return &s.UncheckedAddGroup }},
	{"unattested-admin", "a node takes an admin act (a join, a removal, a resize, an added group) without checking its attestation", func(s *Set) *bool { return &s.UnattestedAdmin }},
	{"any-version-admin", "a node takes an admin act attested against any version of what it changes (a replayed resize undoes a later one, a replayed join adds a removed node back)", func(s *Set) *bool { return &s.AnyVersionAdmin }},
	{"early-admin-answer", "a node answers a join or a removal done once it has proposed it, before it has applied it", func(s *Set) *bool { return &s.EarlyAdminAnswer }},
	{"silent-admin-refusal", "a node that refuses an admin act before proposing it never answers", func(s *Set) *bool { return &s.SilentAdminRefusal }},
	{"unconfirmed-member", "a node asked to join a node it lists answers nil by its own applied membership, unconfirmed with a quorum", func(s *Set) *bool { return &s.UnconfirmedMember }},
	{"proposal-time-version", "a membership change asked for at a membership index applies whatever membership is in force when it commits", func(s *Set) *bool { return &s.ProposalTimeVersion }},
	{"unpublished-membership", "no node publishes its group's new memberships to the fleet's directory", func(s *Set) *bool { return &s.UnpublishedMembership }},
	{"silent-busy", "a proxyOnce call refused at a bound gets no answer at all", func(s *Set) *bool { return &s.SilentBusy }},
	{"loser-refused", "a proxyOnce call that loses its claim gets a 503 at once instead of the winner's recording", func(s *Set) *bool { return &s.LoserRefused }},
	{"unconfirmed-claim", "a proxyOnce owner grants claims without confirming its membership is current, and while isolated", func(s *Set) *bool { return &s.UnconfirmedClaim }},
	{"modulo-owner", "a flow's owner is its hash modulo the voter count, not the top of its rendezvous placement: membership changes move flows between voters that stay", func(s *Set) *bool { return &s.ModuloOwner }},
	{"silent-refusal", "an owner that refuses a request sends no answer: its caller times out instead of getting a 503 at once", func(s *Set) *bool { return &s.SilentRefusal }},
	{"lenient-frames", "a flow frame that does not decode is taken as far as it was read, not refused whole", func(s *Set) *bool { return &s.LenientFrames }},
	{"no-adoption", "a new owner serves before adopting", func(s *Set) *bool { return &s.NoAdoption }},
	{"one-push", "an owner pushes a write to its first successor only, leaving the second to anti-entropy", func(s *Set) *bool { return &s.OnePush }},
	{"no-anti-entropy", "replicas never pull", func(s *Set) *bool { return &s.NoAntiEntropy }},
	{"key-counter", "a write's counter starts from the key's previous tuple or the floor: a key written again after its flow left the shard reuses a tuple", func(s *Set) *bool { return &s.KeyCounter }},
	{"bound-plus-one", "the KV takes a value one byte past its bound", func(s *Set) *bool { return &s.BoundPlusOne }},
	{"empty-branch-malformed", "the KV refuses a txn with an empty failure branch as malformed: every compare-and-set is refused", func(s *Set) *bool { return &s.EmptyBranchMalformed }},
	{"late-send-refusal", "a proxyOnce request the network refused is answered by its deadline, an unknown outcome, instead of at once", func(s *Set) *bool { return &s.LateSendRefusal }},
	{"stop-forgets-local", "an orderly stop answers the calls sent to owners but not those the node serves itself", func(s *Set) *bool { return &s.StopForgetsLocal }},
	{"stop-forgets-waiters", "an orderly stop answers the proxyOnce calls in flight but not the losers waiting on a recording", func(s *Set) *bool { return &s.StopForgetsWaiters }},
	{"repair-to-disk", "a none flow's copy that arrives to repair another is written to disk: a whole-cluster restart brings a memory-only flow back", func(s *Set) *bool { return &s.RepairToDisk }},
	{"no-release", "a node keeps its copies of the flows its group gave another group, forever", func(s *Set) *bool { return &s.NoRelease }},
	{"ae-no-digests", "a replica pulls without its digests: its owners answer every round with all their flows placed on it", func(s *Set) *bool { return &s.AENoDigests }},
	{"no-adopt-wait", "a new owner adopts without waiting out an unreachable previous owner's isolation window (D-17 alone)", func(s *Set) *bool { return &s.NoAdoptWait }},
	{"adopt-refused-copy", "a new owner serves what its full shard writer refused to re-stamp, and counts an adoption answer whose copy its shard refused", func(s *Set) *bool { return &s.AdoptRefusedCopy }},
	{"refused-answer", "a new owner's full shard writer refuses an adoption answer's copy, and a source stopped meanwhile never gives it again", func(s *Set) *bool { return &s.RefusedAnswer }},
	{"no-prune", "a replica keeps keys its owner's anti-entropy copy no longer holds", func(s *Set) *bool { return &s.NoPrune }},
	{"stale-adoption", "a node that owned a flow before keeps its old adoption, and serves its old copy when ownership comes back", func(s *Set) *bool { return &s.StaleAdoption }},
	{"wait-for-removed", "an adoption past AdoptWait still waits for a copy when every node it asked was removed: a last voter never adopts", func(s *Set) *bool { return &s.WaitForRemoved }},
	{"no-floor-wait", "a read that hides an expired entry answers before the clock floor on disk covers the expiry", func(s *Set) *bool { return &s.NoFloorWait }},
	{"read-expired", "a read shows an entry past its expiry", func(s *Set) *bool { return &s.ReadExpired }},
	{"no-readopt", "a restarted owner serves its own disk without pulling from its successors", func(s *Set) *bool { return &s.NoReadopt }},
	{"ack-before-sync", "sync mode acknowledges a write before its fsync", func(s *Set) *bool { return &s.AckBeforeSync }},
	{"ack-at-submit", "the shard's writer counts a batch durable when it hands it to the disk, before its fsync completes", func(s *Set) *bool { return &s.AckAtSubmit }},
	{"wait-refused", "the shard's writer answers a wait it cannot answer at once as if it had stopped: a read or sync write is refused as a disk failure on a healthy disk", func(s *Set) *bool { return &s.WaitRefused }},
	{"untimed-waits", "the shard's writer holds a durability wait for as long as the disk takes: on a stalled disk an owner leaves its sync requests unanswered past their deadlines", func(s *Set) *bool { return &s.UntimedWaits }},
	{"early-cut", "the shard's writer cuts a durability wait at a tenth of MaxWait: an owner answers slow-disk on a healthy disk", func(s *Set) *bool { return &s.EarlyCut }},
	{"abandon-slow-adoption", "an adoption whose fsync outlasts the shard's MaxWait gives up after re-stamping the flow: the next adoption drops the previous owner's copy under the new tuples", func(s *Set) *bool { return &s.AbandonSlowAdoption }},
	{"refused-push", "a replica whose shard writer's queue is full refuses the owner's push: an acknowledged async write has one copy fewer than its promise counts", func(s *Set) *bool { return &s.RefusedPush }},
	{"forget-behind", "a successor's shard writer never writes a push that met its full queue: the copy lives in memory only, and a crash of that successor takes it however long after", func(s *Set) *bool { return &s.ForgetBehind }},
	{"close-unsettled", "an orderly shutdown's Close does not wait for the shard writer's last commit: what the node took just before it is lost, as in a crash", func(s *Set) *bool { return &s.CloseUnsettled }},
	{"disk-count-drift", "dropping a flow the disk holds leaves the shard's count of such flows as it was", func(s *Set) *bool { return &s.DiskCountDrift }},
	{"evict-keys", "the flow cap evicts single keys instead of whole flows", func(s *Set) *bool { return &s.EvictKeys }},
	{"no-expiry-clamp", "expiry reads the node's clock unclamped, so a step back shows expired entries again", func(s *Set) *bool { return &s.NoExpiryClamp }},
	{"no-floor-recovery", "a restarted shard ignores the clock floor it recorded, so its clamp starts from a clock stepped back", func(s *Set) *bool { return &s.NoFloorRecovery }},
	{"retry-failed-sync", "the shard's writer retries a failed fsync and carries on instead of stopping the node", func(s *Set) *bool { return &s.RetryFailedSync }},
	{"selftest-ack-before-sync", "acknowledge a put before its fsync completes", func(s *Set) *bool { return &s.SelftestAckBeforeSync }},
	{"selftest-no-gossip", "never gossip: records stay where they were written", func(s *Set) *bool { return &s.SelftestNoGossip }},
	{"selftest-trust-tail", "replay ignores checksums: a torn record is read as data", func(s *Set) *bool { return &s.SelftestTrustTail }},
	{"no-claim", "proxyOnce calls upstream without a claim: every node that misses the recording calls it", func(s *Set) *bool { return &s.NoClaim }},
	{"record-before-commit", "the owner answers a recording, and ends its claim, before the raft entry commits", func(s *Set) *bool { return &s.RecordBeforeCommit }},
	{"own-record-refused", "an owner answers a duplicated recording as lost to another, though the answer in place is its own", func(s *Set) *bool { return &s.OwnRecordRefused }},
	{"stale-token", "a lapsed or older claim token may still record, over what is recorded", func(s *Set) *bool { return &s.StaleToken }},
	{"gate-local-read", "a scenario gate reads this node's copy of the flow, not the owner's", func(s *Set) *bool { return &s.GateLocalRead }},
	{"forward-fallback", "a request whose forward to the owner failed is answered here from the local copy", func(s *Set) *bool { return &s.ForwardFallback }},
	{"local-state", "injected JavaScript keeps its state on the member that runs it, not the cluster's", func(s *Set) *bool { return &s.LocalState }},
	{"answer-before-reconciled", "a member confirms an admin change once it applied it, before its imposters serve it", func(s *Set) *bool { return &s.AnswerBeforeReconciled }},
	{"local-records-only", "recorded requests are read from the asked member alone", func(s *Set) *bool { return &s.LocalRecordsOnly }},
	{"local-cycle", "a response cycle advances on the member that took the request, not at its owner", func(s *Set) *bool { return &s.LocalCycle }},
}

// Lookup returns the bug called name.
func Lookup(name string) (Bug, bool) {
	for _, b := range Table {
		if b.Name == name {
			return b, true
		}
	}
	return Bug{}, false
}

// Names returns the name of every bug, sorted.
func Names() []string {
	names := make([]string, len(Table))
	for i, b := range Table {
		names[i] = b.Name
	}
	sort.Strings(names)
	return names
}

// Enable switches on the bug called name.
func (s *Set) Enable(name string) error {
	b, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("bugs: unknown bug %q (known: %v)", name, Names())
	}
	*b.on(s) = true
	return nil
}

// Of returns the set with the named bugs switched on.
func Of(names ...string) (Set, error) {
	var s Set
	for _, name := range names {
		if err := s.Enable(name); err != nil {
			return Set{}, err
		}
	}
	return s, nil
}

// Enabled returns the names of the bugs switched on, sorted.
func (s Set) Enabled() []string {
	var on []string
	for _, b := range Table {
		if *b.on(&s) {
			on = append(on, b.Name)
		}
	}
	sort.Strings(on)
	return on
}
