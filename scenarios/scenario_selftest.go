package scenarios

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/fenceline/fenceline/core/halt"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/linearizability"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// The kernel self-test: a toy protocol that exercises every part of the
// kernel before any real protocol exists. Each node keeps a set of records
// in a checksummed log file; a client's put is acknowledged only once its
// record is synced (group commit: one fsync covers every put that arrived
// before it started); nodes gossip their records on timers, so after the
// faults heal every node holds every record.
//
// Its checkers:
//   - durability: a node that acknowledged a put still has it after any
//     crash and restart;
//   - integrity: no node ever holds a record no client wrote (a torn log
//     record read as data would be one);
//   - convergence: once faults stop, every node holds every acknowledged
//     record and all nodes hold the same set.
//
// Its planted bugs (the selftest-* lines of core/bugs.Table) prove the
// checkers can fail.

func init() {
	Register(Scenario{
		Name:     "kernel-selftest",
		Summary:  "toy gossip set: timers, frames, partitions, crashes, torn disks, clock faults",
		Duration: 30 * time.Second,
		Bugs: []Bug{
			{Name: "selftest-ack-before-sync", Window: 20, MinCaught: 10},
			{Name: "selftest-no-gossip", Window: 10, MinCaught: 8},
			{Name: "selftest-trust-tail", Window: 100, MinCaught: 12},
		},
		Floors:   []Floor{{"writes-acked", 3}, {"crashes", 1}},
		Checkers: []string{"convergence", "durability", "integrity"},
		Run:      runSelftest,
	})
}

// toyLogName is the toy's one file.
const toyLogName = "toy.log"

// toyGossipMax bounds the records in one gossip frame.
const toyGossipMax = 256

type toyRecord struct {
	ID, Value string
	WallMs    int64 // the writer's wall reading, to put skewed clocks on the wire
}

type toyNode struct {
	env   *sim.Env
	log   recfile.File
	set   map[string]toyRecord
	order []string // ids in the order this node learned them; gossip walks it
	peers []dial.NodeID
	bugs  toyBugs

	syncing bool
	covered []func(error) // acks the running fsync covers
	waiting []func(error) // acks that arrived during it: the next fsync's
}

type toyBugs struct{ ackBeforeSync, noGossip, trustTail bool }

// bootToy opens the log, replays it (cutting a torn tail) and starts the
// gossip timer.
func bootToy(env *sim.Env, peers []dial.NodeID, bugs toyBugs) (*toyNode, error) {
	t := &toyNode{env: env, set: map[string]toyRecord{}, peers: peers, bugs: bugs}
	f, err := env.Disk.Open(toyLogName)
	if errors.Is(err, recfile.ErrNotExist) {
		if f, err = env.Disk.Create(toyLogName); err == nil {
			err = env.Disk.SyncDir()
		}
	}
	if err != nil {
		return nil, err
	}
	t.log = f
	recs, good, err := replayToy(f, bugs.trustTail)
	if err != nil {
		return nil, err
	}
	if size, _ := f.Size(); size > good {
		if err := f.Truncate(good); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
	}
	for _, r := range recs {
		t.learn(r)
	}
	t.armGossip()
	return t, nil
}

func (t *toyNode) learn(r toyRecord) bool {
	if _, ok := t.set[r.ID]; ok {
		return false
	}
	t.set[r.ID] = r
	t.order = append(t.order, r.ID)
	return true
}

// put appends the record and acknowledges it once an fsync covers it.
func (t *toyNode) put(r toyRecord, ack func(error)) {
	r.WallMs = t.env.Clock.Now().UnixMilli()
	if _, err := t.log.Write(encodeToy(r)); err != nil {
		// After a failed write the file is not what was written: stop,
		// as after a failed fsync (the fail-stop checker holds the toy
		// to it too).
		halt.Stop(err)
	}
	t.learn(r)
	if t.bugs.ackBeforeSync {
		ack(nil)
		ack = func(error) {}
	}
	t.waiting = append(t.waiting, ack)
	t.startSync()
}

