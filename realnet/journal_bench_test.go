package realnet_test

import (
	"fmt"
	"testing"

	"github.com/fenceline/fenceline/core/journal"
	"github.com/fenceline/fenceline/realnet"
)

// BenchmarkJournalSyncedSave is the cost of raft's durable path on a real
// file: each Save appends a batch of 128-byte entries and a hard state and
// fsyncs before returning, as a Ready with MustSync does. The fsync
// dominates, so entries/s grows almost linearly with the batch while
// saves/s stays near the disk's fsync rate; that gap is what batching
// proposals into one Ready buys. The log is compacted off the clock when it
// passes 64 MiB, so memory stays bounded however long the run.
func BenchmarkJournalSyncedSave(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			fs, err := realnet.OpenDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			j, err := journal.Open(fs, "raft.journal", journal.Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			data := make([]byte, 128)
			ents := make([]journal.Entry, batch)
			next := uint64(1)
			b.SetBytes(int64(batch * len(data)))
			for b.Loop() {
				for i := range ents {
					ents[i] = journal.Entry{Index: next + uint64(i), Term: 1, Data: data}
				}
				next += uint64(batch)
				hs := journal.HardState{Term: 1, Vote: 1, Commit: next - 1}
				if err := j.Save(&hs, ents, true); err != nil {
					b.Fatal(err)
				}
				if j.LogBytes() > 64<<20 {
					b.StopTimer()
					if err := j.Compact(next-1, nil, nil); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*batch)/secs, "entries/s")
			b.ReportMetric(float64(b.N)/secs, "saves/s")
		})
	}
}
