// Package proxyonce is the owner's half of proxyOnce's claim protocol: the
// state machine that lets exactly one request, cluster-wide, call the real
// upstream for a request signature it has never seen.
//
// A signature is owned on the ring like a flow (class proxy), under the key
// "<port>:<xxh64 of the canonical signature, 16 hex digits>" (KeyOf). Its
// owner holds it in one of three states:
//
//	Unclaimed --Claim--> Pending(token) --Recorded--> (Recorded: in raft)
//	                         |  ^
//	      Release(token),    |  |  Claim after the lapse: a new token
//	      lapse, Forget      v  |
//	                      Unclaimed
//
// Recorded is not kept here: the recorded answer is an entry of the
// replicated KV, which every node reads before asking the owner anything,
// and which survives every crash. Pending lives only in the owner's
// memory, so an owner that crashes, or loses the key to a membership
// change, forgets it, and the signature becomes claimable again under a
// new token. A token names the owner, its boot session and a sequence
// number, so no two grants ever share one, across restarts included; a
// token that is not the current grant of its key (lapsed, released, from
// before a restart or from another owner) can neither record nor release.
//
// Claims is pure: time comes in as the caller's clock reading, nothing
// runs on its own, and no map order reaches a result.
package proxyonce

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/dial"
)

// KeyOf is the ring key of a signature on an imposter's port.
func KeyOf(port int, canonical []byte) string {
	return strconv.Itoa(port) + ":" + fmt.Sprintf("%016x", xxhash.Sum64(canonical))
}

// portOf reads the port a key belongs to; -1 if the key is not KeyOf's.
func portOf(key string) int {
	p, _, ok := strings.Cut(key, ":")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return -1
	}
	return n
}

// Token is one grant of a claim: who granted it, in which of its boot
// sessions, and the grant's number in that session.
type Token struct {
	Owner   dial.NodeID
	Session uint64
	Seq     uint64
}

func (t Token) String() string { return fmt.Sprintf("%v/%x/%d", t.Owner, t.Session, t.Seq) }

// Config bounds the claims an owner holds.
type Config struct {
	// Lapse is how long a claim stays Pending without a recording or a
	// release; after it the signature is claimable again. Default 60s.
	Lapse time.Duration
	// MaxPending bounds the Pending claims per imposter port; at the bound
	// Claim refuses with ErrBusy. Default 10 000.
	MaxPending int
}

func (c Config) withDefaults() Config {
	if c.Lapse == 0 {
		c.Lapse = 60 * time.Second
	}
	if c.MaxPending == 0 {
		c.MaxPending = 10000
	}
	return c
}

// Errors.
var (
	// ErrBusy is a claim refused because its port has MaxPending claims.
	ErrBusy = errors.New("proxyonce: too many signatures pending on this port")
	// ErrStale is a record or release with a token that is not its key's
	// current grant.
	ErrStale = errors.New("proxyonce: stale claim token")
	// ErrBadKey is a key not made by KeyOf.
	ErrBadKey = errors.New("proxyonce: malformed signature key")
)

// Claims is one owner's Pending claims.
type Claims struct {
	cfg     Config
	self    dial.NodeID
	session uint64
	seq     uint64
	pending map[string]pending
	perPort map[int]int
}

type pending struct {
	token   Token
	expires time.Duration // the claim lapses at this clock reading
}

// New returns an owner's claims; session is drawn at the owner's boot
// (from its seeded source), so that a restarted owner's tokens never
// repeat an earlier incarnation's.
func New(cfg Config, self dial.NodeID, session uint64) *Claims {
	return &Claims{cfg: cfg.withDefaults(), self: self, session: session, pending: map[string]pending{}, perPort: map[int]int{}}
}

// Grant is Claim's answer: the caller won (it, and only it, calls
// upstream, with Token), or another request holds the claim (Token is the
// winner's) and the caller waits for its recording.
type Grant struct {
	Won   bool
	Token Token
}

// Claim asks for key at clock reading now.
func (c *Claims) Claim(key string, now time.Duration) (Grant, error) {
	port := portOf(key)
	if port < 0 {
		return Grant{}, ErrBadKey
	}
	if p, ok := c.pending[key]; ok {
		if now < p.expires {
			return Grant{Token: p.token}, nil
		}
		c.remove(key) // lapsed: claimable again
	}
	if c.perPort[port] >= c.cfg.MaxPending {
		return Grant{}, ErrBusy
	}
	c.seq++
	t := Token{Owner: c.self, Session: c.session, Seq: c.seq}
	c.pending[key] = pending{token: t, expires: now + c.cfg.Lapse}
	c.perPort[port]++
	return Grant{Won: true, Token: t}, nil
}

// CheckRecord says whether t may record key now: it must be the key's
// current, unlapsed grant. The caller then proposes the recording to raft
// and calls Recorded once the entry commits.
func (c *Claims) CheckRecord(key string, t Token, now time.Duration) error {
	p, ok := c.pending[key]
	if !ok || p.token != t || now >= p.expires {
		return ErrStale
	}
	return nil
}

// Recorded ends key's claim: its recording committed.
func (c *Claims) Recorded(key string) { c.remove(key) }

// Release gives key up (the upstream failed, the client went away): the
// signature is claimable again at once.
func (c *Claims) Release(key string, t Token) error {
	p, ok := c.pending[key]
	if !ok || p.token != t {
		return ErrStale
	}
	c.remove(key)
	return nil
}

// Sweep removes the claims lapsed at now and reports how many.
func (c *Claims) Sweep(now time.Duration) int {
	n := 0
	for key, p := range c.pending { //fenceline:unordered removing each lapsed claim; only the count leaves
		if now >= p.expires {
			c.remove(key)
			n++
		}
	}
	return n
}

// Forget drops every claim whose key keep does not keep: the keys this
// node no longer owns after a membership change. Their signatures become
// claimable at their new owners, under new tokens.
func (c *Claims) Forget(keep func(key string) bool) int {
	n := 0
	for key := range c.pending { //fenceline:unordered removing each; only the count leaves
		if !keep(key) {
			c.remove(key)
			n++
		}
	}
	return n
}

// Pending is the number of claims held.
func (c *Claims) Pending() int { return len(c.pending) }

// Holder returns key's current grant, if Pending at now.
func (c *Claims) Holder(key string, now time.Duration) (Token, bool) {
	p, ok := c.pending[key]
	if !ok || now >= p.expires {
		return Token{}, false
	}
	return p.token, true
}

func (c *Claims) remove(key string) {
	if _, ok := c.pending[key]; !ok {
		return
	}
	delete(c.pending, key)
	port := portOf(key)
	if c.perPort[port]--; c.perPort[port] <= 0 {
		delete(c.perPort, port)
	}
}