func (t *toyNode) startSync() {
	if t.syncing || len(t.waiting) == 0 {
		return
	}
	t.syncing = true
	t.covered, t.waiting = t.waiting, nil
	t.env.Disk.SyncAsync(t.log, func(err error) {
		if err != nil {
			// The disk may have dropped what this fsync covered: stop,
			// never retry and carry on.
			halt.Stop(err)
		}
		acks := t.covered
		t.covered, t.syncing = nil, false
		for _, ack := range acks {
			ack(err)
		}
		t.startSync()
	})
}

func (t *toyNode) armGossip() {
	d := sim.Between(t.env.Rand, 50*time.Millisecond, 150*time.Millisecond)
	t.env.Clock.AfterFunc(d, func() {
		t.gossip()
		t.armGossip()
	})
}

// gossip pushes a window of this node's records to one random peer.
func (t *toyNode) gossip() {
	if t.bugs.noGossip || len(t.peers) == 0 || len(t.order) == 0 {
		return
	}
	peer := t.peers[t.env.Rand.IntN(len(t.peers))]
	start := 0
	if len(t.order) > toyGossipMax {
		start = t.env.Rand.IntN(len(t.order) - toyGossipMax + 1)
	}
	var frame []byte
	for _, id := range t.order[start:min(len(t.order), start+toyGossipMax)] {
		frame = append(frame, encodeToy(t.set[id])...)
	}
	// Unreachable is expected under partitions; gossip retries on its timer.
	_ = t.env.Net.Send(peer, frame)
}

// HandleFrame merges gossiped records. They are written but not synced:
// only the writer's copy is promised.
func (t *toyNode) HandleFrame(_ dial.NodeID, frame []byte) {
	for len(frame) > 0 {
		r, n, err := decodeToy(frame, false)
		if err != nil {
			return // a frame is whole or garbage; never half-trusted
		}
		frame = frame[n:]
		if t.learn(r) {
			if _, err := t.log.Write(encodeToy(r)); err != nil {
				halt.Stop(err)
			}
		}
	}
}

// Record format: len u32 | crc32c(payload) u32 | payload, where payload is
// wallMs i64 | idLen u16 | id | value.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeToy(r toyRecord) []byte {
	payload := make([]byte, 0, 10+len(r.ID)+len(r.Value))
	payload = binary.LittleEndian.AppendUint64(payload, uint64(r.WallMs))
	payload = binary.LittleEndian.AppendUint16(payload, uint16(len(r.ID)))
	payload = append(payload, r.ID...)
	payload = append(payload, r.Value...)
	out := make([]byte, 8, 8+len(payload))
	binary.LittleEndian.PutUint32(out, uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[4:], crc32.Checksum(payload, castagnoli))
	return append(out, payload...)
}

var errToyRecord = errors.New("toy: bad record")

// decodeToy reads one record from the front of b.
func decodeToy(b []byte, trustTail bool) (toyRecord, int, error) {
	if len(b) < 8 {
		return toyRecord{}, 0, errToyRecord
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < 10 || n > 1<<16 {
		return toyRecord{}, 0, errToyRecord
	}
	if len(b) < 8+n {
		if !trustTail {
			return toyRecord{}, 0, errToyRecord
		}
		// The planted bug: take what is there as the record.
		n = len(b) - 8
		if n < 10 {
			return toyRecord{}, 0, errToyRecord
		}
	}
	payload := b[8 : 8+n]
	if !trustTail && crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return toyRecord{}, 0, errToyRecord
	}
	idLen := int(binary.LittleEndian.Uint16(payload[8:]))
	if 10+idLen > len(payload) {
		return toyRecord{}, 0, errToyRecord
	}
	return toyRecord{
		WallMs: int64(binary.LittleEndian.Uint64(payload)),
		ID:     string(payload[10 : 10+idLen]),
		Value:  string(payload[10+idLen:]),
	}, 8 + n, nil
}

