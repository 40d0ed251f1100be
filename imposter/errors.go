package imposter

import "fmt"

// Error is one of mountebank's API errors: a code (mountebank's words,
// which clients match on), a message, and optionally the offending part
// of the request (source). The HTTP layer sends it as
// {"errors": [{"code": ..., "message": ..., "source": ...}]}.
type Error struct {
	Code    string
	Message string
	Source  any // a JSON value, or nil
	// Data and Name are an injected function's failure: what it threw
	// (its message) and the error's name (JavaScript's "Error").
	Data, Name string
	// stubSource marks an error mountebank finds by dry-running the stub,
	// whose source is the whole stub as compact JSON text; NewStub fills
	// it in.
	stubSource bool
}

// mountebank's error codes.
const (
	CodeBadData          = "bad data"
	CodeResourceConflict = "resource conflict"
	CodeNoSuchResource   = "no such resource"
	CodeInvalidJSON      = "invalid JSON"
	CodeInvalidProxy     = "invalid proxy"
	CodeCannotStart      = "cannot start server"
	// CodeInvalidStatus is node's, which mountebank passes on when a
	// response's statusCode is no HTTP status.
	CodeInvalidStatus = "ERR_HTTP_INVALID_STATUS_CODE"
)

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Value is the error as mountebank prints it.
func (e *Error) Value() *Object {
	o := NewObject().Set("code", e.Code).Set("message", e.Message)
	if e.Source != nil {
		o.Set("source", e.Source)
	}
	if e.Data != "" {
		o.Set("data", e.Data)
	}
	if e.Name != "" {
		o.Set("name", e.Name)
	}
	return o
}

func badData(msg string, source any) *Error {
	return &Error{Code: CodeBadData, Message: msg, Source: source}
}

// dryRunError is an error mountebank reports with the stub as its source.
func dryRunError(code, msg string) *Error {
	return &Error{Code: code, Message: msg, stubSource: true}
}

// notSupported refuses a feature fenceline leaves out by decision, in
// mountebank's error shape, so that a suite that relies on it fails
// loudly at creation instead of matching differently.
func notSupported(feature string, source any) *Error {
	return badData(feature+" is not supported by fenceline", source)
}

// CodeInvalidInjection is mountebank's code for JavaScript it will not run.
const CodeInvalidInjection = "invalid injection"
