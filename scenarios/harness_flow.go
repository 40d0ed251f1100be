package scenarios

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/proxyonce"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// flowCheckers are what finishFlows judges a flow cluster by, besides its
// consensus checkers: every flow's history (flow-linearizability), the
// isolated-owner rule (d17), the bridge's promises, replica convergence.
var flowCheckers = plus(clusterCheckers, "flow-linearizability", "d17", "known-membership", "placement", "replica-push", "push-taken", "bridge", "replica-convergence", "anti-entropy-quiet", "anti-entropy-bound", "tuple-unique", "request-answered", "disk-answer")

// flowHarness drives the flow store on top of a raftCluster: clients
// pinned to nodes doing flow operations on a few hot flows and many cold
// ones, the simulator's record of who served each operation and which
// handover frames were lost, and the flow checkers.
type flowHarness struct {
	*raftCluster
	stalls      *rand.Rand // draws of stallDuring
	ownedStarts int        // startOwnedClients calls, naming their clients
	clientBase  int        // the first flow client's id (a fleet's groups number theirs apart)
	flowHist    *linearizability.History
	deadline    time.Duration
	aeEvery     time.Duration
	aeMax       int           // the flows one anti-entropy answer may carry
	calm        time.Duration // when the faults stop
	hold        floorHold     // clients kept past calm until the run did enough (runUnderChaos, imposter-scenarios)
	perNode     int           // clients pinned to each node
	allFlows    []string

	// While a client call runs on a node (synchronously, inside Do),
	// calling is that node, callOp the history op (-1: none), arriveBy
	// the latest instant any frame it sent can arrive, and forwarded
	// whether it sent the request on to an owner.
	// stopsWhileAdopting aims orderly restarts at nodes re-adopting
	// (Chaos.AimStopsWhileAdopting): flow-ops sets it.
	stopsWhileAdopting bool
	// waiting counts, per node, the clients' calls through it that
	// outlived the call itself and are not yet answered (callFlowOp).
	waiting   map[dial.NodeID]int
	calling   dial.NodeID
	callOp    int
	arriveBy  time.Duration
	forwarded bool
	// takenAt is when the node took the last client call: its local
	// time, later than the call while it is busy in fsyncs.
	takenAt time.Duration
	// waited is, per history op, how long its answer waited for the
	// answering node's fsyncs (checker.Bridge).
	waited map[int]time.Duration
	// opFrames maps a request frame in flight (by its first byte's
	// address: the network hands watchers the sender's own slice) to its
	// history op; applied records, per op, the node that first received
	// it and when: where and when an owner applies a request.
	opFrames map[*byte]opFrame
	applied  map[int]checker.FlowService
	services []checker.FlowService
	pushes   []checker.Push // every push an owner of this group sent, by the record
	taken    checker.PushesTaken
	// replicaDisk, when a scenario sets it, records what each push left
	// in its node's memory, for replica-disk to judge at restarts.
	replicaDisk *checker.ReplicaDisk
	tuples      checker.Tuples // every write's tuple, from those pushes
	lastPush    *byte          // the first byte of the last push frame tuples read
	// writes are the writes that changed a flow and were answered done,
	// where the record shows they were served (replica-push).
	writes []checker.ServedWrite
	// contacts are the raft frames the network delivered, for the D-17
	// checker.
	contacts []checker.Contact
	// shown are the commit indexes the group's leaders' frames carried
	// as they were sent (known-membership): each a rise on the last one
	// its node showed in the incarnation shownLast names.
	shown     []checker.CommitShown
	shownLast map[dial.NodeID][2]uint64 // incarnation, commit
	// confStalls aims disk stalls at leaders sending a membership change
	// (aimConfStalls); nil when the run does not.
	confStalls *confStalls
	// lostHandovers are the adoption frames the network lost; handovers
	// the adoption answers it delivered.
	lostHandovers []lostFrame
	handovers     []handover
	firstAsk      map[adoptionKey]time.Duration
	cuts          []checker.FlowCut
	// asks and replies are the requests for an owner the group's nodes
	// took and the answers they sent (recordAnswers).
	asks    []checker.Ask
	replies []checker.Reply
	// aeAnswers are the anti-entropy answers the group's nodes sent, and
	// aeQuiet the reading of every copy at the start of the run's last
	// anti-entropy rounds (checker.AEQuiet).
	aeAnswers []checker.AEAnswer
	aeQuiet   *checker.AEQuiet
}

type lostFrame struct {
	flow     string
	from, to dial.NodeID
	at       time.Duration
}

// handover is an adoption answer the network delivered; asked is when
// the adopter first sent an ask of that adoption to anyone (the
// network's record of the adoption's start, at the latest).
type handover struct {
	flow                   string
	from, to               dial.NodeID
	sent, delivered, asked time.Duration
}

// adoptionKey names one adoption: its adopter (and the adopter's
// incarnation: ids start over on a restart), flow and id.
type adoptionKey struct {
	by   dial.NodeID
	inc  uint64
	flow string
	id   uint64
}

func startFlowCluster(c *raftCluster, cfg flow.Config) *flowHarness {
	h := &flowHarness{raftCluster: c, flowHist: linearizability.NewHistory(0), callOp: -1,
		opFrames: map[*byte]opFrame{}, firstAsk: map[adoptionKey]time.Duration{}, waited: map[int]time.Duration{}, applied: map[int]checker.FlowService{}}
	cfg2 := cfg
	c.timing.applyFlow(&cfg2)
	c.flowCfg = &cfg2
	h.deadline = cfg2.Deadline
	if h.deadline == 0 {
		h.deadline = 2 * time.Second
	}
	h.aeEvery = cfg2.AntiEntropy
	if h.aeEvery == 0 {
		h.aeEvery = 5 * time.Second
	}
	h.aeMax = cfg2.MaxAEFlows
	if h.aeMax == 0 {
		h.aeMax = flow.DefaultMaxAEFlows
	}
	c.nw.Watch(h.watch)
	c.nw.WatchTaken(h.pushTaken)
	c.garbleFrames()
	if c.place == nil {
		aimDiskStalls(c.run, c.nodes, c.faultsUntil) // a fleet aims at all its nodes at once (fleetSetup)
		h.aimConfStalls()                            // one group's: not yet a fleet's
	}
	if from := c.run.Duration - aeQuietRounds*h.aeEvery; from > 0 {
		h.k.At(from, sim.EvCheck, xxhash.Sum64String("anti-entropy-quiet"), h.readQuietStart)
	}
	return h
}

// aeQuietRounds is how many anti-entropy periods at the end of a run
// anti-entropy-quiet judges: each replica pulls at least twice in them
// (a pull comes every period, jittered by a quarter).
const aeQuietRounds = 3

