package flow

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Wire format of a flow frame, version 1, written by hand (no reflection)
// like core/kv's commands. Integers are varints (encoding/binary) in their
// shortest form, unsigned unless marked signed (zigzag); a string or byte
// string is a uvarint length and the bytes; a bool is one byte, 0 or 1; a
// map is a uvarint count and its entries in strictly increasing key order.
//
//	frame    := 0x02 0x01 kind ID M Flow Session Served Their Mode Err
//	            req? resp? entries flows digests modes
//	kind     := the frame kind's byte (kindCodes)
//	req?     := 0x00 | 0x01 request
//	resp?    := 0x00 | 0x01 response
//	request  := Flow Op Key Value Expect ExpectAbsent Delta(signed)
//	            Entries(map string→bytes) TTLMs(signed) Read Mode
//	response := flags(Found=1, Succeeded=2) Value Int(signed) All(map string→bytes)
//	entries  := map string→value
//	flows    := map string→entries
//	digests  := map uvarint(uint32)→uvarint
//	modes    := map string→Mode byte
//	value    := flags(Tomb=1) Data Tuple.MIdx Tuple.V Tuple.Origin ExpiresAtMs(signed)
//
// Every field of msg is written for every kind (an absent one costs a
// byte), so the format has one shape to check. The decoder accepts exactly
// what the encoder writes: unknown versions and kinds, non-minimal
// varints, bools other than 0 or 1, unknown flag bits, unsorted or
// repeated map keys, lengths or counts past the end and trailing bytes are
// refused, so equal frames are equal bytes (the simulator's trace hash
// folds them) and a decoded frame encodes back to the same bytes. Every
// count and length is checked against the bytes left before anything is
// allocated, so a frame of n bytes allocates O(n) at most. An empty byte
// string decodes as nil: the store never tells nil from empty.
const frameVersion = 1

// kindCodes are the frame kinds' bytes on the wire: append only.
var kindCodes = [...]string{1: FrameOp, 2: FrameOpResp, 3: FramePush, 4: FrameAE, 5: FrameAEResp, 6: FrameAdopt, 7: FrameAdoptResp}

func kindCode(kind string) (byte, bool) {
	for c, k := range kindCodes {
		if c > 0 && k == kind {
			return byte(c), true
		}
	}
	return 0, false
}

// frameHeader is the prefix, version and kind: FrameKind reads only these.
const frameHeader = 3

// encodeFrame returns m's frame, FramePrefix first. An unknown kind is a
// programmer's error: it panics.
func encodeFrame(m msg) []byte {
	code, ok := kindCode(m.Kind)
	if !ok {
		// Concatenated, not formatted: a %q of m.Kind would make every
		// pointer in m escape (escape analysis is not field-sensitive).
		panic("flow: encoding a frame of unknown kind " + strconv.Quote(m.Kind))
	}
	b := make([]byte, 0, 64+msgDataSize(m))
	b = append(b, FramePrefix, frameVersion, code)
	b = binary.AppendUvarint(b, m.ID)
	b = binary.AppendUvarint(b, m.M)
	b = appendString(b, m.Flow)
	b = binary.AppendUvarint(b, m.Session)
	b = binary.AppendUvarint(b, m.Served)
	b = binary.AppendUvarint(b, m.Their)
	b = append(b, byte(m.Mode))
	b = appendString(b, m.Err)
	if m.Req == nil {
		b = append(b, 0)
	} else {
		b = appendRequest(append(b, 1), m.Req)
	}
	if m.Resp == nil {
		b = append(b, 0)
	} else {
		b = appendResponse(append(b, 1), m.Resp)
	}
	b = appendEntries(b, m.Entries)
	b = binary.AppendUvarint(b, uint64(len(m.Flows)))
	for _, f := range sortedKeys(m.Flows) {
		b = appendString(b, f)
		b = appendEntries(b, m.Flows[f])
	}
	b = binary.AppendUvarint(b, uint64(len(m.Digests)))
	for _, p := range sortedKeys(m.Digests) {
		b = binary.AppendUvarint(b, uint64(p))
		b = binary.AppendUvarint(b, m.Digests[p])
	}
	b = binary.AppendUvarint(b, uint64(len(m.Modes)))
	for _, f := range sortedKeys(m.Modes) {
		b = appendString(b, f)
		b = append(b, byte(m.Modes[f]))
	}
	return b
}

