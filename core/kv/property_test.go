package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/kv"
)

// The random workload runs over few keys, lease names and holders and two
// values, so that guards collide, leases contend and keys go A -> B -> A.
var (
	propKeys    = []string{"a", "b", "c", "too-long-key"} // the last breaks MaxKeyBytes
	propLeases  = []string{"l1", "l2"}
	propHolders = []string{"n1", "n2", "n3"}
	propValues  = []string{"", "A", "B"}
)

// propConfig is small enough that the workload hits the bounds.
func propConfig() kv.Config { return kv.Config{MaxKeyBytes: 8, MaxTxnOps: 3, MaxLeaseTTLMs: 300} }

func drawValue(t *rapid.T, label string) []byte {
	if v := rapid.SampledFrom(propValues).Draw(t, label); v != "" {
		return []byte(v)
	}
	return nil
}

func drawDataOp(t *rapid.T) kv.Op {
	key := rapid.SampledFrom(propKeys).Draw(t, "key")
	if rapid.IntRange(0, 3).Draw(t, "delete") == 0 {
		return kv.Delete(key)
	}
	return kv.Put(key, drawValue(t, "value"))
}

// drawGuard draws a guard, about half of them on what s holds now, so
// that a good share of transactions succeed.
func drawGuard(t *rapid.T, s *kv.State) kv.Guard {
	key := rapid.SampledFrom(propKeys).Draw(t, "guard key")
	e, found := s.Get(key)
	switch rapid.IntRange(0, 4).Draw(t, "guard kind") {
	case 0:
		return kv.Unchanged(key, e, found)
	case 1:
		return kv.VersionIs(key, rapid.Uint64Range(0, 20).Draw(t, "guard version"))
	case 2:
		return kv.Absent(key)
	case 3:
		return kv.ValueIs(key, drawValue(t, "guard value"))
	}
	return kv.Unchanged(key, e, found)
}

func drawOps(t *rapid.T, label string) []kv.Op {
	var ops []kv.Op
	for range rapid.IntRange(0, 2).Draw(t, label) {
		ops = append(ops, drawDataOp(t))
	}
	return ops
}

// drawCommand draws the next command, stamped near atMs.
func drawCommand(t *rapid.T, s *kv.State, atMs int64) kv.Command {
	name := rapid.SampledFrom(propLeases).Draw(t, "lease")
	holder := rapid.SampledFrom(propHolders).Draw(t, "holder")
	ttl := rapid.Int64Range(0, 320).Draw(t, "ttl") // 0 and >300 are invalid
	var op kv.Op
	switch rapid.IntRange(0, 7).Draw(t, "op") {
	case 0, 1:
		op = drawDataOp(t)
	case 2:
		var guards []kv.Guard
		for range rapid.IntRange(0, 2).Draw(t, "guards") {
			guards = append(guards, drawGuard(t, s))
		}
		op = kv.Txn(guards, drawOps(t, "success ops"), drawOps(t, "failure ops"))
	case 3:
		op = kv.LeaseAcquire(name, holder, ttl)
	case 4:
		op = kv.LeaseRenew(name, holder, ttl)
	case 5:
		op = kv.LeaseRelease(name, holder)
	default:
		op = kv.Tick()
	}
	return kv.Command{AtMs: atMs, Op: op}
}

// drawEntry draws the next log entry: mostly an encoded command, sometimes
// bytes that do not decode. The clock mostly moves forward and sometimes
// steps back, as a new leader's might.
func drawEntry(t *rapid.T, s *kv.State, atMs *int64) []byte {
	*atMs = max(0, *atMs+rapid.Int64Range(-40, 120).Draw(t, "clock step"))
	if rapid.IntRange(0, 19).Draw(t, "garbage") == 0 {
		return rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "garbage bytes")
	}
	data, err := kv.EncodeCommand(drawCommand(t, s, *atMs))
	require.NoError(t, err)
	return data
}

// comparable strips a Result of its error value, which two replicas build
// separately, keeping its text.
type comparableResult struct {
	kv.Result
	Err string
}

func comparable(r kv.Result) comparableResult {
	c := comparableResult{Result: r}
	if r.Err != nil {
		c.Err = r.Err.Error()
	}
	c.Result.Err = nil
	return c
}

func newState(t require.TestingT, cfg kv.Config) *kv.State {
	s, err := kv.New(cfg)
	require.NoError(t, err)
	return s
}