// readQuietStart reads every voter's copies at the start of the run's
// last anti-entropy rounds, under the membership in force by the record.
func (h *flowHarness) readQuietStart() {
	now := h.k.Now()
	var in checker.MembershipChange
	for _, c := range h.memberships {
		if c.At <= now {
			in = c
		}
	}
	h.aeQuiet = checker.NewAEQuiet(now, in, h.held)
}

// held is what the simulator reads off id's store.
func (h *flowHarness) held(id dial.NodeID) checker.Held {
	n := h.byID[id]
	if n == nil {
		return checker.Held{}
	}
	out := checker.Held{Up: n.Up(), Incarnation: n.Incarnation()}
	s := h.flows[n.Name()]
	if !n.Up() || s == nil {
		out.Up = false
		return out
	}
	out.Flows = map[string]map[string]flow.Value{}
	for _, f := range s.Flows() {
		out.Flows[f] = s.Copy(f)
	}
	return out
}

// checkAEQuiet holds every anti-entropy answer to its bound
// (checker.AEAnswerBound), and the run's last anti-entropy rounds to the
// design's promise that a quiet pair of nodes exchanges digests, not
// data (checker.AEQuiet). A run shorter than those rounds is not judged
// quiet or not.
func (h *flowHarness) checkAEQuiet() {
	name := func(id dial.NodeID) string { return h.byID[id].Name() }
	at := checker.AEAnswerBound(h.run, h.aeAnswers, h.aeMax, name)
	h.k.Logf("anti-entropy-bound: %d of %d answers carried the bound's %d flows", at, len(h.aeAnswers), h.aeMax)
	if h.aeQuiet == nil {
		h.run.Undecided("anti-entropy-quiet", "the run is shorter than %d anti-entropy rounds", aeQuietRounds)
		return
	}
	n := h.aeQuiet.Judge(h.run, h.k.Now(), h.held, h.memberships, h.aeAnswers, h.aeEvery/2, name)
	h.k.Logf("anti-entropy-quiet: %d quiet pairs, %d answers in the run", n, len(h.aeAnswers))
}

// garbleFrames makes, in a third of the runs until the faults stop, one
// in forty plain flow and claim frames this group's nodes send leave cut
// short or with bytes after their end: garbleProposals' fault, for the
// frames nodes send each other directly. Neither format has an optional
// tail (core/flow's frame.go, core/proxyonce's decodeFrame), so every
// such frame must be refused whole, as if the network had lost it; a
// decoder that took what it could read of one would serve a request no
// client made, keep a copy no owner wrote, or grant a claim no one
// asked for, which the flow and proxyOnce checkers see. The network's
// record keeps what the sender meant beside what went on the wire
// (netsim.Sending.Meant): a node that answered is held to having
// answered, and a request that did not arrive whole is held to having
// no effect. Sealed frames are left alone (the envelope's tag refuses
// any garbled byte, which transport-adversary judges), and so is a
// cluster whose scenario promises a network that loses nothing
// (raftCluster.lossless). Its own stream.
func (c *raftCluster) garbleFrames() {
	r := c.k.Stream("faults/garble-frames")
	on := r.IntN(3) == 0 && !c.lossless
	c.run.Knob("garbled_frames", on)
	if !on {
		return
	}
	c.nw.RewriteIf(func(from, to dial.NodeID, frame []byte) []byte {
		if c.k.Now() >= c.faultsUntil || len(frame) < 2 || frame[0] != flow.FramePrefix && frame[0] != proxyonce.FramePrefix || c.byID[from] == nil || r.IntN(40) != 0 {
			return nil
		}
		var b []byte
		what := "cut short"
		if r.IntN(2) == 0 {
			// A quarter of the cuts fall within the frame's first three
			// bytes (its prefix, version or kind, out), which a cut
			// drawn over the whole length would almost never reach.
			cut := 1 + r.IntN(len(frame)-1)
			if r.IntN(4) == 0 {
				cut = 1 + r.IntN(min(3, len(frame)-1))
			}
			b = append([]byte(nil), frame[:cut]...)
		} else {
			b = append([]byte(nil), frame...)
			for range 1 + r.IntN(3) {
				b = append(b, byte(r.IntN(256)))
			}
			what = "with bytes after its end"
		}
		c.run.Did("garbled-frames", 1)
		c.k.Logf("garble a frame %s sends %s: %s", c.k.Machine(from).Name(), c.k.Machine(to).Name(), what)
		return b
	})
}

