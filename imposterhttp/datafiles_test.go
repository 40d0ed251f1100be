//go:build unix

package imposterhttp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lookupStub is a stub whose response names the row of csvPath keyed by
// the request's path after its first slash.
func lookupStub(csvPath string) string {
	return fmt.Sprintf(`{"responses":[{"is":{"body":"name=${ROW}[\"name\"]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"^/(.*)$"},"index":1},"fromDataSource":{"csv":{"path":%q,"keyColumn":"id"}},"into":"${ROW}"}}]}]}`, csvPath)
}

// lookupAt creates an imposter looking csvPath up and answers GET /key.
func lookupAt(t *testing.T, base, csvPath, key string) string {
	t.Helper()
	port := create(t, base, `{"protocol":"http","stubs":[`+lookupStub(csvPath)+`]}`)
	defer do(t, "DELETE", fmt.Sprintf("%s/imposters/%d", base, port), "")
	return do(t, "GET", at(port, "/"+key), "").body
}

// logged is what GET /logs shows, one message a line.
func logged(t *testing.T, base string) string {
	t.Helper()
	var out []string
	for _, e := range do(t, "GET", base+"/logs", "").json["logs"].([]any) {
		out = append(out, e.(map[string]any)["message"].(string))
	}
	return strings.Join(out, "\n")
}

const unreplaced = `name=${ROW}["name"]`

// Lookups read only regular files under the data root: a relative path
// under it, an absolute one inside it, a symlink that stays inside. Any
// other path (outside by "..", by an absolute path, by a symlink; a
// directory; a missing file) replaces nothing, and the log says one
// thing for all of them, with no OS detail.
func TestLookupConfinedToTheDataRoot(t *testing.T) {
	base, s := admin(t)
	root, outside := t.TempDir(), t.TempDir()
	require.NoError(t, s.UseDataRoot(root))
	rows := []byte("id,name\n1,Ann\n")
	require.NoError(t, os.WriteFile(filepath.Join(root, "in.csv"), rows, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "sub", "deep.csv"), rows, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.csv"), []byte("id,name\n1,SECRET\n"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.csv"), filepath.Join(root, "escape.csv")))
	require.NoError(t, os.Symlink("sub/deep.csv", filepath.Join(root, "link.csv")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "locked.csv"), rows, 0o000))

	for _, p := range []string{"in.csv", "sub/deep.csv", "./sub/../in.csv", filepath.Join(root, "in.csv"), "link.csv"} {
		require.Equal(t, "name=Ann", lookupAt(t, base, p, "1"), p)
	}
	refused := []string{
		"../" + filepath.Base(outside) + "/secret.csv",
		filepath.Join(outside, "secret.csv"),
		"escape.csv",
		"/etc/passwd",
		"missing.csv",
		"sub",
		".",
		root,
	}
	if os.Geteuid() != 0 { // root reads a file whatever its mode
		refused = append(refused, "locked.csv")
	}
	for _, p := range refused {
		require.Equal(t, unreplaced, lookupAt(t, base, p, "1"), p)
	}
	log := logged(t, base)
	for _, p := range refused {
		require.Contains(t, log, fmt.Sprintf("lookup behavior: cannot read the CSV file %q", p))
	}
	for _, detail := range []string{"no such file", "permission denied", "escapes", "not a directory", "is a directory", "openat", "statat"} {
		require.NotContains(t, log, detail, "the log names no OS detail")
	}
	require.NotContains(t, log, "SECRET")
}

// A FIFO, which an open would wait on for a writer, and a device, which
// reads forever, are refused at once: the node neither hangs nor reads.
// The definition naming the FIFO is created at once too: compiling reads
// nothing.
func TestLookupRefusesWhatIsNotARegularFile(t *testing.T) {
	base, s := admin(t)
	root := t.TempDir()
	require.NoError(t, s.UseDataRoot(root))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "pipe.csv"), 0o600))
	start := time.Now()
	require.Equal(t, unreplaced, lookupAt(t, base, "pipe.csv", "1"))
	require.Less(t, time.Since(start), 5*time.Second)

	require.NoError(t, s.UseDataRoot("/"))
	start = time.Now()
	require.Equal(t, unreplaced, lookupAt(t, base, "/dev/zero", "1"))
	require.Less(t, time.Since(start), 5*time.Second)
	require.Contains(t, logged(t, base), `lookup behavior: cannot read the CSV file "/dev/zero"`)
}

// The size bound, at it and past it.
func TestLookupFileSizeBound(t *testing.T) {
	base, s := admin(t)
	root := t.TempDir()
	require.NoError(t, s.UseDataRoot(root))
	head := "id,name\n1,Ann\n"
	at4 := head + strings.Repeat("x", MaxLookupFileBytes-len(head)-1) + "\n"
	require.Len(t, at4, MaxLookupFileBytes)
	require.NoError(t, os.WriteFile(filepath.Join(root, "at.csv"), []byte(at4), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "past.csv"), []byte(at4+"y"), 0o600))
	require.Equal(t, "name=Ann", lookupAt(t, base, "at.csv", "1"), "a file of exactly the bound is read")
	require.Equal(t, unreplaced, lookupAt(t, base, "past.csv", "1"), "a byte past it is refused, not read in part")
	require.Contains(t, logged(t, base), `lookup behavior: the CSV file "past.csv" is over the 4 MiB limit`)
}

