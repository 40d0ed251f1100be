package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/fenceline/fenceline/core/recfile"
)

// DiskConfig is the fault model of one node's disk.
type DiskConfig struct {
	// TornWriteProb is the chance that a crash keeps some of a file's
	// unsynced bytes instead of none of them: half the time a prefix
	// (possibly ending mid-write), half the time a random subset of its
	// recfile.BlockSize blocks, the lost ones reading as zeros where the
	// file grew past them, as a file system that writes blocks back out
	// of order leaves it. A reader that trusts length prefixes without
	// checksums fails here.
	TornWriteProb float64
	// SyncFailProb is the chance that an fsync fails. A failed fsync
	// drops what it was to make durable (the file reads as of its last
	// good Sync), as a kernel may after an I/O error: a node that sees one
	// must stop (core/halt), never retry and carry on.
	SyncFailProb float64
	// WriteFailProb is the chance that a write fails with an I/O error,
	// writing nothing.
	WriteFailProb float64
	// FaultsUntil, when not zero, is when fsync and write failures stop:
	// a scenario's calm phase has none.
	FaultsUntil time.Duration
	// SyncLatencyMin and SyncLatencyMax bound how long an fsync takes,
	// in virtual time: a Sync keeps the node busy that long (the events
	// that come for it meanwhile wait, see Machine.busyUntil); a SyncAsync
	// completes that long after it was asked for.
	SyncLatencyMin, SyncLatencyMax time.Duration
	// MaxBytes bounds the total size of the node's files; a write past it
	// fails with ErrNoSpace.
	MaxBytes int64
}

// DefaultDiskConfig is a fast disk that tears one crash in four.
var DefaultDiskConfig = DiskConfig{
	TornWriteProb:  0.25,
	SyncLatencyMin: 200 * time.Microsecond,
	SyncLatencyMax: 5 * time.Millisecond,
	MaxBytes:       256 << 20,
}

// Disk errors.
var (
	ErrNoSpace = errors.New("sim: disk full")
	// ErrIO is an injected I/O error (DiskConfig.SyncFailProb,
	// WriteFailProb).
	ErrIO = errors.New("sim: I/O error")
	// ErrStaleHandle is returned by a file opened before a crash. Nothing
	// should see it: a crashed node's code never runs again.
	ErrStaleHandle = errors.New("sim: file handle from before a crash")
	ErrClosed      = errors.New("sim: file closed")
)

// Disk is one node's simulated disk: a flat directory of in-memory files
// with fsync semantics. It implements recfile.FS.
//
// The model, stated so the design can claim exactly what it survives:
//   - Write, Truncate, Create, Rename and Remove are visible at once.
//   - File bytes survive a crash only once a Sync covering them returned.
//     A crash keeps every synced byte; of the unsynced bytes past the
//     synced length it keeps none, or, with TornWriteProb, a prefix of any
//     length (a torn write).
//   - Names survive a crash only once SyncDir returned: a crash restores
//     the directory as of the last SyncDir, so a created-but-unlisted file
//     is gone and an unsynced rename is undone.
//   - A restarted node gets the disk as the crash left it.
type Disk struct {
	n       *Machine
	cfg     DiskConfig
	rng     *rand.Rand
	dir     map[string]*inode // the names as the running node sees them
	durable map[string]*inode // the names as of the last SyncDir
	gen     uint64            // bumped by every crash; older handles are stale

	// cutAfter counts down mutating operations to a power cut; 0: none.
	cutAfter int
	// failAfter counts down writes and fsyncs to an I/O error; 0: none.
	failAfter int
	// failedIO is the incarnation of the node that saw a failed fsync or
	// write, 0 if none: the kernel holds that incarnation to stopping
	// (after a failed write, what the disk holds is not what the node
	// wrote, as after a failed fsync).
	failedIO uint64

	// The work a node runs beside its loop (Go), oldest first; when the
	// last of it completes; whether the disk is running one now (its
	// fsyncs then keep the disk busy, not the node).
	bg         []*bgWork
	bgFree     time.Duration
	background bool
	// stallUntil: until then (in the kernel's time) the disk completes
	// nothing (Stall); stalls, every stall's span, for the checkers.
	stallUntil time.Duration
	stalls     []span

	// Counters, for checkers and the benchmark.
	Syncs, Writes, Torn, Holes, PowerCuts, SyncFailures, WriteFailures uint64
	// BackgroundWork counts the work Go completed.
	BackgroundWork uint64
	// renamedTo counts the renames onto each name, crashes or not: a
	// file's rewrites (a raft journal's compactions), as the disk saw
	// them.
	renamedTo map[string]int
}

// Renamed is how many renames have replaced name, over every incarnation.
func (d *Disk) Renamed(name string) int { return d.renamedTo[name] }