// watch reads the network's record for the flow checkers.
func (h *flowHarness) watch(s netsim.Sending) {
	// A delivered frame is taken by its node when the node is free: at
	// its local time, after the fsyncs it is still busy in.
	if h.byID[s.From] == nil && h.byID[s.To] == nil {
		return // between two nodes of another raft group of the fleet
	}
	frame := h.plain(s.Frame)
	var taken time.Duration
	if s.Fate == netsim.Delivered {
		taken = h.k.Machine(s.To).Local()
	}
	if s.Fate != netsim.Delivered && s.Fate != netsim.Lost && len(frame) > 0 && frame[0] == consensus.FramePrefix && h.byID[s.From] != nil {
		if peek, ok := consensus.PeekLeaderFrame(frame); ok {
			h.showCommit(s.From, peek.Commit)
			if peek.ConfAt != 0 && s.Fate == netsim.Sent {
				h.confSent(s.From, peek.ConfAt)
			}
		}
		return
	}
	if len(frame) > 0 && frame[0] != flow.FramePrefix && s.Fate == netsim.Delivered && h.byID[s.To] != nil {
		if info, err := consensus.DecodeFrame(frame); err == nil {
			h.contacts = append(h.contacts, checker.Contact{To: s.To, From: s.From, At: taken, FromLeader: info.FromLeader(), Ack: info.ToLeader()})
		}
		return
	}
	if len(frame) == 0 || frame[0] != flow.FramePrefix {
		return
	}
	// Decoded at most once, and only if a case below reads it. lazy is
	// what went on the wire, which is what a node can take; meant is what
	// the sender sent, which is what it did (they differ only where
	// garbleFrames garbled a plain frame).
	lazy := lazyFrame{frame: frame}
	meant := &lazy
	if s.Meant != nil {
		// Garbled on the wire: by the simulator's record no node can take
		// it, whatever a node's decoder makes of it.
		meant, lazy = &lazyFrame{frame: s.Meant}, lazyFrame{}
	}
	h.recordAnswers(s, &lazy, meant, taken)
	if s.Fate == netsim.Sent || s.Fate == netsim.Refused {
		if info, ok := meant.info(flow.FrameOpResp); ok && info.Refusal == "disk" && h.byID[s.From] != nil {
			h.checkDiskAnswer(h.byID[s.From], fmt.Sprintf("request %d of session %d", info.ID, info.Session))
		}
		if info, ok := meant.info(flow.FrameOpResp); ok && info.Refusal == "slow-disk" && h.byID[s.From] != nil {
			h.checkSlowAnswer(h.byID[s.From], fmt.Sprintf("request %d of session %d", info.ID, info.Session))
		}
		if info, ok := meant.info(flow.FrameAEResp); ok && h.byID[s.From] != nil {
			h.aeAnswers = append(h.aeAnswers, checker.AEAnswer{From: s.From, To: s.To, M: info.M, Flows: info.Flows, At: s.At})
		}
	}
	if s.Fate == netsim.Refused {
		// A push to a peer that is down, or over the link's bound: the
		// owner pushed, and the network refused it.
		if info, ok := meant.info(flow.FramePush); ok && h.byID[s.From] != nil {
			h.pushed(s, meant, info)
		}
		// An adoption's ask to a node that is down (a crash, or an
		// orderly stop that kept its copy on its disk), or its answer
		// to an adopter that is: the handover did not happen, as when
		// the wire loses the frame (imposter-scenarios seed 2091).
		if info, ok := meant.info(flow.FrameAdopt, flow.FrameAdoptResp); ok {
			h.noteAsk(s, meant)
			h.lostHandovers = append(h.lostHandovers, lostFrame{flow: info.Flow, from: s.From, to: s.To, at: h.k.Now()})
		}
		return
	}
	switch s.Fate {
	case netsim.Sent:
		if info, ok := meant.info(flow.FramePush); ok && h.byID[s.From] != nil {
			h.pushed(s, meant, info)
			return
		}
		h.noteAsk(s, meant)
		if s.From != h.calling {
			return
		}
		h.arriveBy = max(h.arriveBy, s.ArriveBy)
		if _, ok := meant.info(flow.FrameOp, flow.FrameGroupOp); ok {
			h.forwarded = true
			// A request that went on the wire garbled can take effect
			// nowhere: only a whole one is followed to its owner.
			if _, whole := lazy.info(flow.FrameOp, flow.FrameGroupOp); whole && h.callOp >= 0 {
				h.opFrames[&s.Frame[0]] = opFrame{op: h.callOp, copies: s.Copies}
			}
		}
	case netsim.Delivered:
		if of, ok := h.opFrames[&s.Frame[0]]; ok {
			h.frameFate(s)
			// Each copy of the request can take effect when it is taken,
			// which a busy owner does after its arrival.
			op := h.flowHist.Op(of.op)
			if op.Bounded && taken > op.Until {
				h.flowHist.Bound(of.op, taken)
			}
			if _, first := h.applied[of.op]; !first && op.Return == 0 {
				h.applied[of.op] = checker.FlowService{Flow: op.Key, Node: s.To, At: taken}
			}
			return
		}
		if info, ok := lazy.info(flow.FrameAdoptResp); ok {
			asked, ok := h.firstAsk[adoptionKey{s.To, h.byID[s.To].Incarnation(), info.Flow, info.ID}]
			if !ok {
				asked = s.At // an answer to no ask the network carried
			}
			h.handovers = append(h.handovers, handover{flow: info.Flow, from: s.From, to: s.To, sent: s.At, delivered: taken, asked: asked})
			return
		}
		if s.Meant == nil {
			return
		}
		// A garbled adoption frame arrives as good as lost.
		if info, ok := meant.info(flow.FrameAdopt, flow.FrameAdoptResp); ok {
			h.lostHandovers = append(h.lostHandovers, lostFrame{flow: info.Flow, from: s.From, to: s.To, at: h.k.Now()})
		}
	case netsim.Lost:
		if _, ok := h.opFrames[&s.Frame[0]]; ok {
			h.frameFate(s)
			return
		}
		if info, ok := meant.info(flow.FrameAdopt, flow.FrameAdoptResp); ok {
			h.lostHandovers = append(h.lostHandovers, lostFrame{flow: info.Flow, from: s.From, to: s.To, at: h.k.Now()})
		}
	}
}

// noteAsk records when an adoption first sent an ask, whatever became
// of it: the adoption's start, from which its AdoptWait runs.
func (h *flowHarness) noteAsk(s netsim.Sending, meant *lazyFrame) {
	if info, ok := meant.info(flow.FrameAdopt); ok {
		if key := (adoptionKey{s.From, h.byID[s.From].Incarnation(), info.Flow, info.ID}); h.firstAsk[key] == 0 {
			h.firstAsk[key] = s.At
		}
	}
}

// pushed records a push a node of the group sent (or the network
// refused): for replica-push, and its values for tuple-unique. An owner
// sends one encoding to both successors (the frame's bytes are shared),
// so the values are read once per write, not once per send.
func (h *flowHarness) pushed(s netsim.Sending, meant *lazyFrame, info flow.FrameInfo) {
	h.pushes = append(h.pushes, checker.Push{Flow: info.Flow, From: s.From, To: s.To, At: s.At})
	if first := &meant.frame[0]; first != h.lastPush {
		h.lastPush = first
		if entries, err := flow.PushEntries(meant.frame); err == nil {
			h.tuples.Push(h.run, s.From, s.At, info.Flow, entries, func(id dial.NodeID) string { return h.byID[id].Name() })
		}
	}
}

// pushTaken judges a push one of the group's nodes took, by its copy
// read in the same step (push-taken), only in runs whose frames are
// plain, as recordAnswers: the envelope may drop a delivered frame. And
// it records what the push left in the node's memory, for replica-disk.
func (h *flowHarness) pushTaken(s netsim.Sending) {
	to, from := h.byID[s.To], h.byID[s.From]
	if to == nil || from == nil || s.Meant != nil || !to.Up() || h.flows[to.Name()] == nil {
		return
	}
	frame := h.plain(s.Frame)
	lazy := lazyFrame{frame: frame}
	info, ok := lazy.info(flow.FramePush)
	if !ok {
		return
	}
	pushed, err := flow.PushEntries(frame)
	if err != nil {
		return
	}
	held := h.flows[to.Name()].Copy(info.Flow)
	if h.keys == nil {
		h.taken.Judge(h.run, checker.Push{Flow: info.Flow, From: s.From, To: s.To, At: s.At}, pushed, held, h.memberships,
			func(id dial.NodeID) string { return h.byID[id].Name() })
	}
	if h.replicaDisk != nil {
		// What the node holds of the push, however it got there: the
		// envelope may have dropped this copy of the frame.
		kept := map[string]flow.Value{}
		for k, v := range pushed { //fenceline:unordered fills a map
			if cur, ok := held[k]; ok && !cur.Tuple.Less(v.Tuple) {
				kept[k] = v
			}
		}
		h.replicaDisk.Took(s.To, info.Flow, kept, to.Local())
	}
}

