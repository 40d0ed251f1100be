package linearizability

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cespare/xxhash/v2"
)

// Flow operations as clients record them, checked per flow by porcupine.
//
// A flow is a small key → value map named by a flow id ("i8080:abc"); one
// owner serializes every operation on it, so the flow, not the key, is the
// unit of linearizability: a GetAll or a Clear touches every key at once.
// Operations are recorded in a History with Op.Key set to the flow id; the
// key inside the flow is FlowInput.Key.
//
// The model assumes what a checked history may show: strong reads only (a
// local read may be a push behind and is not linearizable), and no entry
// lapsing by TTL while the history runs (the model has no clock).

// FlowOp names a flow operation kind. The numbers follow the flow store's
// own operation numbers.
type FlowOp uint8

// Flow operation kinds.
const (
	FlowGet    FlowOp = iota + 1 // one key
	FlowSet                      // key = Value
	FlowDelete                   // remove key
	FlowCas                      // key = Value if key is absent (ExpectAbsent) or equals Expect
	FlowIncr                     // key += Delta as a decimal int64, absent counting as 0
	FlowGetAll                   // the whole flow
	FlowClear                    // remove every key of the flow
	FlowSetAll                   // set every key of Entries, in one step
)

var flowOpNames = [...]string{"invalid", "get", "set", "delete", "cas", "incr", "get-all", "clear", "set-all"}

func (o FlowOp) String() string {
	if int(o) < len(flowOpNames) {
		return flowOpNames[o]
	}
	return fmt.Sprintf("flow-op(%d)", uint8(o))
}

func (o FlowOp) valid() bool { return o >= FlowGet && o <= FlowSetAll }

// reads says the operation changes nothing, so an answer that never came
// tells the checker nothing and the operation can be left out.
func (o FlowOp) reads() bool { return o == FlowGet || o == FlowGetAll }

// FlowInput is an operation's input.
type FlowInput struct {
	Op           FlowOp
	Key          string // the key inside the flow; unused by FlowGetAll, FlowClear
	Value        string // FlowSet, FlowCas: the value written
	Expect       string // FlowCas: the value guarded on, unless ExpectAbsent
	ExpectAbsent bool   // FlowCas: the guard is "key absent"
	Delta        int64  // FlowIncr
	// Mod, for FlowIncr, makes the key a counter seen only modulo Mod, as
	// a response cycle of Mod places shows its counter: the key holds the
	// counter's residue, a step adds Delta modulo Mod, and the answer is
	// the place the step reached, residue before it plus one (1..Mod).
	Mod int64
	// Entries is FlowSetAll's keys and values, as EncodeFlowAll writes a
	// flow (a string, so inputs stay comparable).
	Entries string
}

// FlowOutput is an operation's answer. A write whose answer never came (or
// came as an unknown outcome) is recorded with Unknown set, and may or may
// not have taken effect.
type FlowOutput struct {
	Unknown    bool
	Found      bool   // FlowGet
	Value      string // FlowGet
	Succeeded  bool   // FlowCas
	Int        int64  // FlowIncr: the new value
	NotInteger bool   // FlowIncr: the current value is not a decimal int64; nothing changed
	All        string // FlowGetAll: EncodeFlowAll of the flow's content
}

// EncodeFlowAll is the canonical form of a flow's content, for
// FlowOutput.All: keys in sorted order, each key and then its value written
// as <decimal byte length>:<bytes>. The length prefixes make it unambiguous
// whatever bytes keys and values hold ({"a:1": ""} and {"a": "1"} encode
// differently), and the sorting makes equal maps equal strings, so a
// recorded answer compares with the model's state as a string.
func EncodeFlowAll(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		b = appendFlowEntry(b, k, flowValue{Present: true, Value: m[k]})
	}
	return string(b)
}

// flowValue is what the model knows of one key: present with a value, or
// absent.
type flowValue struct {
	Present bool
	Value   string
}

