package imposterhttp

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// Lookup behaviors read CSV files (imposter.Files) through their server,
// and only:
//
//   - under its data root (UseDataRoot; by default the directory the
//     process started in): a relative path resolves under it, an absolute
//     one is taken only if it lies inside it, and the file is opened
//     through os.Root, so neither ".." nor a symlink leads out;
//   - a regular file, found so by a stat that does not block, and opened
//     non-blocking: a FIFO or a device is refused, never waited on or
//     read;
//   - at most MaxLookupFileBytes, parsed into at most MaxLookupFields;
//   - when a response is made, never when a definition is compiled.
//
// A file that cannot be read for any reason (missing, outside the root,
// forbidden, not a regular file) gets one message, which names no OS
// detail, so an imposter is no oracle for what exists on the machine.
// As in mountebank, the response then goes out with its tokens left as
// they are, and the imposter's log says why (at most once a second per
// imposter and message: a busy imposter cannot flood the log).
const (
	// MaxLookupFileBytes bounds a lookup's CSV file. mountebank's CSV
	// files are tables of test data, kilobytes; 4 MiB is four times the
	// largest definition the cluster stores (1 MiB) and reads in
	// milliseconds, and a file past it is refused, not read in part.
	MaxLookupFileBytes = 4 << 20
	// MaxLookupFields bounds the fields of a parsed file: each costs a
	// 16-byte string header beside its bytes, so a file of one-byte
	// fields would otherwise take nine times its size.
	MaxLookupFields = 1 << 20

	// The parsed files kept per server, by path and delimiter, while the
	// file's identity, size and modification time stay the same: at most
	// lookupCacheEntries and lookupCacheBytes (estimated), the least
	// recently used going first. The largest file the bounds allow costs
	// about 42 MiB parsed, so one always fits.
	lookupCacheEntries = 256
	lookupCacheBytes   = 64 << 20
	// lookupSettle: a file modified more recently than this is not kept
	// (read again next time), since a second write within the file
	// system's timestamp granularity, of the same size, would look
	// unchanged.
	lookupSettle = 2 * time.Second
	// lookupLogEvery and lookupLogKeys bound the log lines of failing
	// reads: one per imposter and message per lookupLogEvery, the last
	// time of at most lookupLogKeys messages remembered.
	lookupLogEvery = time.Second
	lookupLogKeys  = 256
)

// startDir is the working directory the process started in, the data
// root of a server given none (set by this package's init).
var (
	startDir    string
	startDirErr error
)

// dataFiles is a server's data root and its cache of parsed CSV files.
type dataFiles struct {
	root *os.Root // nil when err
	err  error
	// dirs are the root's absolute path and the same with symlinks
	// resolved: an absolute path lying inside either is read under root.
	dirs []string

	mu     sync.Mutex // guards cache, cost, tick and logged
	cache  map[csvKey]*csvEntry
	cost   int
	tick   uint64
	logged map[string]time.Time

	// readMu lets one file be read and parsed at a time: a burst of
	// misses takes the memory of one parse, not one per request.
	readMu sync.Mutex
}

type csvKey struct {
	name  string // the path under the root
	delim rune
}

type csvEntry struct {
	fi      os.FileInfo // the file read: identity, size, modification time
	records [][]string
	err     error // a parse error; records are those before it
	cost    int
	used    uint64
}

func openDataFiles(dir string) *dataFiles {
	d := &dataFiles{cache: map[csvKey]*csvEntry{}, logged: map[string]time.Time{}}
	abs, err := filepath.Abs(dir)
	if err != nil {
		d.err = err
		return d
	}
	if d.root, d.err = os.OpenRoot(abs); d.err != nil {
		return d
	}
	d.dirs = []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		d.dirs = append(d.dirs, real)
	}
	return d
}

// UseDataRoot confines lookup behaviors' files to dir (the node's
// -data-root): it must be a directory that can be opened now. The
// default is the directory the process started in.
func (s *Server) UseDataRoot(dir string) error {
	d := openDataFiles(dir)
	if d.err != nil {
		return fmt.Errorf("data root %q: %w", dir, d.err)
	}
	s.files.Store(d)
	return nil
}

// dataFiles is the server's data root, the start directory's unless
// UseDataRoot named one.
func (s *Server) dataFiles() *dataFiles {
	if d := s.files.Load(); d != nil {
		return d
	}
	d := &dataFiles{err: startDirErr}
	if startDirErr == nil {
		d = openDataFiles(startDir)
	}
	if !s.files.CompareAndSwap(nil, d) {
		if d.root != nil {
			_ = d.root.Close()
		}
		return s.files.Load()
	}
	if d.err != nil {
		s.log.Error("lookup behaviors can read no files: the start directory cannot be opened", "err", d.err)
	}
	return d
}

// giveFiles hands a built imposter its files: the server's data root,
// with failures logged under the imposter's name.
func (s *Server) giveFiles(imp *imposter.Imposter) {
	if imp != nil {
		imp.UseFiles(&imposterFiles{s: s, who: fmt.Sprintf("[%s:%d]", imp.Protocol, imp.Port)})
	}
}

