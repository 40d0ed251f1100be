package scenarios

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Every injected fault and every client operation has a stable name in its
// run, so that a failing run can be replayed with some of them left out
// (simrun -skip, and the shrinker that drives it):
//
//   - a fault's ordinal counts the fault *attempts* of the run, 1, 2, 3 ...
//     in the order they come due. An attempt is numbered whether or not it
//     lands (a crash of a node already down, say), so leaving one fault
//     out does not renumber the others. Faults a scenario aims at what the
//     cluster does (a crash just after a vote, a cut at a new signature's
//     owner) come due when the cluster does it, so they count apart, as
//     "aimed" faults (#a1, #a2, ...): leaving out one of either kind
//     renumbers no fault of the schedule.
//   - an operation is named by its client and the client's own count,
//     "f3/12" (client f3's twelfth operation). Clients draw from their own
//     random streams, so a client's twelfth operation is the same request
//     however the others' timing shifts.
//
// A skipped fault still draws every random number it would have drawn
// (its shape, its duration) before it is skipped, so the rest of the
// schedule is unchanged. A skipped operation is never sent: its client
// hears "not sent" at once and goes on to its next.

// Ordinals is a set of positive integers as sorted, disjoint ranges. A
// range whose Hi is 0 is open: every ordinal from Lo on.
type Ordinals []OrdRange

// OrdRange is the ordinals Lo..Hi; Hi 0 means no end.
type OrdRange struct{ Lo, Hi int }

// Has reports whether n is in the set.
func (s Ordinals) Has(n int) bool {
	for _, r := range s {
		if n >= r.Lo && (r.Hi == 0 || n <= r.Hi) {
			return true
		}
	}
	return false
}

// Count is how many ordinals the set holds; -1 if it is open.
func (s Ordinals) Count() int {
	n := 0
	for _, r := range s {
		if r.Hi == 0 {
			return -1
		}
		n += r.Hi - r.Lo + 1
	}
	return n
}

// OrdinalsOf is the set of the given ordinals, as ranges.
func OrdinalsOf(ns []int) Ordinals {
	ns = slices.Clone(ns)
	slices.Sort(ns)
	ns = slices.Compact(ns)
	var s Ordinals
	for _, n := range ns {
		if l := len(s); l > 0 && s[l-1].Hi == n-1 {
			s[l-1].Hi = n
			continue
		}
		s = append(s, OrdRange{n, n})
	}
	return s
}

// Complement is every ordinal from 1 on that s does not hold (open).
func (s Ordinals) Complement() Ordinals {
	var out Ordinals
	next := 1
	for _, r := range s {
		if r.Lo > next {
			out = append(out, OrdRange{next, r.Lo - 1})
		}
		if r.Hi == 0 {
			return out
		}
		next = r.Hi + 1
	}
	return append(out, OrdRange{next, 0})
}

func (s Ordinals) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		switch {
		case r.Hi == 0:
			parts[i] = fmt.Sprintf("%d-", r.Lo)
		case r.Hi == r.Lo:
			parts[i] = strconv.Itoa(r.Lo)
		default:
			parts[i] = fmt.Sprintf("%d-%d", r.Lo, r.Hi)
		}
	}
	return strings.Join(parts, ",")
}

// parseOrdinals reads "3,17,22-30,40-" (ranges may be given in any order
// and may overlap; the set is normalized).
func parseOrdinals(text string) (Ordinals, error) {
	var ranges Ordinals
	for _, part := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 1 || !digits(lo) || hi != "" && !digits(hi) {
			return nil, fmt.Errorf("%q: want a positive integer or a range A-B or A-", part)
		}
		b := a
		if isRange {
			if hi == "" {
				b = 0
			} else if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q: want A-B with B at least A", part)
			}
		}
		ranges = append(ranges, OrdRange{a, b})
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].Lo < ranges[j].Lo })
	var s Ordinals
	for _, r := range ranges {
		if l := len(s); l > 0 && (s[l-1].Hi == 0 || r.Lo <= s[l-1].Hi+1) {
			if s[l-1].Hi != 0 && (r.Hi == 0 || r.Hi > s[l-1].Hi) {
				s[l-1].Hi = r.Hi
			}
			continue
		}
		s = append(s, r)
	}
	return s, nil
}

// Skip is what a run leaves out: faults by ordinal (scheduled and aimed
// apart), and operations by client and the client's ordinal.
type Skip struct {
	Faults Ordinals
	Aimed  Ordinals
	Ops    map[string]Ordinals
}

// Empty reports whether the run leaves nothing out.
func (s Skip) Empty() bool { return len(s.Faults) == 0 && len(s.Aimed) == 0 && len(s.Ops) == 0 }

// String is the -skip flag's text: "faults:3,17,22- aimed:2
// ops:f1/5-40,f2/1-", clients in name order; "" if nothing is skipped.
func (s Skip) String() string {
	var parts []string
	if len(s.Faults) > 0 {
		parts = append(parts, "faults:"+s.Faults.String())
	}
	if len(s.Aimed) > 0 {
		parts = append(parts, "aimed:"+s.Aimed.String())
	}
	if len(s.Ops) > 0 {
		clients := make([]string, 0, len(s.Ops))
		for c := range s.Ops {
			clients = append(clients, c)
		}
		sort.Strings(clients)
		var ops []string
		for _, c := range clients {
			for _, r := range s.Ops[c] {
				ops = append(ops, c+"/"+Ordinals{r}.String())
			}
		}
		parts = append(parts, "ops:"+strings.Join(ops, ","))
	}
	return strings.Join(parts, " ")
}

