package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/fenceline/fenceline/core/kv"
)

// Lease checkers. Two views, because each catches what the other cannot:
//
//   - LeaseExclusive judges the holders' beliefs at true (simulator)
//     instants: no two clients both believe they hold one lease at one
//     instant. A belief is what a careful client may conclude from its own
//     calls and the cluster's clock error, which the simulator knows
//     exactly (LeaseBeliefs).
//   - LeaseStream judges each node's watch stream in applied order:
//     applied time never goes back, no grant while another holder's tenure
//     is valid, Expired only after the deadline and Deleted only before
//     it, and Deleted only when the holder asked to release.
//   - LeaseLapse judges refusals: a lease whose holder's every grant
//     must have run out by the cluster's clock, or that its holder
//     released since, is free, so an acquire refused in its name is a
//     lease that never lapses or a release that frees nothing, which the
//     other two cannot see: a lease that is never free is never held
//     twice.

// LeaseCallKind is what a client asked of a lease.
type LeaseCallKind uint8

// Lease call kinds.
const (
	LeaseAcquire LeaseCallKind = iota + 1
	LeaseRenew
	LeaseRelease
)

func (k LeaseCallKind) String() string {
	switch k {
	case LeaseAcquire:
		return "acquire"
	case LeaseRenew:
		return "renew"
	case LeaseRelease:
		return "release"
	}
	return fmt.Sprintf("lease-call(%d)", uint8(k))
}

// LeaseCall is one client call on a lease as the client saw it.
type LeaseCall struct {
	Holder, Lease string
	Kind          LeaseCallKind
	Node          string // the node called: it stamps the command with its clock
	TTL           time.Duration
	Call          time.Duration // true time of the call
	Answered      bool          // an answer came (granted or refused)
	// NotApplied: the answer was a refusal known not applied (no leader,
	// busy, a command refused before it was proposed): it says nothing
	// of whether the holder holds the lease.
	NotApplied bool
	Answer     time.Duration // true time of the answer
	Granted    bool          // acquire or renew answered: Holder holds Lease
	Token      uint64        // the tenure the grant named
	// RefusedFor is, for an acquire refused because the lease is held,
	// the holder the refusal named.
	RefusedFor string
	// Released: a release answered as done (the holder held the lease).
	Released bool
}

// ClockRecord is the simulator's record of the nodes' clocks: an offset is
// a node's wall reading minus true time.
type ClockRecord interface {
	// OffsetAt is node's offset at true instant t.
	OffsetAt(node string, t time.Duration) time.Duration
	// MaxOffset is the largest offset any node's clock had at any
	// instant of [from, to].
	MaxOffset(from, to time.Duration) time.Duration
	// MinOffset is the smallest offset any node's clock had at any
	// instant of [from, to].
	MinOffset(from, to time.Duration) time.Duration
}

// LeaseBelief is an interval of true time in which a holder may believe
// it holds a lease.
type LeaseBelief struct {
	Holder, Lease string
	Token         uint64
	From, To      time.Duration // [From, To); empty when To <= From
}

// LeaseBeliefs derives what each holder may believe from its granted
// calls. A grant stamped by node n at the call has its deadline at least
// call + off_n(call) + ttl in applied time; another holder can be granted
// only once some node's clock reads past that, which cannot happen before
// call + ttl - E, E being how far ahead of n's clock at the call any
// clock ran until then. So a careful client believes from the answer to
// call + ttl - E, and stops believing the moment it asks to release. The
// simulator knows E exactly; a real client would subtract the bound its
// deployment assumes.
func LeaseBeliefs(calls []LeaseCall, clocks ClockRecord) []LeaseBelief {
	var out []LeaseBelief
	for _, c := range calls {
		if c.Kind == LeaseRelease || !c.Granted {
			continue
		}
		end := c.Call + c.TTL
		if e := clocks.MaxOffset(c.Call, end) - clocks.OffsetAt(c.Node, c.Call); e > 0 {
			end -= e
		}
		for _, r := range calls {
			if r.Kind == LeaseRelease && r.Holder == c.Holder && r.Lease == c.Lease && r.Call >= c.Answer && r.Call < end {
				end = r.Call
			}
		}
		if end > c.Answer {
			out = append(out, LeaseBelief{Holder: c.Holder, Lease: c.Lease, Token: c.Token, From: c.Answer, To: end})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].Holder < out[j].Holder
	})
	return out
}