// replayToy reads every whole record and returns the offset after the last
// one: a torn tail is cut there.
func replayToy(f recfile.File, trustTail bool) ([]toyRecord, int64, error) {
	size, err := f.Size()
	if err != nil {
		return nil, 0, err
	}
	buf := make([]byte, size)
	if size > 0 {
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err
		}
	}
	var recs []toyRecord
	off := 0
	for off < len(buf) {
		r, n, err := decodeToy(buf[off:], trustTail)
		if err != nil {
			break
		}
		recs = append(recs, r)
		off += n
	}
	return recs, int64(off), nil
}

// runSelftest builds the cluster, runs the workload under chaos, then a
// calm phase, and checks.
func runSelftest(run *Run) error {
	k := run.Kernel
	knobs := k.Stream("knobs")
	n := drawSelftestNodes(knobs)
	netCfg := netsim.Draw(k.Stream("net-config"))
	diskCfg := sim.DefaultDiskConfig
	diskCfg.SyncLatencyMax = sim.Between(knobs, time.Millisecond, 30*time.Millisecond)
	faultCfg := DrawFaults(knobs, n)
	writes := 50 + knobs.IntN(251)
	calmAt := run.Duration * 7 / 10
	run.Knob("nodes", n)
	run.Knob("net", netCfg)
	diskCfg = drawDisk(run, diskCfg, 2e-3, calmAt)
	run.Knob("disk_sync", fmt.Sprintf("%v..%v", diskCfg.SyncLatencyMin, diskCfg.SyncLatencyMax))
	supervise(run)
	run.Knob("faults", faultCfg)
	run.Knob("writes", writes)
	run.Knob("calm_at", calmAt)

	bugs := toyBugs{
		ackBeforeSync: run.Bugs().SelftestAckBeforeSync,
		noGossip:      run.Bugs().SelftestNoGossip,
		trustTail:     run.Bugs().SelftestTrustTail,
	}
	nw := netsim.New(k, netCfg)
	hist := linearizability.NewHistory(0)
	submitted := map[string]string{} // id -> value: what clients wrote
	ackedBy := map[string][]string{} // node -> ids it acknowledged
	live := map[string]*toyNode{}

	var nodes []*sim.Machine
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	var all []dial.NodeID
	for _, name := range names {
		all = append(all, dial.IDFromName(name))
	}
	for _, name := range names {
		name := name
		var peers []dial.NodeID
		for _, id := range all {
			if id != dial.IDFromName(name) {
				peers = append(peers, id)
			}
		}
		boot := func(env *sim.Env) dial.Handler {
			t, err := bootToy(env, peers, bugs)
			if err != nil {
				err = haltOnIO(err, env.Disk)
				run.Fail("boot", "%s: %v", name, err)
				return dial.HandlerFunc(func(dial.NodeID, []byte) {})
			}
			checkRecovered(run, name, t, ackedBy[name], submitted)
			live[name] = t
			return t
		}
		nodes = append(nodes, k.AddMachine(name, boot, nw, diskCfg))
	}
	DrawClocks(run, nodes, 500*time.Millisecond, 200)
	for _, node := range nodes {
		node.Start()
	}
	chaos := StartChaos(run, nw, nodes, faultCfg, calmAt)

	// The workload: bursts of writes to one node at a time, before the
	// calm. Bursts keep fsyncs busy, so crashes land on unsynced acks. A
	// write to a down node is refused at once.
	wl := k.Stream("workload")
	var at time.Duration
	var node *sim.Machine
	if run.ClientsOff {
		writes = 0
	}
	for i := 0; i < writes; i++ {
		if i == 0 || sim.Chance(wl, 0.15) {
			at = sim.Between(wl, 0, calmAt*9/10)
			node = nodes[wl.IntN(n)]
			if sim.Chance(wl, 0.2) {
				// Crash the node in the middle of its burst, where
				// fsyncs are in flight: the point a durability
				// promise is tested.
				chaos.CrashAt(node, at+sim.Between(wl, 0, 10*time.Millisecond))
			}
		}
		at += sim.Between(wl, 0, 2*time.Millisecond)
		node := node
		id := fmt.Sprintf("w%04d", i)
		value := fmt.Sprintf("v%x", wl.Uint32())
		submitted[id] = value
		k.At(at, sim.EvClient, xxhash.Sum64String(id), func() {
			if _, send := run.Op("w"); !send {
				return
			}
			op := hist.Call(i, id, value, k.Now())
			if !node.Up() {
				hist.Refuse(op, "node down", k.Now())
				return
			}
			inc := node.Incarnation()
			t := live[node.Name()]
			node.Exec(func() {
				t.put(toyRecord{ID: id, Value: value}, func(err error) {
					if node.Incarnation() != inc {
						return // the answer died with the process
					}
					if err != nil {
						hist.Refuse(op, err.Error(), k.Now())
						return
					}
					hist.Return(op, "ok", k.Now())
					ackedBy[node.Name()] = append(ackedBy[node.Name()], id)
				})
			})
		})
	}

	if err := k.RunUntil(run.Duration); err != nil {
		return err
	}
	okWrites, _, _ := hist.Count()
	run.Did("writes-acked", okWrites)
	run.Did("crashes", chaos.Crashes)

	// Convergence: after the calm phase every node holds every
	// acknowledged record, and all hold the same set. Gossip needs time:
	// a run cut short (-duration) with under 5s of calm is not judged.
	if run.Duration-calmAt < 5*time.Second {
		run.Undecided("convergence", "a calm phase of %v is too short to judge", run.Duration-calmAt)
		return nil
	}
	var acked []string
	for _, op := range hist.Ops() {
		if op.Outcome == linearizability.OK {
			acked = append(acked, op.Key)
		}
	}
	var ref []string
	for i, node := range nodes {
		t := live[node.Name()]
		if !node.Up() || t == nil {
			run.Fail("convergence", "%s is not up after the calm phase", node.Name())
			continue
		}
		checkIntegrity(run, node.Name(), t, submitted)
		for _, id := range acked {
			if _, ok := t.set[id]; !ok {
				run.Fail("convergence", "%s lacks acknowledged record %s after the calm phase", node.Name(), id)
			}
		}
		got := slices.Sorted(maps.Keys(t.set))
		if i == 0 {
			ref = got
		} else if fmt.Sprint(got) != fmt.Sprint(ref) {
			run.Fail("convergence", "%s holds %d records, %s holds %d", node.Name(), len(got), nodes[0].Name(), len(ref))
		}
	}
	ok, refused, unknown := hist.Count()
	run.Logf("selftest: writes ok=%d refused=%d unknown=%d; faults %s; net sent=%d delivered=%d dropped=%d",
		ok, refused, unknown, chaos, nw.Sent, nw.Delivered, nw.Dropped)
	return nil
}

// drawSelftestNodes is the first draw of a self-test run: 3 or 5 nodes.
func drawSelftestNodes(r *rand.Rand) int { return 3 + 2*r.IntN(2) }

// selftestNodes is the cluster size seed draws.
func selftestNodes(seed uint64) int { return drawSelftestNodes(sim.Stream(seed, "knobs")) }

// checkRecovered runs at every boot: what the node acknowledged before it
// crashed must have survived, and nothing it recovered may be invented.
func checkRecovered(run *Run, name string, t *toyNode, acked []string, submitted map[string]string) {
	for _, id := range acked {
		if _, ok := t.set[id]; !ok {
			run.Fail("durability", "%s acknowledged %s, then lost it in a crash", name, id)
		}
	}
	checkIntegrity(run, name, t, submitted)
}

func checkIntegrity(run *Run, name string, t *toyNode, submitted map[string]string) {
	for _, id := range slices.Sorted(maps.Keys(t.set)) {
		if want, ok := submitted[id]; !ok || want != t.set[id].Value {
			run.Fail("integrity", "%s holds record %q=%q that no client wrote", name, id, t.set[id].Value)
		}
	}
}
