package kv_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

func TestDefaultConfig(t *testing.T) {
	require.Equal(t, kv.Config{
		MaxKeyBytes:     1024,
		MaxValueBytes:   1 << 20,
		MaxTxnOps:       128,
		MaxLeaseTTLMs:   600_000,
		MaxCommandBytes: 4 << 20,
		EventLogLen:     4096,
		EventLogBytes:   64 << 20,
	}, kv.DefaultConfig())
	s := newState(t, kv.Config{})
	require.Equal(t, kv.DefaultConfig(), s.Config(), "zero fields take the defaults")
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]kv.Config{
		"negative key bound":  {MaxKeyBytes: -1},
		"negative log":        {EventLogLen: -5},
		"ttl past MaxAtMs":    {MaxLeaseTTLMs: kv.MaxAtMs + 1},
		"entry below one put": {MaxCommandBytes: 1000},
		"log below one event": {EventLogBytes: 1000},
	} {
		_, err := kv.New(cfg)
		require.Error(t, err, name)
	}
}

func TestValidateNamesTheBound(t *testing.T) {
	cfg := kv.Config{MaxKeyBytes: 8, MaxValueBytes: 16, MaxTxnOps: 2, MaxLeaseTTLMs: 1000, MaxCommandBytes: 40}
	long := strings.Repeat("k", 9)
	cases := map[string]struct {
		cmd  kv.Command
		want string
	}{
		"key":          {kv.Command{Op: put(long, "v")}, "key of 9 bytes, limit 8"},
		"empty key":    {kv.Command{Op: kv.Delete("")}, "empty key"},
		"value":        {kv.Command{Op: put("k", strings.Repeat("v", 17))}, `value of "k" is 17 bytes, limit 16`},
		"lease name":   {kv.Command{Op: kv.LeaseRelease(long, "n1")}, "lease name of 9 bytes"},
		"holder":       {kv.Command{Op: kv.LeaseRelease("l", long)}, "holder of 9 bytes"},
		"ttl":          {kv.Command{Op: kv.LeaseRenew("l", "n1", 1001)}, "TTL 1001 ms outside [1, 1000]"},
		"guards":       {kv.Command{Op: kv.Txn(make([]kv.Guard, 3), nil, nil)}, "unknown guard kind 0"},
		"guard count":  {kv.Command{Op: kv.Txn([]kv.Guard{kv.Absent("a"), kv.Absent("b"), kv.Absent("c")}, nil, nil)}, "3 guards, limit 2"},
		"op count":     {kv.Command{Op: kv.Txn(nil, []kv.Op{kv.Delete("a"), kv.Delete("b")}, []kv.Op{kv.Delete("c")})}, "3 ops, limit 2"},
		"guard value":  {kv.Command{Op: kv.Txn([]kv.Guard{kv.ValueIs("k", make([]byte, 17))}, nil, nil)}, "guard value on \"k\" is 17 bytes"},
		"size":         {kv.Command{Op: kv.Txn(nil, []kv.Op{put("k", strings.Repeat("v", 16)), put("j", strings.Repeat("v", 16))}, nil)}, "encoded command is"},
		"stamp":        {kv.Command{AtMs: -1, Op: kv.Tick()}, "AtMs -1 outside"},
		"unused field": {kv.Command{Op: kv.Op{Kind: kv.OpDelete, Key: "k", TTLMs: 5}}, "delete op sets fields it does not use (ttl)"},
	}
	for name, c := range cases {
		err := cfg.Validate(c.cmd)
		require.ErrorIs(t, err, kv.ErrInvalid, name)
		require.ErrorContains(t, err, c.want, name)
	}
	for _, cmd := range sampleCommands() {
		require.NoError(t, kv.DefaultConfig().Validate(cmd))
	}
}

// TestMalformedEntriesAgree: bytes that do not decode, or an entry over
// the size bound, give every replica the same error and change nothing but
// the applied index. A panic here would crash every replica in turn.
func TestMalformedEntriesAgree(t *testing.T) {
	cfg := kv.Config{MaxKeyBytes: 8, MaxValueBytes: 64, MaxCommandBytes: 128}
	entries := [][]byte{
		nil,
		{0},
		{1},
		{1, 0, 99},
		{0xff, 0xff, 0xff},
		make([]byte, 129),
	}
	a, b := newReplica(t, cfg), newReplica(t, cfg)
	for _, r := range []*replica{a, b} {
		r.apply(500, put("k", "v"))
		r.apply(600, kv.LeaseAcquire("l", "n1", 1000))
	}
	version, ms := a.s.Version(), a.s.AppliedMs()
	for _, data := range entries {
		ra, rb := a.applyRaw(data), b.applyRaw(data)
		require.Error(t, ra.Err)
		require.Equal(t, comparable(ra), comparable(rb))
		require.Equal(t, kv.OpInvalid, ra.Kind)
		require.Equal(t, a.s.Digest(), b.s.Digest())
	}
	require.ErrorIs(t, a.applyRaw(make([]byte, 129)).Err, kv.ErrInvalid, "oversize: refused before decoding")
	require.ErrorIs(t, a.applyRaw([]byte{1, 0, 99}).Err, kv.ErrMalformed)
	require.Equal(t, version, a.s.Version())
	require.Equal(t, ms, a.s.AppliedMs())
	require.Equal(t, uint64(2+len(entries)+2), a.s.AppliedIndex())
}

func TestApplyPanicsOnIndexThatDoesNotAdvance(t *testing.T) {
	s := newState(t, kv.Config{})
	s.Apply(5, nil)
	require.PanicsWithValue(t, "kv: apply index 5 does not follow applied index 5", func() { s.Apply(5, nil) })
	require.Panics(t, func() { s.ApplyCommand(4, kv.Command{Op: kv.Tick()}) })
}
