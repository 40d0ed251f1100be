package linearizability

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// KV operations as clients record them, checked per key by porcupine.
//
// Versions are the KV's: global, monotonic, never reused, so the model
// does not predict them; it pins a key's version when an answer reveals it
// and checks what follows against it. That is what catches a value guard
// passing over an A → B → A change: the guard's version no longer matches
// the pinned one, yet the write went through.

// KVOp names an operation kind.
type KVOp uint8

// KV operation kinds.
const (
	KVPut KVOp = iota + 1
	KVGet
	KVCas    // a txn: guard VersionIs(key, Expect), then Put(key, Value); Expect 0 means "absent"
	KVDelete // remove key
)

// KVInput is an operation's input.
type KVInput struct {
	Op     KVOp
	Value  string
	Expect uint64 // KVCas: the version guarded on
}

// KVOutput is an operation's answer. A write whose answer never came (or
// came as an unknown outcome) is recorded with Unknown set, and may or may
// not have taken effect.
type KVOutput struct {
	Unknown   bool
	Found     bool   // KVGet; KVDelete: the key was there to delete
	Value     string // KVGet
	Version   uint64 // KVGet: the value's version; KVPut, KVCas: the write's
	Succeeded bool   // KVCas
}

// kvState is one key's state. Version 0 with Present means the version is
// not known (it was written by an operation whose answer never came).
type kvState struct {
	Present bool
	Value   string
	Version uint64
}

func kvStep(s kvState, in KVInput, out KVOutput) []any {
	switch in.Op {
	case KVPut:
		if out.Unknown {
			return []any{s, kvState{Present: true, Value: in.Value}}
		}
		if s.Version != 0 && out.Version <= s.Version {
			return nil // versions only grow
		}
		return []any{kvState{Present: true, Value: in.Value, Version: out.Version}}
	case KVGet:
		if out.Found != s.Present {
			return nil
		}
		if !s.Present {
			return []any{s}
		}
		if out.Value != s.Value {
			return nil
		}
		if s.Version == 0 {
			// The read reveals the version an unanswered write got.
			return []any{kvState{Present: true, Value: s.Value, Version: out.Version}}
		}
		if out.Version != s.Version {
			return nil
		}
		return []any{s}
	case KVDelete:
		switch {
		case out.Unknown:
			return []any{s, kvState{}}
		case !out.Found:
			if s.Present {
				return nil // it was there, and a delete found nothing
			}
			return []any{s}
		case !s.Present || (s.Version != 0 && out.Version <= s.Version):
			return nil // deleted what was not there, or went back in versions
		}
		return []any{kvState{}}
	case KVCas:
		// VersionIs(key, 0) holds exactly when the key is absent (no
		// present key has version 0). Otherwise the guard holds if the
		// key is present at exactly Expect; with the version unknown,
		// either may be true.
		var mayHold, mayFail bool
		if in.Expect == 0 {
			mayHold, mayFail = !s.Present, s.Present
		} else {
			mayHold = s.Present && (s.Version == 0 || s.Version == in.Expect)
			mayFail = !s.Present || s.Version != in.Expect
		}
		written := kvState{Present: true, Value: in.Value, Version: out.Version}
		switch {
		case out.Unknown:
			var next []any
			if mayFail {
				next = append(next, s)
			}
			if mayHold {
				next = append(next, kvState{Present: true, Value: in.Value})
			}
			return next
		case out.Succeeded:
			if !mayHold || (s.Version != 0 && out.Version <= s.Version) {
				return nil
			}
			return []any{written}
		default:
			if !mayFail {
				return nil
			}
			return []any{s}
		}
	}
	return nil
}

// KVModel is the porcupine model of one KV key register with version
// guards; operations are partitioned by Op.Key.
var KVModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{kvState{}} },
	Step: func(state, input, output any) []any {
		return kvStep(state.(kvState), input.(KVInput), output.(KVOutput))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(KVInput), output.(KVOutput)
		res := fmt.Sprintf("%+v", out)
		if out.Unknown {
			res = "?"
		}
		switch in.Op {
		case KVPut:
			return fmt.Sprintf("put(%s) -> %s", in.Value, res)
		case KVGet:
			return fmt.Sprintf("get() -> %s", res)
		case KVDelete:
			return fmt.Sprintf("delete() -> %s", res)
		default:
			return fmt.Sprintf("cas(v%d, %s) -> %s", in.Expect, in.Value, res)
		}
	},
}

// KVResult is the verdict on one key.
type KVResult struct {
	Key      string
	Ops      int
	Verdict  porcupine.CheckResult
	Describe string // the key's operations, for a failing verdict
}

// CheckKV checks a history of KVInput/KVOutput operations for
// linearizability, key by key, in sorted key order. Refused operations are
// left out (they did not happen); an Unknown operation is kept with an
// unbounded return time, so it may take effect at any point after its call
// or never. Reads whose answer never came are left out.
//
// porcupine's timeout is wall-clock: a key that takes longer than timeout
// comes back porcupine.Unknown. Callers must not fold that verdict into a
// trace hash; it is reported, not failed.
func CheckKV(h *History, timeout time.Duration) []KVResult {
	byKey := map[string][]porcupine.Operation{}
	for p := range h.all() {
		op := *p
		in, ok := op.Input.(KVInput)
		if !ok || op.Outcome == Refused {
			continue
		}
		var out KVOutput
		ret := int64(op.Return)
		if op.Outcome == Unknown {
			if in.Op == KVGet {
				continue
			}
			out = KVOutput{Unknown: true}
			ret = math.MaxInt64
		} else {
			out = op.Output.(KVOutput)
		}
		byKey[op.Key] = append(byKey[op.Key], porcupine.Operation{
			ClientId: op.Client, Input: in, Output: out, Call: int64(op.Call), Return: ret,
		})
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := KVModel.ToModel()
	var results []KVResult
	for _, k := range keys {
		ops := byKey[k]
		verdict := porcupine.CheckOperationsTimeout(model, ops, timeout)
		r := KVResult{Key: k, Ops: len(ops), Verdict: verdict}
		if verdict == porcupine.Illegal {
			r.Describe = describeOpsWith(KVModel.DescribeOperation, ops)
		}
		results = append(results, r)
	}
	return results
}
