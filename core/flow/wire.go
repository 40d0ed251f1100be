package flow

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// FramePrefix is the first byte of every flow frame, so a node can share
// one dial.Sender between raft (whose frames start with 1) and the flow
// store.
const FramePrefix = 2

// Frame kinds: what a flow frame carries.
const (
	FrameOp        = "op"         // a request for the owner
	FrameGroupOp   = "group-op"   // a request for the owner in another group of the fleet
	FrameOpResp    = "op-resp"    // the owner's answer
	FramePush      = "push"       // an owner's new values, to a successor
	FrameAE        = "ae"         // a replica's per-partition digests, to an owner
	FrameAEResp    = "ae-resp"    // the owner's copies of the partitions that differ
	FrameAdopt     = "adopt"      // a new owner asks for every copy of a flow
	FrameAdoptResp = "adopt-resp" // a copy's answer to an adoption
	FrameMoveAsk   = "move-ask"   // a move's driver asks an old voter for a page of its copies
	FrameMoveCopy  = "move-copy"  // the old voter's page
	FrameIngest    = "ingest"     // the driver hands a page to a new voter
	FrameIngestAck = "ingest-ack" // the new voter has it on disk
)

// FrameInfo is what a flow frame says of itself.
type FrameInfo struct {
	Kind string // one of the Frame* kinds
	Flow string // the flow it is about, for push, adopt and adopt-resp
	M    uint64 // the membership index it was sent at (op, adopt, adopt-resp)
	// Served is an adoption answer's claim of the latest m_idx at which
	// its sender served the flow.
	Served uint64
	// Session and ID name a request (op) and its answer (op-resp).
	Session, ID uint64
	// Epoch is the directory epoch a group-op was routed with.
	Epoch uint64
	// Refusal is an op-resp's refusal code ("disk", "busy", ...: errCodes),
	// empty for an answer that served the request.
	Refusal string
	// Flows is how many flows an ae-resp carries.
	Flows int
}

// DecodeFrame decodes a flow frame as the store does, for the simulator's
// use: a scenario that drops only one kind of frame, or a checker that
// reads the network's record of which frames arrived. It never trusts a
// frame more than the store would.
func DecodeFrame(frame []byte) (FrameInfo, error) {
	if len(frame) == 0 || frame[0] != FramePrefix {
		return FrameInfo{}, errors.New("flow: not a flow frame")
	}
	m, err := scanFrame(frame)
	if err != nil {
		return FrameInfo{}, err
	}
	info := FrameInfo{Kind: m.Kind, Flow: m.Flow, M: m.M, Served: m.Served, Session: m.Session, ID: m.ID, Epoch: m.Epoch, Refusal: m.Err}
	if m.Kind == FrameAEResp {
		// Read whole only here: the scan skips the flows, and an answer
		// of anti-entropy is rare.
		full, err := decodeFrame(frame)
		if err != nil {
			return FrameInfo{}, err
		}
		info.Flows = len(full.Flows)
	}
	return info, nil
}

// PushEntries decodes a push frame's new values, for the simulator's
// checkers: DecodeFrame reads only a frame's head.
func PushEntries(frame []byte) (map[string]Value, error) {
	m, err := decodeFrame(frame)
	if err != nil {
		return nil, err
	}
	if m.Kind != FramePush {
		return nil, fmt.Errorf("flow: a %s frame, not a push", m.Kind)
	}
	return m.Entries, nil
}

// msg is every flow frame. It travels in the binary format of frame.go:
// deterministic (maps in sorted key order), which the simulator's trace
// hash needs, and strict, so a peer's garbage is refused whole.
type msg struct {
	Kind    string
	ID      uint64
	M       uint64
	Flow    string
	Req     *Request
	Resp    *Response
	Err     string
	Entries map[string]Value
	Flows   map[string]map[string]Value
	Digests map[uint32]uint64
	Session uint64                // the caller's boot session, with ID naming a request
	Served  uint64                // adopt-resp: the latest m_idx at which the answering node served the flow
	Their   uint64                // adopt-resp: the answering node's own m_idx
	Mode    shard.Mode            // push, adopt-resp: the flow's durability
	Modes   map[string]shard.Mode // ae-resp: each flow's durability, if not async
	Epoch   uint64                // group-op: the directory epoch the caller routed with (core/fleet)
}

