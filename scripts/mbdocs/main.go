// Command mbdocs runs the examples in mountebank's documentation against a
// server and reports every step whose answer differs from the documented
// one. The pages (src/views/docs in the @mbtest/mountebank npm package)
// hold each example as a testScenario of steps: an http request to send
// as written, a file to write, or a shell command to run, each with the
// answer the page documents, in which <volatile> parts may differ and
// partial answers need only contain what they show.
//
// See README.md next to this file.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// volatile stands in for a documented value that may differ.
const volatile = "§volatile§"

type step struct {
	kind     string // http, exec, file
	attrs    string
	text     string // the request, the command or the file's contents
	expect   string
	asserted bool
	partial  bool
}

type scenario struct {
	page, name string
	steps      []step
}

var (
	scenarioRe   = regexp.MustCompile(`(?s)<testScenario name='([^']*)'>(.*?)</testScenario>`)
	stepRe       = regexp.MustCompile(`(?s)<step type='(\w+)'([^>]*)>(.*?)</step>`)
	codeRe       = regexp.MustCompile(`(?s)<code[^>]*>(.*?)</code>`)
	assertRe     = regexp.MustCompile(`(?s)<assertResponse( partial='true')?>(.*?)</assertResponse>`)
	changeRe     = regexp.MustCompile(`(?s)<change to='([^']*)'>.*?</change>`)
	volatileRe   = regexp.MustCompile(`(?s)<volatile>.*?</volatile>`)
	persistentRe = regexp.MustCompile(`(?s)<% if \(process\.env\.MB_PERSISTENT === 'true'\) \{ %>.*?<% \} %>`)
	indentRe     = regexp.MustCompile(`<%- indent\((\d+)\) %>`)
	tagRe        = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
	attrRe       = regexp.MustCompile(`(\w+)='([^']*)'`)
)

// load reads every scenario under dir, in path order.
func load(dir string, adminPort int, cwd string) ([]scenario, error) {
	var pages []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ejs") {
			pages = append(pages, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(pages)
	var out []scenario
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		src := strings.NewReplacer("<%= port %>", strconv.Itoa(adminPort), "<%= process.cwd() %>", cwd,
			"<%= version %>", "<volatile>version</volatile>").Replace(string(b))
		src = persistentRe.ReplaceAllString(src, "") // written for a server started without MB_PERSISTENT
		src = indentRe.ReplaceAllStringFunc(src, func(m string) string {
			n, _ := strconv.Atoi(indentRe.FindStringSubmatch(m)[1])
			return strings.Repeat(" ", n)
		})
		rel, _ := filepath.Rel(dir, p)
		for _, m := range scenarioRe.FindAllStringSubmatch(src, -1) {
			sc := scenario{page: strings.TrimSuffix(rel, ".ejs"), name: m[1]}
			for _, s := range stepRe.FindAllStringSubmatch(m[2], -1) {
				st := step{kind: s[1], attrs: s[2]}
				body := s[3]
				if a := assertRe.FindStringSubmatch(body); a != nil {
					st.asserted, st.partial = true, a[1] != ""
					if c := codeRe.FindStringSubmatch(a[2]); c != nil {
						st.expect = clean(c[1], true)
					}
					body = strings.Replace(body, a[0], "", 1)
				}
				if c := codeRe.FindStringSubmatch(body); c != nil {
					st.text = clean(c[1], false)
				}
				sc.steps = append(sc.steps, st)
			}
			out = append(out, sc)
		}
	}
	return out, nil
}

// clean turns a page's code block into text: changes applied, volatile
// parts marked (in answers) or kept (in requests), markup dropped,
// entities decoded.
func clean(s string, answer bool) string {
	s = changeRe.ReplaceAllString(s, "$1")
	if answer {
		s = volatileRe.ReplaceAllString(s, volatile)
	} else {
		s = strings.NewReplacer("<volatile>", "", "</volatile>", "").Replace(s)
	}
	s = tagRe.ReplaceAllString(s, "")
	return html.UnescapeString(s)
}

func (st step) attr(name string) string {
	for _, m := range attrRe.FindAllStringSubmatch(st.attrs, -1) {
		if m[1] == name {
			return m[2]
		}
	}
	return ""
}

// result is one step's verdict.
type result struct {
	step     int
	what     string
	diffs    []string
	expected string // why the differences are deliberate
}

