package flow

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenceline/fenceline/dial"
)

// valueCodec is how a Value is stored in the shard's backend: a version
// byte, a flags byte, the tuple and expiry as varints, then the data.
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
	b = append(b, valueFormat, flags)
	b = binary.AppendUvarint(b, v.Tuple.MIdx)
	b = binary.AppendUvarint(b, v.Tuple.V)
	b = binary.AppendUvarint(b, uint64(v.Tuple.Origin))
	b = binary.AppendVarint(b, v.ExpiresAtMs)
	return append(b, v.Data...)
}

var errValueFormat = errors.New("flow: stored value is malformed")

func (valueCodec) Decode(b []byte) (Value, error) {
	if len(b) < 2 || b[0] != valueFormat || b[1] > 1 {
		return Value{}, fmt.Errorf("%w: header %x", errValueFormat, b[:min(len(b), 2)])
	}
	v := Value{Tomb: b[1] == 1}
	b = b[2:]
	var fields [3]uint64
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return Value{}, fmt.Errorf("%w: tuple field %d", errValueFormat, i)
		}
		fields[i], b = n, b[k:]
	}
	exp, k := binary.Varint(b)
	if k <= 0 {
		return Value{}, fmt.Errorf("%w: expiry", errValueFormat)
	}
	v.Tuple = Tuple{MIdx: fields[0], V: fields[1], Origin: dial.NodeID(fields[2])}
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
