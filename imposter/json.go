package imposter

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The engine works on JSON values as JavaScript sees them, because
// mountebank's contract is defined by what its JavaScript does: objects
// keep their keys in insertion order (and echo back in it), a key set twice
// keeps its first place and its last value, and numbers print as
// JavaScript prints them. A value is one of
//
//	nil, bool, float64, string, []any, *Object
//
// Parse makes them from text; Marshal writes them back.

// Object is a JSON object that keeps its keys' insertion order. Its zero
// value is an empty object.
//
// Get, Set and Delete find a key through an index (a map from key to
// place) once the object has more than smallObject keys, so that building
// or reading an object of n keys costs O(n), not O(n²): a 1 MB request
// body of 100,000 distinct keys took 16-38 s to match against
// {"equals":{"body":{"a":"b"}}} when every lookup walked the keys. Every
// change of the keys goes through a method that keeps the index right
// (Set, Delete, renameKeys); nothing else in the package writes o.keys.
// Reading never writes: an object built without one (a literal) is
// searched along its keys, so a shared object (a compiled predicate's)
// can be read by any number of goroutines at once.
type Object struct {
	keys []string
	vals []any
	// index maps each key to its place; nil while the object is small,
	// built by the first Set past smallObject keys.
	index map[string]int
}

// smallObject is the number of keys past which an Object finds its keys
// through its index rather than along the keys.
const smallObject = 16

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

// NewObjectCap returns an empty object with room for n keys.
func NewObjectCap(n int) *Object {
	return &Object{keys: make([]string, 0, n), vals: make([]any, 0, n)}
}

// objectOf is the object of keys and vals (its own, with no repeated
// key), indexed if it is large.
func objectOf(keys []string, vals []any) *Object {
	o := &Object{keys: keys, vals: vals}
	if len(keys) > smallObject {
		o.buildIndex()
	}
	return o
}

// Len is the number of keys.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// Keys are the keys in insertion order (not the enumeration order, which
// puts array-index keys first; see Marshal). The slice is the object's
// own: read it, never write it.
func (o *Object) Keys() []string {
	if o == nil {
		return nil
	}
	return o.keys
}

// At is the i-th key and value.
func (o *Object) At(i int) (string, any) { return o.keys[i], o.vals[i] }

// find is key's place, or -1.
func (o *Object) find(key string) int {
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i, k := range o.keys {
		if k == key {
			return i
		}
	}
	return -1
}

// buildIndex indexes the keys (a key repeated, which only renameKeys makes
// and then merges, is found at its first place, as a search along the
// keys finds it).
func (o *Object) buildIndex() {
	o.index = make(map[string]int, len(o.keys))
	for i, k := range o.keys {
		if _, dup := o.index[k]; !dup {
			o.index[k] = i
		}
	}
}

// Get returns the value of key and whether it is set.
func (o *Object) Get(key string) (any, bool) {
	if o == nil {
		return nil, false
	}
	if i := o.find(key); i >= 0 {
		return o.vals[i], true
	}
	return nil, false
}