// recordAnswers keeps the record request-answered judges: every request
// for an owner (op, group-op) one of the group's nodes took whole, and
// every answer (op-resp) one of them sent or tried to send, garbled on
// the wire or not. Only in runs whose frames are plain: the envelope may
// drop a frame the network delivered (a replay, a peer's old
// incarnation), and its request was never taken.
func (h *flowHarness) recordAnswers(s netsim.Sending, lazy, meant *lazyFrame, taken time.Duration) {
	if h.keys != nil {
		return
	}
	switch s.Fate {
	case netsim.Delivered:
		if h.byID[s.To] == nil || !h.byID[s.To].Up() {
			return
		}
		if info, ok := lazy.info(flow.FrameOp, flow.FrameGroupOp); ok {
			h.asks = append(h.asks, checker.Ask{From: s.From, To: s.To, Session: info.Session, ID: info.ID, Sent: s.At, Taken: taken})
		}
	case netsim.Sent, netsim.Refused:
		if h.byID[s.From] == nil {
			return
		}
		if info, ok := meant.info(flow.FrameOpResp); ok {
			h.replies = append(h.replies, checker.Reply{From: s.From, To: s.To, Session: info.Session, ID: info.ID, At: s.At})
		}
	}
}

// checkDiskAnswer holds a node that answers that its disk failed to
// stopping (checker disk-answer): a failed write or fsync halts a node in
// the step that sees it (fail-stop, core/halt), and an orderly shutdown
// closes the shard and stops the node in one step, so by the next event at
// the same instant the node is down. One that lives on refused a request
// no fault explains, on a disk that is well.
func (h *flowHarness) checkDiskAnswer(n *sim.Machine, what string) {
	inc, at := n.Incarnation(), h.k.Now()
	h.k.At(at, sim.EvCheck, xxhash.Sum64String("disk-answer "+n.Name()), func() {
		if n.Up() && n.Incarnation() == inc {
			h.run.Fail("disk-answer", "%s answered %s at %v that its disk failed, and lived on: a node whose write or fsync fails stops in that step", n.Name(), what, at)
		}
	})
}

// checkSlowAnswer holds a node that answers that its disk was slow
// (flow.ErrDiskSlow, the wire's slow-disk refusal: a durability wait the
// shard cut at MaxWait) to a stall that explains it (checker
// disk-answer): its disk's (sim.Disk.Stall) or its process's
// (sim.Machine.Stall), in the MaxWait before the answer and a tenth more
// for the clocks. Otherwise it refused a request, as an unknown outcome,
// on a disk that answers in milliseconds: a writer that let a wait sit
// (a commit not called for) hides behind the cut. Judged only in runs at
// the default MaxWaiters: at a small bound a wait is cut to make room,
// with no stall at all.
func (h *flowHarness) checkSlowAnswer(n *sim.Machine, what string) {
	if h.timing.bounds.maxWaiters != 0 {
		return
	}
	maxWait := max(h.deadline/4, 1)
	at := h.k.Now()
	from := at - maxWait - maxWait/10
	if n.Disk().StalledDuring(from, at) || n.FrozenDuring(from, at) {
		return
	}
	h.run.Fail("disk-answer", "%s answered %s at %v that its disk was slow, with neither its disk nor its process stalled since %v: a durability wait cut that no fault explains", n.Name(), what, at, from)
}

// checkAnswered holds every owner to answering each request it took
// within the caller's deadline, unless it, or the caller, went down.
func (h *flowHarness) checkAnswered() {
	if h.keys != nil {
		return
	}
	down := func(id dial.NodeID, from, to time.Duration) bool {
		crashed, _ := h.k.Machine(id).CrashedDuring(from, to)
		return crashed
	}
	checker.Answered(h.run, "request-answered", h.asks, h.replies, h.deadline, h.k.Now(), down,
		func(id dial.NodeID) string { return h.k.Machine(id).Name() })
}

// lazyFrame decodes a flow frame's head the first time it is asked for,
// and only if its kind is one the caller wants: a frame of another kind
// is passed over whether it would decode or not, so peeking at the kind
// first changes nothing but the cost.
type lazyFrame struct {
	frame   []byte
	decoded bool
	ok      bool
	head    flow.FrameInfo
}

func (l *lazyFrame) info(kinds ...string) (flow.FrameInfo, bool) {
	if k, ok := flow.PeekKind(l.frame); !ok || !slices.Contains(kinds, k) {
		return flow.FrameInfo{}, false
	}
	if !l.decoded {
		var err error
		l.head, err = flow.DecodeFrame(l.frame)
		l.decoded, l.ok = true, err == nil
	}
	return l.head, l.ok
}

// opFrame is a client's request on its way to an owner: its history op
// and how many of its copies the network has yet to deliver or lose.
type opFrame struct{ op, copies int }

// frameFate counts one copy of a request frame delivered or lost, and
// forgets the frame when none is left in flight.
func (h *flowHarness) frameFate(s netsim.Sending) {
	of := h.opFrames[&s.Frame[0]]
	if of.copies--; of.copies <= 0 {
		delete(h.opFrames, &s.Frame[0])
		return
	}
	h.opFrames[&s.Frame[0]] = of
}

// faultRecord is the simulator's record that FlowCuts reads.
type faultRecord struct{ h *flowHarness }

func (r faultRecord) Crashed(node dial.NodeID, from, to time.Duration) (bool, time.Duration) {
	return r.h.byID[node].LostUnsyncedDuring(from, to)
}

func (r faultRecord) Cut(a, b dial.NodeID, from, to time.Duration) bool {
	return r.h.nw.CutDuring(a, b, from, to)
}

// HandedOver counts an answer only if it reached the adopter before the
// adoption could have completed without it: an adoption may complete once
// AdoptWait has passed since it began (on the adopter's clock, which may
// run 0.1% fast), and an answer that comes later may be ignored by design,
// even if it comes before the adopter first serves the flow. Nor if the
// adopter crashed after it arrived and before to: the copy it adopted went
// with its memory (shrink-to-one seed 115: the survivor took the removed
// owner's copy, lost it in a crash, and adopted again from its own disk
// with the removed node gone).
func (r faultRecord) HandedOver(f string, a, b dial.NodeID, from, sentBy, to time.Duration) bool {
	wait := r.h.flowCfg.AdoptWait - r.h.flowCfg.AdoptWait/1000
	for _, ho := range r.h.handovers {
		if ho.flow == f && ho.from == a && ho.to == b && ho.sent >= from && ho.sent <= sentBy && ho.delivered <= to && ho.delivered < ho.asked+wait {
			if crashed, _ := r.h.byID[b].CrashedDuring(ho.delivered, to); !crashed {
				return true
			}
		}
	}
	return false
}

