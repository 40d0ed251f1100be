// Package configfile reads a set of imposters from a file, as
// mountebank's --configfile does: the file is an EJS template (version
// 2's syntax, which mountebank's default formatter renders) whose output
// is JSON, either {"imposters": [...]} or one imposter.
//
// The template language: text, with <%= expr %> (HTML-escaped output),
// <%- expr %> (raw output), <% code %> (JavaScript run as it is),
// <%# comment %>, <%% for a literal "<%", "-%>" to drop the newline after
// a tag, and the legacy directive <% include file %>, which puts the
// named template (relative to the one including it) in its place.
// Templates see stringify(file[, data]) (alias inject), which renders a
// file relative to the root template and returns its output, trimmed,
// as the inside of a JSON string: how injected functions and multi-line
// bodies are kept in files of their own. include(file[, data]) renders a
// file relative to the including template. A template given data sees it
// as data.
//
// Templates are JavaScript, run in an embedded engine (goja) with no
// access beyond the files named relative to the templates; the operator
// who names the file on the command line is trusted with it, as
// mountebank trusts it. Bounded: files of at most MaxFileBytes, includes
// at most MaxDepth deep, MaxRenders renders in all, and Budget of time.
package configfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/fenceline/fenceline/imposter"
)

// Bounds.
const (
	MaxFileBytes = 16 << 20
	MaxDepth     = 32
	MaxRenders   = 10_000
	Budget       = 30 * time.Second
)

// Load reads the file at path and returns the imposters it defines, as
// the JSON body of PUT /imposters ({"imposters": [...]}). With noParse
// the file is taken as JSON, not rendered (mountebank's --noParse).
func Load(path string, noParse bool) ([]byte, error) {
	text, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	out := text
	if !noParse {
		r := &renderer{root: path, rt: goja.New()}
		t := time.AfterFunc(Budget, func() { r.rt.Interrupt(fmt.Sprintf("rendering took longer than %v", Budget)) })
		defer t.Stop()
		if out, err = r.render(path, text, nil, 0); err != nil {
			return nil, err
		}
	}
	doc, err := imposter.Parse(out)
	if err != nil {
		return nil, fmt.Errorf("%s is not JSON after rendering (%v); it rendered as:\n%s", path, err, out)
	}
	obj, ok := doc.(*imposter.Object)
	if !ok {
		return nil, fmt.Errorf("%s holds no imposters: want an object, {\"imposters\": [...]} or one imposter", path)
	}
	imposters, has := obj.Get("imposters")
	if !has {
		imposters = []any{obj} // one imposter, the outer array left off
	}
	if _, isList := imposters.([]any); !isList {
		return nil, fmt.Errorf("%s: \"imposters\" must be an array", path)
	}
	return imposter.Marshal(imposter.NewObject().Set("imposters", imposters), 0), nil
}

func readBounded(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > MaxFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, MaxFileBytes)
	}
	return string(b), nil
}

// renderer renders one configuration's templates.
type renderer struct {
	root    string
	rt      *goja.Runtime
	renders int
}

// render runs the template text (from file) with data.
func (r *renderer) render(file, text string, data goja.Value, depth int) (string, error) {
	if depth > MaxDepth {
		return "", fmt.Errorf("%s: templates include each other more than %d deep", file, MaxDepth)
	}
	if r.renders++; r.renders > MaxRenders {
		return "", fmt.Errorf("more than %d templates rendered", MaxRenders)
	}
	src, err := compile(file, text, func(name string) (string, error) {
		p := filepath.Join(filepath.Dir(file), name)
		return readBounded(p)
	}, 0)
	if err != nil {
		return "", err
	}
	prog, err := goja.Compile(file, "(function (locals, __escape) { var __out = ''; with (locals) {\n"+src+"\n} return __out; })", false)
	if err != nil {
		return "", fmt.Errorf("%s: %v", file, err)
	}
	fnv, err := r.rt.RunProgram(prog)
	if err != nil {
		return "", fmt.Errorf("%s: %v", file, err)
	}
	fn, _ := goja.AssertFunction(fnv)
	locals := r.rt.NewObject()
	if data == nil {
		data = goja.Undefined()
	}
	_ = locals.Set("data", data)
	_ = locals.Set("filename", r.root)
	stringify := r.stringifyFunc(depth)
	_ = locals.Set("stringify", stringify)
	_ = locals.Set("inject", stringify)
	_ = locals.Set("include", func(name string, d goja.Value) (string, error) {
		p := filepath.Join(filepath.Dir(file), name)
		t, err := readBounded(p)
		if err != nil {
			return "", err
		}
		return r.render(p, t, d, depth+1)
	})
	escape := func(v goja.Value) string {
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			return ""
		}
		return html.EscapeString(v.String())
	}
	out, err := fn(goja.Undefined(), locals, r.rt.ToValue(escape))
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return "", fmt.Errorf("%s: %s", file, ex.Value().String())
		}
		return "", fmt.Errorf("%s: %v", file, err)
	}
	return out.String(), nil
}