// msgDataSize is roughly the bytes of m's strings and values, to size the
// buffer once.
func msgDataSize(m msg) int {
	n := len(m.Flow) + len(m.Err) + entriesSize(m.Entries) + 12*len(m.Digests)
	if m.Req != nil {
		n += 32 + len(m.Req.Flow) + len(m.Req.Key) + len(m.Req.Value) + len(m.Req.Expect) + blobsSize(m.Req.Entries)
	}
	if m.Resp != nil {
		n += 16 + len(m.Resp.Value) + blobsSize(m.Resp.All)
	}
	for f, e := range m.Flows { //fenceline:unordered a sum
		n += 8 + len(f) + entriesSize(e)
	}
	for f := range m.Modes { //fenceline:unordered a sum
		n += 2 + len(f)
	}
	return n
}

func entriesSize(e map[string]Value) int {
	n := 0
	for k, v := range e { //fenceline:unordered a sum
		n += 24 + len(k) + len(v.Data)
	}
	return n
}

func blobsSize(e map[string][]byte) int {
	n := 0
	for k, v := range e { //fenceline:unordered a sum
		n += 4 + len(k) + len(v)
	}
	return n
}

func appendRequest(b []byte, r *Request) []byte {
	b = appendString(b, r.Flow)
	b = append(b, byte(r.Op))
	b = appendString(b, r.Key)
	b = appendString(b, r.Value)
	b = appendString(b, r.Expect)
	b = appendBool(b, r.ExpectAbsent)
	b = binary.AppendVarint(b, r.Delta)
	b = appendBlobs(b, r.Entries)
	b = binary.AppendVarint(b, r.TTLMs)
	b = append(b, byte(r.Read))
	return append(b, byte(r.Mode))
}

const (
	respFound     = 1
	respSucceeded = 2
)

func appendResponse(b []byte, r *Response) []byte {
	flags := byte(0)
	if r.Found {
		flags |= respFound
	}
	if r.Succeeded {
		flags |= respSucceeded
	}
	b = append(b, flags)
	b = appendString(b, r.Value)
	b = binary.AppendVarint(b, r.Int)
	return appendBlobs(b, r.All)
}

func appendEntries(b []byte, e map[string]Value) []byte {
	b = binary.AppendUvarint(b, uint64(len(e)))
	if len(e) == 1 { // a push of one key, the common frame: no key slice to sort
		for k, v := range e { //fenceline:unordered one entry: one order
			return appendValue(appendString(b, k), v)
		}
	}
	for _, k := range sortedKeys(e) {
		b = appendString(b, k)
		b = appendValue(b, e[k])
	}
	return b
}

func appendValue(b []byte, v Value) []byte {
	b = appendBool(b, v.Tomb)
	b = appendString(b, v.Data)
	b = binary.AppendUvarint(b, v.Tuple.MIdx)
	b = binary.AppendUvarint(b, v.Tuple.V)
	b = binary.AppendUvarint(b, uint64(v.Tuple.Origin))
	return binary.AppendVarint(b, v.ExpiresAtMs)
}

func appendBlobs(b []byte, e map[string][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(e)))
	for _, k := range sortedKeys(e) {
		b = appendString(b, k)
		b = appendString(b, e[k])
	}
	return b
}

