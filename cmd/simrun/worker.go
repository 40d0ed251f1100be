package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// A sweep's runs go to worker processes, each a simrun that runs one job
// after another: its arguments as one JSON line on stdin, its output on
// stdout, then an end mark with its exit status. A process per run cost
// about 10ms of wall time and 15ms of CPU each, two minutes of CI's
// budget. A run still cannot touch the sweep's own process, and a worker
// that dies mid-run (a panic outside a node's code, a kill) costs that run
// alone: runJob starts a fresh worker for the next. Each run builds its
// own kernel, cluster and crypto/rand reader (scenarios.Execute), so a
// seed replays the same in a worker that ran others before it; a sweep
// with -check-determinism runs each seed twice, in whatever workers are
// free, and compares.

// workerFlag starts a worker; it is not a user flag.
const workerFlag = "-worker"

// endMark opens the line that ends a job's output; what follows it is
// the exit status simrun would have exited with.
const endMark = "\x1esimrun-worker-end "

// maxJobLine bounds one job's line (its arguments; a -skip list can be long).
const maxJobLine = 1 << 20

// workerLoop runs the jobs that come on in until it closes.
func workerLoop(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxJobLine)
	for sc.Scan() {
		var args []string
		code := exitUsage
		if err := json.Unmarshal(sc.Bytes(), &args); err != nil {
			fmt.Fprintf(out, "simrun: worker: a job line is not a JSON list of arguments: %v\n", err)
		} else {
			code = run(args, out, out)
		}
		fmt.Fprintf(out, "%s%d\n", endMark, code)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "simrun: worker: reading jobs: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// worker is the sweep's side of one worker process.
type worker struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	r   *os.File // the read end of the process's stdout and stderr
}

func startWorker(exe string) (*worker, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, workerFlag)
	// One pipe for both, so that a crash's stack trace reaches the
	// outcome's detail in order with what the run printed.
	cmd.Stdout, cmd.Stderr = wr, wr
	in, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	wr.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting a worker: %w", err)
	}
	return &worker{cmd: cmd, in: in, out: bufio.NewReader(r), r: r}, nil
}

// do runs one job: the output before the end mark and the exit status,
// or an error when the worker died before it.
func (w *worker) do(args []string) ([]byte, int, error) {
	line, err := json.Marshal(args)
	if err != nil {
		return nil, 0, err
	}
	if _, err := w.in.Write(append(line, '\n')); err != nil {
		return nil, 0, fmt.Errorf("worker gone: %w", err)
	}
	var out bytes.Buffer
	for {
		l, err := w.out.ReadString('\n')
		if rest, ok := strings.CutPrefix(l, endMark); ok {
			code, err := strconv.Atoi(strings.TrimSpace(rest))
			return out.Bytes(), code, err
		}
		out.WriteString(l)
		if err != nil {
			return out.Bytes(), 0, fmt.Errorf("worker died mid-run: %w", err)
		}
	}
}

// stop ends the worker: between jobs, or after it died. Its input closed,
// a worker between jobs exits on its own (workerLoop), which lets a binary
// built with -cover write its counters; one that has not exited within
// stopGrace is killed.
func (w *worker) stop() {
	if w == nil {
		return
	}
	w.in.Close()
	exited := make(chan struct{})
	go func() {
		_ = w.cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = w.cmd.Process.Kill()
		<-exited
	}
	w.r.Close()
}

// stopGrace bounds how long stop waits for a worker to exit by itself.
const stopGrace = 2 * time.Second