func (r faultRecord) Name(id dial.NodeID) string { return r.h.byID[id].Name() }

func (r faultRecord) HandoverLost(f string, a, b dial.NodeID, from, to time.Duration) bool {
	for _, l := range r.h.lostHandovers {
		if l.flow == f && l.at >= from && l.at <= to && (l.from == a && l.to == b || l.from == b && l.to == a) {
			return true
		}
	}
	return false
}

// errClientDeadline is a client giving up on a call no node answered in
// time (its node crashed under it, or the store lost the call).
var errClientDeadline = errors.New("client deadline (node crashed?)")

// errNodeDown is a call on a node that is down, refused before it is made.
// One value for every such call: a sweep of crashes makes many.
var errNodeDown = fmt.Errorf("%w: node down", flow.ErrSend)

// callFlow runs one flow request on node n as a client would: refused at
// once if the node is down, given up on (errClientDeadline, an unknown
// outcome) if no answer comes within the client's deadline, and a failure
// of the bridge checker if a live node answers twice or never. tag names
// the client's deadline event in the trace.
//
// It returns the latest instant at which the request can take effect, by
// the network's record: an owner applies a request the moment it is
// served, locally inside the call or when the forwarded frame arrives, and
// a node sends a client's request once, inside the call, so no request can
// take effect after the last frame the call sent has arrived.
func (h *flowHarness) callFlow(n *sim.Machine, client, tag uint64, req flow.Request, done func(flow.Response, error)) (until time.Duration) {
	until, _ = h.callFlowOp(n, client, tag, -1, nil, req, done)
	return until
}

// callFlowOp is callFlow for history op (-1: none), which also reports
// whether the node sent the request on to an owner (else it served it
// itself, or refused it), and sets *taken, if not nil, to when the node
// took the call: later than the call while the node is busy in fsyncs.
func (h *flowHarness) callFlowOp(n *sim.Machine, client, tag uint64, op int, taken *time.Duration, req flow.Request, done func(flow.Response, error)) (until time.Duration, forwarded bool) {
	a := &answer{}
	inc := n.Incarnation()
	store := h.flows[n.Name()]
	sentOn := false  // the node sent the request on: set when its Exec returns
	waiting := false // counted in h.waiting[n] (the call outlived its Exec)
	unwait := func() {
		if waiting {
			waiting = false
			h.waiting[n.ID()]--
		}
	}
	settle := func(resp flow.Response, err error) {
		if !a.once() {
			// The store promises one answer per call; a second one, or
			// one after the client gave up on a live node, is a bug.
			h.run.Fail("bridge", "client %d's call on %s was answered twice", client, req.Flow)
			return
		}
		unwait()
		// Answered inside the call, or after it by a node that sent
		// nothing on: the node itself refused. (An owner elsewhere that
		// refused is judged by the frame it sent.)
		if errors.Is(err, flow.ErrDisk) && !(h.calling == n.ID() && h.forwarded) && !sentOn {
			h.checkDiskAnswer(n, fmt.Sprintf("client %d's call on %s", client, req.Flow))
		}
		if errors.Is(err, flow.ErrDiskSlow) && !(h.calling == n.ID() && h.forwarded) && !sentOn {
			h.checkSlowAnswer(n, fmt.Sprintf("client %d's call on %s", client, req.Flow))
		}
		done(resp, err)
	}
	call := h.k.Now()
	if !n.Up() || store == nil {
		settle(flow.Response{}, errNodeDown)
		return call, false
	}
	h.calling, h.callOp, h.arriveBy, h.forwarded, h.takenAt = n.ID(), op, call, false, call
	n.Exec(func() {
		// A busy node takes the call after its fsyncs: that is when it
		// serves it, if it does.
		h.takenAt = h.k.Now()
		if taken != nil {
			*taken = h.takenAt
		}
		store.Do(req, settle)
	})
	tookAt := h.takenAt
	h.calling, h.callOp, until, forwarded = 0, -1, max(h.arriveBy, h.takenAt), h.forwarded
	sentOn = forwarded
	if a.done {
		return until, forwarded
	}
	waiting = true
	if h.waiting == nil {
		h.waiting = map[dial.NodeID]int{}
	}
	h.waiting[n.ID()]++
	// The store's deadline runs from when the node took the call: a node
	// stalled (or busy in fsyncs) when it came takes it late.
	h.k.At(tookAt+h.deadline+time.Second, sim.EvClient, tag, func() {
		if a.once() {
			unwait()
			if n.Up() && n.Incarnation() == inc {
				// The node lived, yet its store never answered.
				h.run.Fail("bridge", "client %d's call on %s at %v was never answered by a live node", client, req.Flow, call)
			} else if stoppedInOrder(n, call, h.k.Now()) {
				// An operator's stop runs the node's Close, and a store
				// that closes answers every call it holds (Store.Stop):
				// only a crash may leave a caller to its deadline.
				h.run.Fail("bridge", "client %d's call on %s at %v was never answered, though %s was stopped in order, not crashed", client, req.Flow, call, n.Name())
			}
			done(flow.Response{}, fmt.Errorf("%w: %w", flow.ErrTimeout, errClientDeadline))
		}
	})
	return until, forwarded
}

// stoppedInOrder reports whether n was stopped between from and to by
// its operator (sim.Machine.Shutdown, which runs its Close) and by no
// crash: a node that goes down so owes its callers their answers first.
func stoppedInOrder(n *sim.Machine, from, to time.Duration) bool {
	down, _ := n.CrashedDuring(from, to)
	crashed, _ := n.LostUnsyncedDuring(from, to)
	return down && !crashed
}

// stallDuring stalls each of nodes, with even odds, once at an instant
// within the next span, for half to one and a half isolation windows (see
// sim.Machine.Stall). A node frozen while it is cut off is the case in
// which an isolation window counted in ticks falls behind the time that
// has passed (planted bug tick-window): the shard's fsyncs no longer
// hold the loop up, so the scenarios aim this fault at it instead.
func (h *flowHarness) stallDuring(nodes []*sim.Machine, span time.Duration) {
	if h.stalls == nil {
		h.stalls = h.run.Kernel.Stream("faults/stalls")
	}
	for _, n := range nodes {
		at := sim.Between(h.stalls, 0, span)
		d := sim.Between(h.stalls, h.timing.isolation/2, h.timing.isolation*3/2)
		if h.stalls.IntN(2) == 0 {
			continue
		}
		h.run.Kernel.After(at, sim.EvFault, xxhash.Sum64String("stall "+n.Name()), func() { n.Stall(d) })
	}
}

