package imposter

import (
	"fmt"
	"regexp/syntax"
)

// Regular expressions are compiled with their imposter, and Go's regexp
// compiles a repetition by expanding it: "a{1000}", 7 bytes, is a program
// of 1,000 instructions, which takes ~110 KB to compile and ~40 KB to
// keep. A 1 MB creation of many {"matches":{"body":"a{1000}"}} took 3.5 GB
// of allocations and kept 1.35 GB. So what a definition's patterns compile
// to is bounded, counted before anything is compiled:
//
//   - one pattern at most MaxRegexInsts instructions: ordinary patterns
//     are tens (^/api/v1/customers/\d+/orders$ is 31); one repetition at
//     Go's largest count, x{0,1000}, is about 2,000;
//   - an imposter's patterns (its matches predicates', excepts', and copy
//     and lookup behaviors' regex selectors) at most MaxImposterRegexInsts
//     together: ordinary stubs are well under one instruction per byte of
//     definition, so the largest definition the cluster stores (1 MiB) fits
//     with room; that much program takes ~110 MB to compile and ~40 MB to
//     keep, the most one imposter's patterns can cost.
//
// A definition past either is refused at creation (400, bad data), naming
// the limit.
const (
	MaxRegexInsts         = 10_000
	MaxImposterRegexInsts = 1 << 20
)

// regexInsts is the size of the program src compiles to (Perl syntax, as
// regexp.Compile reads it), counted on its parse tree as Go's parser
// counts it for its own (much larger) limit: a repetition is its
// expansion, without making it.
func regexInsts(src string) (int, error) {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return 0, err
	}
	// The program adds a fail and a match to the expression's.
	return int(min(progSize(re), 1<<40)) + 2, nil
}

// progSize mirrors regexp/syntax's calcSize.
func progSize(re *syntax.Regexp) int64 {
	var size int64
	switch re.Op {
	case syntax.OpLiteral:
		size = int64(len(re.Rune))
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + progSize(re.Sub[0])
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + progSize(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			size += progSize(sub)
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			size += progSize(sub)
		}
		size += int64(len(re.Sub)) - 1
	case syntax.OpRepeat:
		sub := progSize(re.Sub[0])
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub
		case re.Max == -1:
			size = 1 + int64(re.Min)*sub
		default:
			size = int64(re.Max)*sub + int64(re.Max-re.Min)
		}
	}
	return max(1, size)
}

// checkRegexSize refuses a pattern that compiles past MaxRegexInsts
// (before it is compiled); an error is the parser's, or the size's.
func checkRegexSize(src string) error {
	n, err := regexInsts(src)
	if err != nil {
		return err
	}
	if n > MaxRegexInsts {
		return fmt.Errorf("it compiles to %d instructions, over the limit of %d for one regular expression (a repetition is expanded: x{1000} is 1,000 copies of x)", n, MaxRegexInsts)
	}
	return nil
}

// CheckRegexTotal refuses a creation request whose regular expressions
// together compile past MaxImposterRegexInsts, counted without compiling
// any: New checks it before compiling the stubs, and so must whatever
// proposes a changed set of stubs (each of which NewStub compiles alone).
// Patterns that do not parse are left for the compiler to report.
func CheckRegexTotal(creation *Object) error {
	total := 0
	add := func(src string) {
		if n, err := regexInsts(src); err == nil {
			total += n
		}
	}
	for _, s := range StubConfigs(creation) {
		st, ok := s.(*Object)
		if !ok {
			continue
		}
		if ps, ok := st.Get("predicates"); ok {
			list, _ := ps.([]any)
			for _, p := range list {
				predicateRegexes(p, add)
				if total > MaxImposterRegexInsts {
					return regexTotalError(total)
				}
			}
		}
		rs, _ := st.Get("responses")
		list, _ := rs.([]any)
		for _, r := range list {
			if ro, ok := r.(*Object); ok {
				behaviorRegexes(ro, add)
			}
		}
		if total > MaxImposterRegexInsts {
			return regexTotalError(total)
		}
	}
	return nil
}

func regexTotalError(total int) *Error {
	return badData(fmt.Sprintf("the imposter's regular expressions compile to over %d instructions together (at least %d), past the limit of %d (a repetition is expanded: x{1000} is 1,000 copies of x)",
		MaxImposterRegexInsts, total, MaxImposterRegexInsts), nil)
}

// predicateRegexes calls add with each pattern the predicate v compiles
// (as CompilePredicate reads it): a matches operand's leaves and an
// except, in and below not, or and and.
func predicateRegexes(v any, add func(string)) {
	o, ok := v.(*Object)
	if !ok {
		return
	}
	op := predicateOperator(o)
	operand, _ := o.Get(op)
	switch op {
	case "not":
		predicateRegexes(operand, add)
		return
	case "or", "and":
		list, _ := operand.([]any)
		for _, x := range list {
			predicateRegexes(x, add)
		}
		return
	case "matches":
		regexLeaves(operand, add)
	}
	if op != "" {
		if e, ok := o.Get("except"); ok && truthy(e) {
			if s, ok := e.(string); ok {
				add(s)
			}
		}
	}
}

// regexLeaves calls add with each string (or number) leaf of a matches
// operand, as compileRegexes compiles them.
func regexLeaves(v any, add func(string)) {
	switch t := v.(type) {
	case *Object:
		for _, x := range t.vals {
			regexLeaves(x, add)
		}
	case []any:
		for _, x := range t {
			regexLeaves(x, add)
		}
	case nil:
	default:
		add(ToString(v))
	}
}

// behaviorRegexes calls add with the regex selector of each copy and
// lookup behavior of a response, in its behaviors array or its legacy
// _behaviors object.
func behaviorRegexes(r *Object, add func(string)) {
	selector := func(using any) {
		u, ok := using.(*Object)
		if !ok {
			return
		}
		if m, _ := u.Get("method"); m != "regex" {
			return
		}
		if s, ok := u.Get("selector"); ok {
			if src, ok := s.(string); ok {
				add(src)
			}
		}
	}
	one := func(kind string, v any) {
		o, ok := v.(*Object)
		if !ok {
			return
		}
		switch kind {
		case "copy":
			u, _ := o.Get("using")
			selector(u)
		case "lookup":
			if k, ok := o.Get("key"); ok {
				if ko, ok := k.(*Object); ok {
					u, _ := ko.Get("using")
					selector(u)
				}
			}
		}
	}
	if bs, ok := r.Get("behaviors"); ok {
		list, _ := bs.([]any)
		for _, b := range list {
			if bo, ok := b.(*Object); ok {
				for i := range bo.Len() {
					one(bo.At(i))
				}
			}
		}
	}
	if old, ok := r.Get("_behaviors"); ok {
		if ob, ok := old.(*Object); ok {
			for _, kind := range []string{"copy", "lookup"} {
				v, _ := ob.Get(kind)
				if list, ok := v.([]any); ok {
					for _, x := range list {
						one(kind, x)
					}
				} else {
					one(kind, v)
				}
			}
		}
	}
}
