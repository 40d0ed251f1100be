// Package rollout answers one question an admin change must answer before
// it is answered itself: does every member serve it yet?
//
// An imposter change is one raft entry. Committing it tells the proposer
// that a quorum has the entry, not that any other member has applied it,
// nor that a member which applied it has done what applying asks of its
// shell: bind the new port, close the deleted one, swap the stubs. A user
// whose next call lands on another member (a round-robin balancer in
// front of the cluster) would meet the old definition, or a refused
// connection. So the proposer waits, after the commit, until every member
// of the committed membership has confirmed that it serves the
// configuration at the change's revision, or until a bound passes; the
// members that did not confirm in time are named in the answer, never
// passed over in silence.
//
// The protocol, between the proposer (asker) and every other member:
//
//	asker                                   member
//	Await(rev) ---- ask(id, rev) ---------> serves rev already: ack at once
//	           <--- ack(id, serving) ------ else hold the ask (bounded),
//	  resend every Resend to members          nudge the shell (Behind) if it
//	  not yet confirmed                       has applied rev, and ack when
//	                                          the shell reports Served(rev)
//	done(Result{Missing}) once every member confirmed, or each one's
//	wait (Wait, or SuspectWait for a member that missed the last rollout
//	it was asked about) has passed
//
// "Serves" is the shell's word, reported through Served after it has
// reconciled what it runs with the configuration it read: never what the
// node has merely applied (the planted bug answer-before-reconciled acks
// at the applied revision). A revision is the replicated KV's version, the
// same number on every member for the same log position.
package rollout

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/binenc"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/dial"
)

// FramePrefix is the first byte of every rollout frame (raft's are 1, the
// flow store's 2, proxyOnce's 3).
const FramePrefix = 4

// FamilyAsk is the envelope family of ask → ack (control class): apart
// from proxyOnce's 5 and 6.
const FamilyAsk = 7

// Frame kinds.
const (
	frameAsk = 1
	frameAck = 2
)

// FrameKind says what a rollout frame is to the envelope.
func FrameKind(b []byte) (family uint8, reply bool, ok bool) {
	if len(b) < 2 || b[0] != FramePrefix {
		return 0, false, false
	}
	switch b[1] {
	case frameAsk:
		return FamilyAsk, false, true
	case frameAck:
		return FamilyAsk, true, true
	}
	return 0, false, false
}

// Control is what the service needs of the node's consensus part.
type Control interface {
	// Members are the committed membership's voters and learners, this
	// node among them if it is a member.
	Members() []dial.NodeID
	// Applied is the configuration revision this node has applied: what
	// its shell can serve once it reconciles, not what it serves.
	Applied() uint64
}

// Env is the service's world.
type Env struct {
	ID    dial.NodeID
	Clock clock.Clock
	Net   dial.Sender
	Ctl   Control
	// Behind, if set, is told that an asker waits for rev, which this
	// node has applied and its shell does not serve yet: the shell should
	// reconcile now rather than at its next look.
	Behind func(rev uint64)
}

// Config bounds the protocol. Zero fields take defaults.
type Config struct {
	// Wait bounds how long Await waits for a member to confirm. Default
	// 1s: a member that is up and connected applies and reconciles a
	// change in milliseconds; one that takes a second is named.
	Wait time.Duration
	// SuspectWait is the wait for a member that did not confirm the last
	// rollout it was asked about (down, cut off): every admin change
	// would otherwise pay the whole Wait while a member is gone. It is
	// long enough for a member that came back to confirm through a lossy
	// network: five asks at the default Resend. Default 250ms (150ms, three
	// asks, named a member that was back when two frames in a row were
	// lost at 5% loss: one-server seed 161).
	SuspectWait time.Duration
	// Resend is how often an unconfirmed member is asked again. Default
	// 50ms.
	Resend time.Duration
	// MaxAwaits bounds the awaits in flight; past it Await is refused at
	// once with ErrBusy. Default 256.
	MaxAwaits int
	// MaxHeld bounds the asks a member holds until its shell catches up;
	// past it an ask is dropped (its asker asks again). Default 1024.
	MaxHeld int
	Bugs    bugs.Set
}

