package imposter

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Objects with many keys parse and print in time linear in their size
// (n log n): found by the issue 26 review, a 1.8 MB body of 160,000
// distinct keys took 35 s to parse (each key looked for along the keys
// before it), and 149 KB of 16,000 array-index keys in descending order
// 6 s to print (an insertion sort). The bounds are 20-50 times what the
// fixed code takes, and far below what the old code took.
func TestManyKeysCostLinearTime(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	const n = 200_000
	for i := range n {
		b.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
	}
	b.WriteString(`"k5":1}`) // set twice: first place, last value
	start := time.Now()
	v, err := Parse(b.String())
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "parsing %d keys", n)
	o := v.(*Object)
	require.Equal(t, n, o.Len())
	require.Equal(t, "k5", o.Keys()[5])
	x, _ := o.Get("k5")
	require.Equal(t, 1.0, x)

	b.Reset()
	b.WriteString("{")
	const m = 100_000
	for i := range m {
		b.WriteString(`"` + strconv.Itoa(m-i) + `":0,`)
	}
	b.WriteString(`"x":0}`)
	v, err = Parse(b.String())
	require.NoError(t, err)
	start = time.Now()
	out := Marshal(v, 0)
	require.Less(t, time.Since(start), 5*time.Second, "printing %d index keys", m)
	require.True(t, strings.HasPrefix(string(out), `{"1":0,"2":0,"3":0,`), "%.40s", out)
	require.True(t, strings.HasSuffix(string(out), `,"100000":0,"x":0}`))
}