// showCommit records that node sent a frame carrying commit, at its own
// instant, if it is more than it showed before in this incarnation.
func (h *flowHarness) showCommit(node dial.NodeID, commit uint64) {
	m := h.byID[node]
	last, ok := h.shownLast[node]
	if ok && last[0] == m.Incarnation() && last[1] >= commit {
		return
	}
	if h.shownLast == nil {
		h.shownLast = map[dial.NodeID][2]uint64{}
	}
	h.shownLast[node] = [2]uint64{m.Incarnation(), commit}
	h.shown = append(h.shown, checker.CommitShown{Node: node, At: m.Local(), Commit: commit})
}

// confStalls is aimConfStalls's state: its draws, the changes already
// aimed at (by log index), and how many stalls it may still aim.
type confStalls struct {
	r             *rand.Rand
	seen, applied map[uint64]bool
	left, atApply int
}

// aimConfStalls stalls, in half the runs of a scenario that opts in
// (Scenario.ConfStalls; knob conf_stalls), the disk of a leader as it
// first sends its followers a membership change, for 0.5 to 2 seconds,
// up to twice a run, with three clients of the flows it owns calling it
// meanwhile: the quorum commits the change without the leader's own
// write, and the leader, which raft lets apply nothing it has not written,
// knows the change committed and cannot apply it. Its membership, and
// the flows it places by it, are then those of a membership no longer in
// force (core/consensus membershipBehind; planted bug stale-membership,
// checker known-membership). Drawn stalls alone met that moment once in
// thousands of runs (imposter-scenarios seed 1302). The stall begins in
// the step that sends the change, before the leader hands the disk its
// write of it.
func (h *flowHarness) aimConfStalls() {
	if !h.run.confStalls {
		return
	}
	r := h.k.Stream("knobs/conf-stalls")
	on := r.IntN(2) == 0
	h.run.Knob("conf_stalls", on)
	if on {
		h.confStalls = &confStalls{r: r, seen: map[uint64]bool{}, applied: map[uint64]bool{}, left: 2, atApply: 2}
		h.onApplied = h.confApplied
	}
}

// confApplied is a node applying membership ms: a leader applying one
// with a learner in it is stalled too, there and then, up to twice a
// run. Every membership change asks for a snapshot that carries it, and
// the leader writes it once the journal write in flight completes: one
// handed to the disk just now, in the stall, holds it back, while the
// newcomer waits for a snapshot that names it (core/consensus
// storage.Snapshot; planted bug stale-snapshot).
func (h *flowHarness) confApplied(n *sim.Machine, ms consensus.Membership) {
	cs := h.confStalls
	cn := h.node(n)
	if cs.atApply == 0 || cs.applied[ms.Index] || len(ms.Learners) == 0 || cn == nil || !cn.BelievesSelfLeader() || h.k.Now() >= h.faultsUntil {
		return
	}
	cs.applied[ms.Index] = true
	cs.atApply--
	h.confStall(n, fmt.Sprintf("as it applies the membership change at %d", ms.Index))
}

// confSent is a leader's append carrying the membership change at index
// at, as it leaves the leader: the moment aimConfStalls aims at.
func (h *flowHarness) confSent(leader dial.NodeID, at uint64) {
	cs := h.confStalls
	if cs == nil || cs.left == 0 || cs.seen[at] || h.k.Now() >= h.faultsUntil {
		return
	}
	cs.seen[at] = true
	cs.left--
	n := h.byID[leader]
	if d, ok := h.confStall(n, fmt.Sprintf("as it sends the membership change at %d", at)); ok {
		// Clients of the flows it owns now, some of which the change
		// moves away: what a leader behind the change must refuse, and
		// writes whose only copies a removal then hands to a new owner
		// whose disk is the one stalled (planted bug refused-answer).
		h.startOwnedClients(n, 3, h.k.Now()+d)
	}
}

// confStall stalls n's disk for 0.5 to 2 seconds (no later than the end
// of the fault phase), at the moment when names: it returns how long, and
// whether the stall was injected (a skipped fault is not).
func (h *flowHarness) confStall(n *sim.Machine, when string) (time.Duration, bool) {
	d := min(sim.Between(h.confStalls.r, 500*time.Millisecond, 2*time.Second), h.faultsUntil-h.k.Now())
	return d, h.run.Inject(h.run.AimedFault(), fmt.Sprintf("%s's disk stalls for %v %s", n.Name(), d, when), func() {
		n.Disk().Stall(d)
	})
}

// checkKnownMembership holds every owner-side service to the memberships
// its node knew were committed, from the commit indexes its frames
// carried.
func (h *flowHarness) checkKnownMembership() {
	n := checker.KnownMembership(h.run, h.services, h.shown, h.memberships,
		func(id dial.NodeID, at time.Duration) time.Duration { return h.byID[id].UpSince(at) },
		func(id dial.NodeID) string { return h.byID[id].Name() })
	h.k.Logf("known-membership: %d services judged against a membership their node knew committed", n)
}

// checkD17 holds every owner-side service to the isolated-owner rule,
// from the network's record.
func (h *flowHarness) checkD17() {
	checker.D17(h.run, h.services, h.contacts, h.memberships, h.isolationWindow(), func(id dial.NodeID) string { return h.byID[id].Name() })
}

// isolationWindow is the isolated-owner rule's window in true time: the
// nodes' window, two ticks for the rule's granularity, and 0.1% for the
// clocks' drift.
func (h *flowHarness) isolationWindow() time.Duration {
	return time.Duration(float64(time.Duration(h.timing.isolationTicks+2)*h.timing.tick) * 1.001)
}

// checkPlacement holds every service to the flow's owners, and every
// push to its successors, under the record's memberships, placed by the
// checkers' own rendezvous hashing.
func (h *flowHarness) checkPlacement() {
	name := func(id dial.NodeID) string { return h.byID[id].Name() }
	checker.OwnerPlacement(h.run, h.services, h.memberships, name)
	checker.ReplicaPlacement(h.run, h.pushes, h.memberships, name)
	n := checker.PushedWrites(h.run, h.writes, h.pushes, h.memberships, name)
	h.k.Logf("replica-push: %d writes judged, %d pushes", n, len(h.pushes))
}

// checkPushesTaken ends push-taken, which judged each push as its node
// took it (pushTaken): a run that judged none could not decide.
// Runs whose frames are sealed are not judged (pushTaken).
// A run with no push taken (one voter) has nothing to judge.
func (h *flowHarness) checkPushesTaken() { pushesTaken(h.run, h.keys != nil, h.taken) }