func (c Config) withDefaults() Config {
	if c.Wait == 0 {
		c.Wait = time.Second
	}
	if c.SuspectWait == 0 {
		c.SuspectWait = 250 * time.Millisecond
	}
	if c.Resend == 0 {
		c.Resend = 50 * time.Millisecond
	}
	if c.MaxAwaits == 0 {
		c.MaxAwaits = 256
	}
	if c.MaxHeld == 0 {
		c.MaxHeld = 1024
	}
	return c
}

// Errors Await answers with; nothing was asked.
var (
	ErrBusy    = errors.New("rollout: too many changes awaiting their rollout")
	ErrStopped = errors.New("rollout: stopped")
)

// Result is an await's answer: the revision, and the members that did not
// confirm they serve it within their wait, sorted. Empty Missing: every
// member of the membership serves it.
type Result struct {
	Rev     uint64
	Missing []dial.NodeID
}

// Service is one node's side of the protocol: asker and member.
type Service struct {
	cfg Config
	env Env

	// serving is the revision the shell last reported it serves.
	serving uint64

	nextID  uint64
	awaits  map[uint64]*await
	suspect map[dial.NodeID]bool // missed the last rollout they were asked about

	// held are asks this node holds until it serves their revision, by
	// asker and await id; each with the time it was last asked (ticks of
	// Resend: no wall clock).
	held    map[heldKey]heldAsk
	ticks   uint64 // Resend ticks since boot, for aging held asks
	ticking bool
	nudged  uint64 // the last revision Behind was told of
	stopped bool

	// Counters, for metrics and tests.
	Awaited, Confirmed, Missed, Dropped, BadFrames uint64
}

type heldKey struct {
	from dial.NodeID
	id   uint64
}

type heldAsk struct {
	rev  uint64
	seen uint64 // s.ticks when last asked
}

// await is one change waiting for its rollout.
type await struct {
	rev  uint64
	done func(Result, error)
	// pending are the members yet to confirm, sorted, each with the tick
	// (of this await's own) at which its wait ends.
	pending []member
	missing []dial.NodeID
	ticks   int
	timer   clock.Timer
}

type member struct {
	id      dial.NodeID
	waitEnd int
}

// New returns the service.
func New(cfg Config, env Env) *Service {
	return &Service{cfg: cfg.withDefaults(), env: env, awaits: map[uint64]*await{},
		suspect: map[dial.NodeID]bool{}, held: map[heldKey]heldAsk{}}
}

// Served is the shell's report that it serves the configuration at rev:
// every held ask for rev or earlier is answered, and this node's own part
// of every await for them is done. A lower rev than reported before
// changes nothing.
func (s *Service) Served(rev uint64) {
	if rev <= s.serving {
		return
	}
	s.serving = rev
	s.answerHeld()
	for _, id := range slices.Sorted(maps.Keys(s.awaits)) {
		s.confirm(id, s.env.ID, rev)
	}
}

// Applied is the node's report that it has applied rev: if an asker
// waits for a revision up to rev that the shell does not serve yet, the
// shell is nudged now rather than at the asker's next resend.
func (s *Service) Applied(rev uint64) {
	if s.env.Behind == nil || len(s.held) == 0 || rev <= s.nudged {
		return
	}
	for _, h := range s.held { //fenceline:unordered a check whether any matches; order reaches nothing
		if h.rev <= rev && h.rev > s.serving {
			s.nudged = rev
			s.env.Behind(rev)
			return
		}
	}
}

// Serving is the revision the shell last reported.
func (s *Service) Serving() uint64 { return s.serving }

// serves is the revision this node acks: what its shell serves (the
// planted bug: what it applied).
func (s *Service) serves() uint64 {
	if s.cfg.Bugs.AnswerBeforeReconciled {
		return max(s.serving, s.env.Ctl.Applied())
	}
	return s.serving
}