func main() {
	if filepath.Base(os.Args[0]) == "nc" {
		os.Exit(runNC(os.Args[1:]))
	}
	docs := flag.String("docs", "", "mountebank's src/views/docs directory")
	admin := flag.String("admin", "http://127.0.0.1:2525", "the server's admin URL (its port replaces the pages' <%= port %>)")
	run := flag.String("run", "", "run only the scenarios whose page/name matches this regexp")
	list := flag.Bool("list", false, "list the scenarios and exit")
	verbose := flag.Bool("v", false, "print every step's verdict")
	skip := flag.String("skip", "", "a regexp of page/name to count as skipped (not run)")
	hosts := flag.String("rotate", "", "comma-separated hosts of a cluster's members (each on the pages' ports): every request goes to the next in turn, as behind a round-robin balancer")
	flag.Parse()
	if *hosts != "" {
		rotation = strings.Split(*hosts, ",")
	}
	if *docs == "" {
		fmt.Fprintln(os.Stderr, "mbdocs: -docs is required")
		os.Exit(2)
	}
	_, portText, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(*admin, "http://"), "https://"))
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		fmt.Fprintf(os.Stderr, "mbdocs: -admin %q has no port\n", *admin)
		os.Exit(2)
	}
	cwd, err := os.MkdirTemp("", "mbdocs")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mbdocs:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(cwd)
	scs, err := load(*docs, port, cwd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mbdocs:", err)
		os.Exit(2)
	}
	var runRe, skipRe *regexp.Regexp
	if *run != "" {
		runRe = regexp.MustCompile(*run)
	}
	if *skip != "" {
		skipRe = regexp.MustCompile(*skip)
	}
	var passed, failed, expected, skipped, steps, failedSteps int
	for _, sc := range scs {
		id := sc.page + "/" + sc.name
		if runRe != nil && !runRe.MatchString(id) {
			continue
		}
		if *list {
			fmt.Printf("%s (%d steps)\n", id, len(sc.steps))
			continue
		}
		if skipRe != nil && skipRe.MatchString(id) {
			skipped++
			fmt.Printf("SKIP %s\n", id)
			continue
		}
		if err := resetAll(port); err != nil {
			fmt.Fprintf(os.Stderr, "mbdocs: cannot reach the admin: %v\n", err)
			os.Exit(2)
		}
		results := runScenario(sc, cwd)
		bad, unexpected := 0, 0
		refused := refusal(results)
		for i, r := range results {
			steps++
			if len(r.diffs) == 0 {
				continue
			}
			bad++
			if why := stepExpects[fmt.Sprintf("%s#%d", id, i+1)]; why != "" {
				results[i].expected = why
			} else if refused != "" {
				results[i].expected = refused
			} else {
				unexpected++
			}
		}
		failedSteps += bad
		switch {
		case bad == 0:
			passed++
			fmt.Printf("PASS %s (%d steps)\n", id, len(results))
		case unexpected == 0:
			expected++
			fmt.Printf("EXPECTED %s (%d of %d steps differ, by design)\n", id, bad, len(results))
		default:
			failed++
			fmt.Printf("FAIL %s (%d of %d steps differ)\n", id, unexpected, len(results))
		}
		for _, r := range results {
			if len(r.diffs) > 0 || *verbose {
				fmt.Printf("  #%d %s\n", r.step+1, r.what)
				if r.expected != "" {
					fmt.Printf("      expected: %s\n", r.expected)
				}
				for _, d := range r.diffs {
					fmt.Printf("      %s\n", d)
				}
			}
		}
	}
	if *list {
		return
	}
	_ = resetAll(port)
	fmt.Printf("\n%d scenarios passed, %d differ by design, %d failed, %d skipped; %d of %d steps differ\n",
		passed, expected, failed, skipped, failedSteps, steps)
	if failed > 0 {
		os.Exit(1)
	}
}

// refusedRe finds fenceline's refusal of what it does not support by
// design (the tcp and smtp protocols, JavaScript injection, shell
// execution): a scenario that needs one differs wherever it leads.
var refusedRe = regexp.MustCompile(`"message": ?"([^"]* is not supported by fenceline[^"]*)"`)

func refusal(results []result) string {
	for _, r := range results {
		for _, d := range r.diffs {
			if m := refusedRe.FindStringSubmatch(d); m != nil {
				return "the scenario needs what fenceline refuses by design: " + m[1]
			}
		}
	}
	return ""
}

// stepExpects are single steps whose differences are deliberate, by
// scenario and step number.
var stepExpects = map[string]string{
	"api/overview/imposters#12": "/config shows fenceline's own options, not mb's command line",
	"api/overview/imposters#13": "/logs holds fenceline's log, which does not start with mb's banner",
}

func resetAll(port int) error {
	resp, err := send(port, "DELETE /imposters HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("DELETE /imposters: %d", resp.StatusCode)
	}
	return err
}