// sortedKeys is m's keys in increasing order, in one allocation.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	if len(m) == 0 {
		return nil
	}
	keys := make([]K, 0, len(m))
	for k := range m { // sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

var errFrame = errors.New("flow: bad frame")

// decodeFrame parses a frame written by encodeFrame (FramePrefix first).
// Errors wrap errFrame. It copies what it keeps: frame may be reused.
func decodeFrame(frame []byte) (msg, error) { return parseFrame(frame, false) }

// scanFrame checks frame as decodeFrame does, refusing exactly what it
// refuses, but keeps only the head (kind, ids, flow, m_idx): the
// simulator reads every frame on the wire this way, without building
// the maps it does not look at.
func scanFrame(frame []byte) (msg, error) { return parseFrame(frame, true) }

func parseFrame(frame []byte, headOnly bool) (msg, error) {
	d := frameDecoder{b: frame, skip: headOnly}
	if p := d.byte(); d.err == nil && p != FramePrefix {
		d.fail("prefix %d, not a flow frame", p)
	}
	if v := d.byte(); d.err == nil && v != frameVersion {
		d.fail("version %d, want %d", v, frameVersion)
	}
	var m msg
	if c := d.byte(); d.err == nil {
		if c == 0 || int(c) >= len(kindCodes) {
			d.fail("unknown kind %d", c)
		} else {
			m.Kind = kindCodes[c]
		}
	}
	m.ID = d.uvarint()
	m.M = d.uvarint()
	m.Flow = d.string()
	m.Session = d.uvarint()
	m.Served = d.uvarint()
	m.Their = d.uvarint()
	m.Mode = shard.Mode(d.byte())
	m.Err = d.text()
	if d.bool() {
		if r := d.request(); !d.skip {
			m.Req = r
		}
	}
	if d.bool() {
		if r := d.response(); !d.skip {
			m.Resp = r
		}
	}
	m.Entries = d.entries()
	if n := d.count(); n > 0 {
		if !d.skip {
			m.Flows = make(map[string]map[string]Value, n)
		}
		var last []byte
		for i := 0; i < n && d.err == nil; i++ {
			f := d.key(i, last)
			e := d.entries()
			if !d.skip {
				m.Flows[string(f)] = e
			}
			last = f
		}
	}
	if n := d.count(); n > 0 {
		if !d.skip {
			m.Digests = make(map[uint32]uint64, n)
		}
		for i, last := 0, uint64(0); i < n && d.err == nil; i++ {
			p := d.uvarint()
			if d.err == nil && (p > 1<<32-1 || i > 0 && p <= last) {
				d.fail("digest partition %d out of order or range", p)
			}
			sum := d.uvarint()
			if !d.skip {
				m.Digests[uint32(p)] = sum
			}
			last = p
		}
	}
	if n := d.count(); n > 0 {
		if !d.skip {
			m.Modes = make(map[string]shard.Mode, n)
		}
		var last []byte
		for i := 0; i < n && d.err == nil; i++ {
			f := d.key(i, last)
			mode := shard.Mode(d.byte())
			if !d.skip {
				m.Modes[string(f)] = mode
			}
			last = f
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return msg{}, fmt.Errorf("%w: %v", errFrame, d.err)
	}
	return m, nil
}

// request, response, entries and blobs return nil (having checked what
// they read) when the decoder skips.
func (d *frameDecoder) request() *Request {
	var r Request
	r.Flow = d.text()
	r.Op = Op(d.byte())
	r.Key = d.text()
	r.Value = d.bytes()
	r.Expect = d.bytes()
	r.ExpectAbsent = d.bool()
	r.Delta = d.varint()
	r.Entries = d.blobs()
	r.TTLMs = d.varint()
	r.Read = ReadMode(d.byte())
	r.Mode = shard.Mode(d.byte())
	if d.skip {
		return nil
	}
	return &r
}

func (d *frameDecoder) response() *Response {
	var r Response
	flags := d.byte()
	if d.err == nil && flags&^(respFound|respSucceeded) != 0 {
		d.fail("response flags %#x", flags)
	}
	r.Found, r.Succeeded = flags&respFound != 0, flags&respSucceeded != 0
	r.Value = d.bytes()
	r.Int = d.varint()
	r.All = d.blobs()
	if d.skip {
		return nil
	}
	return &r
}

func (d *frameDecoder) entries() map[string]Value {
	n := d.count()
	if n == 0 {
		return nil
	}
	var e map[string]Value
	if !d.skip {
		e = make(map[string]Value, n)
	}
	var last []byte
	for i := 0; i < n && d.err == nil; i++ {
		k := d.key(i, last)
		var v Value
		v.Tomb = d.bool()
		v.Data = d.bytes()
		v.Tuple.MIdx = d.uvarint()
		v.Tuple.V = d.uvarint()
		v.Tuple.Origin = dial.NodeID(d.uvarint())
		v.ExpiresAtMs = d.varint()
		if !d.skip {
			e[string(k)] = v
		}
		last = k
	}
	return e
}

func (d *frameDecoder) blobs() map[string][]byte {
	n := d.count()
	if n == 0 {
		return nil
	}
	var e map[string][]byte
	if !d.skip {
		e = make(map[string][]byte, n)
	}
	var last []byte
	for i := 0; i < n && d.err == nil; i++ {
		k := d.key(i, last)
		if v := d.bytes(); !d.skip {
			e[string(k)] = v
		}
		last = k
	}
	return e
}

// frameDecoder reads a frame's primitives. The first failure sticks: later
// reads return zero values, and the caller checks err once at the end.
type frameDecoder struct {
	b    []byte
	err  error
	skip bool // check only: keep no byte strings, build no maps
	// arena holds the byte strings of a small frame, copied in one
	// allocation, each capped so that an append to one cannot reach the
	// next (bytes).
	arena []byte
}

// arenaMax is the largest frame whose byte strings share one allocation:
// a value kept from a larger frame (an anti-entropy answer) would keep
// the whole of it alive.
const arenaMax = 4 << 10

func (d *frameDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *frameDecoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("unexpected end of frame")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *frameDecoder) bool() bool {
	c := d.byte()
	if c > 1 {
		d.fail("bool %d", c)
		return false
	}
	return c == 1
}

// uvarint reads a varint and refuses a longer-than-needed one, which would
// give a second encoding of the same value.
func (d *frameDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) > 0 && d.b[0] < 0x80 { // one byte: most lengths and counts, always minimal
		v := uint64(d.b[0])
		d.b = d.b[1:]
		return v
	}
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		d.fail("unexpected end of frame")
		return 0
	case n < 0:
		d.fail("varint overflows 64 bits")
		return 0
	case n != uvarintLen(v):
		d.fail("non-minimal varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a signed (zigzag) varint, as binary.AppendVarint writes it.
func (d *frameDecoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// count reads an element count. Each element takes at least one byte,
// so a count beyond the bytes left is refused before anything is
// allocated.
func (d *frameDecoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

// raw reads a length-prefixed byte string without copying it.
func (d *frameDecoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

// bytes reads a length-prefixed byte string into a fresh slice; empty
// reads as nil, so that one value has one representation.
func (d *frameDecoder) bytes() []byte {
	s := d.raw()
	if len(s) == 0 || d.skip {
		return nil
	}
	if d.arena == nil {
		n := len(s) + len(d.b)
		if n > arenaMax {
			return append([]byte(nil), s...)
		}
		// Every byte string still to come fits: the arena never grows.
		d.arena = make([]byte, 0, n)
	}
	start := len(d.arena)
	d.arena = append(d.arena, s...)
	return d.arena[start:len(d.arena):len(d.arena)]
}

func (d *frameDecoder) string() string { return string(d.raw()) }

// text is string, or "" when the decoder skips.
func (d *frameDecoder) text() string {
	if s := d.raw(); !d.skip {
		return string(s)
	}
	return ""
}

// key reads the i-th key of a map, which must sort after the last,
// without copying it.
func (d *frameDecoder) key(i int, last []byte) []byte {
	k := d.raw()
	if d.err == nil && i > 0 && string(k) <= string(last) {
		d.fail("map key %q out of order", k)
	}
	return k
}

// uvarintLen is the length of v's shortest varint encoding.
func uvarintLen(v uint64) int {
	if v == 0 {
		return 1
	}
	return (bits.Len64(v) + 6) / 7
}
