package flow

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/dial"
)

// valueCodec is how a Value is stored in the shard's backend: a version
// byte, a flags byte (1: a tombstone; 2: the tuple has an era), the
// tuple (its era only when flagged) and expiry as varints, then the data.
// A value of era 0 is stored as before eras existed.
// Binary rather than JSON: the shard writes one per key per write, and
// recovery decodes every stored key.
type valueCodec struct{}

const valueFormat = 1

func (valueCodec) Encode(v Value) []byte {
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+len(v.Data))
	flags := byte(0)
	if v.Tomb {
		flags = 1
	}
	if v.Tuple.Era != 0 {
		flags |= 2
	}
	b = append(b, valueFormat, flags)
	if v.Tuple.Era != 0 {
		b = binary.AppendUvarint(b, v.Tuple.Era)
	}
	b = binary.AppendUvarint(b, v.Tuple.MIdx)
	b = binary.AppendUvarint(b, v.Tuple.V)
	b = binary.AppendUvarint(b, uint64(v.Tuple.Origin))
	b = binary.AppendVarint(b, v.ExpiresAtMs)
	return append(b, v.Data...)
}

var errValueFormat = errors.New("flow: stored value is malformed")

func (valueCodec) Decode(b []byte) (Value, error) {
	if len(b) < 2 || b[0] != valueFormat || b[1] > 3 {
		return Value{}, fmt.Errorf("%w: header %x", errValueFormat, b[:min(len(b), 2)])
	}
	v := Value{Tomb: b[1]&1 == 1}
	hasEra := b[1]&2 == 2
	b = b[2:]
	var fields [4]uint64 // era, m_idx, v, origin
	for i := range fields {
		if i == 0 && !hasEra {
			continue
		}
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return Value{}, fmt.Errorf("%w: tuple field %d", errValueFormat, i)
		}
		fields[i], b = n, b[k:]
	}
	if hasEra && fields[0] == 0 {
		return Value{}, fmt.Errorf("%w: era flagged but 0", errValueFormat)
	}
	exp, k := binary.Varint(b)
	if k <= 0 {
		return Value{}, fmt.Errorf("%w: expiry", errValueFormat)
	}
	v.Tuple = Tuple{Era: fields[0], MIdx: fields[1], V: fields[2], Origin: dial.NodeID(fields[3])}
	v.ExpiresAtMs = exp
	if rest := b[k:]; len(rest) > 0 {
		if v.Tomb {
			return Value{}, fmt.Errorf("%w: a tombstone with data", errValueFormat)
		}
		v.Data = append([]byte(nil), rest...)
	}
	return v, nil
}

// Expiry: a value is seen until it expires; a tombstone is never seen,
// and its expiry (the deletion time) starts its grace.
func (valueCodec) Expiry(v Value) (int64, bool) { return v.ExpiresAtMs, !v.Tomb }

// servedMeta is the flow metadata the store keeps in the shard: the
// latest m_idx at which this node served the flow, so that a restarted
// owner knows it was the authority.
func encodeServed(m uint64) []byte { return binary.AppendUvarint(nil, m) }

func decodeServed(b []byte) uint64 {
	m, k := binary.Uvarint(b)
	if k <= 0 {
		return 0 // unreadable: claim nothing, which only makes adoption wait
	}
	return m
}
