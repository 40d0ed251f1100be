package skips

type bugs struct{ Early bool }

type config struct{ Bugs bugs }

// Sites inside "bug" comments run only while a bug is planted, or are a
// make's capacity: the mutator leaves them alone. The rest are mutated.
func f(cfg config, xs []int) []int {
	out := make([]int, 0, len(xs)+1 /* capacity */)
	seen := make(map[int]bool, 8 /* capacity */)
	if cfg.Bugs.Early { /* bug */
		out = append(out, 7)
	}
	if cfg.Bugs.Early && len(xs) == 0 { /* bug: and no drop-guard */
		return nil
	}
	if !cfg.Bugs.Early && len(xs) > 2 {
		out = append(out, 1)
	}
	if cfg.Bugs.Early && len(xs) > 3 /* bug */ {
		out = append(out, 2)
	}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

type svc struct{ bugs bugs }

// A bug set kept under the name bugs reads the same.
func (s svc) g(xs []int) int {
	if s.bugs.Early { /* bug: and no drop-guard */
		return 0
	}
	return len(xs)
}

// A case of a switch with no tag on a bug's flag is an if on it.
func (s svc) h(n int) int {
	switch {
	case s.bugs.Early: /* bug */
		n += 1000
	case n > 5:
		n--
	}
	return n
}
