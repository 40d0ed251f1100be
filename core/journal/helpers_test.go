package journal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/sim/simtest"
)

const jname = "raft.journal"

// rig is one simulated machine whose disk the journal lives on.
type rig struct {
	*simtest.Machine
	t T
}

// T is what the helpers need of a test: *testing.T and *rapid.T both fit.
type T = simtest.T

func newRig(t T, seed uint64, tornProb float64) *rig {
	return &rig{Machine: simtest.NewMachine(t, seed, tornProb), t: t}
}

func (r *rig) open(cfg journal.Config) *journal.Journal {
	r.t.Helper()
	j, err := journal.Open(r.Disk(), jname, cfg)
	require.NoError(r.t, err)
	return j
}

// view is everything the journal answers, for comparing a journal with a
// model or with itself after a reopen.
type view struct {
	HS   journal.HardState
	Snap journal.Snapshot
	Ents []journal.Entry
}

func (v view) String() string {
	s := fmt.Sprintf("hs=%+v snap=(%d,%d,%dB)", v.HS, v.Snap.Meta.Index, v.Snap.Meta.Term, len(v.Snap.Data))
	for _, e := range v.Ents {
		s += fmt.Sprintf(" %d/%d", e.Index, e.Term)
	}
	return s
}

func viewOf(t T, j *journal.Journal) view {
	t.Helper()
	ents, err := j.Entries(j.FirstIndex(), j.LastIndex()+1, math.MaxUint64)
	require.NoError(t, err)
	return view{HS: j.HardState(), Snap: j.Snapshot(), Ents: ents}
}

// ents makes entries [from, to] in term; each carries data naming it, so a
// wrong entry in the right slot shows.
func ents(from, to, term uint64) []journal.Entry {
	var out []journal.Entry
	for i := from; i <= to; i++ {
		out = append(out, journal.Entry{Index: i, Term: term, Type: uint8(i % 3), Data: fmt.Appendf(nil, "entry %d of term %d", i, term)})
	}
	return out
}

func hs(term, vote, commit uint64) *journal.HardState {
	return &journal.HardState{Term: term, Vote: vote, Commit: commit}
}

// recordHeader builds a record header as the package doc specifies it, so
// tests can forge records without reaching into the package.
func recordHeader(length uint32, body []byte) []byte {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	h := make([]byte, 12)
	binary.LittleEndian.PutUint32(h[0:4], length)
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[8:12], crc32.Checksum(h[0:8], castagnoli))
	return h
}

// recordEnds parses the record lengths of a journal file (past the 8-byte
// file header) and returns where each record ends.
func recordEnds(t T, file []byte, from int) []int {
	t.Helper()
	var ends []int
	for off := from; off < len(file); {
		require.GreaterOrEqual(t, len(file)-off, 12, "record header at %d", off)
		off += 12 + int(binary.LittleEndian.Uint32(file[off:]))
		require.LessOrEqual(t, off, len(file))
		ends = append(ends, off)
	}
	return ends
}

// faultFS wraps a rig's disk and crashes the machine right after the
// budget-th mutating call (write, sync, truncate, create, rename, remove,
// syncdir) returns. After the crash the dead process's calls all fail, as
// they would if its code ever ran again.
type faultFS struct {
	r      *rig
	budget int // mutating calls left before the crash; < 0: never
	dead   bool
	ops    []string // the mutating calls made, in order
}

var errDead = errors.New("test: process crashed")

var _ recfile.FS = (*faultFS)(nil)

func (f *faultFS) mutated(op string) {
	f.ops = append(f.ops, op)
	if f.budget < 0 {
		return
	}
	f.budget--
	if f.budget == 0 {
		f.r.Crash()
		f.dead = true
	}
}

func (f *faultFS) Create(name string) (recfile.File, error) {
	if f.dead {
		return nil, errDead
	}
	file, err := f.r.Disk().Create(name)
	f.mutated("create " + name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, name: name}, nil
}

func (f *faultFS) Open(name string) (recfile.File, error) {
	if f.dead {
		return nil, errDead
	}
	file, err := f.r.Disk().Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, f: file, name: name}, nil
}

func (f *faultFS) Rename(oldname, newname string) error {
	if f.dead {
		return errDead
	}
	err := f.r.Disk().Rename(oldname, newname)
	f.mutated("rename " + oldname)
	return err
}

func (f *faultFS) Remove(name string) error {
	if f.dead {
		return errDead
	}
	err := f.r.Disk().Remove(name)
	f.mutated("remove " + name)
	return err
}

func (f *faultFS) List() ([]string, error) {
	if f.dead {
		return nil, errDead
	}
	return f.r.Disk().List()
}

func (f *faultFS) SyncDir() error {
	if f.dead {
		return errDead
	}
	err := f.r.Disk().SyncDir()
	f.mutated("syncdir")
	return err
}

type faultFile struct {
	fs   *faultFS
	f    recfile.File
	name string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.dead {
		return 0, errDead
	}
	n, err := f.f.Write(p)
	f.fs.mutated("write " + f.name)
	return n, err
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if f.fs.dead {
		return 0, errDead
	}
	return f.f.ReadAt(p, off)
}

func (f *faultFile) Size() (int64, error) {
	if f.fs.dead {
		return 0, errDead
	}
	return f.f.Size()
}

func (f *faultFile) Truncate(size int64) error {
	if f.fs.dead {
		return errDead
	}
	err := f.f.Truncate(size)
	f.fs.mutated("truncate " + f.name)
	return err
}

func (f *faultFile) Sync() error {
	if f.fs.dead {
		return errDead
	}
	err := f.f.Sync()
	f.fs.mutated("sync " + f.name)
	return err
}

func (f *faultFile) Close() error {
	if f.fs.dead {
		return errDead
	}
	return f.f.Close()
}
