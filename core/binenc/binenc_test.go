package binenc

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestRoundTrip: what the encoders write, the decoder reads back, with
// nothing left over.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		u := rapid.Uint64().Draw(t, "u")
		i := rapid.Int64().Draw(t, "i")
		s := rapid.String().Draw(t, "s")
		raw := rapid.SliceOf(rapid.Byte()).Draw(t, "raw")
		b := binary.AppendUvarint(nil, u)
		require.Len(t, b, UvarintLen(u))
		b = binary.AppendVarint(b, i)
		b = AppendBytes(b, s)
		b = AppendBytes(b, raw)
		b = append(b, 1)
		d := Decoder{B: b}
		require.Equal(t, u, d.Uvarint())
		require.Equal(t, i, d.Varint())
		require.Equal(t, s, d.Str())
		require.Equal(t, len(raw), len(d.Raw()))
		require.True(t, d.Bool())
		d.End()
		require.NoError(t, d.Err)
	})
}

// TestRefuses: a second encoding of a value, a length or count past the
// input, trailing bytes and a short input are errors, the first of which
// sticks, and nothing panics.
func TestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(d *Decoder)
		want string
	}{
		{"non-minimal varint", []byte{0x81, 0x00}, func(d *Decoder) { d.Uvarint() }, "non-minimal varint"},
		{"varint overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, func(d *Decoder) { d.Uvarint() }, "overflows 64 bits"},
		{"short varint", []byte{0x80}, func(d *Decoder) { d.Uvarint() }, "unexpected end of input"},
		{"length past the input", []byte{5, 'a', 'b'}, func(d *Decoder) { d.Raw() }, "length 5 exceeds the 2 bytes left"},
		{"count past the input", []byte{200, 1, 1}, func(d *Decoder) { d.Count() }, "count 200 exceeds the 1 bytes left"},
		{"trailing bytes", []byte{1, 2}, func(d *Decoder) { d.Byte(); d.End() }, "1 trailing bytes"},
		{"bool not 0 or 1", []byte{2}, func(d *Decoder) { d.Bool() }, "bool 2"},
		{"int63 overflow", binary.AppendUvarint(nil, 1<<63), func(d *Decoder) { d.Int63() }, "overflows int64"},
		{"empty", nil, func(d *Decoder) { d.Byte() }, "unexpected end of input"},
	} {
		d := Decoder{B: tc.in}
		tc.read(&d)
		require.ErrorContains(t, d.Err, tc.want, tc.name)
		first := d.Err
		d.Fail("later")
		require.Equal(t, first, d.Err, "%s: the first error sticks", tc.name)
		require.Zero(t, d.Uvarint(), "%s: reads after an error are zero", tc.name)
	}
	d := Decoder{B: []byte{3, 'a', 'b', 'c', 'd'}}
	s := d.Raw()
	require.Equal(t, 3, cap(s), "Raw's capacity ends with it: an append cannot reach the next bytes")
}