func pushesTaken(run *Run, sealed bool, t checker.PushesTaken) {
	switch {
	case sealed:
		run.Kernel.Logf("push-taken: frames sealed, not judged")
	case t.Seen > 0 && t.Judged == 0:
		run.Undecided("push-taken", "%d pushes taken, none above every m_idx at which its node owned the flow", t.Seen)
	default:
		run.Kernel.Logf("push-taken: %d of %d pushes judged", t.Judged, t.Seen)
	}
}

// checkFlowLinearizable runs porcupine over every flow, split at the
// instants the simulator's record shows loss was possible.
func (h *flowHarness) checkFlowLinearizable() {
	h.cuts = checker.FlowCuts(h.services, h.memberships, faultRecord{h})
	h.run.History("flow-linearizability", h.flowHist)
	h.run.TimeCheck("flow-linearizability", func() {
		checker.FlowLinearizable(h.run, h.flowHist, checker.CutTimes(h.cuts), h.run.CheckTimeout)
	})
}

// checkBridge holds the bridge to its promises (checker.Bridge). Clocks
// drift by at most 500ppm in these scenarios; 1000ppm covers it.
func (h *flowHarness) checkBridge() {
	checker.BridgeSeq(h.run, h.flowHist.All(), h.waited, h.deadline, 1000, "client deadline", flow.ErrShed.Error())
}

// checkConvergence: after quiescence every successor's copy of a flow
// whose owner serves it carries the owner's tuples, key by key.
func (h *flowHarness) checkConvergence(members []*sim.Machine) {
	// The promise is convergence within a few anti-entropy rounds of
	// quiet; a run cut short (-duration) before that is not judged.
	if quiet := h.k.Now() - max(h.calm, h.hold.quietFrom); quiet < 4*h.aeEvery+h.aeEvery/2 {
		h.run.Undecided("replica-convergence", "%v of quiet is under 4.5 anti-entropy rounds", quiet)
		return
	}
	for _, n := range members {
		s := h.flows[n.Name()]
		if !n.Up() || s == nil {
			continue
		}
		for _, f := range s.Flows() {
			if owner, _ := s.Owner(f); owner != n.ID() || !s.Adopted(f) {
				continue
			}
			own := s.Copy(f)
			for _, id := range s.Placement(f)[1:] {
				rn := h.byID[id]
				if rs := h.flows[rn.Name()]; rn.Up() && rs != nil {
					checker.ReplicaConvergence(h.run, f, n.Name(), own, rn.Name(), rs.Copy(f))
				}
			}
		}
	}
}

// checkFlowsServed: after the faults heal, a read of every hot flow
// through every member is answered (retried while the owner adopts).
func (h *flowHarness) checkFlowsServed(members []*sim.Machine, hot []string, settle time.Duration) {
	h.k.After(settle, sim.EvCheck, xxhash.Sum64String("flows-served"), func() {
		deadline := h.k.Now() + 5*time.Second
		pending := map[string]error{}
		for _, n := range members {
			for _, f := range hot {
				n, f := n, f
				key := n.Name() + " " + f
				pending[key] = fmt.Errorf("no answer")
				var try func()
				try = func() {
					if _, waiting := pending[key]; !waiting || h.k.Now() >= deadline {
						return
					}
					if s := h.flows[n.Name()]; n.Up() && s != nil {
						n.Exec(func() {
							s.Do(flow.Request{Flow: f, Op: flow.OpGet, Key: "a"}, func(_ flow.Response, err error) {
								if _, waiting := pending[key]; !waiting {
									return
								}
								if err == nil {
									delete(pending, key)
								} else {
									pending[key] = err
								}
							})
						})
					}
					h.k.After(200*time.Millisecond, sim.EvCheck, xxhash.Sum64String(key), try)
				}
				try()
			}
		}
		h.k.At(deadline, sim.EvCheck, xxhash.Sum64String("flows-served-check"), func() {
			gone := h.removedSince(members)
			for _, key := range slices.Sorted(maps.Keys(pending)) {
				if node, _, _ := strings.Cut(key, " "); !gone[node] {
					h.run.Fail("liveness", "flow read %s was not served within 5s of a healed cluster (last: %v)", key, pending[key])
				}
			}
		})
	})
}

// flowSummary logs the flow line of a run whose clients wrote hist, on
// the stores of hs, with cuts accepted losses, and counts its work.
func flowSummary(run *Run, hist *linearizability.History, cuts int, hs ...*flowHarness) {
	ok, refused, unknown := hist.Count()
	var served, shed, adoptions uint64
	for _, h := range hs {
		for _, name := range slices.Sorted(maps.Keys(h.flows)) {
			s := h.flows[name]
			served += s.Served
			shed += s.Shed
			adoptions += s.Adoptions
		}
	}
	run.Logf("flow: ops ok=%d refused=%d unknown=%d; served=%d shed=%d adoptions=%d accepted-loss=%d",
		ok, refused, unknown, served, shed, adoptions, cuts)
	run.Did("flow-ops-ok", ok)
	run.Did("calls-shed", int(shed))
}

func (h *flowHarness) report() {
	flowSummary(h.run, h.flowHist, len(h.cuts), h)
	for _, c := range h.cuts {
		h.k.Logf("accepted loss: flow %s at %v: %s", c.Flow, c.At, c.Reason)
	}
	logServices(h.k, h.services, func(id dial.NodeID) string { return h.byID[id].Name() })
}

// logServices logs who served each flow when, in runs of one node, for
// reading a failure in -v.
func logServices(k *sim.Kernel, services []checker.FlowService, name func(dial.NodeID) string) {
	byFlow := map[string][]checker.FlowService{}
	for _, s := range services {
		byFlow[s.Flow] = append(byFlow[s.Flow], s)
	}
	for _, f := range slices.Sorted(maps.Keys(byFlow)) {
		ss := byFlow[f]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].At < ss[j].At })
		var runs []string
		for i := 0; i < len(ss); {
			j := i
			for j+1 < len(ss) && ss[j+1].Node == ss[i].Node {
				j++
			}
			runs = append(runs, fmt.Sprintf("%s[%v..%v]x%d", name(ss[i].Node), ss[i].At, ss[j].At, j-i+1))
			i = j + 1
		}
		k.Logf("served %s: %s", f, strings.Join(runs, " "))
	}
}