// TestPropertyVersionsAndAgreement applies one random log to two replicas,
// one through the bytes and one through the decoded commands, and checks
// at every step: equal results and digests, the invariants, and that the
// step's events carry the next versions in order, one per change, so that
// no version is reused, not even by a key deleted and written again.
func TestPropertyVersionsAndAgreement(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := newState(t, propConfig()), newState(t, propConfig())
		atMs := int64(1000)
		seen, prevMs := uint64(0), int64(0)
		lastVersionOf := map[string]uint64{}
		for i := range uint64(rapid.IntRange(1, 60).Draw(t, "entries")) {
			index := 2*i + 1 // raft indices need not be dense
			data := drawEntry(t, a, &atMs)
			ra := a.Apply(index, data)
			var rb kv.Result
			if cmd, err := kv.DecodeCommand(data); err == nil {
				rb = b.ApplyCommand(index, cmd)
			} else {
				rb = b.Apply(index, data)
			}
			require.Equal(t, comparable(ra), comparable(rb))
			require.Equal(t, a.Digest(), b.Digest())
			require.NoError(t, a.CheckInvariants())
			require.GreaterOrEqual(t, a.AppliedMs(), prevMs, "the clamp: applied time never moves back")
			prevMs = a.AppliedMs()

			evs, err := a.EventsSince(seen, 0)
			require.NoError(t, err)
			for j, ev := range evs {
				require.Equal(t, seen+1+uint64(j), ev.Version, "versions consecutive, one per change")
				require.Equal(t, index, ev.Index)
				id := ev.Space.String() + "/" + ev.Key
				require.Greater(t, ev.Version, lastVersionOf[id], "never reused")
				lastVersionOf[id] = ev.Version
			}
			require.Equal(t, a.Version(), seen+uint64(len(evs)))
			require.Equal(t, a.Version(), ra.Revision)
			if ra.Version != 0 {
				require.Greater(t, ra.Version, seen)
				require.LessOrEqual(t, ra.Version, ra.Revision)
			}
			seen = a.Version()
		}
	})
}

// TestPropertySnapshotMidway: a replica that restores a snapshot taken
// part way and applies the rest reaches the digest, results and events of
// one that applied everything, and so does a third replica applying the
// same log from the start (determinism).
func TestPropertySnapshotMidway(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ref := newState(t, propConfig())
		atMs := int64(1000)
		var log [][]byte
		var results []comparableResult
		n := rapid.IntRange(1, 60).Draw(t, "entries")
		for i := range n {
			data := drawEntry(t, ref, &atMs)
			log = append(log, data)
			results = append(results, comparable(ref.Apply(uint64(i+1), data)))
		}
		cut := rapid.IntRange(0, n).Draw(t, "cut")

		again := newState(t, propConfig())
		for i, data := range log[:cut] {
			require.Equal(t, results[i], comparable(again.Apply(uint64(i+1), data)))
		}
		restored := newState(t, propConfig())
		require.NoError(t, restored.Restore(again.Snapshot()))
		require.Equal(t, again.Digest(), restored.Digest())
		for i, data := range log[cut:] {
			index := uint64(cut + i + 1)
			require.Equal(t, results[cut+i], comparable(again.Apply(index, data)))
			require.Equal(t, results[cut+i], comparable(restored.Apply(index, data)))
		}
		require.Equal(t, ref.Digest(), again.Digest())
		require.Equal(t, ref.Digest(), restored.Digest())
		require.NoError(t, restored.CheckInvariants())

		wantEvs, err := ref.EventsSince(0, 0)
		require.NoError(t, err)
		gotEvs, err := again.EventsSince(0, 0)
		require.NoError(t, err)
		require.Equal(t, wantEvs, gotEvs, "every replica emits the same events")
	})
}

// TestPropertyEncodingRoundTrip: every well-formed command survives
// encoding exactly, and Validate's size bound agrees with the encoder.
func TestPropertyEncodingRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newState(t, propConfig())
		cmd := drawCommand(t, s, rapid.Int64Range(0, kv.MaxAtMs).Draw(t, "at"))
		data, err := kv.EncodeCommand(cmd)
		require.NoError(t, err)
		got, err := kv.DecodeCommand(data)
		require.NoError(t, err)
		require.Equal(t, cmd, got)

		exact := kv.Config{MaxCommandBytes: len(data)}.Validate(cmd)
		short := kv.Config{MaxCommandBytes: len(data) - 1}.Validate(cmd)
		if exact == nil {
			require.ErrorContains(t, short, "encoded command is")
		} else {
			require.NotContains(t, exact.Error(), "encoded command is")
		}
	})
}
