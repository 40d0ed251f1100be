package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
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
	// GrowBeforeData is the chance that a tear by blocks keeps the file's
	// length as written, its lost blocks reading as zeros to the end, as
	// a file system that logs a file's new size before its data does
	// (ext4 with data=writeback, XFS): a reader then finds a tail of
	// zeros, or a record cut short by zeros with nothing after it. Loss
	// is whole blocks, as the record file assumes (core/recfile): a tear
	// at a finer grain with the length kept is not modelled (see
	// CONTRIBUTING, the fault model). Drawn from the disk's "shape"
	// stream, so its other draws stay where they were.
	GrowBeforeData float64
}

// DefaultDiskConfig is a fast disk that tears one crash in four, and
// keeps a file's grown length in half its tears by blocks.
var DefaultDiskConfig = DiskConfig{
	TornWriteProb:  0.25,
	GrowBeforeData: 0.5,
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
//   - No node may cut a file below what a Sync that returned nil made
//     durable (a synced cut), nor come up from a boot that read a damaged
//     record header (FaultBoots): the disk reports either as misuse
//     (Kernel.OnDiskMisuse), a verdict no fault excuses.
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

	// shape draws what GrowBeforeData decides; aimed tears (CutAtStraddle)
	// and boot faults (FaultBoots) draw from their own streams too.
	shape *rand.Rand
	// straddle: a power cut is armed for the first write that leaves a
	// file's unsynced bytes across a block boundary (CutAtStraddle);
	// holeNext: the crash it causes tears that file by blocks, the first
	// lost and the last kept, so a hole lies under a record.
	straddle bool
	holeNext *inode
	// boot holds the boot faults (FaultBoots) and what the boot under way
	// met of them.
	boot bootFaults
}

