package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Wire format of a Command, version 1. All integers are unsigned varints
// (encoding/binary), in their shortest form; every byte string and string
// is a varint length followed by the bytes.
//
//	command := 0x01 AtMs op
//	op      := kind body                (kind is the OpKind byte)
//	  put     : key value
//	  delete  : key
//	  txn     : n guard{n} n op{n} n op{n}     (guards, OnSuccess, OnFailure)
//	  acquire : name holder ttl
//	  renew   : name holder ttl
//	  release : name holder
//	  tick    : (nothing)
//	guard   := kind key version value   (kind is the GuardKind byte)
//
// A hand-written format rather than JSON because the decoder must be
// strict — one encoding per Command, so that equal commands are equal
// bytes and a replica cannot read an entry differently from another — and
// because it is small enough to check by eye. The decoder refuses unknown
// versions and kinds, non-minimal varints, lengths past the end, nesting
// other than Put and Delete inside a txn, fields a kind does not use (it
// cannot express them) and trailing bytes.
const encodingVersion = 1

// EncodeCommand returns the canonical bytes of cmd. It fails only if cmd is
// ill formed (see Config.Validate for the shape rules); it does not check
// the Config bounds, which proposers check with Config.Validate.
func EncodeCommand(cmd Command) ([]byte, error) {
	if err := checkShape(cmd); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	b := make([]byte, 0, commandSize(cmd))
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(cmd.AtMs))
	return appendOp(b, cmd.Op), nil
}

func appendOp(b []byte, op Op) []byte {
	b = append(b, byte(op.Kind))
	switch op.Kind {
	case OpPut:
		b = appendBytes(b, op.Key)
		b = appendBytes(b, op.Value)
	case OpDelete:
		b = appendBytes(b, op.Key)
	case OpTxn:
		b = binary.AppendUvarint(b, uint64(len(op.Guards)))
		for _, g := range op.Guards {
			b = append(b, byte(g.Kind))
			b = appendBytes(b, g.Key)
			b = binary.AppendUvarint(b, g.Version)
			b = appendBytes(b, g.Value)
		}
		for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
			b = binary.AppendUvarint(b, uint64(len(branch)))
			for _, sub := range branch {
				b = appendOp(b, sub)
			}
		}
	case OpLeaseAcquire, OpLeaseRenew:
		b = appendBytes(b, op.Key)
		b = appendBytes(b, op.Holder)
		b = binary.AppendUvarint(b, uint64(op.TTLMs))
	case OpLeaseRelease:
		b = appendBytes(b, op.Key)
		b = appendBytes(b, op.Holder)
	}
	return b
}

// commandSize is len(EncodeCommand(cmd)) for a shaped cmd, without
// encoding it, so that Validate can bound a 4 MiB command for free.
func commandSize(cmd Command) int {
	return 1 + uvarintLen(uint64(cmd.AtMs)) + opSize(cmd.Op)
}

func opSize(op Op) int {
	n := 1
	switch op.Kind {
	case OpPut:
		n += bytesSize(op.Key) + bytesSize(op.Value)
	case OpDelete:
		n += bytesSize(op.Key)
	case OpTxn:
		n += uvarintLen(uint64(len(op.Guards)))
		for _, g := range op.Guards {
			n += 1 + bytesSize(g.Key) + uvarintLen(g.Version) + bytesSize(g.Value)
		}
		for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
			n += uvarintLen(uint64(len(branch)))
			for _, sub := range branch {
				n += opSize(sub)
			}
		}
	case OpLeaseAcquire, OpLeaseRenew:
		n += bytesSize(op.Key) + bytesSize(op.Holder) + uvarintLen(uint64(op.TTLMs))
	case OpLeaseRelease:
		n += bytesSize(op.Key) + bytesSize(op.Holder)
	}
	return n
}

// maxPutCommandBytes is the encoded size of a Put of a maximal key and
// value stamped at MaxAtMs.
func maxPutCommandBytes(c Config) int {
	return 1 + uvarintLen(uint64(MaxAtMs)) + 1 +
		uvarintLen(uint64(c.MaxKeyBytes)) + c.MaxKeyBytes +
		uvarintLen(uint64(c.MaxValueBytes)) + c.MaxValueBytes
}