func runScenario(sc scenario, cwd string) []result {
	var out []result
	for i, st := range sc.steps {
		r := result{step: i}
		switch st.kind {
		case "http":
			first, _, _ := strings.Cut(st.text, "\n")
			r.what = first
			r.diffs = httpStep(st)
		case "file":
			name := st.attr("filename")
			r.what = "file " + name
			if !strings.HasPrefix(name, cwd) {
				r.diffs = []string{"refused: a file outside the scratch directory"}
			} else if st.attr("delete") == "true" {
				_ = os.Remove(name)
			} else if err := os.WriteFile(name, []byte(st.text), 0o644); err != nil {
				r.diffs = []string{err.Error()}
			}
		case "exec":
			first, _, _ := strings.Cut(strings.TrimSpace(st.text), "\n")
			r.what = "exec " + first
			r.diffs = execStep(st, cwd)
		case "smtp":
			r.what = "smtp to port " + st.attr("port")
			r.diffs = smtpStep(st)
		default:
			r.what = st.kind
			r.diffs = []string{"step type " + st.kind + " is not run by mbdocs"}
		}
		out = append(out, r)
	}
	return out
}

func execStep(st step, cwd string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text := st.text
	if len(rotation) > 0 {
		// A command names the server as localhost: it too goes to the
		// next member.
		text = strings.ReplaceAll(text, "localhost", nextHost())
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = cwd
	if dir, err := ncDir(cwd); err == nil || os.IsExist(err) {
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	// nc waits on an open connection after its input ends: the command
	// gets five seconds, its whole process group is killed after that.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	got, err := cmd.Output()
	if !st.asserted {
		if err != nil && ctx.Err() == nil {
			return []string{"exec: " + err.Error()}
		}
		return nil // a command still running at the timeout (nc waits) did its part
	}
	out := strings.ReplaceAll(string(got), "\r\n", "\n")
	if !textMatches(strings.TrimSpace(st.expect), strings.TrimSpace(out)) {
		return []string{fmt.Sprintf("output: documented %q, got %q (%v)", st.expect, got, err)}
	}
	return nil
}

// httpStep sends the request as written to the port its Host names, and
// closes the connection after the answer.
func httpStep(st step) []string {
	head, body, _ := strings.Cut(strings.ReplaceAll(st.text, "\r\n", "\n"), "\n\n")
	lines := strings.Split(strings.TrimSpace(head), "\n")
	port := 0
	var b strings.Builder
	// The pages' own tester builds requests from their parts: a request
	// line written without its version, or a Host written with a space,
	// is sent as that tester sends it.
	reqLine := strings.TrimSpace(lines[0])
	if len(strings.Fields(reqLine)) == 2 {
		reqLine += " HTTP/1.1"
	}
	b.WriteString(reqLine + "\r\n")
	accept := false
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		name, value, _ := strings.Cut(l, ":")
		accept = accept || strings.EqualFold(name, "Accept")
		if strings.EqualFold(name, "Host") {
			value = strings.ReplaceAll(value, " ", "") // one page writes "localhost: 2525"
			_, p, _ := net.SplitHostPort(value)
			port, _ = strconv.Atoi(p)
			l = "Host: " + value
		}
		if strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Connection") {
			continue
		}
		b.WriteString(strings.TrimSpace(l) + "\r\n")
	}
	if port == 0 {
		return []string{"the request names no port in its Host"}
	}
	if !accept {
		b.WriteString("Accept: application/json\r\n") // as the pages' own test client sends
	}
	// Framed as the pages' own test client (node's) sent it, since the
	// recorded requests they document show it: kept alive, a body chunked.
	b.WriteString("Connection: keep-alive\r\n")
	if body != "" {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	b.WriteString("\r\n")
	if body != "" {
		fmt.Fprintf(&b, "%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	resp, err := send(port, b.String())
	if err != nil {
		if st.asserted {
			return []string{"no answer: " + err.Error()}
		}
		return nil
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !st.asserted {
		// The page shows no answer, and the steps after it assume this one
		// worked.
		if resp.StatusCode >= 400 {
			return []string{fmt.Sprintf("status %d where the page assumes success: %s", resp.StatusCode, trunc(strings.Join(strings.Fields(string(got)), " ")))}
		}
		return nil
	}
	return compare(st, resp, got)
}

// rotation lists the members' hosts a request goes to, in turn (-rotate);
// empty: every request goes to 127.0.0.1.
var (
	rotation []string
	turn     int
)

// nextHost is where the next request goes.
func nextHost() string {
	if len(rotation) == 0 {
		return "127.0.0.1"
	}
	h := rotation[turn%len(rotation)]
	turn++
	return h
}

func send(port int, raw string) (*http.Response, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(nextHost(), strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	c.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, err
}

// framing headers say how this answer was sent, not what it is.
var framing = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Date": true}

func compare(st step, resp *http.Response, got []byte) []string {
	var diffs []string
	expect := strings.TrimSpace(strings.ReplaceAll(st.expect, "\r\n", "\n"))
	head, body, _ := strings.Cut(expect, "\n\n")
	if !strings.HasPrefix(expect, "HTTP/") {
		head, body = "", expect // the page documents the body alone
	}
	lines := strings.Split(head, "\n")
	status := strings.Fields(lines[0])
	if len(status) >= 2 && status[1] != strconv.Itoa(resp.StatusCode) {
		diffs = append(diffs, fmt.Sprintf("status: documented %s, got %d", status[1], resp.StatusCode))
	}
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		name, value = http.CanonicalHeaderKey(strings.TrimSpace(name)), strings.TrimSpace(value)
		if !ok || framing[name] {
			continue
		}
		if _, present := resp.Header[name]; !present {
			diffs = append(diffs, fmt.Sprintf("header %s: documented %q, absent", name, value))
		} else if g := resp.Header.Get(name); !textMatches(value, g) {
			diffs = append(diffs, fmt.Sprintf("header %s: documented %q, got %q", name, value, g))
		}
	}
	body = strings.TrimSpace(body)
	if want, ok := parseJSON(body); ok {
		var have any
		if err := json.Unmarshal(got, &have); err != nil {
			return append(diffs, fmt.Sprintf("body: documented JSON, got %q", trunc(string(got))))
		}
		jsonDiff("body", want, have, st.partial, &diffs)
		return diffs
	}
	if !textMatches(body, strings.TrimSpace(string(got))) {
		if body != "" && (body[0] == '{' || body[0] == '[') {
			diffs = append(diffs, "body: the page's JSON does not parse: "+jsonError(body))
		}
		diffs = append(diffs, fmt.Sprintf("body: documented %q, got %q", trunc(body), trunc(string(got))))
	}
	return diffs
}

// parseJSON parses a documented body, a volatile value standing for any.
func parseJSON(s string) (any, bool) {
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	// A volatile part outside a string becomes a string that says so.
	var b strings.Builder
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		if !inString && strings.HasPrefix(s[i:], volatile) {
			b.WriteString(strconv.Quote(volatile))
			i += len(volatile) - 1
			continue
		}
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		}
		b.WriteByte(c)
	}
	var v any
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		return nil, false
	}
	return v, true
}

// jsonError says where a documented body stops being JSON.
func jsonError(s string) string {
	var v any
	err := json.Unmarshal([]byte(strings.ReplaceAll(s, volatile, "0")), &v)
	if se, ok := err.(*json.SyntaxError); ok {
		at := int(se.Offset)
		lo := max(0, at-60)
		return fmt.Sprintf("%v near %q", err, s[lo:min(len(s), at+20)])
	}
	return fmt.Sprint(err)
}

func jsonDiff(path string, want, have any, partial bool, diffs *[]string) {
	if s, ok := want.(string); ok && strings.Contains(s, volatile) {
		if h, ok := have.(string); ok && textMatches(s, h) || s == volatile {
			return
		}
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: documented an object, got %s", path, show(have)))
			return
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			hv, present := h[k]
			if !present {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: documented %s, absent", path, k, show(w[k])))
				continue
			}
			jsonDiff(path+"."+k, w[k], hv, partial, diffs)
		}
		if !partial {
			for _, k := range slices.Sorted(maps.Keys(h)) {
				if _, documented := w[k]; !documented {
					*diffs = append(*diffs, fmt.Sprintf("%s.%s: not documented, got %s", path, k, show(h[k])))
				}
			}
		}
	case []any:
		h, ok := have.([]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: documented an array, got %s", path, show(have)))
			return
		}
		if len(h) < len(w) || (!partial && len(h) != len(w)) {
			*diffs = append(*diffs, fmt.Sprintf("%s: documented %d elements, got %d: %s", path, len(w), len(h), show(have)))
			return
		}
		for i := range w {
			jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], h[i], partial, diffs)
		}
	default:
		wj, _ := json.Marshal(want)
		hj, _ := json.Marshal(have)
		if !bytes.Equal(wj, hj) {
			*diffs = append(*diffs, fmt.Sprintf("%s: documented %s, got %s", path, wj, hj))
		}
	}
}

// textMatches compares text in which each volatile mark stands for any
// run of characters.
func textMatches(want, got string) bool {
	parts := strings.Split(want, volatile)
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return strings.HasSuffix(got, parts[len(parts)-1])
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return trunc(string(b))
}

func trunc(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
