// Package ignored sits in a nested testdata directory, which the guard skips
// like the go tool does.
package ignored

import "time"

func init() {
	go func() {}()
	_ = time.Now()
}
