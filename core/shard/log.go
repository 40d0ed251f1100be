package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/fenceline/fenceline/core/recfile"
)

// Log is a Backend on any recfile.FS: one append-only file of checksummed
// records, one per Write, replayed into memory on open. The simulator runs
// it on sim.Disk, so the FlowShard's durability is tested against the same
// crash model as the raft journal.
//
// The file is a record file (core/recfile: magic "FLSHRD", version 1),
// framed, replayed and told torn from corrupt by recfile's rules, like
// the raft journal. A body is one batch:
//
//	body     = uv(count) mutation*count                  (count >= 1)
//	mutation = bytes(flow) bytes(key) 0:u8 bytes(value)  a put
//	         | bytes(flow) bytes(key) 1:u8               a delete
//
// bytes = uv(len) ‖ len bytes. A batch is one record, so a crash keeps all
// of it or none. A tail a crash can leave is cut; anything else is
// ErrCorrupt.
//
// The live state is kept in memory too, so Scan never rereads the file and
// compaction knows what to write.
type Log struct {
	fs    recfile.FS
	name  string
	f     recfile.File
	size  int64 // where the next record goes
	dirty bool  // bytes appended since the last sync
	err   error // the first I/O failure; sticky
	done  bool  // closed

	// live is flow -> key -> value; a string, so the stored value can
	// never be changed through a slice the caller or fn still holds.
	live      map[string]map[string]string
	liveBytes int64 // encoded size of every live key as a put
	stats     LogStats
}

// LogStats counts what a Log did, for tests and the simulator's reports.
type LogStats struct {
	Writes      uint64 // non-empty batches appended
	Syncs       uint64 // file fsyncs issued, including open's and compaction's
	Compactions uint64
	Bytes       int64 // file size
	Live        int   // keys held
}

var (
	// ErrCorrupt is damage before the tail: bytes a crash cannot leave
	// (the record file's, core/recfile, whose rules tell it from a tear).
	ErrCorrupt = recfile.ErrCorrupt
	// ErrBatchTooLarge refuses a batch whose record would exceed 64 MiB.
	ErrBatchTooLarge = errors.New("shard: batch too large")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("shard: closed")
)

// logFormat is the shard log's record file (core/recfile): the header,
// framing and replay rules are recfile's; the batches are the log's.
var logFormat = recfile.Format{Magic: "FLSHRD", Version: 1}

const (
	logMaxBody = 64 << 20
	// A compaction record this big amortises its header, and replay
	// never needs a buffer much larger.
	logChunk = 256 << 10
	// Below this a file is not worth rewriting, whatever the garbage.
	logCompactMin = 64 << 10
	logTmpSuffix  = ".tmp"
)

// OpenLog opens (creating if absent) the shard log name on fs and replays
// it. The file is synced before OpenLog returns: after a process restart
// without a machine crash it may hold unsynced batches, and the shard is
// about to act on them as if they were durable.
func OpenLog(fs recfile.FS, name string) (*Log, error) {
	// A leftover from a compaction that died before its rename is
	// garbage; the next compaction would overwrite it anyway, so a crash
	// that brings the name back costs nothing and needs no SyncDir.
	names, err := fs.List()
	if err != nil {
		return nil, fmt.Errorf("shard: list: %w", err)
	}
	if slices.Contains(names, name+logTmpSuffix) {
		if err := fs.Remove(name + logTmpSuffix); err != nil {
			return nil, fmt.Errorf("shard: remove %s: %w", name+logTmpSuffix, err)
		}
	}
	l := &Log{fs: fs, name: name, live: map[string]map[string]string{}}
	if l.f, err = fs.Open(name); errors.Is(err, recfile.ErrNotExist) {
		err = l.create()
	} else if err == nil {
		err = l.replay()
	} else {
		err = fmt.Errorf("shard: open %s: %w", name, err)
	}
	if err != nil {
		if l.f != nil {
			_ = l.f.Close() // the first error is the one worth reporting
		}
		return nil, err
	}
	return l, nil
}

// create makes an empty log. The header is synced before the name, so a
// name that survives a crash always has its header behind it.
func (l *Log) create() error {
	f, err := l.fs.Create(l.name)
	if err != nil {
		return fmt.Errorf("shard: create %s: %w", l.name, err)
	}
	l.f = f
	if err := l.seal(0, logFormat.AppendHeader(nil)); err != nil {
		return err
	}
	if err := l.fs.SyncDir(); err != nil {
		return fmt.Errorf("shard: create %s: sync directory: %w", l.name, err)
	}
	return nil
}

