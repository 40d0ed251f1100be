package imposter

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// modelObject is Object as it was before its index: keys searched along
// the keys, the reference the indexed Object must agree with.
type modelObject struct {
	keys []string
	vals []any
}

func (m *modelObject) set(k string, v any) {
	if i := slices.Index(m.keys, k); i >= 0 {
		m.vals[i] = v
		return
	}
	m.keys, m.vals = append(m.keys, k), append(m.vals, v)
}

func (m *modelObject) delete(k string) {
	if i := slices.Index(m.keys, k); i >= 0 {
		m.keys, m.vals = slices.Delete(m.keys, i, i+1), slices.Delete(m.vals, i, i+1)
	}
}

// rename is the old in-place rename then dedupeKeys: the first place,
// the last value.
func (m *modelObject) rename(fn func(string) string) {
	out := &modelObject{}
	for i, k := range m.keys {
		out.set(fn(k), m.vals[i])
	}
	*m = *out
}

// Set, Get, Delete and renaming keys agree with the unindexed model in
// keys, order and values, through objects that grow past the index
// threshold and shrink back, with keys that merge when lower-cased.
func TestObjectIndexAgreesWithModel(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 26))
		var o Object // the zero value is usable
		m := &modelObject{}
		names := 2 + rng.IntN(60)
		key := func() string {
			k := "k" + strconv.Itoa(rng.IntN(names))
			if rng.IntN(3) == 0 {
				k = strings.ToUpper(k)
			}
			return k
		}
		for step := range 300 {
			switch op := rng.IntN(20); {
			case op < 12:
				k, v := key(), float64(step)
				o.Set(k, v)
				m.set(k, v)
			case op < 16:
				k := key()
				o.Delete(k)
				m.delete(k)
			case op < 17:
				o.renameKeys(strings.ToLower)
				m.rename(strings.ToLower)
			case op < 18:
				suffix := strconv.Itoa(rng.IntN(2))
				fn := func(k string) string { return strings.TrimRight(k, "0123456789") + suffix }
				o.renameKeys(fn)
				m.rename(fn)
			case op < 19:
				c := Clone(&o).(*Object)
				o = *c
			default:
				f := forceStrings(&o).(*Object)
				for i := range m.vals {
					m.vals[i] = ToString(m.vals[i])
				}
				o = *f
			}
			require.True(t, slices.Equal(m.keys, o.Keys()), "seed %d step %d: keys %q, want %q", seed, step, o.Keys(), m.keys)
			for i, k := range m.keys {
				v, ok := o.Get(k)
				require.True(t, ok, "seed %d step %d: %q", seed, step, k)
				require.Equal(t, m.vals[i], v, "seed %d step %d: %q", seed, step, k)
			}
			for n := range names {
				k := "k" + strconv.Itoa(n)
				_, ok := o.Get(k)
				require.Equal(t, slices.Contains(m.keys, k), ok, "seed %d step %d: %q", seed, step, k)
			}
			if o.index != nil {
				require.Len(t, o.index, len(o.keys), "seed %d step %d: the index holds every key once", seed, step)
			}
		}
	}
}

// manyKeys is a JSON object of n distinct keys, about 11 bytes each.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"K` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	return b.String()
}

// A request of many distinct keys costs time linear in them through
// every path that builds or reads objects of its keys. Found by the
// issue 26 fuzzing pass: with keys found along the keys, a 1 MB body of
// 100,000 keys took 16 s against {"equals":{"body":{"a":"b"}}} (lower-casing
// its keys, then merging the ones that became the same), 16 s against a
// jsonpath selector and 32 s against deepEquals; 115,000 distinct form or
// query names would take 80 s to read, 100,000 header names 24 s. Here it
// is 200,000 keys, which the quadratic code takes minutes over: each bound
// is 20-50 times what the indexed Object takes (tens to hundreds of ms).
func TestManyKeysCostLinearTimeThroughRequests(t *testing.T) {
	const n = 200_000
	body := manyKeys(n)
	for _, pred := range []string{
		`{"equals":{"body":{"a":"b"}}}`,
		`{"deepEquals":{"body":{"a":"b"}}}`,
		`{"equals":{"body":"b"},"jsonpath":{"selector":"$.a"}}`,
		`{"exists":{"body":{"k5":true}}}`,
	} {
		p, err := CompilePredicate(mustParse(t, pred))
		require.NoError(t, err)
		r := req("POST", "/", "", body)
		start := time.Now()
		matched := p.Matches(r)
		require.Less(t, time.Since(start), 5*time.Second, "%s against %d keys", pred, n)
		require.Equal(t, strings.HasPrefix(pred, `{"exists"`), matched, pred)
	}

	o := &Object{}
	start := time.Now()
	for i := range n {
		addValue(o, "k"+strconv.Itoa(i), "v") // ParseQuery's and AddHeader's step
	}
	addValue(o, "k7", "again")
	require.Less(t, time.Since(start), 5*time.Second, "%d names", n)
	require.Equal(t, n, o.Len())
	v, _ := o.Get("k7")
	require.Equal(t, []any{"v", "again"}, v)

	// A copy behavior's token replaced in the keys of a response of many
	// keys, two of which become the same.
	is := mustParse(t, strings.Replace(manyKeys(n), `"K1"`, `"TOKEN"`, 1)).(*Object)
	start = time.Now()
	replaceTokens(is, func(s string) string { return strings.ReplaceAll(s, "TOKEN", "K2") })
	require.Less(t, time.Since(start), 5*time.Second, "renaming keys of %d", n)
	require.Equal(t, n-1, is.Len())
	require.Equal(t, []string{"K0", "K2", "K3"}, is.Keys()[:3], "the merged key keeps its first place")
}
