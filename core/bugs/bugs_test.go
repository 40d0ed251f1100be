package bugs

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every switch of Set has exactly one line in the table, and each line
// turns on its own switch and no other.
func TestTheTableNamesEverySwitchOnce(t *testing.T) {
	require.Equal(t, reflect.TypeOf(Set{}).NumField(), len(Table), "a field of Set without a line in Table, or the reverse")
	seen := map[string]bool{}
	fields := map[string]bool{}
	for _, b := range Table {
		require.False(t, seen[b.Name], "bug %q named twice", b.Name)
		seen[b.Name] = true
		require.NotEmpty(t, b.Summary, b.Name)
		s, err := Of(b.Name)
		require.NoError(t, err)
		require.Equal(t, []string{b.Name}, s.Enabled())
		v := reflect.ValueOf(s)
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).Bool() {
				field := v.Type().Field(i).Name
				require.False(t, fields[field], "field %s switched by two bugs", field)
				fields[field] = true
			}
		}
	}
}

func TestUnknownBugsAreRefused(t *testing.T) {
	_, err := Of("no-such-bug")
	require.ErrorContains(t, err, `unknown bug "no-such-bug"`)
	s, err := Of("no-fence", "tick-window")
	require.NoError(t, err)
	require.True(t, s.NoFence && s.TickWindow)
	require.Equal(t, []string{"no-fence", "tick-window"}, s.Enabled())
}
