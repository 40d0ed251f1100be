package journal_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/journal"
)

// A torn tail is cut durably (core/recfile decides what is torn; its
// tests hold the table): a record appended after the cut survives a crash
// and a reopen, with no torn byte coming back in front of it.
func TestAppendAfterACutSurvivesACrash(t *testing.T) {
	for name, prefix := range map[string][]byte{
		"header and a few bytes": append(recordHeader(100, nil), 1, 2, 3),
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 1, 0)
			j := r.open(journal.Config{})
			require.NoError(t, j.Save(hs(1, 0, 2), ents(1, 3, 1), true))
			want, good := viewOf(t, j), r.Raw(jname)
			require.NoError(t, j.Close())
			r.Put(jname, append(bytes.Clone(good), prefix...))

			j = r.open(journal.Config{})
			require.Equal(t, want, viewOf(t, j), "the records before the prefix are intact")
			require.Equal(t, good, r.Raw(jname), "cut exactly at the prefix")

			// Appending after the cut works and survives a crash and
			// another reopen: the cut was synced, so the torn bytes
			// cannot come back in front of the new record.
			require.NoError(t, j.Save(hs(1, 0, 4), ents(4, 5, 1), true))
			r.Crash()
			j = r.open(journal.Config{})
			require.Equal(t, ents(1, 5, 1), viewOf(t, j).Ents)
			require.Equal(t, *hs(1, 0, 4), j.HardState())
		})
	}
}

// tornCase ends a synced journal with one more operation whose records a
// crash may tear anywhere. want[k] is the state once its first k records
// survived.
type tornCase struct {
	name string
	op   func(t *testing.T, j *journal.Journal)
	want func(base view) []view
}

var tornCases = []tornCase{
	{
		name: "entries",
		op:   func(t *testing.T, j *journal.Journal) { require.NoError(t, j.Save(nil, ents(6, 8, 1), false)) },
		want: func(base view) []view {
			after := base
			after.Ents = append(ents(1, 5, 1), ents(6, 8, 1)...)
			return []view{base, after}
		},
	},
	{
		name: "hard state",
		op:   func(t *testing.T, j *journal.Journal) { require.NoError(t, j.Save(hs(2, 3, 5), nil, false)) },
		want: func(base view) []view {
			after := base
			after.HS = *hs(2, 3, 5)
			return []view{base, after}
		},
	},
	{
		// Three records: truncate, entries, hard state. Each prefix is
		// a log raft can restart from.
		name: "conflict",
		op: func(t *testing.T, j *journal.Journal) {
			require.NoError(t, j.Save(hs(2, 0, 4), ents(4, 4, 2), false))
		},
		want: func(base view) []view {
			cut, replaced, voted := base, base, base
			cut.Ents = ents(1, 3, 1)
			replaced.Ents = append(ents(1, 3, 1), ents(4, 4, 2)...)
			voted.Ents, voted.HS = replaced.Ents, *hs(2, 0, 4)
			return []view{base, cut, replaced, voted}
		},
	},
	{
		name: "snapshot",
		op: func(t *testing.T, j *journal.Journal) {
			snap := journal.Snapshot{Meta: journal.SnapshotMeta{Index: 9, Term: 2, ConfState: []byte("voters 1 2 3")}, Data: bytes.Repeat([]byte("state"), 40)}
			require.NoError(t, j.ApplySnapshot(snap))
		},
		want: func(base view) []view {
			after := base
			after.Snap = journal.Snapshot{Meta: journal.SnapshotMeta{Index: 9, Term: 2, ConfState: []byte("voters 1 2 3")}, Data: bytes.Repeat([]byte("state"), 40)}
			after.Ents, after.HS.Commit = nil, 9
			return []view{base, after}
		},
	},
}

// A crash can cut the last write at any byte. Reopening must give exactly
// the records before the cut record, and leave the file ending there.
func TestTornTailAtEveryOffset(t *testing.T) {
	for _, tc := range tornCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, 0)
			j := r.open(journal.Config{})
			require.NoError(t, j.Save(hs(1, 0, 3), ents(1, 5, 1), true))
			base, baseFile := viewOf(t, j), r.Raw(jname)
			tc.op(t, j)
			file := r.Raw(jname)
			want := tc.want(base)
			ends := append([]int{len(baseFile)}, recordEnds(t, file, len(baseFile))...)
			require.Len(t, ends, len(want), "records written by the operation")
			require.Equal(t, want[len(want)-1], viewOf(t, j))

			for cut := len(baseFile); cut <= len(file); cut++ {
				k := 0
				for k+1 < len(ends) && ends[k+1] <= cut {
					k++
				}
				r := newRig(t, 1, 0)
				r.Put(jname, file[:cut])
				j := r.open(journal.Config{})
				require.Equal(t, want[k], viewOf(t, j), "cut at byte %d", cut)
				require.Equal(t, ends[k], len(r.Raw(jname)), "cut at byte %d: file cut at the record boundary", cut)
			}
		})
	}
}