// Await asks every member of the membership, this node included, to
// confirm that it serves rev. done runs once, on the node's loop: with
// the members that did not confirm in time, or with ErrBusy or
// ErrStopped (nothing asked).
func (s *Service) Await(rev uint64, done func(Result, error)) {
	switch {
	case s.stopped:
		done(Result{}, ErrStopped)
		return
	case len(s.awaits) >= s.cfg.MaxAwaits:
		done(Result{}, fmt.Errorf("%w (%d in flight)", ErrBusy, len(s.awaits)))
		return
	}
	s.nextID++
	s.Awaited++
	a := &await{rev: rev, done: done}
	members := slices.Clone(s.env.Ctl.Members())
	slices.Sort(members)
	members = slices.Compact(members)
	full, short := s.ticksFor(s.cfg.Wait), s.ticksFor(s.cfg.SuspectWait)
	for _, id := range members {
		w := full
		if s.suspect[id] {
			w = short
		}
		a.pending = append(a.pending, member{id: id, waitEnd: w})
	}
	// Suspicion is about current members only: a removed member's is
	// forgotten, so the map is bounded by the membership.
	for _, id := range slices.Sorted(maps.Keys(s.suspect)) {
		if !slices.Contains(members, id) {
			delete(s.suspect, id)
		}
	}
	id := s.nextID
	s.awaits[id] = a
	if s.serves() >= rev {
		s.drop(a, s.env.ID)
	}
	s.ask(id, a)
	if s.finishIfDone(id, a) {
		return
	}
	a.timer = s.env.Clock.AfterFunc(s.cfg.Resend, func() { s.tick(id) })
}

// ticksFor is how many Resend ticks a wait lasts, at least one.
func (s *Service) ticksFor(d time.Duration) int {
	return max(1, int((d+s.cfg.Resend-1)/s.cfg.Resend))
}

// ask sends the ask to every pending member but this node.
func (s *Service) ask(id uint64, a *await) {
	for _, m := range a.pending {
		if m.id != s.env.ID {
			_ = s.env.Net.Send(m.id, encode(frameAsk, id, a.rev)) // a lost ask is asked again
		}
	}
}

// tick runs every Resend while an await is pending: members whose wait
// has ended are missing, the others are asked again.
func (s *Service) tick(id uint64) {
	a := s.awaits[id]
	if a == nil || s.stopped {
		return
	}
	a.ticks++
	kept := a.pending[:0]
	for _, m := range a.pending {
		if a.ticks >= m.waitEnd {
			a.missing = append(a.missing, m.id)
			continue
		}
		kept = append(kept, m)
	}
	a.pending = kept
	if s.finishIfDone(id, a) {
		return
	}
	s.ask(id, a)
	a.timer = s.env.Clock.AfterFunc(s.cfg.Resend, func() { s.tick(id) })
}

// confirm notes that member serves rev for await id.
func (s *Service) confirm(id uint64, from dial.NodeID, serving uint64) {
	// Any ack, even for an await that ended without it, says the member
	// is up and serving: it is waited for in full again.
	delete(s.suspect, from)
	a := s.awaits[id]
	if a == nil || serving < a.rev {
		return
	}
	if s.drop(a, from) {
		s.finishIfDone(id, a)
	}
}

// drop takes a confirmed member off an await's pending list.
func (s *Service) drop(a *await, from dial.NodeID) bool {
	i := slices.IndexFunc(a.pending, func(m member) bool { return m.id == from })
	if i < 0 {
		return false
	}
	a.pending = slices.Delete(a.pending, i, i+1)
	delete(s.suspect, from)
	s.Confirmed++
	return true
}

// finishIfDone answers an await with nothing pending.
func (s *Service) finishIfDone(id uint64, a *await) bool {
	if len(a.pending) > 0 {
		return false
	}
	delete(s.awaits, id)
	if a.timer != nil {
		a.timer.Stop()
	}
	slices.Sort(a.missing)
	for _, m := range a.missing {
		s.suspect[m] = true
		s.Missed++
	}
	a.done(Result{Rev: a.rev, Missing: a.missing}, nil)
	return true
}

