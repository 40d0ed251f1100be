package kv

import (
	"encoding/binary"
	"fmt"
	"github.com/fenceline/fenceline/core/binenc"
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
		b = binenc.AppendBytes(b, op.Key)
		b = binenc.AppendBytes(b, op.Value)
	case OpDelete:
		b = binenc.AppendBytes(b, op.Key)
	case OpTxn:
		b = binary.AppendUvarint(b, uint64(len(op.Guards)))
		for _, g := range op.Guards {
			b = append(b, byte(g.Kind))
			b = binenc.AppendBytes(b, g.Key)
			b = binary.AppendUvarint(b, g.Version)
			b = binenc.AppendBytes(b, g.Value)
		}
		for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
			b = binary.AppendUvarint(b, uint64(len(branch)))
			for _, sub := range branch {
				b = appendOp(b, sub)
			}
		}
	case OpLeaseAcquire, OpLeaseRenew:
		b = binenc.AppendBytes(b, op.Key)
		b = binenc.AppendBytes(b, op.Holder)
		b = binary.AppendUvarint(b, uint64(op.TTLMs))
	case OpLeaseRelease:
		b = binenc.AppendBytes(b, op.Key)
		b = binenc.AppendBytes(b, op.Holder)
	}
	return b
}

// commandSize is len(EncodeCommand(cmd)) for a shaped cmd, without
// encoding it, so that Validate can bound a 4 MiB command for free.
func commandSize(cmd Command) int {
	return 1 + binenc.UvarintLen(uint64(cmd.AtMs)) + opSize(cmd.Op)
}

func opSize(op Op) int {
	n := 1
	switch op.Kind {
	case OpPut:
		n += bytesSize(op.Key) + bytesSize(op.Value)
	case OpDelete:
		n += bytesSize(op.Key)
	case OpTxn:
		n += binenc.UvarintLen(uint64(len(op.Guards)))
		for _, g := range op.Guards {
			n += 1 + bytesSize(g.Key) + binenc.UvarintLen(g.Version) + bytesSize(g.Value)
		}
		for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
			n += binenc.UvarintLen(uint64(len(branch)))
			for _, sub := range branch {
				n += opSize(sub)
			}
		}
	case OpLeaseAcquire, OpLeaseRenew:
		n += bytesSize(op.Key) + bytesSize(op.Holder) + binenc.UvarintLen(uint64(op.TTLMs))
	case OpLeaseRelease:
		n += bytesSize(op.Key) + bytesSize(op.Holder)
	}
	return n
}

// maxPutCommandBytes is the encoded size of a Put of a maximal key and
// value stamped at MaxAtMs.
func maxPutCommandBytes(c Config) int {
	return 1 + binenc.UvarintLen(uint64(MaxAtMs)) + 1 +
		binenc.UvarintLen(uint64(c.MaxKeyBytes)) + c.MaxKeyBytes +
		binenc.UvarintLen(uint64(c.MaxValueBytes)) + c.MaxValueBytes
}

// DecodeCommand parses an entry written by EncodeCommand. Errors wrap
// ErrMalformed. It accepts exactly the canonical encodings:
// EncodeCommand(DecodeCommand(b)) == b whenever decoding succeeds. It
// copies what it keeps, so b may be reused afterwards.
func DecodeCommand(b []byte) (Command, error) {
	d := decoder{binenc.Decoder{B: b}}
	if v := d.Byte(); d.Err == nil && v != encodingVersion {
		d.Fail("encoding version %d, want %d", v, encodingVersion)
	}
	at := d.Uvarint()
	if d.Err == nil && at > uint64(MaxAtMs) {
		d.Fail("AtMs %d past %d", at, MaxAtMs)
	}
	op := d.op(false)
	d.End()
	if d.Err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrMalformed, d.Err)
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
	kind := OpKind(d.Byte())
	if d.Err != nil {
		return Op{}
	}
	if kind == OpInvalid || kind >= opKindEnd {
		d.Fail("unknown op kind %d", uint8(kind))
		return Op{}
	}
	if inTxn && kind != OpPut && kind != OpDelete {
		d.Fail("%v inside a txn", kind)
		return Op{}
	}
	op := Op{Kind: kind}
	switch kind {
	case OpPut:
		op.Key = d.Str()
		op.Value = d.bytes()
	case OpDelete:
		op.Key = d.Str()
	case OpTxn:
		for n := d.Count(); n > 0 && d.Err == nil; n-- {
			g := Guard{Kind: GuardKind(d.Byte())}
			g.Key = d.Str()
			g.Version = d.Uvarint()
			g.Value = d.bytes()
			op.Guards = append(op.Guards, g)
		}
		for n := d.Count(); n > 0 && d.Err == nil; n-- {
			op.OnSuccess = append(op.OnSuccess, d.op(true))
		}
		for n := d.Count(); n > 0 && d.Err == nil; n-- {
			op.OnFailure = append(op.OnFailure, d.op(true))
		}
	case OpLeaseAcquire, OpLeaseRenew:
		op.Key = d.Str()
		op.Holder = d.Str()
		op.TTLMs = d.Int63()
	case OpLeaseRelease:
		op.Key = d.Str()
		op.Holder = d.Str()
	}
	return op
}

// decoder reads the primitives shared by commands and snapshots. The first
// failure sticks: later reads return zero values, and the caller checks err
// once at the end.
// decoder is the KV's decoder: binenc's strict primitives, and bytes.
type decoder struct{ binenc.Decoder }

// bytes reads a length-prefixed byte string into a fresh slice; empty
// reads as nil, so that one value has one representation.
func (d *decoder) bytes() []byte {
	s := d.Raw()
	if len(s) == 0 {
		return nil
	}
	return append([]byte(nil), s...)
}

func bytesSize[S ~string | ~[]byte](s S) int { return binenc.UvarintLen(uint64(len(s))) + len(s) }
