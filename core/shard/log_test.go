package shard_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/sim/simtest"
)

const lname = "flow.shard"

var _ shard.Backend = (*shard.Log)(nil)

// T is what the helpers need of a test: *testing.T, *testing.F and
// *rapid.T all fit.
type T = simtest.T

// rig is one simulated machine whose disk the log lives on.
type rig struct {
	*simtest.Machine
	t T
}

func newRig(t T, seed uint64, tornProb float64) *rig {
	return &rig{Machine: simtest.NewMachine(t, seed, tornProb), t: t}
}

func (r *rig) open() *shard.Log {
	r.t.Helper()
	l, err := shard.OpenLog(r.Disk(), lname)
	require.NoError(r.t, err)
	return l
}

// model is what the log should hold: (flow, key) -> value.
type model map[[2]string]string

func (m model) with(batch []shard.Mutation) model {
	out := maps.Clone(m)
	if out == nil {
		out = model{}
	}
	for _, x := range batch {
		if x.Value == nil {
			delete(out, [2]string{x.Flow, x.Key})
		} else {
			out[[2]string{x.Flow, x.Key}] = string(x.Value)
		}
	}
	return out
}

func byFlowKey(a, b shard.Mutation) int {
	return cmp.Or(strings.Compare(a.Flow, b.Flow), strings.Compare(a.Key, b.Key))
}

// muts is m as Scan must give it: in (flow, key) order, values never nil.
func (m model) muts() []shard.Mutation {
	var out []shard.Mutation
	for k, v := range m {
		out = append(out, shard.Mutation{Flow: k[0], Key: k[1], Value: []byte(v)})
	}
	slices.SortFunc(out, byFlowKey)
	return out
}

// scan returns everything l holds, checking Scan's order and values.
func scan(t T, l *shard.Log) []shard.Mutation {
	t.Helper()
	var out []shard.Mutation
	require.NoError(t, l.Scan(func(m shard.Mutation) error {
		require.NotNil(t, m.Value, "a stored value is never nil")
		if len(out) > 0 {
			require.Negative(t, byFlowKey(out[len(out)-1], m), "Scan order: %q/%q after %q/%q", m.Flow, m.Key, out[len(out)-1].Flow, out[len(out)-1].Key)
		}
		out = append(out, m)
		return nil
	}))
	return out
}

func modelOf(t T, l *shard.Log) model {
	return model{}.with(scan(t, l))
}

func put(flow, key, val string) shard.Mutation {
	return shard.Mutation{Flow: flow, Key: key, Value: []byte(val)}
}

func del(flow, key string) shard.Mutation { return shard.Mutation{Flow: flow, Key: key} }

// record frames body as the file format specifies, so tests can forge
// records without reaching into the package.
func record(body []byte) []byte {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	h := make([]byte, 12)
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[8:12], crc32.Checksum(h[0:8], castagnoli))
	return append(h, body...)
}

// recordEnds returns where each record of a log file ends.
func recordEnds(t T, file []byte) []int {
	t.Helper()
	var ends []int
	for off := 8; off < len(file); {
		require.GreaterOrEqual(t, len(file)-off, 12, "record header at %d", off)
		off += 12 + int(binary.LittleEndian.Uint32(file[off:]))
		require.LessOrEqual(t, off, len(file))
		ends = append(ends, off)
	}
	return ends
}

func TestLogRoundTrip(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	batches := [][]shard.Mutation{
		{put("a", "x", "1"), put("a", "y", ""), put("b", "z", "2"), put("aa", "k", "3")},
		{del("a", "x"), put("", "", "empty names"), put("a\x00", "k", "4"), put("\xff", "k", "5")},
		{del("nobody", "nothing"), put("a", "x", "again"), put("a", "x", "twice"), del("b", "z")},
		{put("b", "z", ""), put("a", "", "6")},
	}
	var m model
	for i, b := range batches {
		require.NoError(t, l.Write(b, i%2 == 0))
		m = m.with(b)
		require.Equal(t, m.muts(), scan(t, l), "after batch %d", i)
	}
	require.Equal(t, len(m), l.Stats().Live)
	require.NoError(t, l.Close())

	l = r.open()
	got := scan(t, l)
	require.Equal(t, m.muts(), got)
	require.Equal(t, []byte{}, got[slices.IndexFunc(got, func(m shard.Mutation) bool { return m.Flow == "a" && m.Key == "y" })].Value,
		"an empty put survives as an empty value, not a delete")
	require.Equal(t, uint64(0), l.Stats().Writes)
	require.Equal(t, len(m), l.Stats().Live)
}

