package imposter

import (
	"fmt"
	"time"
)

// shellTransform runs a command that makes the response anew, as
// mountebank's shellTransform behavior does: the command gets the
// request and the response as JSON and prints the new response as JSON.
// The engine runs no process itself: the host does (script.Host.Shell),
// with the node's bounds, and only on a node that allows injection.
type shellTransform struct{ command string }

func (s shellTransform) apply(r *Request, is *Object, _ Files) (time.Duration, error) {
	if r.shell == nil {
		return 0, &Error{Code: CodeInvalidInjection, Message: "Shell execution is not allowed on this node (it runs without -allowInjection)"}
	}
	out, err := r.shell(s.command, string(r.scriptRequest()), string(Marshal(is, 0)))
	if err != nil {
		return 0, &Error{Code: CodeInvalidInjection, Message: err.Error()}
	}
	v, perr := Parse(string(out))
	o, ok := v.(*Object)
	if perr != nil || !ok {
		return 0, &Error{Code: CodeInvalidInjection, Message: fmt.Sprintf("Shell command returned invalid JSON: '%s'", out)}
	}
	replaceObject(is, o)
	return 0, nil
}