// flowAbsentMark stands for a value in the encoding of an open state's
// known-absent key. A length prefix never starts with it, so it cannot be
// confused with a value; EncodeFlowAll never writes it.
const flowAbsentMark = '-'

func appendFlowEntry(b []byte, key string, v flowValue) []byte {
	b = strconv.AppendInt(b, int64(len(key)), 10)
	b = append(b, ':')
	b = append(b, key...)
	if !v.Present {
		return append(b, flowAbsentMark)
	}
	b = strconv.AppendInt(b, int64(len(v.Value)), 10)
	b = append(b, ':')
	return append(b, v.Value...)
}

// decodeFlow reads EncodeFlowAll's encoding and, with absentOK, an open
// state's absent marks. Keys must be strictly increasing, so every map has
// one encoding.
func decodeFlow(s string, absentOK bool) (map[string]flowValue, error) {
	m := map[string]flowValue{}
	var prev string
	for first := true; s != ""; first = false {
		key, rest, err := cutFlowField(s)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		if !first && key <= prev {
			return nil, fmt.Errorf("key %q after %q: keys not strictly increasing", key, prev)
		}
		prev = key
		if absentOK && rest != "" && rest[0] == flowAbsentMark {
			m[key], s = flowValue{}, rest[1:]
			continue
		}
		value, rest, err := cutFlowField(rest)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", key, err)
		}
		m[key], s = flowValue{Present: true, Value: value}, rest
	}
	return m, nil
}

var errFlowField = errors.New("want <decimal length>:<bytes>")

func cutFlowField(s string) (field, rest string, err error) {
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", "", errFlowField
	}
	n := 0
	for _, c := range []byte(s[:i]) {
		if c < '0' || c > '9' || n > len(s) {
			return "", "", errFlowField
		}
		n = n*10 + int(c-'0')
	}
	s = s[i+1:]
	if n > len(s) {
		return "", "", fmt.Errorf("length %d past the end", n)
	}
	return s[:n], s[n:], nil
}

// checkFlowAll says whether all is exactly what EncodeFlowAll writes.
func checkFlowAll(all string) error {
	m, err := decodeFlow(all, false)
	if err != nil {
		return err
	}
	if closedFlowState(m).Known != all {
		return errors.New("not in canonical form")
	}
	return nil
}

// flowState is what the model knows of one flow. Known is its canonical
// encoding, so equal knowledge is one string: the model's Equal and Hash
// compare Known and Open only. m is Known decoded, built once when the
// state is made and never written after, so a step never decodes.
//
// A closed state knows the whole flow: Known is EncodeFlowAll of its
// content and every other key is absent. An open state is the wildcard a
// later segment of CheckFlowsSplit starts from: only the keys in Known are
// known (present, or absent by flowAbsentMark) and every other key may hold
// anything until an answer pins it.
type flowState struct {
	Known string
	Open  bool
	m     map[string]flowValue
}

func (s flowState) equal(o flowState) bool { return s.Known == o.Known && s.Open == o.Open }

func closedFlowState(m map[string]flowValue) flowState {
	return encodeFlowState(m, false)
}

// encodeFlowState makes the state that knows m; it keeps m.
func encodeFlowState(m map[string]flowValue, open bool) flowState {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		// A closed state lists present keys only: an absent key is the
		// same knowledge as a key not listed, and must encode the same.
		if open || v.Present {
			keys = append(keys, k)
		} else {
			delete(m, k)
		}
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		b = appendFlowEntry(b, k, m[k])
	}
	return flowState{Known: string(b), Open: open, m: m}
}

// entries is what s knows, key by key; callers must not change it.
func (s flowState) entries() map[string]flowValue {
	if s.m == nil && s.Known != "" {
		// Only a zero-value state lacks m, and it knows nothing.
		panic(fmt.Sprintf("linearizability: flow state %q without its map", s.Known))
	}
	return s.m
}

// lookup returns what s knows of key; known is false only in an open state.
func (s flowState) lookup(key string) (v flowValue, known bool) {
	v, ok := s.m[key]
	return v, ok || !s.Open
}

