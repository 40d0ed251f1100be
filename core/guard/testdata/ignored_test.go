package fixture

import (
	"os"
	"time"
)

// Test files may use goroutines, the wall clock and the OS; the guard skips
// them.
func init() {
	go func() {}()
	_ = time.Now()
	_ = os.Getpid()
}
