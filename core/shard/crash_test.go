package shard_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/shard"
)

// verCodec stores a version number that never expires.
type verCodec struct{}

func (verCodec) Encode(v int) []byte { return []byte(strconv.Itoa(v)) }
func (verCodec) Decode(b []byte) (int, error) {
	return strconv.Atoi(string(b))
}
func (verCodec) Expiry(int) (int64, bool) { return 1 << 62, true }

// The writer over the simulated disk, through crashes that tear unsynced
// bytes: what each mode promised survives, and a Put is never half kept.
//
// Flows 0 and 1 are sync, 2 and 3 async, 4 none. Every Put sets keys a
// and b of one flow to a new version. After a crash, each flow's a and b
// agree (a Put is atomic), the version is one that was written, it is no
// older than the newest one WhenDurable confirmed, and a none flow is
// gone.
func TestPropShardCrashKeepsWhatEachModePromised(t *testing.T) {
	modes := []shard.Mode{shard.Sync, shard.Sync, shard.Async, shard.Async, shard.None}
	rapid.Check(t, func(rt *rapid.T) {
		r := newRig(rt, rapid.Uint64().Draw(rt, "seed"), 0.5)
		clk := clock.NewManual(time.Unix(1_700_000_000, 0))
		cfg := shard.Config{CommitDelay: time.Millisecond}
		open := func() *shard.Shard[int] {
			l, err := shard.OpenLog(r.Disk(), lname)
			require.NoError(rt, err)
			s, err := shard.Open[int](cfg, shard.Env{Clock: clk, Backend: l}, verCodec{})
			require.NoError(rt, err)
			return s
		}
		s := open()
		written := make([]int, len(modes)) // the newest version written, per flow
		durable := make([]int, len(modes)) // the newest version confirmed durable
		for i := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("op%d", i)); {
			case op < 6:
				f := rapid.IntRange(0, len(modes)-1).Draw(rt, fmt.Sprintf("flow%d", i))
				written[f]++
				v, name := written[f], fmt.Sprintf("f%d", f)
				require.NoError(rt, s.Put(name, map[string]int{"a": v, "b": v}, nil, modes[f]))
				if modes[f] == shard.Sync {
					f := f
					s.WhenDurable(name, func(err error) {
						require.NoError(rt, err)
						durable[f] = max(durable[f], v)
					})
				}
			case op < 9:
				clk.Advance(time.Duration(rapid.IntRange(0, 80).Draw(rt, fmt.Sprintf("ms%d", i))) * time.Millisecond)
			default:
				s.Stop()
				r.Crash()
				s = open()
				for f, mode := range modes {
					keys := s.Peek(fmt.Sprintf("f%d", f))
					if mode == shard.None {
						require.Empty(rt, keys, "flow %d is memory only", f)
						continue
					}
					got := keys["a"]
					require.Equal(rt, got, keys["b"], "flow %d: a Put kept in half", f)
					require.LessOrEqual(rt, got, written[f], "flow %d: a version never written", f)
					require.GreaterOrEqual(rt, got, durable[f], "flow %d (%s): version %d was confirmed durable, the crash kept %d", f, mode, durable[f], got)
					written[f], durable[f] = got, got // the next writes start from what survived
				}
			}
		}
	})
}