func TestLogCopiesValues(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	v := []byte("original")
	require.NoError(t, l.Write([]shard.Mutation{{Flow: "f", Key: "k", Value: v}}, false))
	copy(v, "CHANGED!")
	require.NoError(t, l.Scan(func(m shard.Mutation) error {
		require.Equal(t, "original", string(m.Value))
		copy(m.Value, "SCRIBBLE")
		return nil
	}))
	require.Equal(t, []shard.Mutation{put("f", "k", "original")}, scan(t, l))

	stop := errors.New("stop")
	calls := 0
	require.NoError(t, l.Write([]shard.Mutation{put("f", "l", "2")}, false))
	require.ErrorIs(t, l.Scan(func(shard.Mutation) error { calls++; return stop }), stop)
	require.Equal(t, 1, calls, "Scan stops at fn's first error")
}

func TestLogSyncsOnlyWhatIsPending(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	syncs := func() uint64 { return l.Stats().Syncs }
	s0 := r.Disk().Syncs
	base := syncs()
	require.Equal(t, uint64(1), base, "creating the file syncs its header")

	require.NoError(t, l.Sync())
	require.Equal(t, base, syncs(), "nothing pending")
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "1")}, false))
	require.NoError(t, l.Write(nil, false))
	require.Equal(t, base, syncs())
	require.NoError(t, l.Sync())
	require.Equal(t, base+1, syncs())
	require.NoError(t, l.Sync())
	require.NoError(t, l.Write(nil, true))
	require.Equal(t, base+1, syncs())
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "2")}, true))
	require.Equal(t, base+2, syncs())
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "3")}, false))
	require.NoError(t, l.Write(nil, true), "an empty sync write still syncs what is pending")
	require.Equal(t, base+3, syncs())
	require.NoError(t, l.Write([]shard.Mutation{}, false))

	st := l.Stats()
	require.Equal(t, uint64(3), st.Writes, "empty batches are no-ops")
	require.Equal(t, st.Syncs, r.Disk().Syncs-s0+base, "Stats counts the fsyncs the disk saw")
	require.Equal(t, int64(len(r.Raw(lname))), st.Bytes)
}

func TestLogDurability(t *testing.T) {
	for _, torn := range []float64{0, 1} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			for seed := range uint64(10) {
				r := newRig(t, seed, torn)
				l := r.open()
				require.NoError(t, l.Write([]shard.Mutation{put("f", "a", "1")}, true))
				require.NoError(t, l.Write([]shard.Mutation{put("f", "b", "2")}, false))
				require.NoError(t, l.Sync())
				synced := model{}.with([]shard.Mutation{put("f", "a", "1"), put("f", "b", "2")})
				b3 := []shard.Mutation{put("f", "c", "3"), del("f", "a")}
				b4 := []shard.Mutation{put("f", "d", "4")}
				require.NoError(t, l.Write(b3, false))
				require.NoError(t, l.Write(b4, false))
				r.Crash()
				got := modelOf(t, r.open())
				if torn == 0 {
					require.Equal(t, synced, got, "seed %d: without a tear exactly the synced batches", seed)
					continue
				}
				// A prefix of whole batches.
				require.Contains(t, []model{synced, synced.with(b3), synced.with(b3).with(b4)}, got, "seed %d", seed)
			}
		})
	}
}

// Close syncs, and closes: later calls fail and a crash keeps everything.
func TestLogClose(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "v")}, false))
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), shard.ErrClosed)
	require.ErrorIs(t, l.Write([]shard.Mutation{put("f", "k", "w")}, false), shard.ErrClosed)
	require.ErrorIs(t, l.Write(nil, false), shard.ErrClosed)
	require.ErrorIs(t, l.Sync(), shard.ErrClosed)
	require.ErrorIs(t, l.Scan(func(shard.Mutation) error { return nil }), shard.ErrClosed)
	r.Crash()
	require.Equal(t, []shard.Mutation{put("f", "k", "v")}, scan(t, r.open()))
}

