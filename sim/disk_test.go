package sim

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/halt"
	"github.com/fenceline/fenceline/core/recfile"
)

func read(t *testing.T, d *Disk, name string) []byte {
	t.Helper()
	f, err := d.Open(name)
	require.NoError(t, err)
	size, err := f.Size()
	require.NoError(t, err)
	buf := make([]byte, size)
	if size > 0 {
		_, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
	}
	return buf
}

func diskNode(cfg DiskConfig) (*Kernel, *Machine) {
	k := New(1)
	n := k.AddMachine("a", nil, nopNet{}, cfg)
	return k, n
}

func TestCrashKeepsSyncedAndLosesUnsynced(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 0
	_, n := diskNode(cfg)
	d := n.Disk()
	f, err := d.Create("log")
	require.NoError(t, err)
	require.NoError(t, d.SyncDir())
	_, _ = f.Write([]byte("synced|"))
	require.NoError(t, f.Sync())
	_, _ = f.Write([]byte("lost"))
	require.Equal(t, "synced|lost", string(read(t, d, "log")), "unsynced bytes are visible before a crash")
	d.crash()
	require.Equal(t, "synced|", string(read(t, d, "log")))
	_, err = f.Write([]byte("x"))
	require.ErrorIs(t, err, ErrStaleHandle)
}

func TestCrashMayTearTheUnsyncedTail(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 1
	lengths, zeros := map[int]bool{}, 0
	for seed := uint64(0); seed < 64; seed++ {
		k := New(seed)
		n := k.AddMachine("a", nil, nopNet{}, cfg)
		d := n.Disk()
		f, _ := d.Create("log")
		require.NoError(t, d.SyncDir())
		_, _ = f.Write([]byte("base"))
		require.NoError(t, f.Sync())
		_, _ = f.Write([]byte("0123456789"))
		d.crash()
		got := read(t, d, "log")
		require.Equal(t, "base", string(got[:4]), "synced bytes always survive")
		if tail := got[4:]; string(tail) != "0123456789"[:len(tail)] {
			require.Equal(t, make([]byte, 10), tail, "a tail that is not a prefix is the grown length reading as zeros (GrowBeforeData)")
			zeros++
		}
		lengths[len(got)] = true
	}
	require.Greater(t, len(lengths), 5, "tears should land at many offsets")
	require.Positive(t, zeros, "some tear keeps the length and loses the data")
}

func TestTruncateThenCrashRestoresSyncedContent(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 1
	_, n := diskNode(cfg)
	d := n.Disk()
	f, _ := d.Create("log")
	require.NoError(t, d.SyncDir())
	_, _ = f.Write([]byte("abcdef"))
	require.NoError(t, f.Sync())
	require.NoError(t, f.Truncate(2))
	_, _ = f.Write([]byte("XYZW")) // would overwrite the synced bytes if they shared an array
	d.crash()
	require.Equal(t, "abcdef", string(read(t, d, "log")), "an unsynced truncate is undone and tears nothing")
}

func TestNamesNeedSyncDir(t *testing.T) {
	_, n := diskNode(DefaultDiskConfig)
	d := n.Disk()
	old, _ := d.Create("journal")
	_, _ = old.Write([]byte("old"))
	require.NoError(t, old.Sync())
	require.NoError(t, d.SyncDir())

	// Compaction: write a sibling, sync it, rename over, but crash before
	// SyncDir: the old file must come back whole.
	tmp, _ := d.Create("journal.tmp")
	_, _ = tmp.Write([]byte("new"))
	require.NoError(t, tmp.Sync())
	require.NoError(t, d.Rename("journal.tmp", "journal"))
	require.Equal(t, "new", string(read(t, d, "journal")))
	d.crash()
	names, _ := d.List()
	require.Equal(t, []string{"journal"}, names)
	require.Equal(t, "old", string(read(t, d, "journal")))

	// The same with SyncDir: the rename survives.
	tmp, _ = d.Create("journal.tmp")
	_, _ = tmp.Write([]byte("new"))
	require.NoError(t, tmp.Sync())
	require.NoError(t, d.Rename("journal.tmp", "journal"))
	require.NoError(t, d.SyncDir())
	d.crash()
	require.Equal(t, "new", string(read(t, d, "journal")))

	_, err := d.Open("nope")
	require.ErrorIs(t, err, recfile.ErrNotExist)
	require.ErrorIs(t, d.Rename("nope", "x"), recfile.ErrNotExist)
	require.ErrorIs(t, d.Remove("nope"), recfile.ErrNotExist)
}

