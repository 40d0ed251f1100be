package fixture

import "time"

// Durations and time.Time arithmetic are pure, so they are allowed.
const timeout = 2 * time.Second

func deadline(now time.Time) time.Time { return now.Add(timeout) } // allowed: time handed in

func clocks() {
	_ = time.Now()                          // planted: no-wall-clock
	time.Sleep(time.Millisecond)            // planted: no-wall-clock
	<-time.After(timeout)                   // planted: no-wall-clock
	t := time.AfterFunc(timeout, func() {}) // planted: no-wall-clock
	t.Stop()
	_ = time.NewTimer(timeout)  // planted: no-wall-clock
	_ = time.NewTicker(timeout) // planted: no-wall-clock
	_ = time.Tick(timeout)      // planted: no-wall-clock
	_ = time.Since(time.Time{}) // planted: no-wall-clock
	_ = time.Until(time.Time{}) // planted: no-wall-clock
	now := time.Now             // planted: no-wall-clock (a reference, not a call)
	_ = now

	var d time.Duration = 3 * time.Millisecond // allowed
	_ = d.String()                             // allowed
	_ = time.Time{}.After(time.Time{})         // allowed: the method After compares two instants
}

// fakeClock has a Now method; a local variable named time holding one is not
// the time package.
type fakeClock struct{}

func (fakeClock) Now() int { return 0 }

func shadowed() int {
	time := fakeClock{}
	return time.Now() // allowed: not the time package
}