// servedKey names one request: its caller, the caller's boot session (so
// a restarted caller's reused ids are new requests) and its id.
type servedKey struct {
	from    dial.NodeID
	session uint64
	id      uint64
}

// maxServed bounds the answers an owner remembers for duplicates; the
// oldest is forgotten first. A duplicate older than that is far past its
// caller's deadline.
const maxServed = 4096

func (s *Store) remember(key servedKey, out msg) {
	if len(s.servedOrder) >= maxServed {
		delete(s.served, s.servedOrder[0])
		s.servedOrder = s.servedOrder[1:]
	}
	s.served[key] = out
	s.servedOrder = append(s.servedOrder, key)
}

func (s *Store) send(to dial.NodeID, m msg) error {
	return s.env.Net.Send(to, encodeFrame(m))
}

// Wire codes of the refusals an owner states.
var errCodes = []struct {
	code string
	err  error
}{
	{"fenced", ErrFenced}, {"not-owner", ErrNotOwner}, {"isolated", ErrIsolated},
	{"not-adopted", ErrNotAdopted}, {"not-integer", ErrNotInteger}, {"bad-request", ErrBadRequest},
	{"no-owner", ErrNoOwner}, {"shed", ErrShed}, {"busy", ErrBusy}, {"disk", ErrDisk},
	{"slow-disk", ErrDiskSlow},
	{"elsewhere", fleet.ErrElsewhere}, {"stale-epoch", fleet.ErrStaleEpoch}, {"epoch-ahead", fleet.ErrAhead}, {"moving", fleet.ErrMoving},
}

func encodeErr(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range errCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "internal: " + err.Error()
}

func decodeErr(code string) error {
	if code == "" {
		return nil
	}
	for _, c := range errCodes {
		if c.code == code {
			if c.err == ErrNotInteger || c.err == ErrBadRequest {
				return c.err
			}
			return unavailable(c.err)
		}
	}
	// An error the owner hit after it may have applied: unknown.
	return unavailable(fmt.Errorf("owner: %s", code))
}

// validCopy reports whether a copy of a flow from a peer may enter the
// shard: a flow id and keys a request could have written, within the
// store's bounds, and a known mode. The shard reserves the empty flow id
// and key for its own records; a peer's garbage must never reach them.
func (s *Store) validCopy(flow string, entries map[string]Value, mode shard.Mode) bool {
	if flow == "" || len(flow) > s.cfg.MaxKeyBytes || len(entries) > s.cfg.MaxFlowKeys || !mode.Valid() {
		return false
	}
	for k, v := range entries { //fenceline:unordered validation only: every entry must pass
		if k == "" || len(k) > s.cfg.MaxKeyBytes || len(v.Data) > s.cfg.MaxValueBytes || v.Tomb && len(v.Data) > 0 {
			return false
		}
	}
	return true
}

// HandleFrame handles a flow frame from a peer (the first byte is
// FramePrefix). A frame that does not decode is dropped and counted:
// a peer's garbage never reaches the store.
func (s *Store) HandleFrame(from dial.NodeID, frame []byte) {
	if s.stopped {
		return
	}
	m, err := decodeFrame(frame)
	if err != nil {
		if !s.cfg.Bugs.LenientFrames {
			s.BadFrames++
			return
		}
		m = lenientFrame(frame)
	}
	s.refresh()
	switch m.Kind {
	case FrameOp, FrameGroupOp:
		if m.Req == nil || s.cfg.check(*m.Req) != nil {
			s.BadFrames++
			return
		}
		s.answerOp(from, m)
	case FrameOpResp:
		c := s.calls[m.ID]
		if c == nil || m.Session != s.session || c.to != from {
			// Timed out already (the caller was told "unknown"), or an
			// answer to this node's previous incarnation, or from a node
			// the request was not sent to.
			return
		}
		var resp Response
		if m.Resp != nil {
			resp = *m.Resp
		}
		s.settle(c, resp, decodeErr(m.Err))
	case FramePush:
		if !s.validCopy(m.Flow, m.Entries, m.Mode) {
			s.BadFrames++
			return
		}
		_ = s.mergePush(m.Flow, m.Entries, m.Mode) // refused only by a failed or stopped shard
	case FrameAE:
		s.answerAntiEntropy(from, m)
	case FrameAEResp:
		for _, f := range slices.Sorted(maps.Keys(m.Flows)) {
			if !s.validCopy(f, m.Flows[f], m.Modes[f]) {
				s.BadFrames++
				return
			}
		}
		for _, f := range slices.Sorted(maps.Keys(m.Flows)) {
			_ = s.merge(f, m.Flows[f], s.repairMode(m.Modes[f])) // refused: the next round repeats it
			if m.M == s.mIdx && from != s.env.ID && s.ownerOf(s.ring, f) == from && !s.cfg.Bugs.NoPrune {
				s.prune(f, m.Flows[f])
			}
		}
	case FrameAdopt:
		s.answerAdoption(from, m)
	case FrameAdoptResp:
		if !s.validCopy(m.Flow, m.Entries, m.Mode) {
			s.BadFrames++
			return
		}
		s.adoptionAnswer(from, m)
	case FrameMoveAsk:
		s.answerMoveAsk(from, m)
	case FrameMoveCopy:
		s.moveCopy(from, m)
	case FrameIngest:
		s.ingest(from, m)
	case FrameIngestAck:
		s.moveAck(from, m)
	default:
		s.BadFrames++
	}
}