// drawFlowKnobs draws what every flow workload draws, in this order (the
// knob lines are part of the trace): how many cold flows, how many
// clients per node, and the anti-entropy interval, into cfg with the
// run's planted bugs.
func drawFlowKnobs(run *Run, calm time.Duration, cfg *flow.Config) (cold, perNode int) {
	k := run.Kernel
	cold = 5 + k.Stream("knobs/flows").IntN(40)
	perNode = 1 + k.Stream("knobs/clients").IntN(3)
	run.Knob("cold_flows", cold)
	run.Knob("clients_per_node", perNode)
	run.Knob("calm_at", calm)
	cfg.Bugs = run.Bugs()
	if cfg.AntiEntropy == 0 {
		// Every 2s, not the default 5s, so the calm phase holds enough
		// rounds that the network's steady loss cannot starve one pair of
		// nodes of all of them (the convergence bound is in rounds).
		cfg.AntiEntropy = 2 * time.Second
	}
	run.Knob("anti_entropy_every", cfg.AntiEntropy)
	return cold, perNode
}

// flowSetup draws what every flow scenario draws and builds the cluster.
func flowSetup(run *Run, voters, extra int, cfg flow.Config) (*flowHarness, []string, []string, time.Duration) {
	calm := run.Duration * 55 / 100
	netCfg, disk, _ := clusterKnobs(run, voters, calm)
	cold, perNode := drawFlowKnobs(run, calm, &cfg)
	c := newRaftCluster(run, names(voters+extra), voters, netCfg, disk)
	h := startFlowCluster(c, cfg)
	h.calm, h.perNode = calm, perNode
	hot, all := flowIDs(cold)
	return h, hot, all, calm
}

func (h *flowHarness) finishFlows(members []*sim.Machine, chaos *Chaos) {
	h.finish(chaos)
	h.checkFlowLinearizable()
	h.checkD17()
	h.checkKnownMembership()
	h.checkPlacement()
	h.checkBridge()
	h.checkAnswered()
	h.checkPushesTaken()
	h.checkConvergence(members)
	h.checkAEQuiet()
	h.checkAdminActs(h.calm)
	h.report()
}

// runUnderChaos is the body flow-ops and replica-repair share: start every
// node, inject faults until calm, run the clients and the periodic checks,
// check every flow is served after the heal, and judge the run.
func (h *flowHarness) runUnderChaos(faults FaultConfig, hot, all []string, calm time.Duration) error {
	for _, n := range h.nodes {
		n.Start()
	}
	chaos := StartChaos(h.run, h.nw, h.nodes, faults, calm)
	if h.stopsWhileAdopting {
		chaos.AimStopsWhileAdopting(h.timing.adoptWait, func(n *sim.Machine) bool { return h.waiting[n.ID()] > 0 })
	}
	h.holdForFlowOps(calm)
	h.startFlowClients(h.nodes, h.perNode, hot, all, calm)
	h.startChecks(100 * time.Millisecond)
	h.k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() { h.checkFlowsServed(h.nodes, hot, 3*time.Second) })
	if err := h.k.RunUntil(h.run.Duration); err != nil {
		return err
	}
	h.finishFlows(h.nodes, chaos)
	return nil
}

// ownerOf is the node that owns flow in the most advanced membership.
func (h *flowHarness) ownerOf(f string) *sim.Machine {
	for _, n := range h.nodes {
		if s := h.flows[n.Name()]; n.Up() && s != nil {
			if id, ok := s.Owner(f); ok {
				return h.byID[id]
			}
		}
	}
	return nil
}

// settleMembers ends a run whose membership changed: at calm the network
// heals and every member that is down starts again; the members are then
// held to liveness and every hot flow served, and judged at the end.
func (h *flowHarness) settleMembers(calm time.Duration, member func(*sim.Machine) bool, hot []string) error {
	return h.settleMembersThen(calm, member, hot, nil, nil)
}

// settleMembersThen is settleMembers for a scenario that checks more: at
// calm, after the flow checks start, atCalm gets the members; the run is
// judged with chaos's counts, if any.
func (h *flowHarness) settleMembersThen(calm time.Duration, member func(*sim.Machine) bool, hot []string,
	chaos *Chaos, atCalm func(members []*sim.Machine)) error {
	var members []*sim.Machine
	h.k.At(calm, sim.EvCheck, xxhash.Sum64String("calm"), func() {
		h.nw.Heal()
		for _, n := range h.nodes {
			if member(n) {
				if !n.Up() {
					n.Start()
				}
				members = append(members, n)
			}
		}
		h.checkLiveness(members, 5*time.Second, nil)
		h.checkFlowsServed(members, hot, 3*time.Second)
		if atCalm != nil {
			atCalm(members)
		}
	})
	if err := h.k.RunUntil(h.run.Duration); err != nil {
		return err
	}
	h.finishFlows(members, chaos)
	return nil
}

// floorHold keeps a run's clients working past calm while the run has
// done less than its work floors ask: a seed whose faults left the
// cluster little healthy time before calm is judged on enough work
// instead of failing its floors. A seed that met its floors by calm stops
// its clients exactly then, as it always did.
type floorHold struct {
	from, limit time.Duration // the clients' stop time, and the latest the hold keeps them
	short       func() bool   // whether the run is still under a floor
	quietFrom   time.Duration // no client operation can take effect after this
}

// holdForFloors holds the clients stopping at calm while short says the
// run is under a floor. The hold ends early enough that every operation
// it let in has settled with 4.5 anti-entropy rounds of quiet left before
// the run ends, which the convergence check asks for.
func (h *flowHarness) holdForFloors(calm time.Duration, short func() bool) {
	limit := h.run.Duration - (4*h.aeEvery + h.aeEvery/2) - h.settleBy() - time.Second
	if limit <= calm {
		return
	}
	h.hold = floorHold{from: calm, limit: limit, short: short}
}

// holdForFlowOps is holdForFloors on the scenario's flow-ops-ok floor.
func (h *flowHarness) holdForFlowOps(calm time.Duration) {
	need := h.run.Floor("flow-ops-ok")
	if need == 0 {
		return
	}
	h.holdForFloors(calm, func() bool {
		ok, _, _ := h.flowHist.Count()
		return ok < need
	})
}

// settleBy bounds how long after its call a client's operation can take
// effect: the client gives up by then (callFlowOp, the imposter client).
func (h *flowHarness) settleBy() time.Duration { return h.deadline + 2*time.Second }

// keeps reports whether a client whose stop time stop has come keeps
// working, and when it does, notes how late its next operation can take
// effect.
func (hd *floorHold) keeps(h *flowHarness, stop time.Duration) bool {
	now := h.k.Now()
	if hd.short == nil || stop != hd.from || now >= hd.limit || !hd.short() {
		return false
	}
	hd.quietFrom = max(hd.quietFrom, now+h.settleBy())
	return true
}