// imposterFiles is one imposter's imposter.Files.
type imposterFiles struct {
	s   *Server
	who string
}

func (f *imposterFiles) CSV(path string, delim rune) ([][]string, error) {
	d := f.s.dataFiles()
	records, err := d.csv(path, delim)
	if err != nil {
		d.report(f.s.log, f.who, err)
	}
	return records, err
}

func cannotRead(path string) error {
	return fmt.Errorf("lookup behavior: cannot read the CSV file %q", path)
}

// csv reads and parses the file at path, or answers from the cache.
func (d *dataFiles) csv(path string, delim rune) ([][]string, error) {
	name, ok := d.name(path)
	if !ok {
		return nil, cannotRead(path)
	}
	// Stat, unlike open, never blocks on a FIFO; it follows symlinks
	// only inside the root.
	fi, err := d.root.Stat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, cannotRead(path)
	}
	if fi.Size() > MaxLookupFileBytes {
		return nil, tooLarge(path)
	}
	key := csvKey{name: name, delim: delim}
	if e := d.cached(key, fi); e != nil {
		return e.records, e.err
	}
	d.readMu.Lock()
	defer d.readMu.Unlock()
	if e := d.cached(key, fi); e != nil {
		return e.records, e.err // read by another request meanwhile
	}
	// Non-blocking: were it swapped for a FIFO since the stat, opening
	// it does not wait for a writer (and fstat refuses it).
	f, err := d.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, cannotRead(path)
	}
	defer f.Close()
	fi, err = f.Stat() // the version read: taken before reading, so a change while reading shows next time
	if err != nil || !fi.Mode().IsRegular() {
		return nil, cannotRead(path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxLookupFileBytes+1))
	if err != nil {
		return nil, cannotRead(path)
	}
	if len(data) > MaxLookupFileBytes {
		return nil, tooLarge(path)
	}
	records, perr := imposter.ParseCSV(data, delim, MaxLookupFields)
	e := &csvEntry{fi: fi, records: records, cost: parsedCost(len(data), records)}
	if perr != nil {
		e.err = fmt.Errorf("lookup behavior: the CSV file %q does not parse: %v", path, perr)
	}
	if time.Since(fi.ModTime()) >= lookupSettle {
		d.store(key, e)
	}
	return e.records, e.err
}

func tooLarge(path string) error {
	return fmt.Errorf("lookup behavior: the CSV file %q is over the %d MiB limit", path, MaxLookupFileBytes>>20)
}

// name is path as a name under the root: a relative path as it is (the
// root refuses one that leads out), an absolute one relative to the
// root's directory if it lies inside it.
func (d *dataFiles) name(path string) (string, bool) {
	if d.root == nil || strings.ContainsRune(path, 0) {
		return "", false
	}
	if !filepath.IsAbs(path) {
		return path, true
	}
	p := filepath.Clean(path)
	for _, dir := range d.dirs {
		rel, err := filepath.Rel(dir, p)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel, true
		}
	}
	return "", false
}

// parsedCost estimates the memory a parsed file holds: its text (the
// records' strings share one per record), a string header per field and
// a slice header per record.
func parsedCost(size int, records [][]string) int {
	cost := size + 24*len(records) + 64
	for _, r := range records {
		cost += 16 * len(r)
	}
	return cost
}

// cached returns the entry for key if it was read from the file fi
// describes, unchanged since.
func (d *dataFiles) cached(key csvKey, fi os.FileInfo) *csvEntry {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.cache[key]
	if e == nil || !os.SameFile(e.fi, fi) || e.fi.Size() != fi.Size() || !e.fi.ModTime().Equal(fi.ModTime()) {
		return nil
	}
	d.tick++
	e.used = d.tick
	return e
}

// store keeps e, then drops the least recently used entries past the
// bounds.
func (d *dataFiles) store(key csvKey, e *csvEntry) {
	if e.cost > lookupCacheBytes {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.cache[key]; old != nil {
		d.cost -= old.cost
	}
	d.tick++
	e.used = d.tick
	d.cache[key] = e
	d.cost += e.cost
	for d.cost > lookupCacheBytes || len(d.cache) > lookupCacheEntries {
		var oldest csvKey
		var at uint64
		for k, c := range d.cache { //fenceline:unordered the least recently used is unique: ticks never repeat
			if at == 0 || c.used < at {
				oldest, at = k, c.used
			}
		}
		d.cost -= d.cache[oldest].cost
		delete(d.cache, oldest)
	}
}

// report logs a failed read, at most once per lookupLogEvery for each
// imposter and message.
func (d *dataFiles) report(log *slog.Logger, who string, err error) {
	msg := who + " " + err.Error()
	now := time.Now()
	d.mu.Lock()
	last, seen := d.logged[msg]
	if seen && now.Sub(last) < lookupLogEvery {
		d.mu.Unlock()
		return
	}
	if !seen && len(d.logged) >= lookupLogKeys {
		clear(d.logged) // forgetting only lets a line through sooner
	}
	d.logged[msg] = now
	d.mu.Unlock()
	log.Error(msg)
}
