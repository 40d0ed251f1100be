package consensus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
	"github.com/fenceline/fenceline/sim/simtest"
)

// The order of effects in a Ready is a safety rule, as etcd raft documents
// it: persist the hard state and entries (and fsync, when raft says
// MustSync), then send. A vote granted, or an append acknowledged, must be
// on disk before the message that says so leaves, or a crash forgets what
// a candidate or leader was promised.
//
// This test watches the rule from outside the node: it keeps, per node,
// the journal's bytes as of its last successful fsync, and when a vote
// grant or an append acknowledgement leaves, it replays those bytes, as a
// crash at that instant would leave them, and checks they hold what the
// message promises.

// syncedFS wraps a node's disk and keeps each file's bytes as of its last
// successful Sync (and follows a rename, as the journal's compaction does).
type syncedFS struct {
	recfile.FS
	synced map[string][]byte
}

func (fs *syncedFS) Create(name string) (recfile.File, error) {
	f, err := fs.FS.Create(name)
	return &syncedFile{File: f, fs: fs, name: name}, err
}

func (fs *syncedFS) Open(name string) (recfile.File, error) {
	f, err := fs.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &syncedFile{File: f, fs: fs, name: name}, nil
}

func (fs *syncedFS) Rename(oldname, newname string) error {
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	fs.synced[newname] = fs.synced[oldname]
	return nil
}

type syncedFile struct {
	recfile.File
	fs   *syncedFS
	name string
}

func (f *syncedFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		return err
	}
	b := make([]byte, size)
	if size > 0 {
		if _, err := f.ReadAt(b, 0); err != nil {
			return err
		}
	}
	f.fs.synced[f.name] = b
	return nil
}

// promiseChecker reads what a node's synced journal holds when it sends.
type promiseChecker struct {
	t                   *testing.T
	disks               map[dial.NodeID]*syncedFS
	votes, acks, broken int
	firstBroken         string
}

func (pc *promiseChecker) durable(id dial.NodeID) (journal.HardState, uint64) {
	m := simtest.NewMachine(pc.t, 1, 0)
	m.Put("raft.journal", pc.disks[id].synced["raft.journal"])
	j, err := journal.Open(m.Disk(), "raft.journal", journal.Config{})
	require.NoError(pc.t, err)
	defer j.Close()
	return j.HardState(), j.LastIndex()
}

func (pc *promiseChecker) sent(from dial.NodeID, frame []byte) {
	info, err := consensus.DecodeFrame(frame)
	if err != nil || info.Reject {
		return
	}
	switch info.Kind {
	case consensus.FrameVoteResp:
		pc.votes++
		hs, _ := pc.durable(from)
		if hs.Term < info.Term || (hs.Term == info.Term && hs.Vote != uint64(info.To)) {
			pc.fail("%v granted its vote in term %d to %v; its disk holds term %d, vote %v", from, info.Term, info.To, hs.Term, dial.NodeID(hs.Vote))
		}
	case consensus.FrameAppendResp:
		pc.acks++
		if _, last := pc.durable(from); last < info.Index {
			pc.fail("%v acknowledged entries up to %d; its disk holds up to %d", from, info.Index, last)
		}
	}
}

func (pc *promiseChecker) fail(format string, args ...any) {
	pc.broken++
	if pc.firstBroken == "" {
		pc.firstBroken = fmt.Sprintf(format, args...)
	}
}

type watchedSender struct {
	dial.Sender
	from dial.NodeID
	pc   *promiseChecker
}

func (s watchedSender) Send(to dial.NodeID, frame []byte) error {
	s.pc.sent(s.from, frame)
	return s.Sender.Send(to, frame)
}