func TestDiskFullAtTheLimit(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.MaxBytes = 10
	_, n := diskNode(cfg)
	f, _ := n.Disk().Create("f")
	_, err := f.Write(make([]byte, 10))
	require.NoError(t, err)
	_, err = f.Write([]byte{1})
	require.ErrorIs(t, err, ErrNoSpace)
	size, _ := f.Size()
	require.Equal(t, int64(10), size, "a refused write changes nothing")
}

func TestReadAtPastTheEnd(t *testing.T) {
	_, n := diskNode(DefaultDiskConfig)
	f, _ := n.Disk().Create("f")
	_, _ = f.Write([]byte("abc"))
	buf := make([]byte, 5)
	got, err := f.ReadAt(buf, 1)
	require.Equal(t, 2, got)
	require.ErrorIs(t, err, io.EOF)
	_, err = f.ReadAt(buf, 3)
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, f.Close())
	require.ErrorIs(t, f.Close(), ErrClosed)
}

func TestSyncAsyncCompletesLaterOrNeverAfterACrash(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 0
	cfg.SyncLatencyMin, cfg.SyncLatencyMax = time.Millisecond, time.Millisecond
	k := New(1)
	n := idleNodeWithDisk(k, cfg)
	d := n.Disk()
	f, _ := d.Create("log")
	require.NoError(t, d.SyncDir())
	done := 0
	n.Exec(func() {
		_, _ = f.Write([]byte("a"))
		d.SyncAsync(f, func(err error) { require.NoError(t, err); done++ })
	})
	require.NoError(t, k.RunUntil(2*time.Millisecond))
	require.Equal(t, 1, done)

	n.Exec(func() {
		_, _ = f.Write([]byte("b"))
		d.SyncAsync(f, func(error) { done++ })
	})
	n.Crash()
	require.NoError(t, k.RunUntil(time.Second))
	require.Equal(t, 1, done, "a crash cancels a pending sync completion")
	require.Equal(t, "a", string(read(t, d, "log")))
}

func idleNodeWithDisk(k *Kernel, cfg DiskConfig) *Machine {
	n := k.AddMachine("a", func(*Env) dialHandler { return nopHandler{} }, nopNet{}, cfg)
	n.Start()
	return n
}

func TestPowerCutCrashesTheNodeMidCall(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 0
	k := New(1)
	n := idleNodeWithDisk(k, cfg)
	d := n.Disk()
	f, _ := d.Create("journal")
	require.NoError(t, d.SyncDir())
	_, _ = f.Write([]byte("old"))
	require.NoError(t, f.Sync())
	steps := 0
	d.CutPowerAfter(3) // the third mutating call below never happens
	ran := n.Exec(func() {
		tmp, _ := d.Create("journal.tmp") // 1
		steps++
		_, _ = tmp.Write([]byte("new")) // 2
		steps++
		_ = tmp.Sync() // 3: power goes here
		steps++
	})
	require.True(t, ran)
	require.Equal(t, 2, steps, "code after the cut must not run")
	require.False(t, n.Up(), "the node crashed")
	require.Equal(t, uint64(1), d.PowerCuts)
	names, _ := d.List()
	require.Equal(t, []string{"journal"}, names, "the unsynced create is gone")
	require.Equal(t, "old", string(read(t, d, "journal")))
	require.Panics(t, func() { d.CutPowerAfter(0) })
}

func TestOtherPanicsStillPanic(t *testing.T) {
	k := New(1)
	n := idleNodeWithDisk(k, DefaultDiskConfig)
	require.PanicsWithValue(t, "boom", func() { n.Exec(func() { panic("boom") }) })
}

func TestOnNodePanicCrashesTheNodeAndReports(t *testing.T) {
	k := New(1)
	n := idleNodeWithDisk(k, DefaultDiskConfig)
	var got any
	k.OnNodePanic(func(p *Machine, v any) { got = v })
	require.True(t, n.Exec(func() { panic("boom") }))
	require.Equal(t, "boom", got)
	require.False(t, n.Up())
}

