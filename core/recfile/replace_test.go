package recfile_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/sim/simtest"
)

// fillIn writes b in three calls, as a compaction that streams its
// records does.
func fillIn(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		for _, part := range [][]byte{b[:len(b)/3], b[len(b)/3 : 2*len(b)/3], b[2*len(b)/3:]} {
			if _, err := w.Write(part); err != nil {
				return err
			}
		}
		return nil
	}
}

// Power is cut before each of Replace's disk steps in turn, with and
// without torn writes: the name holds the old file whole until the
// directory sync has returned, and the new file whole after it, never a
// mix; the sibling left behind, if any, is never the name.
func TestReplaceCrashAtEachStep(t *testing.T) {
	old, _ := file(4)
	next, _ := file(7)
	steps := []string{"create", "write", "write", "write", "sync", "rename", "syncdir"}
	for _, torn := range []float64{0, 1} {
		for cut := 1; cut <= len(steps)+1; cut++ {
			for seed := range uint64(3) {
				msg := fmt.Sprintf("torn=%v power cut before step %d", torn, cut)
				m := simtest.NewMachine(t, seed, torn)
				m.Put("log", old)
				if cut <= len(steps) {
					m.Disk().CutPowerAfter(cut)
				}
				var f recfile.File
				var size int64
				var err error
				crashed := m.Do(func() { f, size, err = recfile.Replace(m.Disk(), "log", "log.tmp", fillIn(next)) })
				require.Equal(t, cut <= len(steps), crashed, msg)
				if !crashed {
					require.NoError(t, err, msg)
					require.Equal(t, int64(len(next)), size, msg)
					require.NoError(t, f.Close())
					m.Crash()
				}
				want := old
				if cut > len(steps) {
					want = next // the directory sync returned
				}
				require.Equal(t, want, m.Raw("log"), msg)
			}
		}
	}
}

// Every failure before the rename leaves the old file under the name and
// removes the sibling; the answer says which step failed.
func TestReplaceFailureLeavesTheOldFile(t *testing.T) {
	old, _ := file(2)
	next, _ := file(5)
	for _, fail := range []string{"create", "write", "sync", "rename"} {
		m := simtest.NewMachine(t, 1, 0)
		m.Put("log", old)
		fs := &simtest.FailFS{FS: m.Disk()}
		fill := fillIn(next)
		var into recfile.FS = fs
		switch fail {
		case "create":
			into = noCreateFS{fs}
		case "rename":
			fill = func(w io.Writer) error {
				err := fillIn(next)(w)
				require.NoError(t, fs.FS.Remove("log.tmp")) // the rename finds nothing
				return err
			}
		case "write":
			fill = func(w io.Writer) error {
				_, _ = w.Write(next[:10])
				return fmt.Errorf("encoder gave up")
			}
		case "sync":
			fill = func(w io.Writer) error {
				err := fillIn(next)(w)
				fs.Failing = true
				return err
			}
		}
		f, size, err := recfile.Replace(into, "log", "log.tmp", fill)
		require.Error(t, err, fail)
		require.ErrorContains(t, err, fail, "the answer names the step")
		require.Nil(t, f, fail)
		require.Zero(t, size, fail)
		fs.Failing = false
		require.Equal(t, old, m.Raw("log"), fail)
		require.Equal(t, []string{"log"}, m.Names(), "%s: no sibling left behind", fail)
	}
}

// A write that reaches the file short is an error, not a smaller file.
func TestReplaceShortWriteIsAnError(t *testing.T) {
	m := simtest.NewMachine(t, 1, 0)
	m.Put("log", []byte("old"))
	_, _, err := recfile.Replace(shortFS{m.Disk()}, "log", "log.tmp", fillIn(bytes.Repeat([]byte("x"), 30)))
	require.ErrorIs(t, err, io.ErrShortWrite)
	require.Equal(t, []byte("old"), m.Raw("log"))
}

// noCreateFS cannot create files.
type noCreateFS struct{ recfile.FS }

func (noCreateFS) Create(name string) (recfile.File, error) { return nil, simtest.ErrDisk }

// shortFS hands out files whose writes stop one byte short.
type shortFS struct{ recfile.FS }

func (s shortFS) Create(name string) (recfile.File, error) {
	f, err := s.FS.Create(name)
	return shortFile{f}, err
}

type shortFile struct{ recfile.File }

func (f shortFile) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return f.File.Write(p[:len(p)-1])
}