// Set sets key; a key already set keeps its place.
func (o *Object) Set(key string, v any) *Object {
	if o.index == nil && len(o.keys) >= smallObject {
		o.buildIndex()
	}
	if i := o.find(key); i >= 0 {
		o.vals[i] = v
		return o
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
	if o.index != nil {
		o.index[key] = len(o.keys) - 1
	}
	return o
}

// Delete removes key, if set. The keys after it move down a place, so it
// costs O(n): nothing deletes from objects whose size a stranger chooses
// more than a definition's worth of times.
func (o *Object) Delete(key string) {
	i := o.find(key)
	if i < 0 {
		return
	}
	o.keys = slices.Delete(o.keys, i, i+1)
	o.vals = slices.Delete(o.vals, i, i+1)
	if o.index != nil {
		delete(o.index, key)
		for j := i; j < len(o.keys); j++ {
			o.index[o.keys[j]] = j
		}
	}
}

// renameKeys renames every key to rename(key), in place. Keys that become
// the same are merged as assigning them in order would (JavaScript's
// out[rename(k)] = v for each key): the first place, the last value.
// This is how keys are lower-cased and tokens replaced in keys, in O(n).
func (o *Object) renameKeys(rename func(string) string) {
	changed := false
	for i, k := range o.keys {
		if nk := rename(k); nk != k {
			o.keys[i] = nk
			changed = true
		}
	}
	if !changed {
		return
	}
	o.index = nil
	if len(o.keys) <= smallObject {
		repeated := false
		for i := 1; i < len(o.keys) && !repeated; i++ {
			repeated = slices.Contains(o.keys[:i], o.keys[i])
		}
		if !repeated {
			return
		}
	}
	at := make(map[string]int, len(o.keys))
	n := 0
	for i, k := range o.keys {
		if first, ok := at[k]; ok {
			o.vals[first] = o.vals[i]
			continue
		}
		at[k] = n
		o.keys[n], o.vals[n] = k, o.vals[i]
		n++
	}
	clear(o.keys[n:])
	clear(o.vals[n:])
	o.keys, o.vals = o.keys[:n], o.vals[:n]
	if n > smallObject {
		o.index = at
	}
}

// Clone copies the object and every object and array inside it.
func Clone(v any) any {
	switch t := v.(type) {
	case *Object:
		vals := make([]any, len(t.vals))
		for i, x := range t.vals {
			vals[i] = Clone(x)
		}
		return objectOf(slices.Clone(t.keys), vals)
	case []any:
		c := make([]any, len(t))
		for i, x := range t {
			c[i] = Clone(x)
		}
		return c
	}
	return v
}

// --- parsing

// ErrSyntax is JSON that does not parse.
var ErrSyntax = errors.New("invalid JSON")

// Parse parses one JSON text (RFC 8259, as strict as JSON.parse).
func Parse(text string) (any, error) {
	p := parser{s: text}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.fail("unexpected text after the value")
	}
	return v, nil
}

// maxDepth bounds nesting, so a hostile body cannot exhaust the stack.
const maxDepth = 512

type parser struct {
	s string
	i int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrSyntax, what, p.i)
}

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.fail("nested too deeply")
	}
	if p.i >= len(p.s) {
		return nil, p.fail("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		o := &Object{}
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return o, nil
		}
		for {
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, p.fail("expected a string key")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, p.fail("expected ':'")
			}
			p.i++
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			o.Set(k, v) // a key set twice keeps its first place and its last value
			p.space()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return o, nil
			}
			return nil, p.fail("expected ',' or '}'")
		}
	case c == '[':
		p.i++
		a := []any{}
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return a, nil
		}
		for {
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			p.space()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == ']' {
				p.i++
				return a, nil
			}
			return nil, p.fail("expected ',' or ']'")
		}
	case c == '"':
		return p.str()
	case c == 't' && strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return true, nil
	case c == 'f' && strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return false, nil
	case c == 'n' && strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return nil, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.fail("unexpected character")
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 || (n > 1 && p.s[intStart] == '0') {
		return nil, p.fail("bad number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.fail("bad number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("bad number")
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.fail("bad number")
	}
	return f, nil // out of range: ±Inf or 0, as JSON.parse gives
}

func (p *parser) str() (string, error) {
	start := p.i
	p.i++ // the quote
	plain := true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return p.s[start+1 : p.i-1], nil
			}
			var s string
			if err := json.Unmarshal([]byte(p.s[start:p.i]), &s); err != nil {
				return "", p.fail("bad string")
			}
			return s, nil
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20:
			return "", p.fail("control character in string")
		default:
			if c >= 0x80 {
				plain = false // json.Unmarshal replaces invalid UTF-8 as JSON.parse would see U+FFFD
			}
			p.i++
		}
	}
	return "", p.fail("unterminated string")
}

// --- writing