// A crash may keep any subset of the unsynced tail's blocks: each kept
// block is whole, a lost one before the last kept one reads as zeros, and
// the synced bytes always survive.
func TestCrashTearsBlockByBlock(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 1
	const bs = recfile.BlockSize
	holes := 0
	for seed := uint64(0); seed < 64; seed++ {
		k := New(seed)
		n := k.AddMachine("a", nil, nopNet{}, cfg)
		d := n.Disk()
		f, _ := d.Create("log")
		require.NoError(t, d.SyncDir())
		_, _ = f.Write(make([]byte, 100))
		require.NoError(t, f.Sync())
		tail := make([]byte, 5*bs)
		for i := range tail {
			tail[i] = byte(1 + (100+i)/bs) // the block number, never zero
		}
		_, _ = f.Write(tail)
		d.crash()
		got := read(t, d, "log")
		require.GreaterOrEqual(t, len(got), 100, "synced bytes survive")
		sawZero := false
		for b := 0; b*bs < len(got); b++ {
			from, to := max(b*bs, 100), min((b+1)*bs, len(got))
			if from >= to {
				continue
			}
			block := got[from:to]
			if block[0] == 0 {
				require.Equal(t, make([]byte, len(block)), block, "a lost block reads as zeros")
				sawZero = true
				continue
			}
			require.Equal(t, tail[from-100:to-100], block, "a kept block is whole")
			if sawZero {
				holes++
			}
		}
	}
	require.Positive(t, holes, "some crash must keep a block after losing one")
}

// A failed fsync drops what it covered, and the kernel hears of a node
// that carries on after one; a node that halts is crashed, as fail-stop
// asks.
func TestFailedSyncAndFailStop(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.SyncFailProb = 1
	k := New(1)
	var carried, halted []string
	k.OnCarriedOn(func(n *Machine) { carried = append(carried, n.Name()) })
	k.OnHalt(func(n *Machine, err error) { halted = append(halted, n.Name()+": "+err.Error()) })
	a := idleNodeCfg(k, "a", cfg)
	b := idleNodeCfg(k, "b", cfg)

	var f recfile.File
	a.Exec(func() {
		f, _ = a.Disk().Create("log")
		_, _ = f.Write([]byte("lost"))
		require.ErrorIs(t, f.Sync(), ErrIO)
	})
	require.Equal(t, []string{"a"}, carried, "a went on after its fsync failed")
	require.Empty(t, read(t, a.Disk(), "log"), "the failed fsync dropped the bytes")

	b.Exec(func() {
		g, _ := b.Disk().Create("log")
		if err := g.Sync(); err != nil {
			halt.Stop(err)
		}
	})
	require.False(t, b.Up(), "a node that halts is down")
	require.Len(t, halted, 1)
	require.Contains(t, halted[0], "b: ")
	require.Equal(t, []string{"a"}, carried, "b stopped: nothing to report")
}

// tenMsDisk is a node whose every fsync takes 10ms, with a file open.
func tenMsDisk(t *testing.T) (*Kernel, *Machine, recfile.File) {
	cfg := DefaultDiskConfig
	cfg.SyncLatencyMin, cfg.SyncLatencyMax = 10*time.Millisecond, 10*time.Millisecond
	k := New(1)
	n := idleNodeWithDisk(k, cfg)
	f, err := n.Disk().Create("log")
	require.NoError(t, err)
	return k, n, f
}

func TestAnFsyncKeepsTheNodeBusy(t *testing.T) {
	k, n, f := tenMsDisk(t)

	var readBefore, readAfter, nextRan, timerRan, afterRan time.Duration
	var mono time.Duration
	k.At(time.Second, EvClient, 0, func() {
		n.Exec(func() {
			readBefore = k.Now()
			_, _ = f.Write([]byte("x"))
			require.NoError(t, f.Sync())
			require.NoError(t, n.Disk().SyncDir())
			readAfter = k.Now()
			mono = n.Clock().Mono()
			n.Clock().AfterFunc(5*time.Millisecond, func() { timerRan = k.Now() })
			k.After(time.Millisecond, EvClient, 0, func() { afterRan = k.Now() })
		})
	})
	// An event that comes for the node while it is in the fsyncs waits.
	k.At(time.Second+5*time.Millisecond, EvClient, 0, func() {
		n.Exec(func() { nextRan = k.Now() })
	})
	// A clock step that comes meanwhile lands once the step is done.
	k.At(time.Second+6*time.Millisecond, EvFault, 0, func() { n.Clock().Step(-time.Second) })
	require.NoError(t, k.RunUntil(2*time.Second))

	require.Equal(t, time.Second, readBefore)
	require.Equal(t, time.Second+20*time.Millisecond, readAfter, "two fsyncs of 10ms each")
	require.Equal(t, time.Second+20*time.Millisecond, nextRan, "the next call waits for the fsyncs")
	require.Equal(t, time.Second+25*time.Millisecond, timerRan, "timers run from the node's own time")
	require.Equal(t, time.Second+21*time.Millisecond, afterRan)
	require.Equal(t, time.Second+20*time.Millisecond, mono, "the monotonic reading counts the fsyncs")
	require.Equal(t, time.Duration(0), n.Clock().OffsetAt(time.Second+19*time.Millisecond), "the step lands after the busy step")
	require.Equal(t, -time.Second, n.Clock().OffsetAt(time.Second+20*time.Millisecond))
	require.Equal(t, 2*time.Second, n.Local(), "idle again: local time is true time")
	// A crash that comes while the node is busy lands after the step.
	k.At(3*time.Second, EvClient, 0, func() { n.Exec(func() { require.NoError(t, f.Sync()) }) })
	k.At(3*time.Second+time.Millisecond, EvFault, 0, func() { n.Crash() })
	require.NoError(t, k.RunUntil(4*time.Second))
	stops := n.Stops()
	require.Len(t, stops, 1)
	require.Equal(t, 3*time.Second+10*time.Millisecond, stops[0].From)
	require.False(t, stops[0].Orderly)
}

