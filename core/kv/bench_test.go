package kv_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

const benchKeys = 10_000

// BenchmarkApplyPut applies encoded puts of 100-byte values over 10k keys,
// decoding included: the path of a committed entry.
func BenchmarkApplyPut(b *testing.B) {
	s := newState(b, kv.Config{})
	entries := make([][]byte, benchKeys)
	value := make([]byte, 100)
	for i := range entries {
		data, err := kv.EncodeCommand(kv.Command{AtMs: 1_700_000_000_000, Op: kv.Put(fmt.Sprintf("flow/%06d", i), value)})
		require.NoError(b, err)
		entries[i] = data
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if res := s.Apply(uint64(i+1), entries[i%benchKeys]); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// filledState holds 10k keys of 100-byte values and a few leases.
func filledState(b *testing.B) *kv.State {
	s := newState(b, kv.Config{})
	value := make([]byte, 100)
	for i := range benchKeys {
		s.ApplyCommand(uint64(i+1), kv.Command{AtMs: 1000, Op: kv.Put(fmt.Sprintf("flow/%06d", i), value)})
	}
	for i := range 8 {
		s.ApplyCommand(uint64(benchKeys+i+1), kv.Command{AtMs: 1000, Op: kv.LeaseAcquire(fmt.Sprintf("lease/%d", i), "n1", 60_000)})
	}
	return s
}

// BenchmarkSnapshot encodes a state of 10k keys; the replica-agreement
// checker pays this (plus a hash) for every Digest.
func BenchmarkSnapshot(b *testing.B) {
	s := filledState(b)
	b.SetBytes(int64(len(s.Snapshot())))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Snapshot()
	}
}

// BenchmarkRestore decodes and checks the same 10k-key snapshot.
func BenchmarkRestore(b *testing.B) {
	snap := filledState(b).Snapshot()
	s := newState(b, kv.Config{})
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := s.Restore(snap); err != nil {
			b.Fatal(err)
		}
	}
}
