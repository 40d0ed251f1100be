package kv_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

// sampleCommands has one command of every kind and shape, the fuzz seeds.
func sampleCommands() []kv.Command {
	return []kv.Command{
		{AtMs: 0, Op: kv.Tick()},
		{AtMs: 1_700_000_000_000, Op: put("alias/x", "dpl_A")},
		{AtMs: 1, Op: kv.Put("empty", nil)},
		{AtMs: 2, Op: kv.Delete("alias/x")},
		{AtMs: 3, Op: kv.LeaseAcquire("scheduler", "n1", 60_000)},
		{AtMs: 4, Op: kv.LeaseRenew("scheduler", "n1", 60_000)},
		{AtMs: 5, Op: kv.LeaseRelease("scheduler", "n1")},
		{AtMs: kv.MaxAtMs, Op: kv.Txn(
			[]kv.Guard{kv.VersionIs("a", 7), kv.Unchanged("b", kv.Entry{Value: []byte("B"), Version: 9}, true), kv.Absent("c"), kv.ValueIs("d", []byte("D"))},
			[]kv.Op{put("a", "1"), kv.Delete("b")},
			[]kv.Op{put("conflict", "1")})},
		{AtMs: 6, Op: kv.Txn(nil, nil, nil)},
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, cmd := range sampleCommands() {
		data, err := kv.EncodeCommand(cmd)
		require.NoError(t, err)
		got, err := kv.DecodeCommand(data)
		require.NoError(t, err)
		require.Equal(t, cmd, got)
		again, err := kv.EncodeCommand(got)
		require.NoError(t, err)
		require.Equal(t, data, again, "one encoding per command")
	}
}

func TestEncodeIsCompact(t *testing.T) {
	data, err := kv.EncodeCommand(kv.Command{AtMs: 1_700_000_000_000, Op: put("k", "v")})
	require.NoError(t, err)
	// version, 6-byte stamp, kind, 1+1 key, 1+1 value
	require.Len(t, data, 12)
}

func TestDecodeIsStrict(t *testing.T) {
	good, err := kv.EncodeCommand(kv.Command{AtMs: 300, Op: put("k", "v")})
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"empty":              nil,
		"unknown version":    append([]byte{2}, good[1:]...),
		"trailing garbage":   append(append([]byte{}, good...), 0),
		"truncated":          good[:len(good)-1],
		"unknown op kind":    {1, 0, 99},
		"invalid op kind":    {1, 0, 0},
		"non-minimal varint": {1, 0x80, 0x00, byte(kv.OpTick)},
		"length past end":    {1, 0, byte(kv.OpDelete), 50, 'k'},
		"huge count":         {1, 0, byte(kv.OpTxn), 0xff, 0xff, 0xff, 0xff, 0x0f},
		"txn in txn":         {1, 0, byte(kv.OpTxn), 0, 1, byte(kv.OpTxn), 0, 0, 0, 0},
		"lease op in txn":    {1, 0, byte(kv.OpTxn), 0, 1, byte(kv.OpLeaseRelease), 1, 'l', 1, 'h', 0},
		"unknown guard":      {1, 0, byte(kv.OpTxn), 1, 9, 1, 'k', 0, 0, 0, 0},
		"absent w/ version":  {1, 0, byte(kv.OpTxn), 1, byte(kv.GuardAbsent), 1, 'k', 5, 0, 0, 0},
		"stamp too late":     append([]byte{1}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, byte(kv.OpTick)),
		"ttl overflows":      {1, 0, byte(kv.OpLeaseAcquire), 1, 'l', 1, 'h', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		_, err := kv.DecodeCommand(data)
		require.ErrorIs(t, err, kv.ErrMalformed, name)
	}
}

func TestEncodeRefusesIllFormedCommands(t *testing.T) {
	for name, cmd := range map[string]kv.Command{
		"zero op":          {},
		"negative stamp":   {AtMs: -1, Op: kv.Tick()},
		"put with holder":  {Op: kv.Op{Kind: kv.OpPut, Key: "k", Holder: "n1"}},
		"tick with key":    {Op: kv.Op{Kind: kv.OpTick, Key: "k"}},
		"txn in txn":       {Op: kv.Txn(nil, []kv.Op{kv.Txn(nil, nil, nil)}, nil)},
		"lease op in txn":  {Op: kv.Txn(nil, nil, []kv.Op{kv.LeaseRelease("l", "n1")})},
		"value w/ version": {Op: kv.Txn([]kv.Guard{{Kind: kv.GuardValueIs, Key: "k", Version: 1}}, nil, nil)},
	} {
		_, err := kv.EncodeCommand(cmd)
		require.ErrorIs(t, err, kv.ErrInvalid, name)
	}
}

// FuzzDecodeCommand: decoding never panics, whatever decodes encodes back
// to the same bytes (one encoding per command) and decodes to the same
// command, and applying the bytes never panics either.
func FuzzDecodeCommand(f *testing.F) {
	for _, cmd := range sampleCommands() {
		data, err := kv.EncodeCommand(cmd)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 0x80, 0x00, byte(kv.OpTick)})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := kv.New(kv.Config{})
		require.NoError(t, err)
		res := s.Apply(1, data)
		require.NoError(t, s.CheckInvariants())

		cmd, err := kv.DecodeCommand(data)
		if err != nil {
			require.ErrorIs(t, err, kv.ErrMalformed)
			require.Error(t, res.Err, "apply must refuse what does not decode")
			return
		}
		enc, err := kv.EncodeCommand(cmd)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, enc), "decoded %x, encodes as %x", data, enc)
		again, err := kv.DecodeCommand(enc)
		require.NoError(t, err)
		require.Equal(t, cmd, again)
		if res.Err != nil {
			require.False(t, errors.Is(res.Err, kv.ErrMalformed), "decodes, so apply must not call it malformed: %v", res.Err)
		}
	})
}