// DecodeCommand parses an entry written by EncodeCommand. Errors wrap
// ErrMalformed. It accepts exactly the canonical encodings:
// EncodeCommand(DecodeCommand(b)) == b whenever decoding succeeds. It
// copies what it keeps, so b may be reused afterwards.
func DecodeCommand(b []byte) (Command, error) {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != encodingVersion {
		d.fail("encoding version %d, want %d", v, encodingVersion)
	}
	at := d.uvarint()
	if d.err == nil && at > uint64(MaxAtMs) {
		d.fail("AtMs %d past %d", at, MaxAtMs)
	}
	op := d.op(false)
	d.end()
	if d.err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrMalformed, d.err)
	}
	cmd := Command{AtMs: int64(at), Op: op}
	// The grammar already excludes almost everything checkShape refuses;
	// what remains (a guard kind's unused fields) is checked here so that
	// every decoded command can be encoded again.
	if err := checkShape(cmd); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return cmd, nil
}

func (d *decoder) op(inTxn bool) Op {
	kind := OpKind(d.byte())
	if d.err != nil {
		return Op{}
	}
	if kind == OpInvalid || kind >= opKindEnd {
		d.fail("unknown op kind %d", uint8(kind))
		return Op{}
	}
	if inTxn && kind != OpPut && kind != OpDelete {
		d.fail("%v inside a txn", kind)
		return Op{}
	}
	op := Op{Kind: kind}
	switch kind {
	case OpPut:
		op.Key = d.string()
		op.Value = d.bytes()
	case OpDelete:
		op.Key = d.string()
	case OpTxn:
		for n := d.count(); n > 0 && d.err == nil; n-- {
			g := Guard{Kind: GuardKind(d.byte())}
			g.Key = d.string()
			g.Version = d.uvarint()
			g.Value = d.bytes()
			op.Guards = append(op.Guards, g)
		}
		for n := d.count(); n > 0 && d.err == nil; n-- {
			op.OnSuccess = append(op.OnSuccess, d.op(true))
		}
		for n := d.count(); n > 0 && d.err == nil; n-- {
			op.OnFailure = append(op.OnFailure, d.op(true))
		}
	case OpLeaseAcquire, OpLeaseRenew:
		op.Key = d.string()
		op.Holder = d.string()
		op.TTLMs = d.int63()
	case OpLeaseRelease:
		op.Key = d.string()
		op.Holder = d.string()
	}
	return op
}

// decoder reads the primitives shared by commands and snapshots. The first
// failure sticks: later reads return zero values, and the caller checks err
// once at the end.
type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("unexpected end of input")

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// uvarint reads a varint and refuses a longer-than-needed one, which would
// give a second encoding of the same value.
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	switch {
	case n == 0:
		d.err = errShort
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

// int63 reads a varint that must fit an int64.
func (d *decoder) int63() int64 {
	v := d.uvarint()
	if v > 1<<63-1 {
		d.fail("integer %d overflows int64", v)
		return 0
	}
	return int64(v)
}

// count reads an element count. Each element takes at least one byte, so
// a count beyond the bytes left is refused before anything is allocated.
func (d *decoder) count() int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

// raw reads a length-prefixed byte string without copying it.
func (d *decoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

// bytes reads a length-prefixed byte string into a fresh slice; empty
// reads as nil, so that one value has one representation.
func (d *decoder) bytes() []byte {
	s := d.raw()
	if len(s) == 0 {
		return nil
	}
	return append([]byte(nil), s...)
}

func (d *decoder) string() string { return string(d.raw()) }

// end refuses trailing bytes: they would make two encodings of one value.
func (d *decoder) end() {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
}

func appendBytes[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func bytesSize[S ~string | ~[]byte](s S) int { return uvarintLen(uint64(len(s))) + len(s) }

// uvarintLen is the length of v's shortest varint encoding.
func uvarintLen(v uint64) int {
	if v == 0 {
		return 1
	}
	return (bits.Len64(v) + 6) / 7
}