type bgWork struct {
	work func() error
	done func(error)
	h    Handle
}

// powerCut is the panic value a disk raises to crash its node mid-call;
// the kernel recovers it (Kernel.call) and crashes the node.
type powerCut struct{}

// CutPowerAfter arranges for the node to lose power just before its n-th
// next mutating disk operation (write, truncate, sync, create, rename,
// remove, sync of the directory), n >= 1: that operation and everything
// after it never happen, and the node crashes on the spot. This is how a
// scenario crashes a node between any two steps of a multi-step update,
// such as a journal compaction, which no crash between events can reach.
func (d *Disk) CutPowerAfter(n int) {
	if n < 1 {
		panic("sim: CutPowerAfter needs n >= 1")
	}
	d.cutAfter = n
}

// FailAfter makes the node's n-th next write or fsync fail with ErrIO,
// as WriteFailProb and SyncFailProb fail them, but aimed: a scenario arms
// it at a drawn moment and count, so a failure lands on whatever the node
// does then — its boot, a journal compaction, a snapshot — not only
// where writes are many. It does nothing once FaultsUntil has passed.
func (d *Disk) FailAfter(n int) {
	if n < 1 {
		panic("sim: FailAfter needs n >= 1")
	}
	d.failAfter = n
}

// aimedFailure counts a write or fsync down to an armed FailAfter.
func (d *Disk) aimedFailure() bool {
	if d.failAfter == 0 {
		return false
	}
	d.failAfter--
	return d.failAfter == 0 && d.faulty()
}

// CancelPowerCut disarms a pending CutPowerAfter.
func (d *Disk) CancelPowerCut() { d.cutAfter = 0 }

// PowerCutArmed reports whether a CutPowerAfter is pending.
func (d *Disk) PowerCutArmed() bool { return d.cutAfter > 0 }

// mutate is called before every mutating operation.
func (d *Disk) mutate() {
	if d.cutAfter == 0 {
		return
	}
	d.cutAfter--
	if d.cutAfter == 0 {
		d.PowerCuts++
		panic(powerCut{})
	}
}

var _ recfile.FS = (*Disk)(nil)

type inode struct {
	data []byte
	// synced is the durable content. While the file has only grown since
	// the last Sync, it shares data's backing array (a prefix of it);
	// Truncate gives data a fresh array, so synced is never overwritten.
	synced []byte
	// grown is true while data is synced plus appended bytes, i.e. no
	// Truncate since the last Sync. Only then can a crash tear a write.
	grown bool
}

func newDisk(n *Machine, cfg DiskConfig, rng *rand.Rand) *Disk {
	return &Disk{n: n, cfg: cfg, rng: rng, dir: map[string]*inode{}, durable: map[string]*inode{}}
}

func (d *Disk) used() int64 {
	var total int64
	for _, ino := range d.dir { //fenceline:unordered summing sizes; order does not reach any output
		total += int64(len(ino.data))
	}
	return total
}

// Create makes an empty file, replacing any file of that name.
func (d *Disk) Create(name string) (recfile.File, error) {
	d.mutate()
	ino := &inode{grown: true}
	d.dir[name] = ino
	return &simFile{d: d, ino: ino, gen: d.gen, name: name}, nil
}

// Open opens an existing file.
func (d *Disk) Open(name string) (recfile.File, error) {
	ino, ok := d.dir[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", recfile.ErrNotExist, name)
	}
	return &simFile{d: d, ino: ino, gen: d.gen, name: name}, nil
}

// Rename replaces newname with oldname.
func (d *Disk) Rename(oldname, newname string) error {
	d.mutate()
	ino, ok := d.dir[oldname]
	if !ok {
		return fmt.Errorf("%w: %s", recfile.ErrNotExist, oldname)
	}
	delete(d.dir, oldname)
	d.dir[newname] = ino
	if d.renamedTo == nil {
		d.renamedTo = map[string]int{}
	}
	d.renamedTo[newname]++
	return nil
}

// Remove deletes name.
func (d *Disk) Remove(name string) error {
	d.mutate()
	if _, ok := d.dir[name]; !ok {
		return fmt.Errorf("%w: %s", recfile.ErrNotExist, name)
	}
	delete(d.dir, name)
	return nil
}

