package imposterhttp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Bounds on a shellTransform's command.
const (
	ShellBudget    = 10 * time.Second
	MaxShellOutput = 4 << 20
)

// runShell runs a shellTransform's command as mountebank does: the
// request and response JSON in MB_REQUEST and MB_RESPONSE, and (as
// mountebank adds them for older scripts) as its last two arguments when
// the whole line is under 2048 bytes; its output is the new response.
//
// The command is the definition's, run by /bin/sh as mountebank runs it;
// the request's data reaches it only through the environment and as
// arguments passed apart from the command line ("$@"), so the shell never
// parses anything a client sent. It runs within ShellBudget, its output
// bounded by MaxShellOutput.
func runShell(command, request, response string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ShellBudget)
	defer cancel()
	args := []string{"-c", command, "sh"}
	if len(command)+len(request)+len(response)+6 < 2048 {
		args = []string{"-c", command + ` "$@"`, "sh", request, response}
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", args...)
	cmd.Env = append(os.Environ(), "MB_REQUEST="+request, "MB_RESPONSE="+response)
	var stdout, stderr boundedBuffer
	stdout.max, stderr.max = MaxShellOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("Command failed: %s: no answer within %v", command, ShellBudget)
	case stdout.over:
		return nil, fmt.Errorf("Command failed: %s: more than %d bytes of output", command, MaxShellOutput)
	case err != nil:
		return nil, fmt.Errorf("Command failed: %s: %v\n%s", command, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// boundedBuffer keeps at most max bytes, and says if more came.
type boundedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		b.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