// runPromises runs three nodes through elections (a leader cut off twice)
// and a stream of proposals, watching every grant and acknowledgement.
// With worker, the journal's writes run as the disk's background work
// (as in the real node); without, on the loop.
func runPromises(t *testing.T, seed uint64, b bugs.Set, worker bool) *promiseChecker {
	k := sim.New(seed)
	t.Cleanup(k.InstallCryptoRand())
	nw := netsim.New(k, netsim.DefaultConfig)
	pc := &promiseChecker{t: t, disks: map[dial.NodeID]*syncedFS{}}
	boot := []consensus.Member{consensus.NewMember("n1", ""), consensus.NewMember("n2", ""), consensus.NewMember("n3", "")}
	live := map[string]*consensus.Node{}
	var nodes []*sim.Machine
	for _, m := range boot {
		name := m.Name
		n := k.AddMachine(name, func(env *sim.Env) dial.Handler {
			fs := &syncedFS{FS: env.Disk, synced: map[string][]byte{}}
			if old := pc.disks[env.ID]; old != nil {
				fs.synced = old.synced
			}
			pc.disks[env.ID] = fs
			cfg := consensus.Config{Name: name, Bootstrap: boot, Bugs: b, KV: kv.Config{Bugs: b}}
			cenv := consensus.Env{Clock: env.Clock, Net: watchedSender{env.Net, env.ID, pc}, FS: fs, Rand: env.Rand}
			if worker {
				cenv.Worker = env.Disk
			}
			node, err := consensus.Open(cfg, cenv)
			require.NoError(t, err)
			live[name] = node
			return node
		}, nw, sim.DefaultDiskConfig)
		nodes = append(nodes, n)
		n.Start()
	}
	leader := func() *sim.Machine {
		for _, n := range nodes {
			if live[n.Name()].IsLeader() {
				return n
			}
		}
		return nil
	}
	var propose func(i int)
	propose = func(i int) {
		n := nodes[i%3]
		n.Exec(func() {
			live[n.Name()].Propose(kv.Put(fmt.Sprintf("k%d", i%7), []byte("v")), func(kv.Result, error) {})
		})
		k.After(20*time.Millisecond, sim.EvClient, uint64(i), func() { propose(i + 1) })
	}
	k.After(500*time.Millisecond, sim.EvClient, 0, func() { propose(0) })
	for _, at := range []time.Duration{2 * time.Second, 4 * time.Second} {
		k.At(at, sim.EvFault, 0, func() {
			if l := leader(); l != nil {
				var others []dial.NodeID
				for _, n := range nodes {
					if n != l {
						others = append(others, n.ID())
					}
				}
				nw.Split([]dial.NodeID{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}, []dial.NodeID{l.ID()}, others)
			}
		})
		k.At(at+time.Second, sim.EvFault, 0, func() { nw.Heal() })
	}
	require.NoError(t, k.RunUntil(6*time.Second))
	return pc
}

func TestVotesAndAcknowledgementsLeaveOnlyOnceDurable(t *testing.T) {
	for _, worker := range []bool{false, true} {
		t.Run(fmt.Sprintf("worker=%v", worker), func(t *testing.T) {
			pc := runPromises(t, 1, bugs.Set{}, worker)
			require.Greater(t, pc.votes, 2, "the run granted too few votes to judge")
			require.Greater(t, pc.acks, 100, "the run acknowledged too few appends to judge")
			t.Logf("votes granted %d, appends acknowledged %d", pc.votes, pc.acks)
			require.Zero(t, pc.broken, pc.firstBroken)

			// The rule bites: with a vote written but not synced, a grant
			// leaves with the vote only in the page cache.
			pc = runPromises(t, 1, bugs.Set{NoVoteSync: true}, worker)
			require.NotZero(t, pc.broken, "no-vote-sync went unnoticed")
			require.Contains(t, pc.firstBroken, "granted its vote")

			// And with an append's responses sent when it is staged, an
			// acknowledgement leaves before its entries are written.
			pc = runPromises(t, 1, bugs.Set{AckBeforeAppend: true}, worker)
			require.NotZero(t, pc.broken, "ack-before-append went unnoticed")
			t.Logf("ack-before-append: %d broken promises, first: %s", pc.broken, pc.firstBroken)
		})
	}
}
