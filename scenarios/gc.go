package scenarios

import (
	"os"
	"runtime/debug"
)

// SimGCPercent is the garbage collector's target (GOGC) that simrun and
// BenchmarkScenarios run the simulator with. A simulated cluster's live
// heap is small (tens of MB) and it allocates at a high rate, so with
// Go's default of 100 the collector ran about a quarter of the time;
// at 400 a run is 35–45% faster for about 10% more peak memory
// (durability-restart seeds 1..6: 85 → 96 MB). At 800 (issue 16's second
// pass) the collector's marking was still 7–8% of owner-handoff: 800 takes
// another ~10% of CPU off flow-ops, owner-handoff and durability-restart,
// for a peak of at most ~55 MB per simrun seed here (ownership-returns;
// 41 MB at 400). It changes no result: a trace does not depend on when the
// collector runs.
const SimGCPercent = 800

// TuneGC sets the collector's target to SimGCPercent, unless GOGC is set
// in the environment: an explicit setting wins. For the main function of
// a simulator binary, or a benchmark; not for library code.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(SimGCPercent)
	}
}