// Marshal writes v as JSON.stringify(v, null, indent) does: keys in
// JavaScript's enumeration order (array-index keys ascending first, then
// the rest in insertion order), numbers as JavaScript prints them, and
// only the characters JSON requires escaped.
func Marshal(v any, indent int) []byte {
	w := writer{indent: indent}
	w.value(v, 0)
	return w.b
}

type writer struct {
	b      []byte
	indent int
}

func (w *writer) newline(depth int) {
	if w.indent == 0 {
		return
	}
	w.b = append(w.b, '\n')
	for range depth * w.indent {
		w.b = append(w.b, ' ')
	}
}

func (w *writer) value(v any, depth int) {
	switch t := v.(type) {
	case nil:
		w.b = append(w.b, "null"...)
	case bool:
		w.b = strconv.AppendBool(w.b, t)
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			w.b = append(w.b, "null"...)
		} else {
			w.b = append(w.b, NumberString(t)...)
		}
	case int:
		w.b = strconv.AppendInt(w.b, int64(t), 10)
	case string:
		w.b = appendQuoted(w.b, t)
	case []any:
		if len(t) == 0 {
			w.b = append(w.b, "[]"...)
			return
		}
		w.b = append(w.b, '[')
		for i, x := range t {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.newline(depth + 1)
			w.value(x, depth+1)
		}
		w.newline(depth)
		w.b = append(w.b, ']')
	case *Object:
		if t.Len() == 0 {
			w.b = append(w.b, "{}"...)
			return
		}
		w.b = append(w.b, '{')
		for i, k := range enumerationOrder(t) {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.newline(depth + 1)
			w.b = appendQuoted(w.b, t.keys[k])
			w.b = append(w.b, ':')
			if w.indent > 0 {
				w.b = append(w.b, ' ')
			}
			w.value(t.vals[k], depth+1)
		}
		w.newline(depth)
		w.b = append(w.b, '}')
	default:
		panic(fmt.Sprintf("imposter: %T is not a JSON value", v))
	}
}

// enumerationOrder returns the indexes of o's keys in the order JavaScript
// enumerates them.
func enumerationOrder(o *Object) []int {
	idx := make([]int, 0, len(o.keys))
	var named []int
	var nums []uint64 // the array index of each key in idx
	for i, k := range o.keys {
		if n, ok := arrayIndex(k); ok {
			idx = append(idx, i)
			nums = append(nums, n)
		} else {
			named = append(named, i)
		}
	}
	if len(idx) > 1 {
		// Sorted by the indexes read once each, in O(n log n): an
		// insertion sort here made an object of 16,000 index keys
		// written in descending order take 6 s to print. Stable, so keys
		// that read the same (an object whose keys were renamed in place)
		// keep their insertion order.
		order := make([]int, len(idx))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(nums[a], nums[b]) })
		sorted := make([]int, len(idx), len(o.keys))
		for i, j := range order {
			sorted[i] = idx[j]
		}
		idx = sorted
	}
	return append(idx, named...)
}

// arrayIndex reports whether k is a canonical array index (0 ≤ n < 2³²−1).
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return n, err == nil && n < math.MaxUint32
}

// NumberString prints f as JavaScript's String(f) does.
func NumberString(f float64) string {
	if f == 0 {
		return "0" // -0 too
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e-07 and e+21; JavaScript e-7 and e+21.
		if i := strings.IndexByte(s, 'e'); i >= 0 && i+2 < len(s) && s[i+2] == '0' {
			s = s[:i+2] + strings.TrimLeft(s[i+2:], "0")
		}
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// ToString converts v as JavaScript's String(v) would for the values the
// engine compares: objects print as "[object Object]", arrays joined by
// commas.
func ToString(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return NumberString(t)
	case string:
		return t
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			if x != nil {
				parts[i] = ToString(x)
			}
		}
		return strings.Join(parts, ",")
	case *Object:
		return "[object Object]"
	}
	return fmt.Sprint(v)
}
