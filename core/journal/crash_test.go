package journal_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/journal"
)

// crashModel is what the journal should hold, and what a crash may bring
// back: the last durable state and every record boundary written since.
// A crash keeps a prefix of the unsynced bytes and replay cuts at a record
// boundary, so a reopened journal must equal one of the candidates; the
// first one is everything synced, so equality with a candidate is the
// durability promise.
type crashModel struct {
	cur   view
	cands []view
}

func (m *crashModel) durable() { m.cands = []view{m.cur} }

func (m *crashModel) step(v view) {
	m.cur = v
	m.cands = append(m.cands, v)
}

func lastIndex(v view) uint64 { return v.Snap.Meta.Index + uint64(len(v.Ents)) }

func lastTerm(v view) uint64 {
	if len(v.Ents) == 0 {
		return v.Snap.Meta.Term
	}
	return v.Ents[len(v.Ents)-1].Term
}

// withEnts returns v holding ents (copied, so views never share arrays).
func withEnts(v view, ents ...[]journal.Entry) view {
	v.Ents = nil
	for _, e := range ents {
		v.Ents = append(v.Ents, e...)
	}
	return v
}

func payload(t *rapid.T, i uint64) []byte {
	n := rapid.IntRange(0, 100).Draw(t, "data bytes")
	if n == 0 {
		return nil
	}
	return bytes.Repeat([]byte{byte(i)}, n)
}

func genBatch(t *rapid.T, from, term uint64) []journal.Entry {
	n := rapid.IntRange(1, 8).Draw(t, "batch")
	batch := make([]journal.Entry, n)
	for k := range batch {
		i := from + uint64(k)
		batch[k] = journal.Entry{Index: i, Term: term, Type: uint8(i % 4), Data: payload(t, i)}
	}
	return batch
}

// genHardState follows raft: terms rise, a vote is cast at most once per
// term, commit rises but never past the log.
func genHardState(t *rapid.T, cur journal.HardState, last uint64) journal.HardState {
	h := cur
	if rapid.Bool().Draw(t, "new term") {
		h.Term++
		h.Vote = 0
	}
	if h.Vote == 0 && rapid.Bool().Draw(t, "vote") {
		h.Vote = rapid.Uint64Range(1, 5).Draw(t, "for")
	}
	h.Commit = rapid.Uint64Range(cur.Commit, last).Draw(t, "commit")
	return h
}

// TestPropCrashesKeepWhatWasSynced runs random Save, ApplySnapshot and
// Compact sequences on a simulated disk, crashing between operations and
// inside them (after any write, sync, truncate, rename or directory sync,
// including those of Open's own repair), and reopens from the disk each
// time. With tearing off, a crash between operations must bring back
// exactly the synced state; with every crash tearing, a record-boundary
// prefix of what followed it.
func TestPropCrashesKeepWhatWasSynced(t *testing.T) {
	for _, torn := range []float64{0, 1} {
		t.Run(fmt.Sprintf("torn=%v", torn), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { crashWorkload(t, torn) })
		})
	}
}