func TestLogRefusesOversizedBatch(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	huge := make([]byte, 64<<20)
	err := l.Write([]shard.Mutation{put("f", "small", "ok"), {Flow: "f", Key: "huge", Value: huge}}, true)
	require.ErrorIs(t, err, shard.ErrBatchTooLarge)
	require.Contains(t, err.Error(), `"huge"`)
	require.Empty(t, scan(t, l), "no part of a refused batch applies")
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "v")}, true), "a refusal is not a failure")
	require.NoError(t, l.Write([]shard.Mutation{{Flow: "f", Key: "big", Value: huge[:32<<20]}}, true))
	r.Crash()
	require.Equal(t, 2, r.open().Stats().Live)
}

func TestLogErrorsAreSticky(t *testing.T) {
	for _, sync := range []bool{false, true} {
		r := newRig(t, 1, 0)
		fs := &simtest.FailFS{FS: r.Disk()}
		l, err := shard.OpenLog(fs, lname)
		require.NoError(t, err)
		require.NoError(t, l.Write([]shard.Mutation{put("f", "a", "1")}, true))
		if sync {
			require.NoError(t, l.Write([]shard.Mutation{put("f", "b", "2")}, false))
		}
		fs.Failing = true
		if sync {
			require.ErrorIs(t, l.Sync(), simtest.ErrDisk)
		} else {
			require.ErrorIs(t, l.Write([]shard.Mutation{put("f", "b", "2")}, false), simtest.ErrDisk)
		}
		fs.Failing = false
		require.ErrorIs(t, l.Write([]shard.Mutation{put("f", "c", "3")}, true), simtest.ErrDisk)
		require.ErrorIs(t, l.Write(nil, false), simtest.ErrDisk)
		require.ErrorIs(t, l.Sync(), simtest.ErrDisk)
		require.ErrorIs(t, l.Scan(func(shard.Mutation) error { return nil }), simtest.ErrDisk)
		require.ErrorIs(t, l.Close(), simtest.ErrDisk)
		require.ErrorIs(t, l.Close(), shard.ErrClosed)
		r.Crash()
		require.Equal(t, []shard.Mutation{put("f", "a", "1")}, scan(t, r.open()))
	}
}

// genBatch draws a batch over a small key space, so that keys are
// overwritten and deleted often. A big batch writes 64 KiB over 8 keys:
// two of them make a file compaction is due on.
func genBatch(t *rapid.T, op int, big bool) []shard.Mutation {
	if big {
		batch := make([]shard.Mutation, 16)
		for i := range batch {
			k := rapid.IntRange(0, 7).Draw(t, "big key")
			batch[i] = shard.Mutation{Flow: "big", Key: fmt.Sprint(k), Value: bytes.Repeat([]byte{byte(op)}, 4<<10)}
		}
		return batch
	}
	batch := make([]shard.Mutation, rapid.IntRange(1, 8).Draw(t, "batch size"))
	for i := range batch {
		m := shard.Mutation{
			Flow: rapid.SampledFrom([]string{"", "a", "ab", "b", "big"}).Draw(t, "flow"),
			Key:  rapid.SampledFrom([]string{"", "0", "1", "2", "k"}).Draw(t, "key"),
		}
		if rapid.IntRange(0, 3).Draw(t, "delete") > 0 {
			m.Value = fmt.Appendf([]byte{}, "%.*d", rapid.IntRange(0, 40).Draw(t, "value bytes"), op)
		}
		batch[i] = m
	}
	return batch
}

// TestPropLogCrashesKeepAPrefixOfBatches runs random writes, syncs,
// crashes, power cuts inside any operation (compactions and open's repair
// included) and clean restarts, and reopens from the disk each time. A
// reopened log must hold the durable state or that state plus a prefix of
// the whole batches written since: the candidates. Without tearing, a
// crash between operations keeps exactly the durable state.
func TestPropLogCrashesKeepAPrefixOfBatches(t *testing.T) {
	for _, torn := range []float64{0, 0.5} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { crashWorkload(t, torn) })
		})
	}
}