func (s flowState) with(key string, v flowValue) flowState {
	m := make(map[string]flowValue, len(s.m)+1)
	for k, old := range s.m { //fenceline:unordered copying into a map
		m[k] = old
	}
	m[key] = v
	return encodeFlowState(m, s.Open)
}

// flowInt reads a value as FlowIncr does: absent is 0, otherwise a decimal
// int64 exactly as strconv.ParseInt takes it, which is what the store uses.
func flowInt(v flowValue) (n int64, ok bool) {
	if !v.Present {
		return 0, true
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

func flowStep(s flowState, in FlowInput, out FlowOutput) []any {
	// maybe is a write's successors: with its answer, next; without, it
	// may or may not have taken effect.
	maybe := func(next flowState) []any {
		if out.Unknown {
			return []any{s, next}
		}
		return []any{next}
	}
	switch in.Op {
	case FlowGet:
		if out.Unknown {
			return []any{s}
		}
		seen := flowValue{Present: out.Found}
		if out.Found {
			seen.Value = out.Value
		}
		cur, known := s.lookup(in.Key)
		if !known {
			return []any{s.with(in.Key, seen)} // the first read pins the key
		}
		if cur != seen {
			return nil
		}
		return []any{s}
	case FlowSet:
		return maybe(s.with(in.Key, flowValue{Present: true, Value: in.Value}))
	case FlowDelete:
		return maybe(s.with(in.Key, flowValue{}))
	case FlowClear:
		return maybe(emptyFlow)
	case FlowSetAll:
		set, err := decodeFlow(in.Entries, false)
		if err != nil {
			return nil
		}
		m := make(map[string]flowValue, len(s.m)+len(set))
		for k, v := range s.m { //fenceline:unordered copying into a map
			m[k] = v
		}
		for k, v := range set { //fenceline:unordered copying into a map
			m[k] = v
		}
		return maybe(encodeFlowState(m, s.Open))
	case FlowCas:
		written := s.with(in.Key, flowValue{Present: true, Value: in.Value})
		cur, known := s.lookup(in.Key)
		if !known {
			// The guard may hold or fail. A failed guard leaves the key
			// unknown: "not equal to Expect" is not a value to pin, and
			// forgetting it can only let a history pass, never fail one.
			switch {
			case out.Unknown:
				return []any{s, written}
			case out.Succeeded:
				return []any{written}
			default:
				return []any{s}
			}
		}
		holds := !cur.Present
		if !in.ExpectAbsent {
			holds = cur.Present && cur.Value == in.Expect
		}
		switch {
		case out.Unknown:
			if holds {
				return []any{s, written}
			}
			return []any{s}
		case out.Succeeded != holds:
			return nil
		case holds:
			return []any{written}
		default:
			return []any{s}
		}
	case FlowIncr:
		cur, known := s.lookup(in.Key)
		if in.Mod > 0 {
			return cycleStep(s, in, out, cur, known)
		}
		if !known {
			// A successful answer pins the new value; a refusal says only
			// that the key holds some non-integer, which is not a value.
			if out.Unknown || out.NotInteger {
				return []any{s}
			}
			return []any{s.with(in.Key, flowValue{Present: true, Value: strconv.FormatInt(out.Int, 10)})}
		}
		n, isInt := flowInt(cur)
		if !isInt {
			// The op fails and changes nothing, answered or not.
			if out.Unknown || out.NotInteger {
				return []any{s}
			}
			return nil
		}
		// Wrapping, as the store's int64 addition does.
		next := n + in.Delta
		written := s.with(in.Key, flowValue{Present: true, Value: strconv.FormatInt(next, 10)})
		switch {
		case out.Unknown:
			return []any{s, written}
		case out.NotInteger || out.Int != next:
			return nil
		}
		return []any{written}
	case FlowGetAll:
		if out.Unknown {
			return []any{s}
		}
		got, err := decodeFlow(out.All, false)
		if err != nil {
			return nil
		}
		seen := closedFlowState(got)
		if !s.Open {
			if !seen.equal(s) {
				return nil
			}
			return []any{s}
		}
		for k, v := range s.entries() {
			if got[k] != v {
				return nil
			}
		}
		return []any{seen} // the whole flow is pinned
	}
	return nil
}

// cycleStep is FlowIncr on a counter seen modulo in.Mod (FlowInput.Mod).
func cycleStep(s flowState, in FlowInput, out FlowOutput, cur flowValue, known bool) []any {
	set := func(r int64) flowState {
		return s.with(in.Key, flowValue{Present: true, Value: strconv.FormatInt(r, 10)})
	}
	if !known {
		// The place a step reached pins the residue after it.
		if out.Unknown {
			return []any{s}
		}
		return []any{set((out.Int - 1 + in.Delta) % in.Mod)}
	}
	r, isInt := flowInt(cur)
	if !isInt {
		return nil
	}
	written := set((r + in.Delta) % in.Mod)
	switch {
	case out.Unknown:
		return []any{s, written}
	case out.Int != r+1:
		return nil
	}
	return []any{written}
}

// FlowModel is the porcupine model of one flow, from an empty flow;
// operations are partitioned by flow id (Op.Key in the History).
var FlowModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{emptyFlow} },
	Step: func(state, input, output any) []any {
		return flowStep(state.(flowState), input.(FlowInput), output.(FlowOutput))
	},
	Equal: func(a, b any) bool { return a.(flowState).equal(b.(flowState)) },
	Hash: func(state any) uint64 {
		s := state.(flowState)
		h := xxhash.Sum64String(s.Known)
		if s.Open {
			h = ^h
		}
		return h
	},
	DescribeOperation: describeFlowOp,
	DescribeState:     describeFlowState,
}