// Damage before the tail (core/recfile's verdict) stops Open with
// ErrCorrupt naming the offset, and never shortens the log silently.
func TestCorruptRecordBeforeTheTailIsAnError(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 0), ents(1, 2, 1), true))
	require.NoError(t, j.Save(nil, ents(3, 4, 1), true))
	require.NoError(t, j.Save(hs(1, 0, 4), nil, true))
	file := r.Raw(jname)
	ends := recordEnds(t, file, 8)
	require.Len(t, ends, 4)
	// The entries record of the second Save sits between two others.
	from, to := ends[1], ends[2]
	for _, off := range []int{from, from + 5, from + 13, to - 1} { // header, body
		for _, flip := range []byte{0x01, 0xff} {
			r := newRig(t, 1, 0)
			bad := bytes.Clone(file)
			bad[off] ^= flip
			r.Put(jname, bad)
			_, err := journal.Open(r.Disk(), jname, journal.Config{})
			require.ErrorIs(t, err, journal.ErrCorrupt, "byte %d ^ %#x", off, flip)
			require.ErrorContains(t, err, "offset", "the error says where")
			require.Equal(t, bad, r.Raw(jname), "nothing was cut")
		}
	}
}

// A record whose checksums hold was written as it reads, so one that does
// not fit the log is corruption wherever it sits, even last.
func TestWellFormedRecordThatBreaksTheLogIsCorrupt(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 2), ents(1, 2, 1), true))
	good := r.Raw(jname)
	// An entries record for index 5 after a log ending at 2: a gap.
	body := []byte{1, 5, 1, 1, 0, 0} // kind, first, count, term, type, empty data
	r.Put(jname, append(append(bytes.Clone(good), recordHeader(uint32(len(body)), body)...), body...))
	_, err := journal.Open(r.Disk(), jname, journal.Config{})
	require.ErrorIs(t, err, journal.ErrCorrupt)
	require.ErrorContains(t, err, "does not follow")
}

// MaxRecordBytes reaches the scan: a record inside the file but over the
// bound cannot be read, and it is not at the tail, so it is an error (a
// config lowered below records already written says so instead of
// dropping them). core/recfile's tests hold that a huge declared length
// is never allocated.
func TestRecordOverTheBoundIsAnError(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 1), ents(1, 1, 1), true))
	require.NoError(t, j.Save(nil, []journal.Entry{{Index: 2, Term: 1, Data: make([]byte, 200)}}, true))
	_, err := journal.Open(r.Disk(), jname, journal.Config{MaxRecordBytes: 100})
	require.ErrorIs(t, err, journal.ErrCorrupt)
}

func TestFileHeaderIsChecked(t *testing.T) {
	r := newRig(t, 1, 0)
	r.Put(jname, []byte("NOTAJOURNAL"))
	_, err := journal.Open(r.Disk(), jname, journal.Config{})
	require.ErrorIs(t, err, journal.ErrCorrupt)

	r.Put(jname, []byte("FLJRNL\x02\x00"))
	_, err = journal.Open(r.Disk(), jname, journal.Config{})
	require.ErrorIs(t, err, journal.ErrVersion)

	// Shorter than a header: create syncs the header before the name, so
	// such a file never held a record and is started over.
	r.Put(jname, []byte("FLJ"))
	j := r.open(journal.Config{})
	require.Equal(t, uint64(0), j.LastIndex())
	require.Equal(t, "FLJRNL\x01\x00", string(r.Raw(jname)))
}

func TestLeftoverCompactionSiblingIsRemoved(t *testing.T) {
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 2), ents(1, 2, 1), true))
	want := viewOf(t, j)
	r.Put(jname+".compact", []byte("half a compaction"))
	j = r.open(journal.Config{})
	require.Equal(t, want, viewOf(t, j))
	require.Equal(t, []string{jname}, r.Names())
	r.Crash()
	require.Equal(t, []string{jname}, r.Names(), "the removal was synced")
}

// The planted bug journal-trust-tail: with it on, a record cut short by a
// crash is decoded from what survived instead of being cut, and raft gets
// an entry with the right index and term and the wrong data. The test pins
// that the switch really switches.
func TestTrustTailBugKeepsATornEntry(t *testing.T) {
	payload := bytes.Repeat([]byte{'x'}, 64)
	r := newRig(t, 1, 0)
	j := r.open(journal.Config{})
	require.NoError(t, j.Save(hs(1, 0, 5), ents(1, 5, 1), true))
	good := r.Raw(jname)
	require.NoError(t, j.Save(nil, []journal.Entry{{Index: 6, Term: 1, Data: payload}}, false))
	file := r.Raw(jname)
	torn := file[:len(file)-10] // the crash kept all but the last 10 bytes

	r = newRig(t, 1, 0)
	r.Put(jname, torn)
	j = r.open(journal.Config{})
	require.Equal(t, uint64(5), j.LastIndex(), "correct: the torn entry is cut")
	require.Equal(t, good, r.Raw(jname))

	bug := journal.Config{Bugs: bugs.Set{JournalTrustTail: true}}
	r = newRig(t, 1, 0)
	r.Put(jname, torn)
	j = r.open(bug)
	require.Equal(t, uint64(6), j.LastIndex(), "buggy: the torn entry is kept")
	got, err := j.Entries(6, 7, 1<<20)
	require.NoError(t, err)
	require.Equal(t, uint64(1), got[0].Term, "with the right index and term")
	require.Len(t, got[0].Data, len(payload))
	require.NotEqual(t, payload, got[0].Data, "and the wrong data")
	require.Equal(t, append(bytes.Repeat([]byte{'x'}, 54), make([]byte, 10)...), got[0].Data)

	// The garbage is now durable: even a correct journal reads it back.
	r.Crash()
	j = r.open(journal.Config{})
	require.Equal(t, uint64(6), j.LastIndex())

	// A tear inside the entry's fields keeps only the entries before it.
	r = newRig(t, 1, 0)
	r.Put(jname, file[:len(good)+12+4])
	require.Equal(t, uint64(5), r.open(bug).LastIndex())
}
