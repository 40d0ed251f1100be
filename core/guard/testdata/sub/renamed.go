// Package sub checks that the guard descends into subdirectories and sees
// through a renamed import of time.
package sub

import clk "time"

// Stamp reads the wall clock under another name.
func Stamp() int64 {
	return clk.Now().UnixNano() // planted: no-wall-clock
}

// Wait only names a duration.
func Wait() clk.Duration { return clk.Second } // allowed

// Sum ranges over a slice.
func Sum(xs []int) (n int) {
	for _, x := range xs { // allowed
		n += x
	}
	return n
}
