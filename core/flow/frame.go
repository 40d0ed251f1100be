package flow

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/fenceline/fenceline/core/binenc"
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
//	            req? resp? entries flows digests modes epoch?
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
//	epoch?   := Epoch, in a group-op frame only (kind 8, added after
//	            version 1 shipped: every other kind's bytes are as they were)
//	value    := flags(Tomb=1, Era=2) Data Tuple.Era? Tuple.MIdx Tuple.V Tuple.Origin
//	            ExpiresAtMs(signed)   (Era only when flagged, and then not 0:
//	                                   a value of era 0 is as before eras)
//
// Every field of msg but Epoch is written for every kind (an absent one
// costs a byte), so the format has one shape to check, and one tail. The decoder accepts exactly
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
var kindCodes = [...]string{1: FrameOp, 2: FrameOpResp, 3: FramePush, 4: FrameAE, 5: FrameAEResp, 6: FrameAdopt, 7: FrameAdoptResp, 8: FrameGroupOp,
	9: FrameMoveAsk, 10: FrameMoveCopy, 11: FrameIngest, 12: FrameIngestAck}

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
	if m.Kind == FrameGroupOp {
		b = binary.AppendUvarint(b, m.Epoch)
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
	flags := byte(0)
	if v.Tomb {
		flags = 1
	}
	if v.Tuple.Era != 0 {
		flags |= 2
	}
	b = append(b, flags)
	b = appendString(b, v.Data)
	if v.Tuple.Era != 0 {
		b = binary.AppendUvarint(b, v.Tuple.Era)
	}
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
	m, err := readFrame(frame, headOnly)
	if err != nil {
		return msg{}, fmt.Errorf("%w: %v", errFrame, err)
	}
	return m, nil
}

// readFrame reads frame as far as it can: the fields it read, and the
// first failure (parseFrame keeps the fields only without one).
func readFrame(frame []byte, headOnly bool) (msg, error) {
	d := frameDecoder{Decoder: binenc.Decoder{B: frame}, skip: headOnly}
	if p := d.Byte(); d.Err == nil && p != FramePrefix {
		d.Fail("prefix %d, not a flow frame", p)
	}
	if v := d.Byte(); d.Err == nil && v != frameVersion {
		d.Fail("version %d, want %d", v, frameVersion)
	}
	var m msg
	if c := d.Byte(); d.Err == nil {
		if c == 0 || int(c) >= len(kindCodes) {
			d.Fail("unknown kind %d", c)
		} else {
			m.Kind = kindCodes[c]
		}
	}
	m.ID = d.Uvarint()
	m.M = d.Uvarint()
	m.Flow = d.Str()
	m.Session = d.Uvarint()
	m.Served = d.Uvarint()
	m.Their = d.Uvarint()
	m.Mode = shard.Mode(d.Byte())
	// Read even by a scan of the head: a refusal's code is part of what
	// an answer says (the simulator's checkers read it), and it is empty,
	// so free, in every answer that served its request.
	m.Err = string(d.Raw())
	if d.Bool() {
		if r := d.request(); !d.skip {
			m.Req = r
		}
	}
	if d.Bool() {
		if r := d.response(); !d.skip {
			m.Resp = r
		}
	}
	m.Entries = d.entries()
	if n := d.Count(); n > 0 {
		if !d.skip {
			m.Flows = make(map[string]map[string]Value, n)
		}
		var last []byte
		for i := 0; i < n && d.Err == nil; i++ {
			f := d.key(i, last)
			e := d.entries()
			if !d.skip {
				m.Flows[string(f)] = e
			}
			last = f
		}
	}
	if n := d.Count(); n > 0 {
		if !d.skip {
			m.Digests = make(map[uint32]uint64, n)
		}
		for i, last := 0, uint64(0); i < n && d.Err == nil; i++ {
			p := d.Uvarint()
			if d.Err == nil && (p > 1<<32-1 || i > 0 && p <= last) {
				d.Fail("digest partition %d out of order or range", p)
			}
			sum := d.Uvarint()
			if !d.skip {
				m.Digests[uint32(p)] = sum
			}
			last = p
		}
	}
	if n := d.Count(); n > 0 {
		if !d.skip {
			m.Modes = make(map[string]shard.Mode, n)
		}
		var last []byte
		for i := 0; i < n && d.Err == nil; i++ {
			f := d.key(i, last)
			mode := shard.Mode(d.Byte())
			if !d.skip {
				m.Modes[string(f)] = mode
			}
			last = f
		}
	}
	if m.Kind == FrameGroupOp {
		m.Epoch = d.Uvarint()
	}
	d.End()
	return m, d.Err
}