// emptyFlow is the closed state of a flow with no keys.
var emptyFlow = flowState{m: map[string]flowValue{}}

// flowModelFrom is FlowModel starting from init.
func flowModelFrom(init flowState) porcupine.Model {
	m := FlowModel
	m.Init = func() []any { return []any{init} }
	return m.ToModel()
}

// DescribeFlowOp is a flow operation as the checkers print it, for
// people: "cas(\"c\", absent → \"a\") -> true".
func DescribeFlowOp(input, output any) string { return describeFlowOp(input, output) }

func describeFlowOp(input, output any) string {
	in, out := input.(FlowInput), output.(FlowOutput)
	var call, res string
	switch in.Op {
	case FlowGet:
		call, res = fmt.Sprintf("get(%q)", in.Key), "absent"
		if out.Found {
			res = strconv.Quote(out.Value)
		}
	case FlowSet:
		call, res = fmt.Sprintf("set(%q, %q)", in.Key, in.Value), "ok"
	case FlowDelete:
		call, res = fmt.Sprintf("delete(%q)", in.Key), "ok"
	case FlowCas:
		expect := "absent"
		if !in.ExpectAbsent {
			expect = strconv.Quote(in.Expect)
		}
		call, res = fmt.Sprintf("cas(%q, %s → %q)", in.Key, expect, in.Value), strconv.FormatBool(out.Succeeded)
	case FlowIncr:
		call, res = fmt.Sprintf("incr(%q, %+d)", in.Key, in.Delta), strconv.FormatInt(out.Int, 10)
		if in.Mod > 0 {
			call = fmt.Sprintf("step(%q) of %d places", in.Key, in.Mod)
		}
		if out.NotInteger {
			res = "not an integer"
		}
	case FlowGetAll:
		call, res = "get-all()", describeFlowAll(out.All)
	case FlowClear:
		call, res = "clear()", "ok"
	case FlowSetAll:
		call, res = "set-all("+describeFlowAll(in.Entries)+")", "ok"
	default:
		call, res = in.Op.String(), fmt.Sprintf("%+v", out)
	}
	if out.Unknown {
		res = "?"
	}
	return call + " -> " + res
}

func describeFlowAll(all string) string {
	m, err := decodeFlow(all, false)
	if err != nil {
		return fmt.Sprintf("malformed %q", all)
	}
	return describeFlowState(closedFlowState(m))
}