// LeaseExclusive fails when two holders both believe they hold one lease
// at one true instant. It reports the first overlap per pair of holders.
func LeaseExclusive(rep Reporter, beliefs []LeaseBelief) {
	seen := map[string]bool{}
	for i, a := range beliefs {
		for _, b := range beliefs[i+1:] {
			if b.From >= a.To {
				continue
			}
			if a.Lease != b.Lease || a.Holder == b.Holder {
				continue
			}
			pair := a.Lease + "\x00" + a.Holder + "\x00" + b.Holder
			if seen[pair] {
				continue
			}
			seen[pair] = true
			rep.Fail("lease-safety", "lease %q: %s (token %d) believed it held it over [%v, %v) and %s (token %d) over [%v, %v): both at %v",
				a.Lease, a.Holder, a.Token, a.From, a.To, b.Holder, b.Token, b.From, b.To, b.From)
		}
	}
}

// leaseSlack covers the millisecond the clock is stamped in, either way.
const leaseSlack = 2 * time.Millisecond

// LeaseLapse fails an acquire refused in the name of a holder whose
// tenure must have ended before the refused command applied (checker
// lease-lapse): by its deadline, by a release, or because the record
// holds no grant to it at all. Each of the holder's acquires and
// renewals that may have applied before the refused one was stamped by
// the node it was sent through, at an instant before its answer, so its
// deadline in applied time is at most answer + (the most any clock ran
// ahead by then) + TTL. The refused acquire was stamped after its own
// call, so applied time at it was at least call + (the least any clock
// ran behind over its span): past every such deadline, the holder's
// lease had lapsed and the acquire had to be granted (another holder's
// grant in between would have named that holder instead). A release by
// the holder answered as done before the acquire was called, and called
// after every grant to the holder was answered, freed the lease too. A
// holder's call with no answer (an unknown outcome: it may have applied
// at any time) leaves the refusal unjudged.
func LeaseLapse(rep Reporter, calls []LeaseCall, clocks ClockRecord) {
	for _, x := range calls {
		if x.Kind != LeaseAcquire || !x.Answered || x.RefusedFor == "" || x.RefusedFor == x.Holder {
			continue
		}
		deadline, lastGrant, judged := time.Duration(0), time.Duration(-1), true
		for _, h := range calls {
			if h.Holder != x.RefusedFor || h.Lease != x.Lease || h.Kind == LeaseRelease || h.Call >= x.Answer {
				continue
			}
			if !h.Answered {
				judged = false
				break
			}
			if !h.Granted {
				continue // refused: it changed nothing
			}
			deadline = max(deadline, h.Answer+clocks.MaxOffset(h.Call, h.Answer)+h.TTL)
			lastGrant = max(lastGrant, h.Answer)
		}
		if !judged {
			continue
		}
		why := ""
		if lastGrant < 0 {
			why = "who the record shows was never granted it"
		} else if applied := x.Call + clocks.MinOffset(x.Call, x.Answer); applied > deadline+leaseSlack {
			why = fmt.Sprintf("whose last grant ran out by %v in applied time; the acquire applied at %v or later", deadline, applied)
		}
		for _, r := range calls {
			if why != "" {
				break
			}
			if r.Holder == x.RefusedFor && r.Lease == x.Lease && r.Kind == LeaseRelease && r.Released &&
				r.Call > lastGrant && r.Answer < x.Call {
				why = fmt.Sprintf("who released it at %v, after its last grant and before the acquire was called", r.Call)
			}
		}
		if why != "" {
			rep.Fail("lease-lapse", "acquire of lease %q by %s through %s at %v was refused as held by %s, %s",
				x.Lease, x.Holder, x.Node, x.Call, x.RefusedFor, why)
			return
		}
	}
}

// LeaseAnswer checks that an answer says what the call asked: a grant
// names the lease and the holder that asked, with a tenure. It fails
// otherwise (checker lease-answer).
func LeaseAnswer(rep Reporter, c LeaseCall, got kv.Lease) {
	if !c.Granted {
		return
	}
	if got.Name != c.Lease || got.Holder != c.Holder || got.Token == 0 {
		rep.Fail("lease-answer", "%s of lease %q by %s through %s at %v was answered with lease %q of %q, token %d",
			c.Kind, c.Lease, c.Holder, c.Node, c.Call, got.Name, got.Holder, got.Token)
	}
}

