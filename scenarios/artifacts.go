package scenarios

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fenceline/fenceline/linearizability"
)

// This file: what a failing run leaves for a person (simrun -out DIR):
// porcupine's picture of the offending key's history, a timeline around
// the violation, and the command that replays it.

// eventLog keeps the kernel's human-readable lines (every event, fault
// and log line, stamped with virtual time) while a run that may need
// drawing goes on.
type eventLog struct{ buf bytes.Buffer }

func (e *eventLog) Write(p []byte) (int, error) { return e.buf.Write(p) }

// timelineBefore is how much of the run before a violation the timeline
// shows.
const timelineBefore = 5 * time.Second

// draw writes the failure's files into dir and returns their paths.
func (r *Run) draw(dir, replay string, events *eventLog) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, f func(b *bytes.Buffer) error) error {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		files = append(files, path)
		return os.WriteFile(path, b.Bytes(), 0o644)
	}
	if err := write("replay.txt", func(b *bytes.Buffer) error {
		fmt.Fprintln(b, replay)
		for _, f := range r.result.Findings {
			fmt.Fprintf(b, "FAIL %s\n", f)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var keys []offense
	for _, o := range r.offenses {
		if !seen[o.checker] {
			seen[o.checker] = true
			keys = append(keys, o)
		}
	}
	for _, o := range keys {
		h := r.histories[o.checker]
		if h == nil {
			continue
		}
		name := fmt.Sprintf("%s-%s", o.checker, safeName(o.key))
		if err := write(name+".html", func(b *bytes.Buffer) error {
			_, err := linearizability.VisualizeFlow(h, o.key, r.CheckTimeout, b)
			return err
		}); err != nil {
			return nil, err
		}
		if err := write(name+"-timeline.txt", func(b *bytes.Buffer) error {
			timeline(b, o, h, events)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// timeline merges, in virtual time, the faults, membership and node
// events the kernel logged and the operations on the offending key, from
// timelineBefore before the violation to a second after it.
func timeline(b *bytes.Buffer, o offense, h *linearizability.History, events *eventLog) {
	from, to := o.at-timelineBefore, o.at+time.Second
	fmt.Fprintf(b, "%s on %s: first fails at %v; from %v to %v\n", o.checker, o.key, o.at, max(from, 0), to)
	type line struct {
		at   time.Duration
		text string
	}
	var lines []line
	if events != nil {
		sc := bufio.NewScanner(bytes.NewReader(events.buf.Bytes()))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			text := sc.Text()
			at, rest, ok := stamp(text)
			if !ok || at < from || at > to || !worthTelling(rest) {
				continue
			}
			lines = append(lines, line{at, rest})
		}
	}
	for _, op := range h.Ops() {
		if op.Key != o.key || op.Call > to || (op.Return != 0 && op.Return < from) {
			continue
		}
		var what string
		switch op.Outcome {
		case linearizability.OK:
			what = fmt.Sprintf("%s, answered at %v", linearizability.DescribeFlowOp(op.Input, op.Output), op.Return)
		case linearizability.Refused:
			what = fmt.Sprintf("%s refused at %v", linearizability.DescribeFlowOp(op.Input, linearizability.FlowOutput{Unknown: true}), op.Return)
		default:
			what = fmt.Sprintf("%s (%s)", linearizability.DescribeFlowOp(op.Input, linearizability.FlowOutput{Unknown: true}), op.Note)
		}
		lines = append(lines, line{op.Call, fmt.Sprintf("client %d %s", op.Client, what)})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return int(a.at - b.at) })
	for _, l := range lines {
		mark := "  "
		if l.at >= o.at && l.at < o.at+time.Millisecond {
			mark = "> "
		}
		fmt.Fprintf(b, "%s%12v %s\n", mark, l.at, l.text)
	}
}

// worthTelling keeps the kernel's lines about faults, nodes, membership
// and leadership, and the checkers', not every frame sent.
func worthTelling(s string) bool {
	for _, w := range []string{"fault", "crash", "start", "heal", "partition", "CHECK FAILED", "member", "leader", "learner", "remove", "join", "halted", "power", "accepted loss"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// stamp reads the virtual time a kernel line starts with.
func stamp(s string) (time.Duration, string, bool) {
	s = strings.TrimLeft(s, " ")
	t, rest, ok := strings.Cut(s, " ")
	if !ok {
		return 0, "", false
	}
	d, err := time.ParseDuration(t)
	return d, rest, err == nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == ' ' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, s)
}