func describeFlowState(state any) string {
	s := state.(flowState)
	m := s.entries()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		v := "absent"
		if m[k].Present {
			v = strconv.Quote(m[k].Value)
		}
		parts = append(parts, fmt.Sprintf("%q: %s", k, v))
	}
	if s.Open {
		parts = append(parts, "others: ?")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// FlowResult is the verdict on one flow.
type FlowResult struct {
	Flow     string // the flow id
	Ops      int    // history operations checked (not those left out)
	Segments int    // 1, or one more than the flow's distinct cut points
	// Straddling counts answered operations whose interval held a cut:
	// reads among them were left out, writes were checked as if their
	// answer never came. It is the size of the exception a cut grants.
	Straddling int
	Verdict    porcupine.CheckResult
	Describe   string // the failing segment's operations, for a failing verdict
	// FailsAt is when the operation whose call makes the history fail
	// was called (a failing verdict; 0 if the narrowing ran out of time).
	FailsAt time.Duration
}

// CheckFlows checks a history of FlowInput/FlowOutput operations for
// linearizability, flow by flow (Op.Key is the flow id), in sorted flow
// order, each from an empty flow. Refused operations are left out (they did
// not happen); an Unknown write is kept with its return time at Op.Until
// when the recorder bounded it (the simulator saw when its request could
// last take effect), unbounded otherwise, so it may take effect at any
// point in that window or never. Reads whose answer never came are left
// out.
//
// A FlowGetAll's All must be EncodeFlowAll's encoding, and every Op a
// FlowOp; CheckFlows panics otherwise, as the recording is wrong.
//
// porcupine's timeout is wall-clock: a flow that takes longer than timeout
// comes back porcupine.Unknown. Callers must not fold that verdict into a
// trace hash; it is reported, not failed.
func CheckFlows(h *History, timeout time.Duration) []FlowResult {
	return CheckFlowsSplit(h, timeout, nil)
}

// CheckFlowsSplit is CheckFlows with cut points: a flow with cuts is checked
// as separate segments [cut_i, cut_i+1), the first from an empty flow and
// each later one from a wildcard flow whose keys are unknown until an answer
// pins them (the first read of a key, or a get-all for every key) or a
// write sets them. A cut forgives whatever happened to the flow's content
// at that instant, exactly once: the design accepts that writes
// acknowledged by an owner but not yet pushed to its successors are lost
// when ownership moves, and a cut at the handoff lets the checker name and
// count that loss instead of failing on it, while every segment is still
// held to linearizability on its own. It does not bound the loss: what
// survived a handoff is a durability question for another checker.
//
// An operation belongs to the segment it was called and answered in. One
// whose interval holds a cut cannot be placed on either side, so it is
// weakened rather than trusted: a read is left out, a write is kept in
// every segment it overlaps as if its answer never came (may or may not
// have taken effect there). Dropping such a write outright would make a
// read that saw it look like a read of a value never written. An Unknown
// write is likewise kept in its own segment and every later one. The
// weakening can only let a history pass, never fail one.
//
// The timeout applies to each segment.
func CheckFlowsSplit(h *History, timeout time.Duration, cuts map[string][]time.Duration) []FlowResult {
	var results []FlowResult
	CheckFlowsEach(h, timeout, cuts, func(r FlowResult) bool {
		results = append(results, r)
		return true
	})
	return results
}

// CheckFlowsEach is CheckFlowsSplit handing each flow's verdict to each as
// it comes, in sorted flow order, until each returns false: a caller that
// needs one failure stops there, rather than narrowing every failing
// flow to its shortest illegal prefix (which, with a planted bug breaking
// most flows, costs minutes).
func CheckFlowsEach(h *History, timeout time.Duration, cuts map[string][]time.Duration, each func(FlowResult) bool) {
	byFlow := map[string][]Op{}
	for p := range h.all() {
		op := *p
		in, ok := op.Input.(FlowInput)
		if !ok || op.Outcome == Refused {
			continue
		}
		if !in.Op.valid() {
			panic(fmt.Sprintf("linearizability: op %d on flow %q: %v", op.ID, op.Key, in.Op))
		}
		if in.Op == FlowSetAll {
			if err := checkFlowAll(in.Entries); err != nil {
				panic(fmt.Sprintf("linearizability: op %d on flow %q: Entries %q is not EncodeFlowAll's: %v", op.ID, op.Key, in.Entries, err))
			}
		}
		if op.Outcome == Unknown {
			if in.Op.reads() {
				continue
			}
		} else if out := op.Output.(FlowOutput); in.Op == FlowGetAll {
			if err := checkFlowAll(out.All); err != nil {
				panic(fmt.Sprintf("linearizability: op %d on flow %q: All %q is not EncodeFlowAll's: %v", op.ID, op.Key, out.All, err))
			}
		}
		byFlow[op.Key] = append(byFlow[op.Key], op)
	}
	flows := make([]string, 0, len(byFlow))
	for f := range byFlow {
		flows = append(flows, f)
	}
	sort.Strings(flows)
	for _, f := range flows {
		if !each(checkFlow(f, byFlow[f], cutPoints(cuts[f]), timeout)) {
			return
		}
	}
}

// cutPoints sorts and dedupes a flow's cuts, without touching the caller's
// slice.
func cutPoints(cuts []time.Duration) []int64 {
	points := make([]int64, 0, len(cuts))
	for _, c := range cuts {
		points = append(points, int64(c))
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	out := points[:0]
	for i, p := range points {
		if i == 0 || p != points[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// flowSegment is [lo, hi) of one flow's history and the operations checked
// in it.
type flowSegment struct {
	lo, hi int64 // hi is math.MaxInt64 for the last segment
	ops    []porcupine.Operation
}

func checkFlow(flow string, ops []Op, cuts []int64, timeout time.Duration) FlowResult {
	segs := make([]flowSegment, len(cuts)+1)
	for i := range segs {
		segs[i].lo, segs[i].hi = math.MinInt64, math.MaxInt64
		if i > 0 {
			segs[i].lo = cuts[i-1]
		}
		if i < len(cuts) {
			segs[i].hi = cuts[i]
		}
	}
	// segmentOf is the segment holding instant t: cuts at or before t.
	segmentOf := func(t int64) int {
		return sort.Search(len(cuts), func(i int) bool { return cuts[i] > t })
	}
	r := FlowResult{Flow: flow, Ops: len(ops), Segments: len(segs), Verdict: porcupine.Ok}
	for _, op := range ops {
		in := op.Input.(FlowInput)
		out, ret := FlowOutput{Unknown: true}, int64(math.MaxInt64)
		switch {
		case op.Outcome == OK:
			out, ret = op.Output.(FlowOutput), int64(op.Return)
		case op.Bounded:
			// The simulator's record says when the request could last
			// take effect: hold the unknown write to that window.
			ret = int64(op.Until)
		}
		first, last := segmentOf(int64(op.Call)), segmentOf(ret)
		if first == last {
			segs[first].ops = append(segs[first].ops, porcupine.Operation{
				ClientId: op.Client, Input: in, Output: out, Call: int64(op.Call), Return: ret,
			})
			continue
		}
		note := "unanswered, spread over segments"
		if op.Outcome == OK {
			r.Straddling++
			note = "answered across a cut: checked as unknown"
			if in.Op.reads() {
				r.Ops--
				continue
			}
		}
		for i := first; i <= last; i++ {
			segs[i].ops = append(segs[i].ops, porcupine.Operation{
				ClientId: op.Client, Input: in, Output: FlowOutput{Unknown: true},
				Call: max(int64(op.Call), segs[i].lo), Return: min(ret, segs[i].hi),
				Metadata: note,
			})
		}
	}
	for i, seg := range segs {
		if len(seg.ops) == 0 {
			continue
		}
		init := emptyFlow
		if i > 0 {
			init = encodeFlowState(map[string]flowValue{}, true)
		}
		switch porcupine.CheckOperationsTimeout(flowModelFrom(init), seg.ops, timeout) {
		case porcupine.Illegal:
			r.Verdict = porcupine.Illegal
			if len(segs) > 1 {
				r.Describe = fmt.Sprintf("\n  segment %d of %d, %s:", i+1, len(segs), describeSegment(seg))
			}
			ops, last := shortestIllegalPrefix(flowModelFrom(init), seg.ops, timeout)
			if last != nil {
				r.FailsAt = time.Duration(last.Call)
				r.Describe += fmt.Sprintf("\n  it first fails when %s is called at %v; the %d operations called by then:",
					describeFlowOp(last.Input, last.Output), time.Duration(last.Call), len(ops))
			}
			r.Describe += describeOpsWith(describeFlowOp, ops)
			return r
		case porcupine.Unknown:
			r.Verdict = porcupine.Unknown
		}
	}
	return r
}

// shortestIllegalPrefix narrows an illegal history to its shortest
// illegal prefix in call order: the operations called up to the one whose
// call makes it fail, and that one. A history whose prefix is legal stays
// legal as operations called later are left out, so the search halves.
// It returns the whole history and nil if a check runs out of time.
func shortestIllegalPrefix(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) ([]porcupine.Operation, *porcupine.Operation) {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	lo, hi := 1, len(sorted) // the shortest illegal prefix has length in [lo, hi]
	for lo < hi {
		mid := (lo + hi) / 2
		switch porcupine.CheckOperationsTimeout(model, sorted[:mid], timeout) {
		case porcupine.Illegal:
			hi = mid
		case porcupine.Ok:
			lo = mid + 1
		default:
			return ops, nil
		}
	}
	return sorted[:hi], &sorted[hi-1]
}

func describeSegment(seg flowSegment) string {
	switch {
	case seg.lo == math.MinInt64:
		return fmt.Sprintf("before %v, from an empty flow", time.Duration(seg.hi))
	case seg.hi == math.MaxInt64:
		return fmt.Sprintf("from %v on, from an unknown flow", time.Duration(seg.lo))
	}
	return fmt.Sprintf("[%v, %v), from an unknown flow", time.Duration(seg.lo), time.Duration(seg.hi))
}

// describeOpsWith lists ops in call order for a failing verdict, each with
// its interval and, when it has one, the note in its Metadata. It is
// describeOps with the model's describer as a parameter.
func describeOpsWith(describe func(input, output any) string, ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for _, op := range sorted {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = time.Duration(op.Return).String()
		}
		fmt.Fprintf(&b, "\n    client %d [%v, %s] %s", op.ClientId, time.Duration(op.Call), ret,
			describe(op.Input, op.Output))
		if note, ok := op.Metadata.(string); ok && note != "" {
			fmt.Fprintf(&b, "  (%s)", note)
		}
	}
	return b.String()
}

// VisualizeFlow writes porcupine's HTML visualization of one flow's whole
// history (refused operations left out, unknown outcomes shown as "?",
// each write held to the window the recorder bounded it to) to w: the
// picture to open when CheckFlows says the flow is not linearizable. It
// returns porcupine's verdict on the history it drew.
func VisualizeFlow(h *History, flow string, timeout time.Duration, w io.Writer) (porcupine.CheckResult, error) {
	var ops []porcupine.Operation
	for p := range h.all() {
		op := *p
		if op.Key != flow || op.Outcome == Refused {
			continue
		}
		in := op.Input.(FlowInput)
		out, ret := FlowOutput{Unknown: true}, int64(math.MaxInt64)
		switch {
		case op.Outcome == OK:
			out, ret = op.Output.(FlowOutput), int64(op.Return)
		case in.Op.reads():
			continue // an unanswered read tells nothing
		case op.Bounded:
			ret = int64(op.Until)
		}
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: in, Output: out, Call: int64(op.Call), Return: ret})
	}
	model := flowModelFrom(emptyFlow)
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	return res, porcupine.Visualize(model, info, w)
}
