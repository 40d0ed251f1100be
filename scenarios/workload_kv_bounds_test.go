package scenarios

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

// Each command the bounds client proposes is what it claims, at every
// bound the knob draws: one that breaks a rule fails kv's validation, one
// at a bound passes it. A probe that claimed wrongly would fail runs of a
// correct node, or pass a validation that let it through.
func TestKVProbesAreWhatTheyClaim(t *testing.T) {
	for _, b := range []kvBounds{
		{keyBytes: 12, valueBytes: 2, txnOps: 1, ttlMs: 30_000},
		{keyBytes: 19, valueBytes: 7, txnOps: 3, ttlMs: 90_000},
		{keyBytes: 15, valueBytes: 4, txnOps: 2, ttlMs: 45_123},
	} {
		cfg := kv.Config{MaxKeyBytes: b.keyBytes, MaxValueBytes: b.valueBytes, MaxTxnOps: b.txnOps, MaxLeaseTTLMs: b.ttlMs}
		for _, n := range []int{0, 7, 999} {
			for _, p := range kvProbes(b, n) {
				err := cfg.Validate(kv.Command{AtMs: 1, Op: p.op})
				require.Equal(t, p.invalid, errors.Is(err, kv.ErrInvalid), "%s at %v (n=%d): %v", p.what, b, n, err)
			}
		}
	}
}