// stringifyFunc is the templates' stringify(file, data) (and the old
// stringify(name, file, data)): the file, relative to the root template,
// rendered and trimmed, as the inside of a JSON string.
func (r *renderer) stringifyFunc(depth int) func(call goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		file, data := call.Argument(0), call.Argument(1)
		if s, isStr := data.Export().(string); isStr && len(call.Arguments) >= 2 {
			file, data = r.rt.ToValue(s), call.Argument(2) // the deprecated three-argument form
		}
		p := filepath.Join(filepath.Dir(r.root), file.String())
		t, err := readBounded(p)
		if err != nil {
			panic(r.rt.NewGoError(err))
		}
		out, err := r.render(p, t, data, depth+1)
		if err != nil {
			panic(r.rt.NewGoError(err))
		}
		b, _ := json.Marshal(strings.TrimSpace(out))
		return r.rt.ToValue(string(b[1 : len(b)-1]))
	}
}

// compile turns a template into the body of its JavaScript function,
// legacy includes expanded (read resolves their names).
func compile(file, text string, read func(string) (string, error), depth int) (string, error) {
	if depth > MaxDepth {
		return "", fmt.Errorf("%s: templates include each other more than %d deep", file, MaxDepth)
	}
	var b strings.Builder
	literal := func(s string) {
		if s != "" {
			q, _ := json.Marshal(s)
			b.WriteString("__out += " + string(q) + ";\n")
		}
	}
	for {
		i := strings.Index(text, "<%")
		if i < 0 {
			literal(text)
			return b.String(), nil
		}
		literal(text[:i])
		text = text[i+2:]
		if strings.HasPrefix(text, "%") { // <%% is a literal <%
			literal("<%")
			text = text[1:]
			continue
		}
		end := strings.Index(text, "%>")
		if end < 0 {
			return "", fmt.Errorf("%s: a tag opened with <%% is never closed", file)
		}
		tag := text[:end]
		text = text[end+2:]
		if strings.HasSuffix(tag, "-") || strings.HasSuffix(tag, "_") {
			tag = tag[:len(tag)-1]
			if strings.HasPrefix(text, "\r\n") {
				text = text[2:]
			} else if strings.HasPrefix(text, "\n") {
				text = text[1:]
			}
		}
		switch {
		case strings.HasPrefix(tag, "#"):
		case strings.HasPrefix(tag, "="):
			b.WriteString("__out += __escape(" + tag[1:] + ");\n")
		case strings.HasPrefix(tag, "-"):
			b.WriteString("__out += ((" + tag[1:] + ") ?? '');\n")
		default:
			tag = strings.TrimPrefix(tag, "_")
			if name, ok := legacyInclude(tag); ok {
				inc, err := read(name)
				if err != nil {
					return "", fmt.Errorf("%s: include %s: %w", file, name, err)
				}
				incFile := filepath.Join(filepath.Dir(file), name)
				src, err := compile(incFile, inc, func(n string) (string, error) {
					return readBounded(filepath.Join(filepath.Dir(incFile), n))
				}, depth+1)
				if err != nil {
					return "", err
				}
				b.WriteString(src)
				continue
			}
			b.WriteString(tag + "\n")
		}
	}
}

// legacyInclude reads "<% include name %>".
func legacyInclude(tag string) (string, bool) {
	f := strings.Fields(tag)
	if len(f) == 2 && f[0] == "include" {
		return f[1], true
	}
	return "", false
}