// A stalled disk completes nothing it is handed until the stall ends:
// background work and asynchronous fsyncs complete a latency after its
// end, and an fsync on the loop keeps the node busy until then. Work
// handed to the disk before the stall is not held. A crash does not end
// a stall.
func TestAStalledDiskCompletesNothingUntilItsEnd(t *testing.T) {
	k, n, f := tenMsDisk(t)

	var before, during, async, afterCrash, synced time.Duration
	k.At(time.Second, EvClient, 0, func() {
		n.Exec(func() {
			n.Disk().Go(func() error { return nil }, func(error) { before = k.Now() })
			n.Disk().Stall(500 * time.Millisecond)
			n.Disk().Go(func() error { return nil }, func(error) { during = k.Now() })
			n.Disk().SyncAsync(f, func(error) { async = k.Now() })
		})
	})
	k.At(time.Second+100*time.Millisecond, EvClient, 0, func() {
		n.Exec(func() {
			_, _ = f.Write([]byte("x"))
			require.NoError(t, f.Sync())
			synced = k.Now()
		})
	})
	k.At(time.Second+700*time.Millisecond, EvFault, 0, func() {
		n.Disk().Stall(500 * time.Millisecond)
		n.Crash()
	})
	k.At(time.Second+800*time.Millisecond, EvFault, 0, func() {
		n.Start()
		n.Exec(func() { n.Disk().Go(func() error { return nil }, func(error) { afterCrash = k.Now() }) })
	})
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Equal(t, time.Second+10*time.Millisecond, before, "handed over before the stall")
	require.Equal(t, time.Second+510*time.Millisecond, during)
	require.GreaterOrEqual(t, async, time.Second+510*time.Millisecond, "an asynchronous fsync completes a latency after the stall")
	require.Less(t, async, time.Second+600*time.Millisecond)
	require.Equal(t, time.Second+510*time.Millisecond, synced, "an fsync on the loop waits out the stall")
	require.Equal(t, time.Second+1210*time.Millisecond, afterCrash, "the restart does not end the stall")
}

// closingHandler's Close syncs a file: an orderly shutdown that waits for
// its disk.
type closingHandler struct {
	nopHandler
	f recfile.File
}

func (h closingHandler) Close() error {
	_, _ = h.f.Write([]byte("last"))
	return h.f.Sync()
}

// An orderly shutdown is a stop from the instant it was called, though
// its Close keeps the node busy on its disk: from then the node takes
// nothing new. The record forgives no loss at it.
func TestAShutdownStopsTheNodeWhereItIsCalled(t *testing.T) {
	cfg := DefaultDiskConfig
	cfg.SyncLatencyMin, cfg.SyncLatencyMax = 10*time.Millisecond, 10*time.Millisecond
	k := New(1)
	n := k.AddMachine("a", func(env *Env) dialHandler {
		f, err := env.Disk.Create("log")
		require.NoError(t, err)
		return closingHandler{f: f}
	}, nopNet{}, cfg)
	n.Start()
	k.At(time.Second, EvFault, 0, func() { n.Shutdown() })
	require.NoError(t, k.RunUntil(2*time.Second))
	stops := n.Stops()
	require.Len(t, stops, 1)
	require.Equal(t, Stop{From: time.Second, To: 2 * time.Second, Orderly: true}, stops[0])
	crashed, at := n.CrashedDuring(time.Second+5*time.Millisecond, time.Second+5*time.Millisecond)
	require.True(t, crashed, "inside its Close, the node is stopping")
	require.Equal(t, time.Second+5*time.Millisecond, at)
	lost, _ := n.LostUnsyncedDuring(0, 2*time.Second)
	require.False(t, lost, "an orderly stop loses nothing synced")
}