// request, response, entries and blobs return nil (having checked what
// they read) when the decoder skips.
func (d *frameDecoder) request() *Request {
	var r Request
	r.Flow = d.text()
	r.Op = Op(d.Byte())
	r.Key = d.text()
	r.Value = d.bytes()
	r.Expect = d.bytes()
	r.ExpectAbsent = d.Bool()
	r.Delta = d.Varint()
	r.Entries = d.blobs()
	r.TTLMs = d.Varint()
	r.Read = ReadMode(d.Byte())
	r.Mode = shard.Mode(d.Byte())
	if d.skip {
		return nil
	}
	return &r
}

func (d *frameDecoder) response() *Response {
	var r Response
	flags := d.Byte()
	if d.Err == nil && flags&^(respFound|respSucceeded) != 0 {
		d.Fail("response flags %#x", flags)
	}
	r.Found, r.Succeeded = flags&respFound != 0, flags&respSucceeded != 0
	r.Value = d.bytes()
	r.Int = d.Varint()
	r.All = d.blobs()
	if d.skip {
		return nil
	}
	return &r
}

func (d *frameDecoder) entries() map[string]Value {
	n := d.Count()
	if n == 0 {
		return nil
	}
	var e map[string]Value
	if !d.skip {
		e = make(map[string]Value, n)
	}
	var last []byte
	for i := 0; i < n && d.Err == nil; i++ {
		k := d.key(i, last)
		var v Value
		flags := d.Byte()
		if flags > 3 {
			d.Fail("value flags %d", flags)
		}
		v.Tomb = flags&1 == 1
		v.Data = d.bytes()
		if flags&2 == 2 {
			if v.Tuple.Era = d.Uvarint(); v.Tuple.Era == 0 {
				d.Fail("era flagged but 0")
			}
		}
		v.Tuple.MIdx = d.Uvarint()
		v.Tuple.V = d.Uvarint()
		v.Tuple.Origin = dial.NodeID(d.Uvarint())
		v.ExpiresAtMs = d.Varint()
		if !d.skip {
			e[string(k)] = v
		}
		last = k
	}
	return e
}

func (d *frameDecoder) blobs() map[string][]byte {
	n := d.Count()
	if n == 0 {
		return nil
	}
	var e map[string][]byte
	if !d.skip {
		e = make(map[string][]byte, n)
	}
	var last []byte
	for i := 0; i < n && d.Err == nil; i++ {
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
	binenc.Decoder
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

// bytes reads a length-prefixed byte string into a fresh slice; empty
// reads as nil, so that one value has one representation.
func (d *frameDecoder) bytes() []byte {
	s := d.Raw()
	if len(s) == 0 || d.skip {
		return nil
	}
	if d.arena == nil {
		n := len(s) + len(d.B)
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

// text is string, or "" when the decoder skips.
func (d *frameDecoder) text() string {
	if s := d.Raw(); !d.skip {
		return string(s)
	}
	return ""
}

// key reads the i-th key of a map, which must sort after the last,
// without copying it.
func (d *frameDecoder) key(i int, last []byte) []byte {
	k := d.Raw()
	if d.Err == nil && i > 0 && string(k) <= string(last) {
		d.Fail("map key %q out of order", k)
	}
	return k
}
