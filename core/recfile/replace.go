package recfile

import (
	"fmt"
	"io"
)

// Replace swaps the file called name for a new one, the way both record
// files compact: fill writes the new file's bytes (header included) into
// sibling, which is synced and then renamed over name, and the directory
// is synced last. A crash at any point leaves name holding either the old
// file or the whole new one, never a mix, and a leftover sibling is
// garbage for the next Open to remove.
//
// The effects come in this order, and the answer says how far they got:
//
//		create sibling → fill → sync sibling → rename over name → sync directory
//
//	  - f == nil: something before the rename failed. name still holds the
//	    old file; the sibling is closed and removed (best effort). The
//	    caller's state stands.
//	  - f != nil: name now holds the new file, open as f, size bytes long.
//	    The caller must adopt f and close its old file whatever err says,
//	    because that is what name holds. err != nil means the directory sync
//	    failed: the rename may not survive a crash, which a caller that
//	    answers for durability must treat as a failed sync.
//
// fill's writer fails on a short write; fill may write in one call or
// many (the number of writes reaches the disk, so a caller keeps its own).
func Replace(fs FS, name, sibling string, fill func(w io.Writer) error) (f File, size int64, err error) {
	nf, err := fs.Create(sibling)
	if err != nil {
		return nil, 0, fmt.Errorf("create %s: %w", sibling, err)
	}
	w := &countingWriter{f: nf}
	step, err := "write", fill(w)
	if err == nil {
		step, err = "sync", nf.Sync()
	}
	if err == nil {
		step, err = "rename", fs.Rename(sibling, name)
	}
	if err != nil {
		_ = nf.Close()         // the sibling is garbage now; the next Open
		_ = fs.Remove(sibling) // removes it if this fails
		return nil, 0, fmt.Errorf("%s %s: %w", step, sibling, err)
	}
	if err := fs.SyncDir(); err != nil {
		return nf, w.n, fmt.Errorf("sync directory after renaming %s: %w", sibling, err)
	}
	return nf, w.n, nil
}

// countingWriter counts what reached the file and turns a short write
// into an error.
type countingWriter struct {
	f File
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err == nil && n != len(p) {
		err = fmt.Errorf("short write: %d of %d bytes: %w", n, len(p), io.ErrShortWrite)
	}
	return n, err
}