// A tear by blocks ends the file at its last kept block, unless the file
// system logged the grown length first (GrowBeforeData): then the file
// keeps the length it was written to, its lost blocks at the end zeros.
func TestGrowBeforeDataKeepsTheLengthWithZeros(t *testing.T) {
	const bs = recfile.BlockSize
	zeroEnds := map[float64]int{}
	for _, grow := range []float64{0, 1} {
		cfg := DefaultDiskConfig
		cfg.TornWriteProb, cfg.GrowBeforeData = 1, grow
		for seed := uint64(0); seed < 64; seed++ {
			k := New(seed)
			n := k.AddMachine("a", nil, nopNet{}, cfg)
			d := n.Disk()
			f, _ := d.Create("log")
			require.NoError(t, d.SyncDir())
			require.NoError(t, f.Sync())
			tail := make([]byte, 3*bs)
			for i := range tail {
				tail[i] = 1
			}
			_, _ = f.Write(tail)
			d.crash()
			got := read(t, d, "log")
			if len(got) > 0 && got[len(got)-1] == 0 {
				require.Len(t, got, 3*bs, "a file ending in zeros kept its grown length")
				zeroEnds[grow]++
			}
		}
	}
	require.Zero(t, zeroEnds[0], "without GrowBeforeData a torn file ends at its last kept byte")
	require.Positive(t, zeroEnds[1], "with it, some tear keeps the length and loses the last block")
}

// A node that cuts a file below what a completed fsync made durable is
// reported as misuse; a cut of unsynced bytes (a torn tail) is not.
func TestASyncedCutIsMisuse(t *testing.T) {
	k, n := diskNode(DefaultDiskConfig)
	var got []string
	k.OnDiskMisuse(func(m *Machine, checker, what string) { got = append(got, checker+": "+what) })
	d := n.Disk()
	f, _ := d.Create("log")
	_, _ = f.Write([]byte("synced"))
	require.NoError(t, f.Sync())
	_, _ = f.Write([]byte("torn"))
	require.NoError(t, f.Truncate(6))
	require.Empty(t, got, "cutting what no fsync covered is a torn tail's cut")
	require.NoError(t, f.Truncate(5))
	require.Len(t, got, 1)
	require.Contains(t, got[0], "synced-cut: a cut log to 5 bytes, below the 6")
	require.NoError(t, f.Truncate(4))
	require.Len(t, got, 2, "every further cut below the durable bytes is reported")
}

// CutAtStraddle cuts the power at the first write whose unsynced bytes
// span a block boundary, and the crash loses the first block and keeps
// the last: a hole under the record that straddled.
func TestCutAtStraddleLeavesAHole(t *testing.T) {
	const bs = recfile.BlockSize
	cfg := DefaultDiskConfig
	cfg.TornWriteProb = 0
	k := New(1)
	n := idleNodeWithDisk(k, cfg)
	d := n.Disk()
	f, _ := d.Create("log")
	require.NoError(t, d.SyncDir())
	synced := make([]byte, bs-100)
	for i := range synced {
		synced[i] = 's'
	}
	_, _ = f.Write(synced)
	require.NoError(t, f.Sync())
	d.CutAtStraddle()
	require.True(t, d.PowerCutArmed())
	steps := 0
	n.Exec(func() {
		_, _ = f.Write(make([]byte, 50)) // within the block: no cut
		steps++
		rec := make([]byte, 200)
		for i := range rec {
			rec[i] = 'r'
		}
		_, _ = f.Write(rec) // across the boundary: the cut is armed
		steps++
		_ = f.Sync() // power goes here
		steps++
	})
	require.Equal(t, 2, steps, "the power went at the sync after the straddling write")
	require.False(t, n.Up())
	require.False(t, d.PowerCutArmed())
	got := read(t, d, "log")
	require.Equal(t, synced, got[:bs-100], "synced bytes survive")
	require.Equal(t, make([]byte, 100), got[bs-100:bs], "the first unsynced block is lost: zeros")
	require.Len(t, got, bs+150, "the last block is kept")
	for _, c := range got[bs:] {
		require.Equal(t, byte('r'), c)
	}
}

