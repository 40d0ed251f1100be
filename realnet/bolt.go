package realnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/fenceline/fenceline/core/shard"
)

// BoltFile is the name of the flow store inside a node's data dir. It is a
// file of its own, apart from the raft journal, so the two fsync policies
// never contend.
const BoltFile = "flow.db"

// flowsBucket holds every key of the store. One bucket with composite keys
// (see compositeKey) rather than one bucket per flow: a write touches no
// bucket metadata, there are no empty buckets to clean up, and bbolt's key
// order is already the (flow, key) order that Scan promises.
var flowsBucket = []byte("flows")

// Bolt is the flow shard's Backend on a bbolt file.
//
// Like every Backend it has one writer and is not safe for concurrent use.
// Write relies on that: it sets db.NoSync for the one Update it runs, which
// would race with another goroutine's commit but cannot race with itself.
type Bolt struct {
	db    *bolt.DB
	path  string
	dirty bool // a NoSync commit has happened since the last fdatasync
}

var _ shard.Backend = (*Bolt)(nil)

// OpenBolt opens (creating if needed) the flow store dir/flow.db.
//
// bbolt takes an exclusive file lock, and by default waits for it forever:
// a second node started on the same data dir would hang silently. OpenBolt
// waits at most timeout and then fails with an error naming the file and
// saying another process holds it, so timeout must be positive.
//
// A file that is not a valid bbolt database (garbage, truncated, a newer
// format) gives an error naming the file, never a panic.
func OpenBolt(dir string, timeout time.Duration) (*Bolt, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("realnet: open flow store: lock timeout must be positive, got %v (bbolt reads 0 as wait forever)", timeout)
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, BoltFile)
	db, err := openBolt(path, timeout)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("realnet: open %s: another process holds its lock (waited %v): %w", path, timeout, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, fmt.Errorf("realnet: open %s: not a valid flow store (corrupt, or not a bbolt file): %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("realnet: open %s: %w", path, err)
	}
	if err := os.Chmod(path, privateFile); err != nil { // one an older node wrote 0644
		_ = db.Close()
		return nil, fmt.Errorf("realnet: open %s: %w", path, err)
	}
	b := &Bolt{db: db, path: path}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(flowsBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("realnet: open %s: %w", path, err)
	}
	return b, nil
}

// openBolt turns a panic inside bolt.Open into an error. bbolt validates
// the meta pages and returns errors for them, but some damage past the
// meta pages (a corrupt freelist, read while opening) panics instead; a
// node should report that file, not crash. The descriptor and lock of such
// a half-opened file cannot be released, but the caller is about to give
// up on the data dir anyway.
func openBolt(path string, timeout time.Duration) (db *bolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("corrupt file: bbolt panicked: %v", p)
		}
	}()
	return bolt.Open(path, privateFile, &bolt.Options{Timeout: timeout})
}

// Write applies batch as one bbolt transaction, so it is atomic. It runs
// one Update per call and never uses DB.Batch: Batch coalesces concurrent
// callers by waiting for others, and from a single writer it only adds its
// delay (about 100 batches/s).
//
// Without sync the commit skips both fdatasyncs. A later sync Write or
// Sync fdatasyncs the whole file, covering this batch too, so writes stay
// ordered. Caveat: such a batch survives a process crash (it reached the
// page cache) but an OS crash or power loss before the next sync may
// leave the file unreadable, not merely stale, because bbolt's copy-on-
// write safety rests on the data pages reaching disk before the meta page.
func (b *Bolt) Write(batch []shard.Mutation, sync bool) error {
	if len(batch) == 0 {
		if sync {
			return b.Sync()
		}
		return nil
	}
	b.db.NoSync = !sync
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(flowsBucket)
		for _, m := range batch {
			k := compositeKey(m.Flow, m.Key)
			var err error
			if m.Value == nil {
				err = bk.Delete(k)
			} else {
				err = bk.Put(k, m.Value)
			}
			if err != nil {
				return fmt.Errorf("flow %q key %q: %w", m.Flow, m.Key, err)
			}
		}
		return nil
	})
	b.db.NoSync = false
	if err != nil {
		return fmt.Errorf("realnet: write %s: %w", b.path, err)
	}
	b.dirty = !sync
	return nil
}

// Sync fdatasyncs the file, making every batch written so far durable.
func (b *Bolt) Sync() error {
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("realnet: sync %s: %w", b.path, err)
	}
	b.dirty = false
	return nil
}

// Scan visits every key in (flow, key) order in one read transaction.
// bbolt's slices point into its mmap and die with the transaction, so each
// Mutation gets copies; Value is copied even when empty so that it is
// never nil (nil would read as a delete).
//
// A corrupt page makes bbolt panic mid-read; Scan reports that as an error
// (View has already rolled the transaction back).
func (b *Bolt) Scan(fn func(shard.Mutation) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("realnet: scan %s: corrupt file: bbolt panicked: %v", b.path, p)
		}
	}()
	return b.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(flowsBucket).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			flow, key, ok := splitKey(k)
			if !ok {
				return fmt.Errorf("realnet: scan %s: malformed key %x", b.path, k)
			}
			if err := fn(shard.Mutation{Flow: flow, Key: key, Value: append(make([]byte, 0, len(v)), v...)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close syncs any unsynced writes, so a clean shutdown loses nothing, and
// closes the file, releasing its lock.
func (b *Bolt) Close() error {
	var serr error
	if b.dirty {
		serr = b.Sync()
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("realnet: close %s: %w", b.path, err)
	}
	return serr
}

// compositeKey lays out (flow, key) as one bbolt key whose byte order is
// the (flow, key) order. A plain length prefix would group each flow's keys
// but sort flows by length first ("b" before "aa"); instead the flow is
// escaped (0x00 becomes 0x00 0xFF) and terminated by 0x00 0x01, which sorts
// below any continuation of the flow (a byte above 0x00, or an escaped
// 0x00 0xFF), so a flow's keys come before those of any longer flow it
// prefixes. The key follows raw: it ends the composite key. The result is
// never empty, as bbolt requires.
func compositeKey(flow, key string) []byte {
	k := make([]byte, 0, len(flow)+2+len(key)+strings.Count(flow, "\x00"))
	for i := 0; i < len(flow); i++ {
		k = append(k, flow[i])
		if flow[i] == 0 {
			k = append(k, 0xFF)
		}
	}
	k = append(k, 0x00, 0x01)
	return append(k, key...)
}

// splitKey inverts compositeKey.
func splitKey(k []byte) (flow, key string, ok bool) {
	f := make([]byte, 0, len(k))
	for i := 0; i+1 < len(k); i++ {
		if k[i] != 0 {
			f = append(f, k[i])
			continue
		}
		switch k[i+1] {
		case 0xFF:
			f = append(f, 0)
			i++
		case 0x01:
			return string(f), string(k[i+2:]), true
		default:
			return "", "", false
		}
	}
	return "", "", false
}