func crashWorkload(t *rapid.T, torn float64) {
	r := newRig(t, rapid.Uint64().Draw(t, "disk seed"), torn)
	cur := model{}
	cands := []model{cur}
	var l *shard.Log
	cut := func(what string, steps int) {
		if rapid.IntRange(0, 5).Draw(t, "cut "+what) == 0 {
			r.Disk().CutPowerAfter(rapid.IntRange(1, steps).Draw(t, what+" steps"))
		}
	}
	reopen := func(crashed, midOp bool) {
		for {
			cut("open", 3)
			var err error
			if r.Do(func() { l, err = shard.OpenLog(r.Disk(), lname) }) {
				continue
			}
			require.NoError(t, err)
			break
		}
		got := modelOf(t, l)
		switch {
		case !crashed:
			require.Equal(t, cur, got, "a clean restart keeps everything")
		case torn == 0 && !midOp:
			require.Equal(t, cands[0], got, "a crash without a tear keeps exactly what was synced")
		default:
			require.True(t, slices.ContainsFunc(cands, func(c model) bool { return assert.ObjectsAreEqual(c, got) }),
				"reopened to %v, not one of %v", got, cands)
		}
		cur, cands = got, []model{got}
	}
	reopen(true, false)

	for op := range rapid.IntRange(1, 50).Draw(t, "ops") {
		switch kind := rapid.IntRange(0, 9).Draw(t, "op"); {
		case kind <= 5:
			batch := genBatch(t, op, kind == 5)
			sync := rapid.Bool().Draw(t, "sync")
			compactions := l.Stats().Compactions
			cut("write", 12)
			var err error
			crashed := r.Do(func() { err = l.Write(batch, sync) })
			next := cur.with(batch)
			if crashed {
				cands = append(cands, next)
				reopen(true, true)
				continue
			}
			require.NoError(t, err)
			if l.Stats().Compactions > compactions {
				cands = []model{cur} // the rewrite made everything before the batch durable
			}
			cur, cands = next, append(cands, next)
			if sync {
				cands = []model{cur}
			}
		case kind == 6:
			cut("sync", 1)
			var err error
			if r.Do(func() { err = l.Sync() }) {
				reopen(true, true)
				continue
			}
			require.NoError(t, err)
			cands = []model{cur}
		case kind == 7:
			r.Crash()
			reopen(true, false)
		default:
			require.NoError(t, l.Close())
			reopen(false, false)
		}
		require.Equal(t, cur.muts(), scan(t, l))
	}
}

// opsFS records the mutating calls made through it.
type opsFS struct {
	recfile.FS
	ops []string
}

type opsFile struct {
	recfile.File
	fs   *opsFS
	name string
}

func (f *opsFS) Create(name string) (recfile.File, error) {
	f.ops = append(f.ops, "create "+name)
	file, err := f.FS.Create(name)
	return &opsFile{File: file, fs: f, name: name}, err
}

func (f *opsFS) Open(name string) (recfile.File, error) {
	file, err := f.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &opsFile{File: file, fs: f, name: name}, nil
}

func (f *opsFS) Rename(oldname, newname string) error {
	f.ops = append(f.ops, "rename "+oldname)
	return f.FS.Rename(oldname, newname)
}

func (f *opsFS) SyncDir() error {
	f.ops = append(f.ops, "syncdir")
	return f.FS.SyncDir()
}

func (f *opsFile) Write(p []byte) (int, error) {
	f.fs.ops = append(f.fs.ops, "write "+f.name)
	return f.File.Write(p)
}

func (f *opsFile) Sync() error {
	f.fs.ops = append(f.fs.ops, "sync "+f.name)
	return f.File.Sync()
}

// compactionWorkload fills a log until the next write compacts it: 150
// keys of 2 KiB (about 300 KiB live, so the rewrite takes two records),
// overwritten until the file passes four times that. With unsynced, the
// last three batches before the compacting write are not synced.
type compactionWorkload struct {
	unsynced bool
	pre      []shard.Mutation // the batches written before the compacting one
	last     []shard.Mutation // the compacting write, synced
}

