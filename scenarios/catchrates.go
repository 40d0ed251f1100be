package scenarios

import (
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// catchRatesFile is the last measurement of every planted bug's catch
// rate, written by `simrun -catch-rates -write scenarios/catchrates.txt`
// and shown by `simrun -list` beside each bug's pin.
//
//go:embed catchrates.txt
var catchRatesFile string

// Measured is one catch-rate measurement: Caught of seeds 1..Window
// failed with the bug on, the lowest of them First (0 when none did).
// First lets `go test` confirm a catch in one run where a scan from seed
// 1 would take dozens (TestPlantedBugsAreCaught).
type Measured struct {
	Scenario, Bug         string
	Caught, Window, First int
}

// LastMeasured returns the recorded measurement of a bug, if any.
func LastMeasured(scenario, bug string) (Measured, bool) {
	ms, err := ParseCatchRates(catchRatesFile)
	if err != nil {
		panic(fmt.Sprintf("scenarios: catchrates.txt: %v", err))
	}
	for _, m := range ms {
		if m.Scenario == scenario && m.Bug == bug {
			return m, true
		}
	}
	return Measured{}, false
}

// ParseCatchRates reads the catch-rate file: a line per bug,
// "<scenario> <bug> <caught> <window> <first>", and # comments.
func ParseCatchRates(text string) ([]Measured, error) {
	var out []Measured
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("line %d: want <scenario> <bug> <caught> <window> <first>, got %q", i+1, line)
		}
		caught, err1 := strconv.Atoi(f[2])
		window, err2 := strconv.Atoi(f[3])
		first, err3 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil || caught < 0 || window < 1 || caught > window ||
			first < 0 || first > window || (first == 0) != (caught == 0) {
			return nil, fmt.Errorf("line %d: bad counts in %q", i+1, line)
		}
		out = append(out, Measured{Scenario: f[0], Bug: f[1], Caught: caught, Window: window, First: first})
	}
	return out, nil
}

// FormatCatchRates writes measurements in the file's form, sorted.
func FormatCatchRates(ms []Measured) string {
	ms = append([]Measured(nil), ms...)
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Scenario != ms[j].Scenario {
			return ms[i].Scenario < ms[j].Scenario
		}
		return ms[i].Bug < ms[j].Bug
	})
	var b strings.Builder
	b.WriteString("# Last measured catch rate of every planted bug: <scenario> <bug> <seeds caught> <window> <first seed caught>.\n")
	b.WriteString("# Written by: go run ./cmd/simrun -catch-rates -write scenarios/catchrates.txt\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %s %d %d %d\n", m.Scenario, m.Bug, m.Caught, m.Window, m.First)
	}
	return b.String()
}
