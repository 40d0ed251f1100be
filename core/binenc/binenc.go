// Package binenc holds the primitives of the core's one binary encoding:
// minimal uvarints, length-prefixed byte strings, and a strict decoder.
// The replicated KV's commands and snapshots (core/kv), the flow store's
// peer frames (core/flow) and proxyOnce's claim frames (core/proxyonce)
// are written with it. The decoder
// refuses a second encoding of any value (a non-minimal varint, trailing
// bytes), so that a decoded value re-encodes to the same bytes, and it
// checks every length and count against the bytes left before anything
// is allocated, so that a peer's garbage costs no more memory than its
// size. It never panics: the first error sticks, and every later read
// returns a zero value.
package binenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// UvarintLen is the length of v's shortest varint encoding.
func UvarintLen(v uint64) int {
	if v == 0 {
		return 1
	}
	return (bits.Len64(v) + 6) / 7
}

// AppendBytes appends s as a length-prefixed byte string.
func AppendBytes[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrShort is a decode that ran out of input.
var ErrShort = errors.New("unexpected end of input")

// Decoder reads what the encoders wrote, from B; the first error stays in
// Err.
type Decoder struct {
	B   []byte
	Err error
}

// Fail records an error, unless one is already recorded.
func (d *Decoder) Fail(format string, args ...any) {
	if d.Err == nil {
		d.Err = fmt.Errorf(format, args...)
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.Err != nil {
		return 0
	}
	if len(d.B) == 0 {
		d.Err = ErrShort
		return 0
	}
	c := d.B[0]
	d.B = d.B[1:]
	return c
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	c := d.Byte()
	if c > 1 {
		d.Fail("bool %d", c)
		return false
	}
	return c == 1
}

// Uvarint reads a varint and refuses a longer-than-needed one, which
// would give a second encoding of the same value.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	if len(d.B) > 0 && d.B[0] < 0x80 { // one byte: most lengths and counts, always minimal
		v := uint64(d.B[0])
		d.B = d.B[1:]
		return v
	}
	v, n := binary.Uvarint(d.B)
	switch {
	case n == 0:
		d.Err = ErrShort
		return 0
	case n < 0:
		d.Fail("varint overflows 64 bits")
		return 0
	case n != UvarintLen(v):
		d.Fail("non-minimal varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed (zigzag) varint, as binary.AppendVarint writes it.
func (d *Decoder) Varint() int64 {
	u := d.Uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// Int63 reads a uvarint that must fit an int64.
func (d *Decoder) Int63() int64 {
	v := d.Uvarint()
	if v > 1<<63-1 {
		d.Fail("integer %d overflows int64", v)
		return 0
	}
	return int64(v)
}

// Count reads an element count. Each element takes at least one byte, so
// a count beyond the bytes left is refused before anything is allocated.
func (d *Decoder) Count() int {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Fail("count %d exceeds the %d bytes left", n, len(d.B))
		return 0
	}
	return int(n)
}

// Raw reads a length-prefixed byte string without copying it; its
// capacity ends where it does, so an append to it cannot reach the bytes
// after it.
func (d *Decoder) Raw() []byte {
	n := d.Uvarint()
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.B)) {
		d.Fail("length %d exceeds the %d bytes left", n, len(d.B))
		return nil
	}
	s := d.B[:n:n]
	d.B = d.B[n:]
	return s
}

// Str reads a length-prefixed byte string as a string.
func (d *Decoder) Str() string { return string(d.Raw()) }

// End refuses trailing bytes: they would make two encodings of one value.
func (d *Decoder) End() {
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
}
