package imposter

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A behavior changes a response after it is chosen: wait delays it, copy
// replaces a token with part of the request, lookup replaces tokens with
// a row of a CSV file keyed by part of the request. They run in the order
// the behaviors array gives (the legacy _behaviors object is upcast to it).
type behavior interface {
	apply(r *Request, is *Object, fs Files) (time.Duration, error)
}

// Files is how lookup behaviors read their CSV files. The engine itself
// touches no files: the HTTP layer hands each imposter its own (UseFiles),
// confined to its server's data root and bounded. A file is read when a
// response is made, never when a definition is compiled, so compiling
// (at creation, at each member's apply, at every restart's replay of the
// log) does no I/O, and a file written after the imposter was created is
// read, as mountebank reads it.
type Files interface {
	// CSV returns the records of the CSV file at path as ParseCSV splits
	// them at delim, the header first; they may be shared: read only.
	// A file that cannot be read gives an error whose message names no
	// OS detail (nothing tells a missing file from a forbidden one) and
	// that the implementation has reported (logged) already; the records
	// returned with an error are those before it.
	CSV(path string, delim rune) ([][]string, error)
}

// UseFiles gives the imposter the files its lookup behaviors read. An
// imposter without any answers a lookup with an error.
func (imp *Imposter) UseFiles(fs Files) { imp.files = fs }

// UseLog gives the imposter somewhere to say what went wrong matching a
// request that the answer does not say: a predicate's selector that
// stopped at its work budget (the stub is passed over). log must be safe
// for concurrent use: requests are matched outside the imposter's lock
// (Candidates). The engine logs nothing by itself.
func (imp *Imposter) UseLog(log func(msg string)) { imp.log = log }

// ParseCSV splits a lookup's CSV file into records as the engine reads
// it: fields split at delim, quoted as RFC 4180 says, rows of any
// length, at most maxFields fields in all (a bound on the memory a
// parsed file takes: each field costs a string header beside its bytes).
// On an error it returns the records before it, as mountebank's streaming
// parser has matched them by then.
func ParseCSV(data []byte, delim rune, maxFields int) ([][]string, error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comma = delim
	cr.FieldsPerRecord = -1
	var out [][]string
	fields := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if fields += len(rec); fields > maxFields {
			return out, fmt.Errorf("more than %d fields", maxFields)
		}
		out = append(out, rec)
	}
}

