package fixture

import (
	"maps"
	"slices"
	"sort"
	"strings"
)

type registry map[string]int

func planted(m map[string]int, r registry) (out []string) {
	for k := range m { // planted: map-order (collected, never sorted)
		out = append(out, k)
	}
	for k, v := range r { // planted: map-order (named map type)
		if v > 0 {
			out = append(out, k)
		}
	}
	for k := range maps.Keys(m) { // planted: map-order (random iterator)
		out = append(out, k)
	}
	for _, v := range maps.All(m) { // planted: map-order (random iterator)
		_ = v
	}
	var late []string
	for k := range m { // planted: map-order (sorted only inside another block)
		late = append(late, k)
	}
	if len(late) > 1 {
		sort.Strings(late)
	}
	var other []string
	for k := range m { // planted: map-order (a different slice is sorted)
		late = append(late, k)
	}
	sort.Strings(other)
	return out
}

func generic[M ~map[K]V, K comparable, V any](m M) (ks []K) {
	for k := range m { // planted: map-order (type parameter over maps)
		ks = append(ks, k)
	}
	return ks
}

func allowed(m map[string]int, xs []string) []string {
	var keys []string
	for k := range m { // allowed: collect-then-sort
		keys = append(keys, k)
	}
	sort.Strings(keys)

	var vals []int
	for _, v := range m { // allowed: collect-then-sort of the values
		vals = append(vals, v)
	}
	_ = len(vals)
	slices.Sort(vals)

	var conv []string
	for k := range m { // allowed: collect-then-sort through a conversion
		conv = append(conv, k)
	}
	sort.Sort(sort.StringSlice(conv))

	var byLen []string
	for k := range m { // allowed: collect-then-sort with a comparison
		byLen = append(byLen, k)
	}
	slices.SortFunc(byLen, func(a, b string) int { return len(a) - len(b) })
	keys = append(keys, byLen...)

	for _, x := range xs { // allowed: a slice
		keys = append(keys, x)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) { // allowed: sorted iterator
		keys = append(keys, k)
	}
	n := 0
	for range m { // allowed: no key or value, so order is unobservable
		n++
	}
	for i := range n { // allowed: an int
		_ = i
	}
	return keys
}

type lease struct{ deadline int64 }

func (l lease) lapsed(now int64) bool { return l.deadline <= now }

func filtered(leases map[string]lease, now int64, prefix string) []string {
	var lapsed []string
	for name, l := range leases { // allowed: an effect-free filter, then a sort
		if l.deadline <= now && strings.HasPrefix(name, prefix) && len(name) > 0 {
			lapsed = append(lapsed, name)
		}
	}
	slices.Sort(lapsed)

	var firstTen []string
	for name := range leases { // planted: map-order (the filter reads the slice)
		if len(firstTen) < 10 {
			firstTen = append(firstTen, name)
		}
	}
	slices.Sort(firstTen)

	var viaMethod []string
	for name, l := range leases { // planted: map-order (the filter calls a method that could have effects)
		if l.lapsed(now) {
			viaMethod = append(viaMethod, name)
		}
	}
	slices.Sort(viaMethod)

	var withElse []string
	for name := range leases { // planted: map-order (an else branch does more than filter)
		if name != "" {
			withElse = append(withElse, name)
		} else {
			now++
		}
	}
	slices.Sort(withElse)
	return append(append(append(lapsed, firstTen...), viaMethod...), withElse...)
}
