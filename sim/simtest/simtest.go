// Package simtest is what storage tests share: one simulated machine whose
// disk a test works on, and a disk that fails on demand. The journal, the
// shard log and the node's boot files are all tested through it, so each
// meets the same crash model the scenarios run.
package simtest

import (
	"errors"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/sim"
)

// T is what the helpers need of a test: *testing.T, *testing.F and
// *rapid.T all fit.
type T interface {
	require.TestingT
	Helper()
}

// NopNet is a network a machine that sends nothing can be given.
type NopNet struct{}

// Sender returns no sender.
func (NopNet) Sender(dial.NodeID) dial.Sender { return nil }

// Machine is one simulated machine. Its process does nothing; it exists so
// a test can crash it, which is how the simulator applies its disk fault
// model (sim/disk.go): unsynced bytes lost, or a prefix of them kept.
type Machine struct {
	t T
	n *sim.Machine
}

// NewMachine starts a machine whose disk tears a crash's unsynced bytes
// with probability tornProb.
func NewMachine(t T, seed uint64, tornProb float64) *Machine {
	cfg := sim.DefaultDiskConfig
	cfg.TornWriteProb = tornProb
	k := sim.New(seed)
	boot := func(*sim.Env) dial.Handler { return dial.HandlerFunc(func(dial.NodeID, []byte) {}) }
	n := k.AddMachine("a", boot, NopNet{}, cfg)
	n.Start()
	return &Machine{t: t, n: n}
}

// Disk is the machine's disk; handles opened from it die with a crash.
func (m *Machine) Disk() *sim.Disk { return m.n.Disk() }

// Crash kills the process (the disk keeps what its model keeps) and starts
// a new one; handles opened before are dead.
func (m *Machine) Crash() {
	m.n.Crash()
	m.n.Start()
}

// Do runs f as the machine's process, so that a power cut armed with
// Disk().CutPowerAfter crashes it mid-call, and restarts the machine if it
// did.
func (m *Machine) Do(f func()) (crashed bool) {
	m.t.Helper()
	require.True(m.t, m.n.Exec(f))
	m.Disk().CancelPowerCut()
	if m.n.Up() {
		return false
	}
	m.n.Start()
	return true
}

// Raw returns a file's bytes, synced or not.
func (m *Machine) Raw(name string) []byte {
	m.t.Helper()
	f, err := m.Disk().Open(name)
	require.NoError(m.t, err)
	size, err := f.Size()
	require.NoError(m.t, err)
	buf := make([]byte, size)
	if size > 0 {
		_, err = f.ReadAt(buf, 0)
		require.NoError(m.t, err)
	}
	require.NoError(m.t, f.Close())
	return buf
}

// Put makes a file hold exactly b, durably.
func (m *Machine) Put(name string, b []byte) {
	m.t.Helper()
	f, err := m.Disk().Create(name)
	require.NoError(m.t, err)
	_, err = f.Write(b)
	require.NoError(m.t, err)
	require.NoError(m.t, f.Sync())
	require.NoError(m.t, f.Close())
	require.NoError(m.t, m.Disk().SyncDir())
}

// Names lists the disk's files.
func (m *Machine) Names() []string {
	m.t.Helper()
	names, err := m.Disk().List()
	require.NoError(m.t, err)
	return names
}

// ErrDisk is the error a FailFS gives once Failing is set.
var ErrDisk = errors.New("simtest: disk error")

// FailFS fails every write and sync of the files it opens once Failing is
// set: a disk that went bad under a running component.
type FailFS struct {
	recfile.FS
	Failing bool
}

type failFile struct {
	recfile.File
	fs *FailFS
}

// Create creates a file that fails with the FS.
func (f *FailFS) Create(name string) (recfile.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

// Open opens a file that fails with the FS.
func (f *FailFS) Open(name string) (recfile.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &failFile{File: file, fs: f}, nil
}

func (f *failFile) Write(p []byte) (int, error) {
	if f.fs.Failing {
		return 0, ErrDisk
	}
	return f.File.Write(p)
}

func (f *failFile) Sync() error {
	if f.fs.Failing {
		return ErrDisk
	}
	return f.File.Sync()
}