// answerOp serves a request for this node as owner: op from a member of
// its group, group-op from a node of another group, which is first held
// to the fleet's directory (admit). A request can arrive twice (a
// duplicated frame, a retrying transport); an incr must not apply twice,
// so the owner remembers what it answered and answers a duplicate the
// same way.
func (s *Store) answerOp(from dial.NodeID, m msg) {
	key := servedKey{from: from, session: m.Session, id: m.ID}
	if prev, ok := s.served[key]; ok {
		_ = s.send(from, prev)
		return
	}
	if s.inflight[key] {
		return // still being served (a sync write awaits its fsync): one answer will go
	}
	s.inflight[key] = true
	id := m.ID
	reply := func(resp Response, err error) {
		delete(s.inflight, key)
		if s.cfg.Bugs.SilentRefusal && Known(err) {
			return // the planted bug: the caller waits out its deadline
		}
		out := msg{Kind: FrameOpResp, ID: id, Session: key.session, Resp: &resp, Err: encodeErr(err)}
		s.remember(key, out)
		// A lost answer leaves the caller with an unknown outcome;
		// its deadline fires. Nothing to do about a send error.
		_ = s.send(from, out)
	}
	if m.Kind == FrameGroupOp {
		if err := s.admit(m.Req.Flow, m.Epoch); err != nil {
			reply(Response{}, unavailable(err))
			return
		}
	}
	s.serve(m.M, *m.Req, reply)
}

// The flow store's request and reply families, for the envelope
// (core/transport). A push is one-way.
const (
	FamilyOp    = 1 // op → op-resp
	FamilyAE    = 2 // ae → ae-resp
	FamilyAdopt = 3 // adopt → adopt-resp
	FamilyMove  = 4 // move-ask → move-copy, ingest → ingest-ack
)

// PeekKind reads a flow frame's kind from its head without decoding or
// checking the rest: for a watcher that decodes (DecodeFrame) only the
// kinds it wants, and skips the rest whether they would decode or not.
func PeekKind(frame []byte) (kind string, ok bool) {
	if len(frame) < frameHeader || frame[0] != FramePrefix || frame[1] != frameVersion || frame[2] == 0 || int(frame[2]) >= len(kindCodes) {
		return "", false
	}
	return kindCodes[frame[2]], true
}

// FrameKind says, for the envelope, which family a flow frame belongs to
// and whether it is a reply, from the kind at the head of the frame
// without decoding the rest.
func FrameKind(frame []byte) (family uint8, reply bool, ok bool) {
	if len(frame) < frameHeader || frame[0] != FramePrefix || frame[1] != frameVersion || frame[2] == 0 || int(frame[2]) >= len(kindCodes) {
		return 0, false, false
	}
	switch kindCodes[frame[2]] {
	case FrameOp, FrameGroupOp:
		return FamilyOp, false, true
	case FrameOpResp:
		return FamilyOp, true, true
	case FrameAE:
		return FamilyAE, false, true
	case FrameAEResp:
		return FamilyAE, true, true
	case FrameAdopt:
		return FamilyAdopt, false, true
	case FrameAdoptResp:
		return FamilyAdopt, true, true
	case FrameMoveAsk, FrameIngest:
		return FamilyMove, false, true
	case FrameMoveCopy, FrameIngestAck:
		return FamilyMove, true, true
	case FramePush:
		return 0, false, true
	}
	return 0, false, false
}
