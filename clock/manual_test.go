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