// bootFaults is a disk's faults at a node's restarts: a read of a record
// header that returns the header damaged (one byte flipped: a misdirected
// read, a controller's bad DMA), or a read that fails with ErrIO. Both
// are transient: the next boot reads the disk as it is.
type bootFaults struct {
	rng             *rand.Rand
	damage, fail    float64
	files           []string // where damage may land
	Damaged, Failed uint64   // boots that met each, for the checkers' work counts

	// The boot under way: the damaged byte (ino, off; ino nil: none) and
	// whether a read returned it; the reads left before one fails (0:
	// none).
	ino    *inode
	name   string
	off    int
	read   bool
	failIn int
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

// CutAtStraddle arranges for the node to lose power at its first write
// that leaves a file's unsynced bytes across a block boundary, just before
// its next mutating operation, and for that crash to tear the file by
// blocks with the first lost and the last kept: a hole under a record,
// which a file system that writes blocks back out of order leaves. Tears
// drawn at other crashes almost never span two blocks (a node syncs every
// few hundred bytes), so a reader's test for holes would go unjudged.
func (d *Disk) CutAtStraddle() { d.straddle = true }

// CancelStraddle disarms a pending CutAtStraddle, leaving a CutPowerAfter
// armed.
func (d *Disk) CancelStraddle() { d.straddle = false }

// CancelPowerCut disarms a pending CutPowerAfter or CutAtStraddle.
func (d *Disk) CancelPowerCut() { d.cutAfter, d.straddle = 0, false }

// PowerCutArmed reports whether a CutPowerAfter or CutAtStraddle is
// pending.
func (d *Disk) PowerCutArmed() bool { return d.cutAfter > 0 || d.straddle }

// FaultBoots makes the disk fault the node's restarts (never its first
// boot) while its faults last: with chance damage, one read of a record
// header that has a whole record after it returns that header with a
// byte flipped, and half the time one of the two reads after the damaged
// one fails with ErrIO (the reads that tell damage from a tear); with
// chance fail, one of the boot's first eight reads fails with ErrIO.
// Either lasts the boot only. Damage lands only in the
// files named by damageIn, those whose readers promise to refuse it: a
// boot that read the damaged header must not come up, since the record
// file's promise is to refuse damage no crash leaves, never to cut it away
// as a torn tail. Drawn from the node's "disk-boot" stream.
func (d *Disk) FaultBoots(damage, fail float64, damageIn ...string) {
	d.boot.rng = d.n.k.Stream("disk-boot/" + d.n.name)
	d.boot.damage, d.boot.fail, d.boot.files = damage, fail, damageIn
}

// BootReadDamaged reports whether the boot under way has read a header
// FaultBoots damaged: the error it then meets is the fault's, not a
// defect's.
func (d *Disk) BootReadDamaged() bool { return d.boot.read }

// BootFaults counts the boots that read a damaged header and the reads
// that failed at a boot.
func (d *Disk) BootFaults() (damaged, failed uint64) { return d.boot.Damaged, d.boot.Failed }

// bootBegin draws the faults of a boot about to run.
func (d *Disk) bootBegin(restart bool) {
	b := &d.boot
	if b.rng == nil || !restart || !d.faulty() {
		return
	}
	switch x := b.rng.Float64(); {
	case x < b.damage:
		d.pickDamage()
	case x < b.damage+b.fail:
		b.failIn = 1 + b.rng.IntN(8)
	}
}

// bootEnd judges the boot that ran and clears its faults.
func (d *Disk) bootEnd() {
	b := &d.boot
	if b.read && d.n.up {
		d.misuse("damaged-boot", "%s came up from a boot that read the record header at %d of %s damaged", d.n.name, b.off, b.name)
	}
	b.ino, b.name, b.read, b.failIn = nil, "", false, 0
}

// fileHeaderSize is a record file's header: a six-byte magic and a
// version (core/recfile's format).
const fileHeaderSize = 8

// pickDamage chooses the header byte a boot's read returns flipped: the
// first byte of a record header's own checksum, in a header that lies
// within one block and is followed by a whole record. Damage there has
// only one reading: no crash leaves a bad header with a good record
// after it and no hole under it (core/recfile's table), so the reader
// must refuse it. The records are found by the format's framing, each
// header checked by its checksum here, not by core/recfile's scanner:
// the aim must not move with the code it judges. A file of another
// format offers none.
func (d *Disk) pickDamage() {
	type site struct {
		ino  *inode
		name string
		off  int
	}
	var sites []site
	for _, name := range d.names() {
		if !slices.Contains(d.boot.files, name) {
			continue
		}
		data := d.dir[name].data
		for off := fileHeaderSize; ; {
			length, ok := wholeRecord(data, off)
			if !ok {
				break
			}
			next := off + recfile.RecordHeaderSize + length
			if _, ok := wholeRecord(data, next); ok && off/recfile.BlockSize == (off+recfile.RecordHeaderSize-1)/recfile.BlockSize {
				sites = append(sites, site{d.dir[name], name, off + 8})
			}
			off = next
		}
	}
	if len(sites) == 0 {
		return
	}
	st := sites[d.boot.rng.IntN(len(sites))]
	d.boot.ino, d.boot.name, d.boot.off = st.ino, st.name, st.off
}

// wholeRecord reports the body length of the record at off in data if
// its header's checksum holds and its body lies within data.
func wholeRecord(data []byte, off int) (int, bool) {
	if off+recfile.RecordHeaderSize > len(data) {
		return 0, false
	}
	h := data[off : off+recfile.RecordHeaderSize]
	if binary.LittleEndian.Uint32(h[8:12]) != crc32.Checksum(h[0:8], castagnoli) {
		return 0, false
	}
	length := int(binary.LittleEndian.Uint32(h[0:4]))
	return length, length > 0 && off+recfile.RecordHeaderSize+length <= len(data)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// names returns the directory's names, sorted.
func (d *Disk) names() []string {
	names := make([]string, 0, len(d.dir))
	for name := range d.dir {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

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
	// acked is how many bytes a Sync that returned nil has made durable:
	// the node was told they are on disk, so a cut below them drops what
	// it may have acknowledged (a synced cut).
	acked int
}

func newDisk(n *Machine, cfg DiskConfig, rng, shape *rand.Rand) *Disk {
	return &Disk{n: n, cfg: cfg, rng: rng, shape: shape, dir: map[string]*inode{}, durable: map[string]*inode{}}
}

// misuse reports a node breaking the storage contract (see Disk).
func (d *Disk) misuse(checker, format string, args ...any) {
	if f := d.n.k.onDiskMisuse; f != nil {
		f(d.n, checker, fmt.Sprintf(format, args...))
	}
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
func (d *Disk) List() ([]string, error) { return d.names(), nil }

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
	d.cutAfter, d.straddle = 0, false
	hole := d.holeNext // the file a straddle cut tears by blocks with a hole
	d.holeNext = nil
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
		if ino == hole && ino.grown && len(ino.data) > len(ino.synced) {
			kept = d.keepBlocks(ino, true)
		} else if ino.grown && len(ino.data) > len(ino.synced) && Chance(d.rng, d.cfg.TornWriteProb) {
			if d.rng.IntN(2) == 0 {
				extra := d.rng.IntN(len(ino.data) - len(ino.synced) + 1)
				kept = ino.data[:len(ino.synced)+extra]
				if extra > 0 {
					d.Torn++
				}
			} else {
				kept = d.keepBlocks(ino, false)
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
// synced part survive). With GrowBeforeData the file may keep its whole
// length instead, its lost blocks at the end reading as zeros too. hole
// (CutAtStraddle) loses the first block and keeps the last, whatever the
// draws say.
func (d *Disk) keepBlocks(ino *inode, hole bool) []byte {
	const bs = recfile.BlockSize
	s, e := len(ino.synced), len(ino.data)
	keep := 0.1 + 0.8*d.rng.Float64()
	out := append([]byte(nil), ino.synced...)
	first, last := s/bs*bs, (e-1)/bs*bs
	for b := first; b < e; b += bs {
		from, to := max(b, s), min(b+bs, e)
		kept := Chance(d.rng, keep)
		if hole {
			kept = b == last || b != first && kept
		}
		if !kept {
			continue
		}
		if len(out) < from {
			out = append(out, make([]byte, from-len(out))...) // the holes before this block
			d.Holes++
		}
		out = append(out, ino.data[from:to]...)
		d.Torn++
	}
	if len(out) < e && d.cfg.GrowBeforeData > 0 && Chance(d.shape, d.cfg.GrowBeforeData) {
		out = append(out, make([]byte, e-len(out))...) // the size reached the disk, the data did not
		d.Holes++
	}
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
	if f.d.straddle && f.ino.grown && len(f.ino.synced)/recfile.BlockSize < (len(f.ino.data)-1)/recfile.BlockSize {
		// The unsynced bytes span a block boundary now: the power goes
		// before the node's next mutating operation (its sync, most
		// often), and the crash leaves a hole (keepBlocks).
		f.d.straddle, f.d.holeNext, f.d.cutAfter = false, f.ino, 1
	}
	return len(p), nil
}

func (f *simFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("sim: negative offset %d", off)
	}
	if b := &f.d.boot; b.failIn > 0 {
		if b.failIn--; b.failIn == 0 {
			b.Failed++
			return 0, fmt.Errorf("%w: reading %d bytes of %s at %d", ErrIO, len(p), f.name, off)
		}
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if b := &f.d.boot; b.ino == f.ino && int64(b.off) >= off && int64(b.off) < off+int64(n) {
		p[int64(b.off)-off] ^= 0xff
		if !b.read {
			b.read = true
			b.Damaged++
			if b.failIn == 0 && b.rng.IntN(2) == 0 {
				// Half the time one of the two reads after it fails
				// too: the reads that tell damage from a tear.
				b.failIn = 1 + b.rng.IntN(2)
			}
		}
	}
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
	if int(size) < f.ino.acked {
		f.d.misuse("synced-cut", "%s cut %s to %d bytes, below the %d a completed fsync made durable: records it may have acknowledged are gone", f.d.n.name, f.name, size, f.ino.acked)
		f.ino.acked = int(size)
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
	f.ino.acked = len(f.ino.data)
	return nil
}

func (f *simFile) Close() error {
	if f.closed {
		return ErrClosed
	}
	f.closed = true
	return nil
}