func (l *Log) replay() error {
	size, err := l.f.Size()
	if err != nil {
		return fmt.Errorf("shard: size of %s: %w", l.name, err)
	}
	short, err := logFormat.CheckHeader(l.f, l.name, size)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	if short {
		// The header is synced before the name is, so a shorter file
		// never held a record: start it over.
		return l.seal(0, logFormat.AppendHeader(nil))
	}
	sc := recfile.NewScanner(l.f, l.name, int64(logFormat.HeaderSize()), size, logMaxBody)
	for {
		body, err := sc.Next()
		if err != nil {
			return fmt.Errorf("shard: %w", err)
		}
		if body == nil {
			break // the end, or a torn tail from sc.Off on
		}
		if err := decodeLogBody(body, l.apply); err != nil {
			return fmt.Errorf("shard: %w", sc.Corrupt(sc.RecordStart(body), "%v", err))
		}
	}
	return l.seal(sc.Off, nil)
}

// seal ends a replay: cut the file at off, append tail, sync. The cut must
// be durable before anything is appended, or a crash could bring the torn
// bytes back between good records, where they would read as corruption.
func (l *Log) seal(off int64, tail []byte) error {
	size, err := l.f.Size()
	if err == nil && size > off {
		err = l.f.Truncate(off)
	}
	if err != nil {
		return fmt.Errorf("shard: cut %s at %d: %w", l.name, off, err)
	}
	l.size, l.dirty = off, true // what replay kept may never have been synced
	if len(tail) > 0 {
		if err := l.write(tail); err != nil {
			return err
		}
	}
	return l.sync()
}

// Write implements Backend. A compaction, when due, runs first: the
// rewritten file then holds the state before this batch, and the batch is
// appended to it like any other.
func (l *Log) Write(batch []Mutation, sync bool) error {
	if err := l.usable(); err != nil {
		return err
	}
	if len(batch) == 0 {
		if sync {
			return l.Sync()
		}
		return nil
	}
	n := logUvLen(len(batch))
	for _, m := range batch {
		n += logMutLen(m.Flow, m.Key, m.Value, m.Value == nil)
		if n > logMaxBody {
			return fmt.Errorf("%w: more than %d bytes encoded (at flow %q key %q)", ErrBatchTooLarge, logMaxBody, m.Flow, m.Key)
		}
	}
	if l.size > max(logCompactMin, 4*l.liveBytes) {
		if err := l.compact(); err != nil {
			return err
		}
	}
	rec, start := recfile.Begin(make([]byte, 0, recfile.RecordHeaderSize+n))
	rec = binary.AppendUvarint(rec, uint64(len(batch)))
	for _, m := range batch {
		rec = appendLogMut(rec, m.Flow, m.Key, m.Value, m.Value == nil)
	}
	if err := l.write(recfile.End(rec, start)); err != nil {
		return err
	}
	for _, m := range batch {
		l.apply(m.Flow, m.Key, m.Value)
	}
	l.stats.Writes++
	if sync {
		return l.sync()
	}
	return nil
}

// Sync implements Backend; it issues no fsync when nothing is pending.
func (l *Log) Sync() error {
	if err := l.usable(); err != nil {
		return err
	}
	return l.sync()
}

// Scan implements Backend, from memory.
func (l *Log) Scan(fn func(Mutation) error) error {
	if err := l.usable(); err != nil {
		return err
	}
	return l.each(func(flow, key, val string) error {
		return fn(Mutation{Flow: flow, Key: key, Value: []byte(val)}) // never nil, even when empty
	})
}

// Close implements Backend. After a failure it still closes the file, and
// returns the failure.
func (l *Log) Close() error {
	if l.done {
		return ErrClosed
	}
	err := l.Sync()
	l.done = true
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("shard: close %s: %w", l.name, cerr)
	}
	return err
}

// Stats reports the counters and the current size of the file and state.
func (l *Log) Stats() LogStats {
	s := l.stats
	s.Bytes = l.size
	return s
}

// compact rewrites the live state into a sibling, syncs it and renames it
// over the log. A crash before the directory sync brings back the old
// file, whole as far as it was synced; one after finds the new one, which
// also holds every batch the old one had not synced: more durable, never
// less. Every failure is sticky, like any other: the recovery is to reopen.
func (l *Log) compact() error {
	fill := func(w io.Writer) error {
		type kv struct{ flow, key, val string }
		var chunk []kv
		n := 0
		emit := func() error {
			if len(chunk) == 0 {
				return nil
			}
			rec, start := recfile.Begin(make([]byte, 0, recfile.RecordHeaderSize+binary.MaxVarintLen64+n))
			rec = binary.AppendUvarint(rec, uint64(len(chunk)))
			for _, e := range chunk {
				rec = appendLogMut(rec, e.flow, e.key, e.val, false)
			}
			chunk, n = chunk[:0], 0
			_, err := w.Write(recfile.End(rec, start))
			return err
		}
		if _, err := w.Write(logFormat.AppendHeader(nil)); err != nil {
			return err
		}
		err := l.each(func(flow, key, val string) error {
			// A key bigger than a chunk gets a record of its own: it
			// fitted one when it was written.
			m := logMutLen(flow, key, val, false)
			if n > 0 && n+m > logChunk {
				if err := emit(); err != nil {
					return err
				}
			}
			chunk, n = append(chunk, kv{flow, key, val}), n+m
			return nil
		})
		if err != nil {
			return err
		}
		return emit()
	}
	f, size, err := recfile.Replace(l.fs, l.name, l.name+logTmpSuffix, fill)
	if f == nil {
		return l.fail(fmt.Errorf("compact: %w", err))
	}
	// The name is the new file's now; memory must follow it.
	_ = l.f.Close() // everything it held is in the new file, synced
	l.f, l.size, l.dirty = f, size, false
	l.stats.Syncs++
	l.stats.Compactions++
	if err != nil {
		return l.fail(fmt.Errorf("compact: %w", err))
	}
	return nil
}

