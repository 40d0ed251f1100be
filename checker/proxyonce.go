package checker

import (
	"fmt"
	"github.com/fenceline/fenceline/dial"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// UpstreamCall is one call the simulated upstream received for a
// signature: when the claim it ran under was granted (the network's record
// of the owner's answer leaving), when it started and ended, whether it
// failed, and the answer it gave (unique to the call).
type UpstreamCall struct {
	Key                 string
	Node                string
	Granted, Start, End time.Duration
	Failed              bool
	// Released: the call answered, but its client had gone, so its
	// winner gave the claim up instead of recording.
	Released bool
	Answer   string
	// Owner is the node that granted the claim (its token's owner).
	Owner dial.NodeID
}

// Served is an answer a client got for a signature.
type Served struct {
	Key    string
	Node   string
	At     time.Duration
	Answer string
}

// OwnerLoss is an instant a signature's owner lost its memory of a claim:
// the owner crashed, or the committed membership moved the signature to
// another owner. The simulator computes both from its own record.
type OwnerLoss struct {
	Key string
	At  time.Duration
	Why string
	// Moved: the signature moved to another owner. Nodes apply a
	// membership at different times, so the old owner may grant under the
	// old one after the new owner granted under the new: a move allows an
	// epoch whenever it came before the last grant, not only between the
	// first grant and the last, as a crash does; but before the first
	// grant only if the old owner (From) granted within Window after the
	// move. Past that window the old owner has either applied the move or
	// been cut off from its leader for D-17's isolation window, and must
	// grant nothing more: a late grant of its is an epoch no fault allows.
	Moved  bool
	From   dial.NodeID
	Window time.Duration
}

// lateGrantAllowed reports whether the old owner of a move l granted one
// of cs within l's window after it: the grant a move allows before the
// new owner's.
func lateGrantAllowed(cs []UpstreamCall, l OwnerLoss) bool {
	for _, c := range cs {
		if c.Owner == l.From && c.Granted >= l.At && c.Granted <= l.At+l.Window {
			return true
		}
	}
	return false
}

// ProxyOnce judges proxyOnce's promises (checker "proxyonce") from the
// simulator's record of the upstream it runs and of what clients got:
//
//   - upstream calls per signature stay within the claim epochs the faults
//     allow: one, plus one per earlier call that failed or whose client
//     had gone (its winner released the claim), per owner loss between the first grant and the
//     last, and per lapse that fits between them (lapse is the claims'
//     lapse less the owner's clock drift: a claim may end that early);
//   - every answer served for a signature is one answer, and it is what
//     an upstream call (that did not fail) answered for that signature;
//   - final, read off every node at the end, holds the recording each
//     node has; it must be the answer served.
//
// On a failure it prints the counts for each signature that broke.
func ProxyOnce(rep Reporter, calls []UpstreamCall, served []Served, losses []OwnerLoss, lapse time.Duration, final map[string]map[string]string) {
	byKey := map[string][]UpstreamCall{}
	for _, c := range calls {
		byKey[c.Key] = append(byKey[c.Key], c)
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		cs := byKey[key]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].Granted < cs[j].Granted })
		first, last := cs[0].Granted, cs[len(cs)-1].Granted
		failed, lost := 0, 0
		for _, c := range cs[:len(cs)-1] {
			if (c.Failed || c.Released) && c.End <= last {
				failed++
			}
		}
		for _, l := range losses {
			if l.Key == key && l.At <= last && (l.At >= first || l.Moved && lateGrantAllowed(cs, l)) {
				lost++
			}
		}
		lapses := 0
		if lapse > 0 {
			lapses = int((last - first) / lapse)
		}
		if allowed := 1 + failed + lost + lapses; len(cs) > allowed {
			var at []string
			for _, c := range cs {
				at = append(at, fmt.Sprintf("%v(granted %v by %v)@%s", c.Start, c.Granted, c.Owner, c.Node))
			}
			rep.Fail("proxyonce", "signature %s: %d upstream calls, at most %d allowed (1 + %d failed or released + %d owner losses + %d lapses): %s",
				key, len(cs), allowed, failed, lost, lapses, strings.Join(at, " "))
		}
	}
	answered := map[string]map[string]bool{} // key -> upstream answers that did not fail
	for _, c := range calls {
		if !c.Failed {
			if answered[c.Key] == nil {
				answered[c.Key] = map[string]bool{}
			}
			answered[c.Key][c.Answer] = true
		}
	}
	first := map[string]Served{}
	bad := map[string]bool{}
	for _, s := range served {
		if !answered[s.Key][s.Answer] && !bad[s.Key] {
			bad[s.Key] = true
			rep.Fail("proxyonce", "signature %s: %s served %q at %v, which no upstream call answered", s.Key, s.Node, s.Answer, s.At)
			continue
		}
		f, ok := first[s.Key]
		if !ok {
			first[s.Key] = s
			continue
		}
		if f.Answer != s.Answer && !bad[s.Key] {
			bad[s.Key] = true
			n := 0
			for _, c := range calls {
				if c.Key == s.Key {
					n++
				}
			}
			rep.Fail("proxyonce", "signature %s: two answers served, %q (%s at %v) and %q (%s at %v); %d upstream calls",
				s.Key, f.Answer, f.Node, f.At, s.Answer, s.Node, s.At, n)
		}
	}
	for _, node := range slices.Sorted(maps.Keys(final)) {
		for _, key := range slices.Sorted(maps.Keys(final[node])) {
			if f, ok := first[key]; ok && final[node][key] != f.Answer && !bad[key] {
				bad[key] = true
				rep.Fail("proxyonce", "signature %s: %s holds %q at the end, but %q was served", key, node, final[node][key], f.Answer)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(first)) {
		for _, node := range slices.Sorted(maps.Keys(final)) {
			if _, ok := final[node][key]; !ok && !bad[key] {
				bad[key] = true
				rep.Fail("proxyonce", "signature %s: served %q, but %s has no recording at the end", key, first[key].Answer, node)
			}
		}
	}
}