func (w *compactionWorkload) batches() (batches [][]shard.Mutation) {
	for round := 0; ; round++ {
		for first := 0; first < 150; first += 10 {
			var b []shard.Mutation
			for k := first; k < first+10; k++ {
				b = append(b, shard.Mutation{Flow: fmt.Sprint("flow", k%7), Key: fmt.Sprint("key", k), Value: bytes.Repeat([]byte{byte(round)}, 2<<10)})
			}
			batches = append(batches, b)
			if len(batches) > 200 {
				return batches
			}
		}
	}
}

// build writes every batch before the compacting one and returns the log,
// the state it holds and the state that is synced.
func (w *compactionWorkload) build(t *testing.T, r *rig, fs recfile.FS, n int) (*shard.Log, model, model) {
	l, err := shard.OpenLog(fs, lname)
	require.NoError(t, err)
	var cur, synced model
	for i, b := range w.batches()[:n] {
		sync := !w.unsynced || i < n-3
		require.NoError(t, l.Write(b, sync))
		require.Zero(t, l.Stats().Compactions, "batch %d", i)
		cur = cur.with(b)
		if sync {
			synced = cur
		}
	}
	return l, cur, synced
}

// TestLogCrashAtEachStepOfCompaction cuts the power before each mutating
// step of the write that compacts, reopens from the disk, and asserts
// exactly what each cut may leave: before the directory sync that ends the
// compaction, the old file (its synced part, plus, with a tear, whole
// batches of the unsynced part); after it, the new file, which holds every
// batch before the compacting one, synced or not; the compacting batch
// itself only once its own sync has returned, or, with a tear, if its
// record reached the disk whole.
func TestLogCrashAtEachStepOfCompaction(t *testing.T) {
	for _, unsynced := range []bool{false, true} {
		t.Run(fmt.Sprintf("unsynced=%v", unsynced), func(t *testing.T) {
			w := &compactionWorkload{unsynced: unsynced}
			all := w.batches()

			// A run without a cut finds the compacting write and names
			// its steps.
			r := newRig(t, 1, 0)
			fs := &opsFS{FS: r.Disk()}
			l, err := shard.OpenLog(fs, lname)
			require.NoError(t, err)
			n := 0
			for ; l.Stats().Compactions == 0; n++ {
				fs.ops = nil
				require.NoError(t, l.Write(all[n], true))
			}
			n-- // all[n] compacted
			require.Equal(t, []string{
				"create " + lname + ".tmp",
				"write " + lname + ".tmp", // header
				"write " + lname + ".tmp", // the first 256 KiB of live keys
				"write " + lname + ".tmp", // the rest
				"sync " + lname + ".tmp",
				"rename " + lname + ".tmp",
				"syncdir",
				"write " + lname + ".tmp", // the batch, appended to the new file
				"sync " + lname + ".tmp",
			}, fs.ops)
			steps, syncdir := len(fs.ops), slices.Index(fs.ops, "syncdir")+1
			require.Less(t, l.Stats().Bytes, int64(600<<10), "the file shrank")

			for _, torn := range []float64{0, 1} {
				for cut := 1; cut <= steps+1; cut++ {
					for seed := range uint64(3) {
						r := newRig(t, seed, torn)
						l, pre, synced := w.build(t, r, r.Disk(), n)
						post := pre.with(all[n])
						if cut <= steps {
							r.Disk().CutPowerAfter(cut)
						}
						var err error
						crashed := r.Do(func() { err = l.Write(all[n], true) })
						require.Equal(t, cut <= steps, crashed, "cut %d", cut)
						if !crashed {
							require.NoError(t, err)
							r.Crash()
						}
						got := modelOf(t, r.open())
						msg := fmt.Sprintf("torn=%v cut before step %d of %v", torn, cut, fs.ops)
						require.Equal(t, []string{lname}, r.Names(), msg)
						switch {
						case cut <= syncdir && (torn == 0 || !unsynced):
							require.Equal(t, synced, got, msg)
						case cut <= syncdir:
							cands := []model{synced}
							for i := n - 3; i < n; i++ {
								cands = append(cands, cands[len(cands)-1].with(all[i]))
							}
							require.Contains(t, cands, got, msg)
						case cut < steps || (cut == steps && torn == 0):
							require.Equal(t, pre, got, msg)
						case cut == steps:
							require.Contains(t, []model{pre, post}, got, msg)
						default:
							require.Equal(t, post, got, msg)
						}
					}
				}
			}
		})
	}
}