// each visits the live state in (flow, key) order.
func (l *Log) each(fn func(flow, key, val string) error) error {
	flows := make([]string, 0, len(l.live))
	for flow := range l.live {
		flows = append(flows, flow)
	}
	slices.Sort(flows)
	for _, flow := range flows {
		m := l.live[flow]
		keys := make([]string, 0, len(m))
		for key := range m {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		for _, key := range keys {
			if err := fn(flow, key, m[key]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *Log) apply(flow, key string, val []byte) {
	keys := l.live[flow]
	if old, ok := keys[key]; ok {
		l.liveBytes -= int64(logMutLen(flow, key, old, false))
		l.stats.Live--
		delete(keys, key)
	}
	if val == nil {
		if len(keys) == 0 {
			delete(l.live, flow)
		}
		return
	}
	if keys == nil {
		keys = map[string]string{}
		l.live[flow] = keys
	}
	keys[key] = string(val)
	l.liveBytes += int64(logMutLen(flow, key, val, false))
	l.stats.Live++
}

func (l *Log) usable() error {
	if l.done {
		return ErrClosed
	}
	return l.err
}

// fail makes err sticky: after a failed write the file may end in part of
// a record, and appending after it would turn a torn tail into corruption.
func (l *Log) fail(err error) error {
	l.err = fmt.Errorf("shard: log %s failed: %w", l.name, err)
	return l.err
}

func (l *Log) write(p []byte) error {
	n, err := l.f.Write(p)
	l.size += int64(n)
	l.dirty = l.dirty || n > 0
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return l.fail(fmt.Errorf("write: %w", err))
	}
	return nil
}

func (l *Log) sync() error {
	if !l.dirty {
		return nil
	}
	l.stats.Syncs++
	if err := l.f.Sync(); err != nil {
		return l.fail(fmt.Errorf("sync: %w", err))
	}
	l.dirty = false
	return nil
}

func appendLogStr[S string | []byte](buf []byte, s S) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(s))), s...)
}

func appendLogMut[S string | []byte](buf []byte, flow, key string, val S, del bool) []byte {
	buf = appendLogStr(appendLogStr(buf, flow), key)
	if del {
		return append(buf, 1)
	}
	return appendLogStr(append(buf, 0), val)
}

func logMutLen[S string | []byte](flow, key string, val S, del bool) int {
	n := logStrLen(len(flow)) + logStrLen(len(key)) + 1
	if !del {
		n += logStrLen(len(val))
	}
	return n
}

func logStrLen(n int) int { return logUvLen(n) + n }

func logUvLen(v int) int {
	var b [binary.MaxVarintLen64]byte
	return len(binary.AppendUvarint(b[:0], uint64(v)))
}

// decodeLogBody decodes a checksummed body strictly, handing each mutation
// to apply (val nil for a delete, else aliasing b). The writer produced
// these exact bytes, so any malformation is corruption, never a tear, and
// it fails the whole open: a partly applied batch is never served.
func decodeLogBody(b []byte, apply func(flow, key string, val []byte)) error {
	str := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		s := b[k : k+int(n)] // never nil, so an empty value stays a put
		b = b[k+int(n):]
		return s, true
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count == 0 || count > uint64(len(b)-k)/3 { // >= 3 bytes each
		return fmt.Errorf("bad mutation count in %d bytes", len(b))
	}
	b = b[k:]
	for i := range count {
		flow, ok1 := str()
		key, ok2 := str()
		if !ok1 || !ok2 || len(b) == 0 {
			return fmt.Errorf("mutation %d runs past the end", i)
		}
		flag := b[0]
		b = b[1:]
		var val []byte
		switch ok := true; flag {
		case 0:
			if val, ok = str(); !ok {
				return fmt.Errorf("mutation %d: value runs past the end", i)
			}
		case 1:
		default:
			return fmt.Errorf("mutation %d: bad flag %d", i, flag)
		}
		apply(string(flow), string(key), val)
	}
	if len(b) > 0 {
		return fmt.Errorf("%d bytes after the last mutation", len(b))
	}
	return nil
}