// ParseSkip reads the -skip flag: space-separated "faults:LIST",
// "aimed:LIST" and "ops:CLIENT/LIST,CLIENT/LIST,..." parts, where a LIST
// is ordinals and ranges ("3,17,22-30,40-") and a client is named as the
// run names it in its inventory (f3, kv1, ...: letters and digits).
func ParseSkip(text string) (Skip, error) {
	var s Skip
	for _, part := range strings.Fields(text) {
		kind, list, ok := strings.Cut(part, ":")
		if !ok || list == "" {
			return Skip{}, fmt.Errorf("skip %q: want faults:LIST or ops:CLIENT/LIST,...", part)
		}
		switch kind {
		case "faults", "aimed":
			f, err := parseOrdinals(list)
			if err != nil {
				return Skip{}, fmt.Errorf("skip %s: %w", kind, err)
			}
			set := &s.Faults
			if kind == "aimed" {
				set = &s.Aimed
			}
			if *set, err = parseOrdinals(append(*set, f...).String()); err != nil {
				return Skip{}, err
			}
		case "ops":
			if s.Ops == nil {
				s.Ops = map[string]Ordinals{}
			}
			// CLIENT/LIST items are separated by commas, and so are a
			// LIST's ordinals: an item with a slash starts a client.
			client := ""
			for _, item := range strings.Split(list, ",") {
				if c, rest, ok := strings.Cut(item, "/"); ok {
					if !isName(c) {
						return Skip{}, fmt.Errorf("skip ops %q: a client name is letters and digits", item)
					}
					client, item = c, rest
				}
				if client == "" {
					return Skip{}, fmt.Errorf("skip ops %q: want CLIENT/LIST, e.g. f3/5-40", item)
				}
				o, err := parseOrdinals(item)
				if err != nil {
					return Skip{}, fmt.Errorf("skip ops %s: %w", client, err)
				}
				merged, _ := parseOrdinals(append(s.Ops[client], o...).String())
				s.Ops[client] = merged
			}
		default:
			return Skip{}, fmt.Errorf("skip %q: want faults:LIST, aimed:LIST or ops:CLIENT/LIST,...", part)
		}
	}
	return s, nil
}

// isName reports whether s is a client name: letters and digits.
func isName(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return s != ""
}

// digits reports whether s is a non-empty run of decimal digits.
func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// FaultID names a fault attempt: its ordinal among the scheduled faults,
// or among the aimed ones.
type FaultID struct {
	Aimed bool
	N     int
}

func (id FaultID) String() string {
	if id.Aimed {
		return fmt.Sprintf("#a%d", id.N)
	}
	return fmt.Sprintf("#%d", id.N)
}

// FaultRecord is one fault a run injected, for its inventory.
type FaultRecord struct {
	ID   FaultID
	At   time.Duration
	What string
}

func (f FaultRecord) String() string {
	return fmt.Sprintf("%s t=%v %s", f.ID, f.At.Round(time.Millisecond), f.What)
}

// Fault is the next scheduled fault attempt. Call it once per attempt,
// before the attempt looks at any state (whether the node is up, how many
// are down, who leads), so that the numbering depends only on the
// schedule; then Inject, if the attempt lands.
func (r *Run) Fault() FaultID {
	r.faultSeq++
	return FaultID{N: r.faultSeq}
}

// AimedFault is the next aimed fault attempt: one a scenario makes when
// the cluster does something (a vote, a read that finds a flow gone, a
// new signature), counted apart from the schedule's.
func (r *Run) AimedFault() FaultID {
	r.aimedSeq++
	return FaultID{Aimed: true, N: r.aimedSeq}
}

// Inject applies fault id, described in words, unless the run skips it;
// it reports whether the fault was applied. Every random number the
// fault needs must be drawn before: a skipped fault draws the same ones.
func (r *Run) Inject(id FaultID, what string, apply func()) bool {
	k := r.Kernel
	if skipped := r.skip.Faults; id.Aimed && r.skip.Aimed.Has(id.N) || !id.Aimed && skipped.Has(id.N) {
		k.Mix([]byte(fmt.Sprintf("skip fault %s", id)))
		k.Logf("fault %s skipped: %s", id, what)
		return false
	}
	k.Mix([]byte(what))
	k.Logf("fault %s", what)
	r.result.Faults = append(r.result.Faults, FaultRecord{ID: id, At: k.Now(), What: what})
	apply()
	return true
}

// opOf is Op for the client named prefix followed by id in decimal, as
// fmt's %d writes it: the names are made once per client, not once per
// operation.
func opOf[T int | uint64](r *Run, prefix string, id T) (ord int, send bool) {
	const cached = 1 << 10
	if id < 0 || uint64(id) >= cached {
		return r.Op(fmt.Sprintf("%s%d", prefix, id))
	}
	if r.opNames == nil {
		r.opNames = map[string][]string{}
	}
	names := r.opNames[prefix]
	for uint64(len(names)) <= uint64(id) {
		names = append(names, prefix+strconv.Itoa(len(names)))
	}
	r.opNames[prefix] = names
	return r.Op(names[id])
}

// Op names client's next operation and reports whether to send it: false
// when the run skips it, and the client must then answer itself "not
// sent" and go on. Call it after the operation's random draws.
func (r *Run) Op(client string) (ord int, send bool) {
	if r.opSeq == nil {
		r.opSeq = map[string]int{}
	}
	r.opSeq[client]++
	ord = r.opSeq[client]
	if r.skip.Ops[client].Has(ord) {
		return ord, false
	}
	if r.result.Ops == nil {
		r.result.Ops = map[string][]int{}
	}
	r.result.Ops[client] = append(r.result.Ops[client], ord)
	return ord, true
}
