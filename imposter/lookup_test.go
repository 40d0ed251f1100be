package imposter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dirFiles reads lookups' CSV files from a directory, as a server's data
// root does (without its bounds, which imposterhttp tests), and notes
// every path asked for.
type dirFiles struct {
	dir   string
	asked []string
}

func (d *dirFiles) CSV(path string, delim rune) ([][]string, error) {
	d.asked = append(d.asked, path)
	b, err := os.ReadFile(filepath.Join(d.dir, path))
	if err != nil {
		return nil, fmt.Errorf("lookup behavior: cannot read the CSV file %q", path)
	}
	return ParseCSV(b, delim, 1000)
}

const lookupImposter = `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"name=${ROW}[\"name\"]"},
	"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"/(.*)$"},"index":1},
	"fromDataSource":{"csv":{"path":"people.csv","keyColumn":"id"%s}},"into":"${ROW}"}}]}]}]}`

// A definition compiles without its CSV file (at creation, at each
// member's apply, at every replay of the log), and the file is read when
// a response is made: written after the imposter was created, it is
// read, as mountebank's own tests write theirs.
func TestLookupReadsWhenResponding(t *testing.T) {
	files := &dirFiles{dir: t.TempDir()}
	imp := newImposter(t, fmt.Sprintf(lookupImposter, ""))
	imp.UseFiles(files)
	require.Empty(t, files.asked, "compiling reads no file")

	out := respond(t, imp, &Request{Method: "GET", Path: "/456"})
	require.Equal(t, `name=${ROW}["name"]`, string(out.Body), "a file that cannot be read replaces nothing, as in mountebank")
	require.Equal(t, []string{"people.csv"}, files.asked)

	require.NoError(t, os.WriteFile(filepath.Join(files.dir, "people.csv"), []byte("id,name\n123,Alice\n456,Bob\n"), 0o600))
	require.Equal(t, "name=Bob", string(respond(t, imp, &Request{Method: "GET", Path: "/456"}).Body))
	require.NoError(t, os.WriteFile(filepath.Join(files.dir, "people.csv"), []byte("id,name\n456,Robert\n"), 0o600))
	require.Equal(t, "name=Robert", string(respond(t, imp, &Request{Method: "GET", Path: "/456"}).Body), "read again at each response")

	asked := len(files.asked)
	respond(t, imp, &Request{Method: "GET", Path: "/"})
	require.Len(t, files.asked, asked+1, "an empty key is still a key")
}

// An imposter given no files (the simulator's) answers a lookup with an
// error instead of pretending the file is empty; it still compiles.
func TestLookupWithoutFiles(t *testing.T) {
	imp := newImposter(t, fmt.Sprintf(lookupImposter, ""))
	_, _, err := imp.Respond(&Request{Method: "GET", Path: "/456"})
	require.ErrorContains(t, err, "this server reads no files")
}

// A delimiter encoding/csv cannot split at is refused when the stub is
// made, not at every response.
func TestLookupDelimiter(t *testing.T) {
	for _, d := range []string{`""`, `"ab"`, `"\""`, `"\n"`, `"\r"`, `"\u0000"`} {
		_, err := New(mustParse(t, fmt.Sprintf(lookupImposter, `,"delimiter":`+d)).(*Object), 4545)
		require.Error(t, err, d)
		require.Contains(t, err.Error(), "delimiter", d)
	}
	files := &dirFiles{dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(files.dir, "people.csv"), []byte("id;name\n456;Bob\n"), 0o600))
	imp := newImposter(t, fmt.Sprintf(lookupImposter, `,"delimiter":";"`))
	imp.UseFiles(files)
	require.Equal(t, "name=Bob", string(respond(t, imp, &Request{Method: "GET", Path: "/456"}).Body))
}

// ParseCSV's bound on fields, at it and past it, and a parse error: the
// records before either are returned with it.
func TestParseCSVBounds(t *testing.T) {
	recs, err := ParseCSV([]byte("a,b\n1,2\n3,4\n"), ',', 6)
	require.NoError(t, err, "six fields, at the bound")
	require.Equal(t, [][]string{{"a", "b"}, {"1", "2"}, {"3", "4"}}, recs)

	recs, err = ParseCSV([]byte("a,b\n1,2\n3,4,5\n"), ',', 6)
	require.ErrorContains(t, err, "more than 6 fields")
	require.Equal(t, [][]string{{"a", "b"}, {"1", "2"}}, recs, "the records before the bound")

	recs, err = ParseCSV([]byte("a,b\n1,2\n3,\"x\"y\n5,6\n"), ',', 100)
	require.Error(t, err)
	require.Equal(t, [][]string{{"a", "b"}, {"1", "2"}}, recs, "the records before the parse error")

	recs, err = ParseCSV([]byte("id,city\n1,\"New\nYork\"\n\n2,x"), ',', 100)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"id", "city"}, {"1", "New\nYork"}, {"2", "x"}}, recs, "quoted line breaks; blank lines skipped")

	recs, err = ParseCSV([]byte(strings.Repeat("x\n", 10)), ',', 10)
	require.NoError(t, err)
	require.Len(t, recs, 10)
}

// A parse error part way through still lets the rows before it answer,
// as mountebank's streaming parser has matched them by then.
func TestLookupRowsBeforeAParseError(t *testing.T) {
	files := &dirFiles{dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(files.dir, "people.csv"), []byte("id,name\n456,Bob\n789,\"x\"y\n"), 0o600))
	imp := newImposter(t, fmt.Sprintf(lookupImposter, ""))
	imp.UseFiles(files)
	require.Equal(t, "name=Bob", string(respond(t, imp, &Request{Method: "GET", Path: "/456"}).Body))
	require.Equal(t, `name=${ROW}["name"]`, string(respond(t, imp, &Request{Method: "GET", Path: "/789"}).Body))
}