// mountebank reads the file at each response: written after the imposter
// was created (mountebank's own tests do so), then changed, it is read
// as it is then; a cached file changed is read again.
func TestLookupReadAtResponse(t *testing.T) {
	base, s := admin(t)
	root := t.TempDir()
	require.NoError(t, s.UseDataRoot(root))
	port := create(t, base, `{"protocol":"http","stubs":[`+lookupStub("late.csv")+`]}`)
	require.Equal(t, unreplaced, do(t, "GET", at(port, "/1"), "").body)
	path := filepath.Join(root, "late.csv")
	require.NoError(t, os.WriteFile(path, []byte("id,name\n1,Ann\n"), 0o600))
	require.Equal(t, "name=Ann", do(t, "GET", at(port, "/1"), "").body)
	require.NoError(t, os.WriteFile(path, []byte("id,name\n1,Bob\n"), 0o600))
	require.Equal(t, "name=Bob", do(t, "GET", at(port, "/1"), "").body, "a change of the same size within the timestamps' granularity")

	// Settled files are kept; a change (a new modification time) is read.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
	require.Equal(t, "name=Bob", do(t, "GET", at(port, "/1"), "").body)
	require.Len(t, s.dataFiles().cache, 1, "kept")
	require.NoError(t, os.WriteFile(path, []byte("id,name\n1,Cy\n"), 0o600))
	require.NoError(t, os.Chtimes(path, old.Add(time.Minute), old.Add(time.Minute)))
	require.Equal(t, "name=Cy", do(t, "GET", at(port, "/1"), "").body)
}

// The cache's bounds: at most lookupCacheEntries files and
// lookupCacheBytes of estimated cost, the least recently used going
// first; a file costing more than the whole budget is not kept.
func TestLookupCacheBounds(t *testing.T) {
	d := openDataFiles(t.TempDir())
	fi, err := os.Stat(d.dirs[0])
	require.NoError(t, err)
	for i := range lookupCacheEntries + 10 {
		d.store(csvKey{name: fmt.Sprint(i), delim: ','}, &csvEntry{fi: fi, cost: 100})
		if i == 0 {
			continue
		}
		require.NotNil(t, d.cached(csvKey{name: "0", delim: ','}, fi), "the one in use stays") // used again: never the oldest
	}
	require.Len(t, d.cache, lookupCacheEntries)
	require.NotNil(t, d.cache[csvKey{name: "0", delim: ','}])
	require.Nil(t, d.cache[csvKey{name: "1", delim: ','}], "the least recently used went")

	d.store(csvKey{name: "big", delim: ','}, &csvEntry{fi: fi, cost: lookupCacheBytes - 1000})
	require.LessOrEqual(t, d.cost, lookupCacheBytes)
	require.NotNil(t, d.cache[csvKey{name: "big", delim: ','}])
	require.Less(t, len(d.cache), lookupCacheEntries, "the budget in bytes made room")
	d.store(csvKey{name: "huge", delim: ','}, &csvEntry{fi: fi, cost: lookupCacheBytes + 1})
	require.Nil(t, d.cache[csvKey{name: "huge", delim: ','}])
	require.LessOrEqual(t, d.cost, lookupCacheBytes)
}

// The fields bound: a file at MaxLookupFields is read, one past is
// refused with the rows before the bound kept.
func TestLookupFieldsBound(t *testing.T) {
	base, s := admin(t)
	root := t.TempDir()
	require.NoError(t, s.UseDataRoot(root))
	// Two fields a row: the header, one row, then rows up to the bound.
	var b strings.Builder
	b.WriteString("id,name\n1,Ann\n")
	for range MaxLookupFields/2 - 2 {
		b.WriteString(",\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "at.csv"), []byte(b.String()), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "past.csv"), []byte(b.String()+"2,Bo\n"), 0o600))
	old := time.Now().Add(-time.Hour) // settled: each is parsed once, then kept
	require.NoError(t, os.Chtimes(filepath.Join(root, "at.csv"), old, old))
	require.NoError(t, os.Chtimes(filepath.Join(root, "past.csv"), old, old))
	require.Equal(t, "name=Ann", lookupAt(t, base, "at.csv", "1"))
	require.Equal(t, "name=Ann", lookupAt(t, base, "past.csv", "1"), "the rows before the bound still answer")
	require.Equal(t, unreplaced, lookupAt(t, base, "past.csv", "2"))
	require.Contains(t, logged(t, base), fmt.Sprintf(`lookup behavior: the CSV file "past.csv" does not parse: more than %d fields`, MaxLookupFields))
}

// UseDataRoot refuses what is no directory, saying why (the operator's
// flag, not a request: the OS's words help).
func TestUseDataRoot(t *testing.T) {
	_, s := admin(t)
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o600))
	require.ErrorContains(t, s.UseDataRoot(f), "data root")
	require.Error(t, s.UseDataRoot(filepath.Join(t.TempDir(), "none")))
}

// A server given no data root reads under the directory the process
// started in (this package's, under go test), and nowhere else.
func TestDefaultDataRoot(t *testing.T) {
	base, _ := admin(t)
	elsewhere := filepath.Join(t.TempDir(), "x.csv")
	require.NoError(t, os.WriteFile(elsewhere, []byte("id,name\n1,Ann\n"), 0o600))
	require.Equal(t, unreplaced, lookupAt(t, base, elsewhere, "1"))
	lookupAt(t, base, "datafiles_test.go", "1") // read (it is no table: nothing replaced)
	log := logged(t, base)
	require.Contains(t, log, fmt.Sprintf("cannot read the CSV file %q", elsewhere))
	require.NotContains(t, log, `cannot read the CSV file "datafiles_test.go"`)
}