// List returns the names, sorted.
func (d *Disk) List() ([]string, error) {
	names := make([]string, 0, len(d.dir))
	for name := range d.dir {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir makes the current names durable.
func (d *Disk) SyncDir() error {
	d.mutate()
	d.wait()
	d.durable = make(map[string]*inode, len(d.dir))
	for name, ino := range d.dir { //fenceline:unordered copying a map into a map
		d.durable[name] = ino
	}
	return nil
}

// Stall makes the disk answer nothing for dur from now, as a volume that
// stops answering for a while does (a cloud disk re-attaching, a
// controller resetting, a device busy with its own garbage collection):
// the background work and asynchronous fsyncs the node hands it from now
// on complete no sooner than the stall's end plus their usual latency,
// and an fsync on the node's loop blocks the node until then. Work handed
// over before the stall completes as it was scheduled (the simulator
// does not hold what is already in flight). Writes still land in the
// page cache at once. A crash does not end a stall.
func (d *Disk) Stall(dur time.Duration) {
	d.stallUntil = max(d.stallUntil, d.n.k.now+dur)
	d.stalls = append(d.stalls, span{d.n.k.now, d.n.k.now + dur})
}

// StalledDuring reports whether the disk was stalled at any instant of
// [from, to], by the simulator's record.
func (d *Disk) StalledDuring(from, to time.Duration) bool { return overlaps(d.stalls, from, to) }

// StallSpans returns every stall's span, in the order they began: the
// simulator's record, for checkers that allow a stalled disk its delay.
func (d *Disk) StallSpans() (from, to []time.Duration) { return spansOf(d.stalls) }

func spansOf(spans []span) (from, to []time.Duration) {
	for _, s := range spans {
		from, to = append(from, s.from), append(to, s.to)
	}
	return from, to
}

// span is an interval of the kernel's time.
type span struct{ from, to time.Duration }

// overlaps reports whether any of spans meets [from, to].
func overlaps(spans []span, from, to time.Duration) bool {
	for _, s := range spans {
		if s.from <= to && from <= s.to {
			return true
		}
	}
	return false
}

// ready is when an operation asked for now may start: now, or the end of
// a stall.
func (d *Disk) ready() time.Duration { return max(d.n.Local(), d.stallUntil) }

// SyncAsync syncs f in the background: done runs on the node, as a disk
// completion event, after the disk's sync latency. What was written before
// the call is durable when done runs; a crash before then loses it, and
// done never runs. This is how a node models an fsync it does not block on.
func (d *Disk) SyncAsync(f recfile.File, done func(error)) {
	lat := Between(d.rng, d.cfg.SyncLatencyMin, d.cfg.SyncLatencyMax)
	sf, _ := f.(*simFile)
	var digest uint64
	if sf != nil {
		digest = uint64(len(sf.ino.data))
	}
	d.n.k.atNode(d.ready()+lat, EvDisk, d.n, digest, func() { done(f.Sync()) })
}

// Go runs work as the disk's background work (shard.Worker): it
// completes, and done runs on the node as a disk completion event, a
// latency the seed draws after the later of now and the completion of the
// work handed before it (one queue, in order). Meanwhile the node takes
// its other events; the work's fsyncs keep the disk busy, not the node. A
// crash before the completion loses the work whole: it never ran, and
// done never runs.
func (d *Disk) Go(work func() error, done func(error)) {
	lat := Between(d.rng, d.cfg.SyncLatencyMin, d.cfg.SyncLatencyMax)
	at := max(d.ready(), d.bgFree) + lat
	d.bgFree = at
	w := &bgWork{work: work, done: done}
	d.bg = append(d.bg, w)
	d.BackgroundWork++
	w.h = d.n.k.atNode(at, EvDisk, d.n, d.BackgroundWork, func() { d.complete(w, true) })
}

// Settle runs every background work now, in order, on the node: an
// orderly shutdown waits for its disk.
func (d *Disk) Settle() {
	for len(d.bg) > 0 {
		w := d.bg[0]
		w.h.Cancel()
		d.complete(w, false)
	}
}

// complete runs the oldest background work and its done.
func (d *Disk) complete(w *bgWork, background bool) {
	if len(d.bg) == 0 || d.bg[0] != w {
		panic("sim: background disk work completed out of order")
	}
	d.bg = d.bg[1:]
	d.background = background
	err := w.work()
	d.background = false
	w.done(err)
}

// wait spends one fsync's latency of the node's time, if the node is the
// one running: the process blocks in the fsync, and whatever it does next
// (frames, timers, answers, its next event) comes after it.
func (d *Disk) wait() {
	if d.n.k.cur != d.n || d.background || d.cfg.SyncLatencyMax == 0 && d.stallUntil <= d.n.Local() {
		return
	}
	d.n.busyUntil = d.ready() + Between(d.rng, d.cfg.SyncLatencyMin, d.cfg.SyncLatencyMax)
}

// crash applies the fault model: names back to the last SyncDir, each
// file's bytes back to its synced content, perhaps plus a torn prefix of
// what was not synced.
func (d *Disk) crash() {
	d.gen++
	d.cutAfter = 0
	d.bg, d.bgFree, d.background = nil, 0, false
	names := make([]string, 0, len(d.durable))
	for name := range d.durable {
		names = append(names, name)
	}
	sort.Strings(names) // the tear draws must not follow map order
	seen := map[*inode]bool{}
	for _, name := range names {
		ino := d.durable[name]
		if seen[ino] {
			continue
		}
		seen[ino] = true
		kept := ino.synced
		if ino.grown && len(ino.data) > len(ino.synced) && Chance(d.rng, d.cfg.TornWriteProb) {
			if d.rng.IntN(2) == 0 {
				extra := d.rng.IntN(len(ino.data) - len(ino.synced) + 1)
				kept = ino.data[:len(ino.synced)+extra]
				if extra > 0 {
					d.Torn++
				}
			} else {
				kept = d.keepBlocks(ino)
			}
		}
		ino.data = append([]byte(nil), kept...)
		ino.synced = ino.data[:len(ino.data):len(ino.data)]
		ino.grown = true
	}
	d.dir = make(map[string]*inode, len(d.durable))
	for _, name := range names {
		d.dir[name] = d.durable[name]
	}
}

// faulty reports whether the disk still injects I/O errors.
func (d *Disk) faulty() bool { return d.cfg.FaultsUntil == 0 || d.n.k.now < d.cfg.FaultsUntil }

// keepBlocks tears a file's unsynced bytes block by block: each block the
// unsynced bytes touch survives whole or not at all, with one chance per
// crash; the file ends where the last surviving block ends, and a lost
// block before that reads as zeros (the synced bytes it shares with the
// synced part survive).
func (d *Disk) keepBlocks(ino *inode) []byte {
	const bs = recfile.BlockSize
	s, e := len(ino.synced), len(ino.data)
	keep := 0.1 + 0.8*d.rng.Float64()
	out := append([]byte(nil), ino.synced...)
	lost := false
	for b := s / bs * bs; b < e; b += bs {
		from, to := max(b, s), min(b+bs, e)
		if !Chance(d.rng, keep) {
			lost = true
			continue
		}
		if len(out) < from {
			out = append(out, make([]byte, from-len(out))...) // the holes before this block
			d.Holes++
		}
		out = append(out, ino.data[from:to]...)
		d.Torn++
	}
	_ = lost
	return out
}

type simFile struct {
	d      *Disk
	ino    *inode
	gen    uint64
	name   string
	closed bool
}

func (f *simFile) check() error {
	if f.closed {
		return ErrClosed
	}
	if f.gen != f.d.gen {
		return ErrStaleHandle
	}
	return nil
}

func (f *simFile) Write(p []byte) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	f.d.mutate()
	if f.d.cfg.MaxBytes > 0 && f.d.used()+int64(len(p)) > f.d.cfg.MaxBytes {
		return 0, fmt.Errorf("%w: writing %d bytes to %s", ErrNoSpace, len(p), f.name)
	}
	if f.d.aimedFailure() || f.d.cfg.WriteFailProb > 0 && f.d.faulty() && Chance(f.d.rng, f.d.cfg.WriteFailProb) {
		f.d.WriteFailures++
		f.d.failedIO = f.d.n.inc
		return 0, fmt.Errorf("%w: writing %d bytes to %s", ErrIO, len(p), f.name)
	}
	f.d.Writes++
	f.ino.data = append(f.ino.data, p...)
	return len(p), nil
}

func (f *simFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("sim: negative offset %d", off)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *simFile) Size() (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

func (f *simFile) Truncate(size int64) error {
	if err := f.check(); err != nil {
		return err
	}
	f.d.mutate()
	if size < 0 || size > int64(len(f.ino.data)) {
		return fmt.Errorf("sim: truncate %s to %d: size is %d", f.name, size, len(f.ino.data))
	}
	// A fresh array: the synced bytes may share the old one.
	f.ino.data = append([]byte(nil), f.ino.data[:size]...)
	f.ino.grown = false
	return nil
}

func (f *simFile) Sync() error {
	if err := f.check(); err != nil {
		return err
	}
	f.d.mutate()
	f.d.Syncs++
	f.d.wait()
	if f.d.aimedFailure() || f.d.cfg.SyncFailProb > 0 && f.d.faulty() && Chance(f.d.rng, f.d.cfg.SyncFailProb) {
		// The kernel dropped the dirty pages it could not write: the
		// file is as of its last good sync, and the node must stop.
		f.d.SyncFailures++
		f.d.failedIO = f.d.n.inc
		f.ino.data = append([]byte(nil), f.ino.synced...)
		f.ino.synced = f.ino.data[:len(f.ino.data):len(f.ino.data)]
		f.ino.grown = true
		return fmt.Errorf("%w: fsync of %s", ErrIO, f.name)
	}
	f.ino.synced = f.ino.data[:len(f.ino.data):len(f.ino.data)]
	f.ino.grown = true
	return nil
}

func (f *simFile) Close() error {
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	return nil
}