func compileBehaviors(r *Object) ([]behavior, error) {
	v, ok := r.Get("behaviors")
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badData("behaviors must be an array", r)
	}
	var out []behavior
	for _, x := range list {
		o, ok := x.(*Object)
		if !ok {
			return nil, badData("each behavior must be an object", x)
		}
		for i := range o.Len() {
			k, val := o.At(i)
			b, err := compileBehavior(k, val, o)
			if err != nil {
				return nil, err
			}
			if b != nil {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

func compileBehavior(kind string, v any, src *Object) (behavior, error) {
	switch kind {
	case "wait":
		switch t := v.(type) {
		case float64:
			if t < 0 || t != float64(int64(t)) {
				return nil, badData("wait behavior \"wait\" field must be an integer greater than or equal to 0", src)
			}
			return waitBehavior(time.Duration(t) * time.Millisecond), nil
		case string:
			// mountebank takes any string wait for a function to run
			// (even "5", which it reads as a number), which needs
			// injection allowed.
			return waitFunction{src: t}, nil
		}
		return nil, badData("wait behavior \"wait\" field must be a number or a string", src)
	case "copy":
		return compileCopy(v, src)
	case "lookup":
		return compileLookup(v, src)
	case "decorate":
		fn, ok := v.(string)
		if !ok {
			return nil, badData(`decorate behavior "decorate" field must be a string, representing a JavaScript function`, src)
		}
		return decorateBehavior{src: fn}, nil
	case "shellTransform":
		cmd, ok := v.(string)
		if !ok {
			return nil, badData(`shellTransform behavior "shellTransform" field must be a string, representing the path to a command line application`, src)
		}
		return shellTransform{command: cmd}, nil
	}
	return nil, badData(fmt.Sprintf("Unrecognized behavior: %q", kind), src)
}

type waitBehavior time.Duration

func (w waitBehavior) apply(*Request, *Object, Files) (time.Duration, error) {
	return time.Duration(w), nil
}

// selection is a copy or lookup "from" and "using": where in the request
// to look and how to pick values out of it.
type selection struct {
	from     []string // e.g. ["query", "name"]: a field, then keys inside it
	regex    *regexp.Regexp
	jsonpath *JSONPath
	xpath    *XPath
}

func compileSelection(o *Object, kind string, src any) (*selection, error) {
	sel := &selection{}
	from, _ := o.Get("from")
	for from != nil {
		switch t := from.(type) {
		case string:
			sel.from = append(sel.from, t)
			from = nil
		case *Object:
			if t.Len() != 1 {
				return nil, badData(kind+" behavior \"from\" field must be a string or an object with one key", src)
			}
			k, v := t.At(0)
			sel.from = append(sel.from, k)
			from = v
		default:
			return nil, badData(kind+" behavior \"from\" field must be a string or an object with one key", src)
		}
	}
	if len(sel.from) == 0 {
		return nil, badData(kind+" behavior \"from\" field required", src)
	}
	u, _ := o.Get("using")
	using, ok := u.(*Object)
	if !ok {
		return nil, badData(kind+" behavior \"using\" field required", src)
	}
	m, _ := using.Get("method")
	s, _ := using.Get("selector")
	selector, ok := s.(string)
	if !ok {
		return nil, badData(kind+" behavior \"using.selector\" field required", src)
	}
	var err error
	switch m {
	case "regex":
		flags := ""
		if opts, ok := using.Get("options"); ok {
			if oo, ok := opts.(*Object); ok {
				if has(oo, "ignoreCase") {
					flags += "i"
				}
				if has(oo, "multiline") {
					flags += "m"
				}
			}
		}
		if flags != "" {
			selector = "(?" + flags + ")" + selector
		}
		if err = checkRegexSize(selector); err == nil {
			sel.regex, err = regexp.Compile(selector)
		}
		if err != nil {
			return nil, badData(fmt.Sprintf("%s behavior: invalid regular expression %q: %v", kind, selector, err), src)
		}
	case "jsonpath":
		if sel.jsonpath, err = compileJSONPathParam(selector, false, kind+" behavior's jsonpath", src); err != nil {
			return nil, err
		}
	case "xpath":
		ns, _ := using.Get("ns")
		if sel.xpath, err = compileXPathParam(selector, ns, false, kind+" behavior's xpath", src); err != nil {
			return nil, err
		}
	default:
		return nil, badData(kind+" behavior \"using.method\" field must be one of [regex, xpath, jsonpath]", src)
	}
	return sel, nil
}

// values picks the values out of the request: a regex gives its match
// and groups, a selector its matches; nothing found gives none. A
// selector past its work budget is an error, in mountebank's shape, that
// the response is (kind names the behavior).
func (s *selection) values(r *Request, kind string) ([]string, error) {
	// mountebank looks the field up ignoring case, as every key below it.
	v, ok := r.field(strings.ToLower(s.from[0]))
	for _, k := range s.from[1:] {
		o, isObj := v.(*Object)
		if !ok || !isObj {
			ok = false
			break
		}
		name, found := headerName(o, k) // mountebank looks keys up ignoring case
		if !found {
			ok = false
			break
		}
		v, _ = o.Get(name)
	}
	if arr, isArr := v.([]any); isArr && len(s.from) > 1 {
		if len(arr) == 0 {
			ok = false
		} else {
			v = arr[0]
		}
	}
	text := ToString(v)
	if !ok {
		// mountebank runs the selector on undefined, which a regex sees
		// as the text "undefined".
		text = "undefined"
	}
	var out []string
	var err error
	switch {
	case s.regex != nil:
		return s.regex.FindStringSubmatch(text), nil
	case s.jsonpath != nil:
		doc, perr := Parse(text)
		if perr != nil {
			return nil, nil
		}
		var found []any
		found, err = s.jsonpath.Select(toPlain(doc))
		for _, x := range found {
			out = append(out, ToString(fromPlain(x)))
		}
	default:
		out, err = s.xpath.Select(text)
	}
	if err != nil {
		return nil, &Error{Code: CodeBadData, Message: kind + " behavior: " + err.Error()}
	}
	return out, nil
}

type copyBehavior struct {
	sel  *selection
	into string
}

// required reports, in mountebank's order and all at once, the fields a
// behavior lacks.
func required(kind string, o *Object, src *Object, fields ...string) error {
	var errs []error
	for _, f := range fields {
		if v, ok := o.Get(f); !ok || v == nil {
			errs = append(errs, badData(fmt.Sprintf("%s behavior %q field required", kind, f), src))
		}
	}
	return errors.Join(errs...)
}

func compileCopy(v any, src *Object) (behavior, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, badData("copy behavior must be an object", src)
	}
	if err := required("copy", o, src, "from", "into", "using"); err != nil {
		return nil, err
	}
	into, _ := o.Get("into")
	token, ok := into.(string)
	if !ok || token == "" {
		return nil, badData("copy behavior \"into\" field required", src)
	}
	sel, err := compileSelection(o, "copy", src)
	if err != nil {
		return nil, err
	}
	return &copyBehavior{sel: sel, into: token}, nil
}

func (c *copyBehavior) apply(r *Request, is *Object, _ Files) (time.Duration, error) {
	values, err := c.sel.values(r, "copy")
	if err != nil {
		return 0, err
	}
	replaceTokens(is, func(s string) string {
		for i, v := range values {
			s = strings.ReplaceAll(s, c.into+"["+strconv.Itoa(i)+"]", v)
		}
		if len(values) > 0 {
			s = strings.ReplaceAll(s, c.into, values[0])
		}
		return s
	})
	return 0, nil
}

// replaceTokens rewrites every string in the response, keys included.
func replaceTokens(v any, fn func(string) string) {
	switch t := v.(type) {
	case *Object:
		for i := range t.vals {
			if s, ok := t.vals[i].(string); ok {
				t.vals[i] = fn(s)
			} else {
				replaceTokens(t.vals[i], fn)
			}
		}
		t.renameKeys(fn) // keys that became the same merge
	case []any:
		for i := range t {
			if s, ok := t[i].(string); ok {
				t[i] = fn(s)
			} else {
				replaceTokens(t[i], fn)
			}
		}
	}
}

type lookupBehavior struct {
	key   *selection
	index int
	into  string
	// The CSV file is named here and read when a response is made
	// (Files), so a definition compiles without touching it.
	path      string
	keyColumn string
	delim     rune
}

func compileLookup(v any, src *Object) (behavior, error) {
	o, ok := v.(*Object)
	if !ok {
		return nil, badData("lookup behavior must be an object", src)
	}
	if err := required("lookup", o, src, "key", "fromDataSource", "into"); err != nil {
		return nil, err
	}
	k, _ := o.Get("key")
	key, ok := k.(*Object)
	if !ok {
		return nil, badData("lookup behavior \"key\" field required", src)
	}
	sel, err := compileSelection(key, "lookup", src)
	if err != nil {
		return nil, err
	}
	lb := &lookupBehavior{key: sel, delim: ','}
	if idx, ok := key.Get("index"); ok {
		f, ok := idx.(float64)
		if !ok || f < 0 || f != float64(int(f)) {
			return nil, badData("lookup behavior \"key.index\" field must be an integer greater than or equal to 0", src)
		}
		lb.index = int(f)
	}
	into, _ := o.Get("into")
	if lb.into, ok = into.(string); !ok || lb.into == "" {
		return nil, badData("lookup behavior \"into\" field required", src)
	}
	fds, _ := o.Get("fromDataSource")
	ds, ok := fds.(*Object)
	if !ok {
		return nil, badData("lookup behavior \"fromDataSource\" field required", src)
	}
	c, _ := ds.Get("csv")
	csvCfg, ok := c.(*Object)
	if !ok {
		return nil, badData("lookup behavior \"fromDataSource.csv\" field required (the only data source)", src)
	}
	p, _ := csvCfg.Get("path")
	if lb.path, ok = p.(string); !ok || lb.path == "" {
		return nil, badData("lookup behavior \"fromDataSource.csv.path\" field required", src)
	}
	kc, _ := csvCfg.Get("keyColumn")
	if lb.keyColumn, ok = kc.(string); !ok {
		return nil, badData("lookup behavior \"fromDataSource.csv.keyColumn\" field required", src)
	}
	if d, ok := csvCfg.Get("delimiter"); ok {
		ds, _ := d.(string)
		r, size := utf8.DecodeRuneInString(ds)
		if size == 0 || size != len(ds) || r == utf8.RuneError {
			return nil, badData("lookup behavior \"fromDataSource.csv.delimiter\" must be one character", src)
		}
		if r == 0 || r == '"' || r == '\r' || r == '\n' {
			// encoding/csv splits at none of these: every read would fail.
			return nil, badData("lookup behavior \"fromDataSource.csv.delimiter\" cannot be a quote, a line break or NUL", src)
		}
		lb.delim = r
	}
	return lb, nil
}

// apply replaces the tokens with the first row whose key column holds
// the request's key. A file that cannot be read, has no key column or
// no such row replaces nothing, as mountebank's lookup does (Files has
// logged why).
func (l *lookupBehavior) apply(r *Request, is *Object, fs Files) (time.Duration, error) {
	keys, err := l.key.values(r, "lookup")
	if err != nil {
		return 0, err
	}
	if l.index >= len(keys) {
		return 0, nil
	}
	if fs == nil {
		// An imposter given no Files (UseFiles): a deployment's fact, not
		// a file's, so it is said.
		return 0, &Error{Code: CodeBadData, Message: "lookup behavior: this server reads no files"}
	}
	records, _ := fs.CSV(l.path, l.delim)
	if len(records) == 0 {
		return 0, nil
	}
	header := records[0]
	column := -1
	for i, h := range header {
		if h == l.keyColumn {
			column = i
			break
		}
	}
	if column < 0 {
		return 0, nil
	}
	want := keys[l.index]
	for _, row := range records[1:] {
		if column < len(row) && row[column] == want {
			replaceTokens(is, func(s string) string {
				for i, h := range header {
					val := ""
					if i < len(row) {
						val = row[i]
					}
					for _, q := range []string{`"`, `'`, ``} {
						s = strings.ReplaceAll(s, l.into+"["+q+h+q+"]", val)
					}
				}
				return s
			})
			return 0, nil
		}
	}
	return 0, nil
}