func TestLogCompactionKeepsTheState(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	var m model
	for i := range 200 {
		b := []shard.Mutation{
			{Flow: "f", Key: fmt.Sprint(i % 5), Value: bytes.Repeat([]byte{byte(i)}, 1000)},
			del("f", fmt.Sprint((i+2)%5)),
			put("g", fmt.Sprint(i%3), ""),
		}
		require.NoError(t, l.Write(b, i%4 == 0))
		m = m.with(b)
	}
	st := l.Stats()
	require.Greater(t, st.Compactions, uint64(2))
	require.LessOrEqual(t, st.Bytes, int64(64<<10+4<<10), "the file stays near the threshold")
	require.Equal(t, m.muts(), scan(t, l))
	require.NoError(t, l.Close())
	require.Equal(t, []string{lname}, r.Names())
	require.Equal(t, m.muts(), scan(t, r.open()))
}

// A leftover sibling from a compaction that died is removed on open, and
// the log file alone is the truth.
func TestLogLeftoverTmpIsRemoved(t *testing.T) {
	r := newRig(t, 1, 0)
	l := r.open()
	require.NoError(t, l.Write([]shard.Mutation{put("f", "k", "v")}, true))
	f, err := r.Disk().Create(lname + ".tmp")
	require.NoError(t, err)
	_, err = f.Write([]byte("half a compaction"))
	require.NoError(t, err)
	require.NoError(t, r.Disk().SyncDir())
	r.Crash()
	require.Equal(t, []shard.Mutation{put("f", "k", "v")}, scan(t, r.open()))
	require.Equal(t, []string{lname}, r.Names())
}

// threeBatches writes three synced batches and returns the file and the
// state after each.
func threeBatches(t *testing.T) (file []byte, states []model) {
	r := newRig(t, 1, 0)
	l := r.open()
	states = []model{{}}
	for i, b := range [][]shard.Mutation{
		{put("f", "a", "1"), put("f", "b", "2")},
		{put("g", "c", "3"), del("f", "a"), put("f", "b", "")},
		{put("h", "d", "4")},
	} {
		require.NoError(t, l.Write(b, true))
		states = append(states, states[i].with(b))
	}
	return r.Raw(lname), states
}

// Damage before the tail (core/recfile's verdict, whose tests hold the
// table) stops the open, naming the offset, and leaves the file alone.
func TestLogCorruptRecordBeforeTheTailIsAnError(t *testing.T) {
	file, _ := threeBatches(t)
	ends := recordEnds(t, file)
	require.Len(t, ends, 3)
	for _, off := range []int{ends[0], ends[0] + 5, ends[0] + 13, ends[1] - 1} { // header, body
		for _, flip := range []byte{0x01, 0xff} {
			r := newRig(t, 1, 0)
			bad := bytes.Clone(file)
			bad[off] ^= flip
			r.Put(lname, bad)
			_, err := shard.OpenLog(r.Disk(), lname)
			require.ErrorIs(t, err, shard.ErrCorrupt, "byte %d ^ %#x", off, flip)
			require.ErrorContains(t, err, fmt.Sprintf("%s at offset %d", lname, ends[0]))
			require.Equal(t, bad, r.Raw(lname), "nothing was cut")
		}
	}
}

// Well-framed records the writer never writes are corruption too, even
// last: their checksums hold, so they are not torn.
func TestLogMalformedRecordIsCorrupt(t *testing.T) {
	file, _ := threeBatches(t)
	for name, body := range map[string][]byte{
		"count 0":          {0},
		"count too big":    {5, 1, 'f', 1, 'k', 1},
		"bad flag":         {1, 1, 'f', 1, 'k', 2},
		"trailing bytes":   {1, 1, 'f', 1, 'k', 1, 0},
		"key past the end": {1, 1, 'f', 9, 'k', 1},
		"value past end":   {1, 1, 'f', 1, 'k', 0, 3, 'v'},
		"no flag":          {1, 1, 'f', 1, 'k'},
		"empty body":       {},
	} {
		r := newRig(t, 1, 0)
		r.Put(lname, append(bytes.Clone(file), record(body)...))
		_, err := shard.OpenLog(r.Disk(), lname)
		require.ErrorIs(t, err, shard.ErrCorrupt, name)
		require.ErrorContains(t, err, fmt.Sprintf("offset %d", len(file)), name)
	}
}