// recordFile writes a record file of n records to d under name, synced.
func recordFile(t *testing.T, d *Disk, name string, n int) {
	t.Helper()
	f, err := d.Create(name)
	require.NoError(t, err)
	buf := recfile.Format{Magic: "TESTRF", Version: 1}.AppendHeader(nil)
	for i := range n {
		var start int
		buf, start = recfile.Begin(buf)
		buf = append(buf, byte('a'+i), 1, 2, 3)
		buf = recfile.End(buf, start)
	}
	_, err = f.Write(buf)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, d.SyncDir())
}

// scanAll reads every record of name, as a node's boot replays it.
func scanAll(d *Disk, name string) (int, error) {
	f, err := d.Open(name)
	if err != nil {
		return 0, err
	}
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	sc := recfile.NewScanner(f, name, 8, size, 1<<10)
	records := 0
	for {
		body, err := sc.Next()
		if err != nil || body == nil {
			return records, err
		}
		records++
	}
}

// FaultBoots damages a header of a named file at a restart (never the
// first boot), for that boot only; a boot that read the damage and came
// up is misuse, one that refused it is not.
func TestFaultBootsDamagesAHeaderForOneBoot(t *testing.T) {
	k := New(1)
	var misuse []string
	k.OnDiskMisuse(func(m *Machine, checker, what string) { misuse = append(misuse, checker) })
	refuse := true
	var results []error
	n := k.AddMachine("a", func(env *Env) dialHandler {
		_, err := scanAll(env.Disk, "log")
		results = append(results, err)
		if err != nil && refuse {
			halt.Stop(err)
		}
		return nopHandler{}
	}, nopNet{}, DefaultDiskConfig)
	n.Disk().FaultBoots(1, 0, "log")
	recordFile(t, n.Disk(), "log", 3)
	n.Start()
	require.NoError(t, results[0], "the first boot is never faulted")
	n.Crash()

	refusedDamage := func(err error) bool {
		// the damage itself, or half the time a failed read just after it
		return errors.Is(err, recfile.ErrCorrupt) || errors.Is(err, ErrIO)
	}
	n.Start()
	require.True(t, refusedDamage(results[1]), "the restart read a damaged header: %v", results[1])
	require.False(t, n.Up(), "it refused, and halted")
	require.Empty(t, misuse, "refusing damage is what the promise asks")
	damaged, _ := n.Disk().BootFaults()
	require.Equal(t, uint64(1), damaged)

	refuse = false
	n.Start()
	require.True(t, refusedDamage(results[2]), "%v", results[2])
	require.True(t, n.Up())
	require.Equal(t, []string{"damaged-boot"}, misuse, "coming up over damage is misuse")
	require.NoError(t, func() error { _, err := scanAll(n.Disk(), "log"); return err }(), "the damage lasted the boot only")

	// Half the time, one of the two reads after the damaged one fails too:
	// the reads that tell damage from a tear.
	refuse = true
	kinds := map[bool]int{}
	for range 16 {
		n.Crash()
		n.Start()
		err := results[len(results)-1]
		require.True(t, refusedDamage(err), "%v", err)
		kinds[errors.Is(err, ErrIO)]++
	}
	require.Positive(t, kinds[true], "a read after the damage failed")
	require.Positive(t, kinds[false], "the damage alone was refused")
}

// FaultBoots can fail one of a restart's first reads with ErrIO instead.
func TestFaultBootsFailsARead(t *testing.T) {
	k := New(1)
	var results []error
	n := k.AddMachine("a", func(env *Env) dialHandler {
		_, err := scanAll(env.Disk, "log")
		results = append(results, err)
		return nopHandler{}
	}, nopNet{}, DefaultDiskConfig)
	n.Disk().FaultBoots(0, 1)
	recordFile(t, n.Disk(), "log", 40)
	failed := 0
	for range 20 {
		n.Start()
		n.Crash()
		if errors.Is(results[len(results)-1], ErrIO) {
			failed++
		}
	}
	require.NoError(t, results[0], "the first boot is never faulted")
	_, reads := n.Disk().BootFaults()
	require.Equal(t, uint64(failed), reads)
	require.Positive(t, failed, "a restart's read fails when one of its first eight does")
}
