package realnet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/fenceline/fenceline/core/recfile"
)

// DirFS is a directory of OS files behind the journal's FS seam.
type DirFS struct{ dir string }

var _ recfile.FS = (*DirFS)(nil)

// OpenDir returns the FS for dir, creating it if needed. The dir and its
// files are its owner's alone (0700 and 0600), made so even if they were
// not: the journal holds imposter definitions with their https private
// keys.
func OpenDir(dir string) (*DirFS, error) {
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("realnet: data dir: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), privateFile); err != nil {
				return nil, fmt.Errorf("realnet: data dir: %w", err)
			}
		}
	}
	return &DirFS{dir: dir}, nil
}

// privateFile is the mode of every file a node writes.
const privateFile fs.FileMode = 0o600

// privateDir makes dir, or makes it its owner's alone if it exists.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("realnet: data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("realnet: data dir: %w", err)
	}
	return nil
}

// path checks that name is a plain file name: the seam is a flat
// directory, and a name with a separator would escape it.
func (d *DirFS) path(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("realnet: bad file name %q", name)
	}
	return filepath.Join(d.dir, name), nil
}

func notExist(err error, name string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", recfile.ErrNotExist, name)
	}
	return err
}

// Create makes an empty file, replacing any file of that name.
func (d *DirFS) Create(name string) (recfile.File, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, privateFile)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

// Open opens an existing file for reading and appending.
func (d *DirFS) Open(name string) (recfile.File, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return nil, notExist(err, name)
	}
	return &osFile{f: f}, nil
}

// Rename replaces newname with oldname.
func (d *DirFS) Rename(oldname, newname string) error {
	po, err := d.path(oldname)
	if err != nil {
		return err
	}
	pn, err := d.path(newname)
	if err != nil {
		return err
	}
	return notExist(os.Rename(po, pn), oldname)
}

// Remove deletes name.
func (d *DirFS) Remove(name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	return notExist(os.Remove(p), name)
}

// List returns the regular files in the directory, sorted.
func (d *DirFS) List() ([]string, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir fsyncs the directory, making creates and renames durable.
func (d *DirFS) SyncDir() error {
	f, err := os.Open(d.dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// osFile appends with an explicit offset: the seam says writes go to the
// end, and tracking the end ourselves keeps that true after a Truncate.
type osFile struct {
	f    *os.File
	size int64
	init bool
}

func (o *osFile) end() (int64, error) {
	if !o.init {
		st, err := o.f.Stat()
		if err != nil {
			return 0, err
		}
		o.size, o.init = st.Size(), true
	}
	return o.size, nil
}

func (o *osFile) Write(p []byte) (int, error) {
	off, err := o.end()
	if err != nil {
		return 0, err
	}
	n, err := o.f.WriteAt(p, off)
	o.size += int64(n)
	return n, err
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

func (o *osFile) Size() (int64, error) { return o.end() }

func (o *osFile) Truncate(size int64) error {
	cur, err := o.end()
	if err != nil {
		return err
	}
	if size < 0 || size > cur {
		return fmt.Errorf("realnet: truncate %s to %d: size is %d", o.f.Name(), size, cur)
	}
	if err := o.f.Truncate(size); err != nil {
		return err
	}
	o.size = size
	return nil
}

func (o *osFile) Sync() error  { return o.f.Sync() }
func (o *osFile) Close() error { return o.f.Close() }