// A crash can cut the last write at any byte: reopening gives exactly the
// batches before the cut one, and the file ends where they do, durably,
// so the next batch lands right after them.
func TestLogTornTailAtEveryOffset(t *testing.T) {
	file, states := threeBatches(t)
	ends := append([]int{8}, recordEnds(t, file)...)
	for cut := 0; cut <= len(file); cut++ {
		k := 0
		for k+1 < len(ends) && ends[k+1] <= cut {
			k++
		}
		r := newRig(t, 1, 1)
		r.Put(lname, file[:cut])
		l := r.open()
		require.Equal(t, states[k], modelOf(t, l), "cut at byte %d", cut)
		require.Equal(t, max(ends[k], 8), len(r.Raw(lname)), "cut at byte %d: file cut at the record boundary", cut)
		next := []shard.Mutation{put("z", "z", "after")}
		require.NoError(t, l.Write(next, true))
		r.Crash()
		require.Equal(t, states[k].with(next), modelOf(t, r.open()), "cut at byte %d: the next batch follows", cut)
	}
}

func TestLogFileHeaderIsChecked(t *testing.T) {
	file, _ := threeBatches(t)
	r := newRig(t, 1, 0)
	bad := bytes.Clone(file)
	copy(bad, "FLJRNL")
	r.Put(lname, bad)
	_, err := shard.OpenLog(r.Disk(), lname)
	require.ErrorIs(t, err, shard.ErrCorrupt)
	require.ErrorContains(t, err, "is not a FLSHRD file")

	bad = bytes.Clone(file)
	bad[6] = 2
	r.Put(lname, bad)
	_, err = shard.OpenLog(r.Disk(), lname)
	require.ErrorIs(t, err, recfile.ErrVersion)
	require.ErrorContains(t, err, "version 2")

	// Shorter than a header: the header is synced before the name, so
	// such a file never held a record.
	r.Put(lname, []byte("FLS"))
	require.Empty(t, scan(t, r.open()))
	require.Equal(t, file[:8], r.Raw(lname))
}

// FuzzLogReplay opens arbitrary bytes as a log file. OpenLog never panics;
// it fails (leaving the file alone), or it only cut the file and Scan
// works; a second open finds the same state and cuts nothing; a batch
// written then lands after what was kept. Allocations stay within a small
// multiple of the file, whatever lengths and counts the bytes declare.
func FuzzLogReplay(f *testing.F) {
	r := newRig(f, 1, 0)
	l := r.open()
	require.NoError(f, l.Write([]shard.Mutation{put("f", "a", "1"), put("f", "b", "")}, true))
	require.NoError(f, l.Write([]shard.Mutation{del("f", "a"), put("g", "", "2")}, true))
	file := r.Raw(lname)
	f.Add(file)
	f.Add(file[:len(file)-3])
	f.Add(append(bytes.Clone(file), make([]byte, 20)...))
	f.Add(append(bytes.Clone(file[:8]), record([]byte{0xff, 0xff, 0xff, 0x0f, 1, 'f', 1, 'k', 1})...))
	f.Add(file[:8])
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t, 1, 0)
		r.Put(lname, data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		l, err := shard.OpenLog(r.Disk(), lname)
		runtime.ReadMemStats(&after)
		require.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20+64*len(data)), "bytes allocated opening %d bytes", len(data))
		if err != nil {
			require.Equal(t, data, r.Raw(lname), "a file that fails is left alone")
			return
		}
		want := modelOf(t, l)
		kept := r.Raw(lname)
		if len(data) >= 8 {
			require.Equal(t, data[:len(kept)], kept, "replay only cuts")
		}
		next := []shard.Mutation{put("new", "k", "v"), del("f", "b")}
		require.NoError(t, l.Write(next, true))
		r.Crash()
		l = r.open()
		require.Equal(t, want.with(next), modelOf(t, l))
	})
}
