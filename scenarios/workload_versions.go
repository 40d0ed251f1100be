package scenarios

import (
	"strconv"

	"github.com/fenceline/fenceline/checker"
	"github.com/fenceline/fenceline/core/flow"
)

// flowKeysAll are the keys every write of these scenarios sets together
// (one set-all), each to the write's version: a read that sees them
// disagree, or sees some and not others, saw a torn flow.
var flowKeysAll = []string{"a", "b", "c"}

func setAll(version int) map[string][]byte {
	out := map[string][]byte{}
	v := []byte(strconv.Itoa(version))
	for _, k := range flowKeysAll {
		out[k] = v
	}
	return out
}

func outcomeOf(err error) checker.WriteOutcome {
	switch {
	case err == nil:
		return checker.WriteOK
	case flow.Known(err):
		return checker.WriteRefused
	default:
		return checker.WriteUnknown
	}
}