func crashWorkload(t *rapid.T, torn float64) {
	r := newRig(t, rapid.Uint64().Draw(t, "disk seed"), torn)
	split := rapid.Bool().Draw(t, "small records")
	cfg := journal.Config{}
	if split {
		cfg.MaxRecordBytes = 256 // batches span several records
	}
	fs := &faultFS{r: r, budget: -1}
	j, err := journal.Open(fs, jname, cfg)
	require.NoError(t, err)
	m := &crashModel{}
	m.durable()

	// reopen opens the journal after a crash (or without one) and checks
	// what it finds against the candidates. It may crash Open itself.
	reopen := func(crashed, midOp bool) {
		for {
			fs = &faultFS{r: r, budget: -1}
			if crashed && rapid.IntRange(0, 4).Draw(t, "crash in open") == 0 {
				fs.budget = rapid.IntRange(1, 3).Draw(t, "open budget")
			}
			j, err = journal.Open(fs, jname, cfg)
			if fs.dead {
				continue // crashed again while cutting the tail
			}
			require.NoError(t, err)
			fs.budget = -1
			break
		}
		got := viewOf(t, j)
		switch {
		case !crashed:
			// Open syncs what it replayed, so now all of it is durable.
			require.Equal(t, m.cur, got, "reopened without a crash")
		case torn == 0 && !midOp:
			require.Equal(t, m.cands[0], got, "a crash without tearing keeps the synced state exactly")
		default:
			require.True(t, slices.ContainsFunc(m.cands, func(c view) bool {
				return assert.ObjectsAreEqual(c, got)
			}), "reopened to\n\t%v\nnot one of the states a crash may keep:\n\t%v", got, m.cands)
		}
		m.cur = got
		m.durable()
	}

	for range rapid.IntRange(1, 60).Draw(t, "ops") {
		cur := m.cur
		last, lterm := lastIndex(cur), lastTerm(cur)
		if rapid.IntRange(0, 9).Draw(t, "crash mid-op") == 0 {
			fs.budget = rapid.IntRange(1, 5).Draw(t, "op budget")
		}

		var (
			views []view // the state after each record the op writes
			syncs bool
			run   func() error
		)
		switch op := rapid.IntRange(0, 10).Draw(t, "op"); {
		case op <= 3: // append, perhaps with a new hard state
			batch := genBatch(t, last+1, max(cur.HS.Term, lterm))
			views = append(views, withEnts(cur, cur.Ents, batch))
			if split {
				views = views[:0]
				for k := 1; k <= len(batch); k++ {
					views = append(views, withEnts(cur, cur.Ents, batch[:k]))
				}
			}
			var h *journal.HardState
			if rapid.Bool().Draw(t, "with hard state") {
				hh := genHardState(t, cur.HS, lastIndex(views[len(views)-1]))
				h = &hh
				v := views[len(views)-1]
				v.HS = hh
				views = append(views, v)
			}
			syncs = rapid.Bool().Draw(t, "sync")
			run = func() error { return j.Save(h, batch, syncs) }

		case op == 4: // a new leader overwrites the uncommitted suffix
			floor := max(cur.HS.Commit, cur.Snap.Meta.Index)
			if last <= floor {
				continue
			}
			from := rapid.Uint64Range(floor+1, last).Draw(t, "conflict from")
			term := max(cur.HS.Term, lterm) + 1
			batch := genBatch(t, from, term)
			kept := cur.Ents[:from-cur.Snap.Meta.Index-1]
			views = append(views, withEnts(cur, kept))
			if split {
				for k := 1; k < len(batch); k++ {
					views = append(views, withEnts(cur, kept, batch[:k]))
				}
			}
			views = append(views, withEnts(cur, kept, batch))
			h := journal.HardState{Term: term, Commit: rapid.Uint64Range(cur.HS.Commit, batch[len(batch)-1].Index).Draw(t, "commit")}
			v := views[len(views)-1]
			v.HS = h
			views = append(views, v)
			syncs = rapid.Bool().Draw(t, "sync")
			run = func() error { return j.Save(&h, batch, syncs) }

		case op == 5: // a hard state alone: a vote, a commit
			h := genHardState(t, cur.HS, last)
			v := withEnts(cur, cur.Ents)
			v.HS = h
			views = append(views, v)
			syncs = rapid.Bool().Draw(t, "sync")
			run = func() error { return j.Save(&h, nil, syncs) }

		case op == 6: // sync what earlier Saves left unsynced
			syncs = true
			run = func() error { return j.Save(nil, nil, true) }

		case op == 7: // the leader sends a snapshot
			idx := rapid.Uint64Range(max(cur.HS.Commit, cur.Snap.Meta.Index)+1, last+3).Draw(t, "snapshot index")
			snap := journal.Snapshot{
				Meta: journal.SnapshotMeta{Index: idx, Term: max(cur.HS.Term, lterm), ConfState: []byte("voters")},
				Data: payload(t, idx),
			}
			v := withEnts(cur)
			v.Snap, v.HS.Commit = snap, idx
			views = append(views, v)
			syncs = true
			run = func() error { return j.ApplySnapshot(snap) }

		case op == 8: // compact the applied prefix
			if cur.HS.Commit <= cur.Snap.Meta.Index {
				continue
			}
			idx := rapid.Uint64Range(cur.Snap.Meta.Index+1, cur.HS.Commit).Draw(t, "compact to")
			pos := idx - cur.Snap.Meta.Index - 1
			data := payload(t, idx)
			v := withEnts(cur, cur.Ents[pos+1:])
			v.Snap = journal.Snapshot{Meta: journal.SnapshotMeta{Index: idx, Term: cur.Ents[pos].Term}, Data: data}
			views = append(views, v)
			syncs = true
			run = func() error { return j.Compact(idx, data, nil) }

		case op == 9: // the machine crashes between operations
			fs.budget = -1
			r.Crash()
			reopen(true, false)
			continue

		default: // a clean restart: everything written is still there
			fs.budget = -1
			require.NoError(t, j.Close())
			reopen(false, false)
			continue
		}

		err := run()
		for _, v := range views {
			m.step(v)
		}
		if fs.dead {
			reopen(true, true)
			continue
		}
		fs.budget = -1
		require.NoError(t, err)
		require.Equal(t, m.cur, viewOf(t, j), "memory after the op")
		if syncs {
			m.durable()
		}
	}
}

// A crash that keeps some unsynced blocks and loses earlier ones leaves a
// hole of zeros between records: everything from the hole on was never
// synced, so replay cuts there, keeps every synced entry, and reports no
// corruption.
func TestCrashHolesAreTornTails(t *testing.T) {
	holes := 0
	for seed := uint64(0); seed < 40; seed++ {
		r := newRig(t, seed, 1)
		j := r.open(journal.Config{})
		require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 5, 1), true))
		big := make([]journal.Entry, 12)
		for i := range big {
			big[i] = journal.Entry{Index: uint64(6 + i), Term: 1, Data: make([]byte, 1500)}
			big[i].Data[0] = byte(i + 1)
		}
		require.NoError(t, j.Save(nil, big, false)) // ~18 KiB, never synced
		before := r.Disk().Holes
		r.Crash()
		j = r.open(journal.Config{})
		got := viewOf(t, j)
		require.GreaterOrEqual(t, len(got.Ents), 5, "the synced entries survive")
		for i, e := range got.Ents[5:] {
			require.Equal(t, big[i].Data, e.Data, "what survives past the synced part is whole and in order")
		}
		holes += int(r.Disk().Holes - before)
	}
	require.Positive(t, holes, "some crash must have left a hole")
}