// LeaseStream judges one node's watch stream. Feed it every lease event
// (and the applied time of every event) in order; after the node restarts
// or the stream skips (a compacted watch log), start a new one.
type LeaseStream struct {
	Node    string
	atMs    int64
	tenures map[string]tenure
}

type tenure struct {
	holder     string
	token      uint64
	deadlineMs int64
}

// NewLeaseStream starts judging node's stream.
func NewLeaseStream(node string) *LeaseStream {
	return &LeaseStream{Node: node, tenures: map[string]tenure{}}
}

// Skip forgets the tenures the stream knew, after a gap in it (the node's
// watch log no longer reached back): what it knew is stale. Applied time
// is still held to never going back.
func (s *LeaseStream) Skip() { s.tenures = map[string]tenure{} }

// Event judges the next event of the stream. calls are the clients'
// lease calls so far, which justify a Deleted.
func (s *LeaseStream) Event(rep Reporter, ev kv.Event, calls []LeaseCall) {
	if ev.AtMs < s.atMs {
		rep.Fail("lease-stream", "%s: applied time went back from %d to %d ms at index %d", s.Node, s.atMs, ev.AtMs, ev.Index)
	}
	s.atMs = max(s.atMs, ev.AtMs)
	if ev.Space != kv.SpaceLease {
		return
	}
	t, held := s.tenures[ev.Key]
	switch ev.Kind {
	case kv.EventPut:
		if held && t.holder != ev.Holder && t.deadlineMs > ev.AtMs {
			rep.Fail("lease-stream", "%s: lease %q granted to %s (token %d) at %d ms while %s (token %d) held it until %d ms",
				s.Node, ev.Key, ev.Holder, ev.Token, ev.AtMs, t.holder, t.token, t.deadlineMs)
		}
		// A tenure lapses at its deadline: a renewal applied at it or
		// after it renews a lease that has already expired.
		if held && t.holder == ev.Holder && t.token == ev.Token && ev.AtMs >= t.deadlineMs {
			rep.Fail("lease-stream", "%s: lease %q of %s (token %d) renewed at %d ms, at or after its deadline %d ms",
				s.Node, ev.Key, ev.Holder, ev.Token, ev.AtMs, t.deadlineMs)
		}
		s.tenures[ev.Key] = tenure{holder: ev.Holder, token: ev.Token, deadlineMs: ev.DeadlineMs}
	case kv.EventDeleted:
		// A lapse is reported as Expired, never Deleted: a lease past
		// its deadline expires before anything else applies.
		if ev.DeadlineMs <= ev.AtMs {
			rep.Fail("lease-stream", "%s: lease %q of %s reported Deleted at %d ms, after its deadline %d: a lapse is Expired",
				s.Node, ev.Key, ev.Holder, ev.AtMs, ev.DeadlineMs)
		}
		if !releaseJustified(calls, ev.Holder, ev.Key, ev.Token) {
			rep.Fail("lease-stream", "%s: lease %q of %s (token %d) was released at %d ms, but %s never asked to release that tenure",
				s.Node, ev.Key, ev.Holder, ev.Token, ev.AtMs, ev.Holder)
		}
		delete(s.tenures, ev.Key)
	case kv.EventExpired:
		if ev.DeadlineMs > ev.AtMs {
			rep.Fail("lease-stream", "%s: lease %q of %s expired at %d ms, before its deadline %d", s.Node, ev.Key, ev.Holder, ev.AtMs, ev.DeadlineMs)
		}
		delete(s.tenures, ev.Key)
	}
}

// releaseJustified reports whether holder asked to release the tenure
// token of lease: some release of its came after a call of its that
// could have begun or renewed that tenure — one answered with that token,
// or, when the tenure was never learned, the holder's last acquire or
// renew before the release, if no answer to it came.
func releaseJustified(calls []LeaseCall, holder, lease string, token uint64) bool {
	for _, r := range calls {
		if r.Kind != LeaseRelease || r.Holder != holder || r.Lease != lease {
			continue
		}
		var last *LeaseCall
		for i := range calls {
			c := &calls[i]
			if c.Kind == LeaseRelease || c.Holder != holder || c.Lease != lease || c.Call > r.Call {
				continue
			}
			if c.Granted && c.Token == token {
				return true
			}
			if c.NotApplied {
				// Refused before it reached the lease: the holder knows
				// no more than before it asked.
				continue
			}
			if last == nil || c.Call >= last.Call {
				last = c
			}
		}
		if last != nil && !last.Answered {
			return true
		}
	}
	return false
}
