package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestShrinkKeepsTheFailure shrinks failing runs of four planted bugs and
// runs each printed replay command as printed: it must fail the same
// checker, with the minimized run's event count (the shrinker's result
// replays exactly), and keep at most as much as the original.
func TestShrinkKeepsTheFailure(t *testing.T) {
	bin := buildSimrun(t, "builds the binary and runs the shrinker")

	for _, tc := range []struct {
		scenario, bug, seed, checker string
	}{
		{"kernel-selftest", "selftest-no-gossip", "1", "convergence"},
		{"proxyonce-race", "no-claim", "1", "proxyonce"},
		{"replica-repair", "no-anti-entropy", "1", "replica-convergence"},
		// The example, on a budget: faults and length are shrunk
		// in it, and what the operations pass reached.
		{"owner-handoff", "no-fence", "2", "flow-linearizability"},
	} {
		t.Run(tc.scenario+"/"+tc.bug, func(t *testing.T) {
			out, err := exec.Command(bin, "-scenario", tc.scenario, "-bug", tc.bug, "-seed", tc.seed, "-shrink", "-shrink-for", "20s").Output()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, string(out))
			require.Equal(t, exitFail, exit.ExitCode(), "a shrunk run is a failing run")
			text := string(out)
			require.Contains(t, text, "which fails "+tc.checker)
			orig, mini := lineWith(text, "original: "), lineWith(text, "minimized: ")
			require.Contains(t, mini, "verdict FAIL: ")
			require.LessOrEqual(t, atoiField(mini, "faults"), atoiField(orig, "faults"))
			require.Less(t, atoiField(mini, "operations"), atoiField(orig, "operations"))
			replayCmd := strings.TrimPrefix(lineWith(text, "replay: "), "replay: ")
			require.True(t, strings.HasPrefix(replayCmd, "go run ./cmd/simrun "), replayCmd)
			args := shellWords(strings.TrimPrefix(replayCmd, "go run ./cmd/simrun "))
			cmd := exec.Command(bin, append(args, "-quiet")...)
			again, err := cmd.Output()
			require.Error(t, err)
			require.Equal(t, exitFail, cmd.ProcessState.ExitCode(), string(again))
			summary := lastLine(string(again))
			require.Contains(t, strings.Split(field(summary, "checkers"), ","), tc.checker, summary)
			require.Contains(t, mini, " "+field(summary, "events")+" events", "the replay is the minimized run")
		})
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// atoiField reads the number before word in a line like "3 faults, ...".
func atoiField(line, word string) int {
	fs := strings.Fields(strings.ReplaceAll(line, ",", ""))
	for i := 1; i < len(fs); i++ {
		if fs[i] == word {
			n := 0
			for _, r := range fs[i-1] {
				if r < '0' || r > '9' {
					return -1
				}
				n = n*10 + int(r-'0')
			}
			return n
		}
	}
	return -1
}

// shellWords splits a command line on spaces, keeping single-quoted
// words whole, as a shell would for the replay lines simrun prints.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}
