package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestManualRunsTimersInDeadlineOrder(t *testing.T) {
	c := NewManual(time.Unix(100, 0))
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "b@"+c.Now().Format("05")) })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a@"+c.Now().Format("05"))
		c.AfterFunc(0, func() { got = append(got, "a-then@"+c.Now().Format("05")) })
	})
	stopped := c.AfterFunc(time.Second, func() { got = append(got, "stopped") })
	require.True(t, stopped.Stop())
	c.AfterFunc(3*time.Second, func() { got = append(got, "late") })
	c.Advance(2 * time.Second)
	require.Equal(t, []string{"a@41", "a-then@41", "b@42"}, got)
	require.Equal(t, time.Unix(102, 0), c.Now())
	c.Set(time.Unix(50, 0)) // a step back moves no deadline
	c.Advance(0)
	require.Len(t, got, 3)
}

func TestManualMonoCountsAdvanceOnly(t *testing.T) {
	c := NewManual(time.Unix(100, 0))
	var inTimer time.Duration
	c.AfterFunc(time.Second, func() { inTimer = c.Mono() })
	c.Advance(1500 * time.Millisecond)
	require.Equal(t, time.Second, inTimer, "a timer reads the monotonic clock at its deadline")
	c.Set(time.Unix(10, 0)) // a wall step does not move it
	require.Equal(t, 1500*time.Millisecond, c.Mono())
	c.Advance(time.Second)
	require.Equal(t, 2500*time.Millisecond, c.Mono())
}