// HandleFrame takes an ask or an ack from a peer.
func (s *Service) HandleFrame(from dial.NodeID, frame []byte) {
	if s.stopped {
		return
	}
	kind, id, rev, err := decode(frame)
	if err != nil {
		s.BadFrames++
		return
	}
	switch kind {
	case frameAck:
		s.confirm(id, from, rev)
	case frameAsk:
		s.onAsk(from, id, rev)
	}
}

// onAsk answers an ask at once if this node serves rev; otherwise it
// holds it until it does, and nudges the shell if the revision is
// applied here.
func (s *Service) onAsk(from dial.NodeID, id, rev uint64) {
	if serving := s.serves(); serving >= rev {
		_ = s.env.Net.Send(from, encode(frameAck, id, serving))
		return
	}
	k := heldKey{from, id}
	if _, ok := s.held[k]; !ok && len(s.held) >= s.cfg.MaxHeld {
		s.ageHeld()
		if len(s.held) >= s.cfg.MaxHeld {
			s.Dropped++ // its asker asks again, and names this node if it must
			return
		}
	}
	s.held[k] = heldAsk{rev: rev, seen: s.ticks}
	s.startTicking()
	if applied := s.env.Ctl.Applied(); s.env.Behind != nil && applied >= rev {
		s.nudged = max(s.nudged, applied)
		s.env.Behind(rev)
	}
}

// answerHeld acks every held ask this node now serves, in a fixed order.
func (s *Service) answerHeld() {
	if len(s.held) == 0 {
		return
	}
	serving := s.serves()
	keys := make([]heldKey, 0, len(s.held))
	for k, h := range s.held {
		if h.rev <= serving {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b heldKey) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.id, b.id))
	})
	for _, k := range keys {
		delete(s.held, k)
		_ = s.env.Net.Send(k.from, encode(frameAck, k.id, serving))
	}
}

// heldFor is how long, in Resend ticks, a held ask lasts without being
// asked again: its asker resends every tick while it waits, so one not
// asked for this long belongs to an await that ended.
func (s *Service) heldFor() uint64 { return uint64(2 * s.ticksFor(s.cfg.Wait)) }

// ageHeld forgets held asks no asker renewed.
func (s *Service) ageHeld() {
	for k, h := range s.held { //fenceline:unordered deleting stale entries; order reaches nothing
		if s.ticks-h.seen > s.heldFor() {
			delete(s.held, k)
		}
	}
}

// startTicking runs the member's clock for aging held asks while it
// holds any; in the real node's bigger picture, and while held asks wait
// for a shell that reports through Served, it also retries the nudge.
func (s *Service) startTicking() {
	if s.ticking {
		return
	}
	s.ticking = true
	s.env.Clock.AfterFunc(s.cfg.Resend, s.memberTick)
}

func (s *Service) memberTick() {
	s.ticking = false
	if s.stopped {
		return
	}
	s.ticks++
	s.ageHeld()
	if len(s.held) > 0 {
		s.startTicking()
	}
}

// Stop answers every await with ErrStopped and drops every held ask.
func (s *Service) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	for _, id := range slices.Sorted(maps.Keys(s.awaits)) {
		a := s.awaits[id]
		delete(s.awaits, id)
		if a.timer != nil {
			a.timer.Stop()
		}
		a.done(Result{}, ErrStopped)
	}
	clear(s.held)
}

// encode writes a frame: prefix, kind, await id, revision.
func encode(kind byte, id, rev uint64) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64)
	b = append(b, FramePrefix, kind)
	b = binary.AppendUvarint(b, id)
	return binary.AppendUvarint(b, rev)
}

func decode(frame []byte) (kind byte, id, rev uint64, err error) {
	d := binenc.Decoder{B: frame}
	if d.Byte() != FramePrefix {
		d.Fail("not a rollout frame")
	}
	kind = d.Byte()
	if d.Err == nil && kind != frameAsk && kind != frameAck {
		d.Fail("rollout frame kind %d", kind)
	}
	id, rev = d.Uvarint(), d.Uvarint()
	d.End()
	return kind, id, rev, d.Err
}
