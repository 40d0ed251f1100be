package realnet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/realnet"
)

// BenchmarkBoltWrite is the cost of the flow shard's Write on a real bbolt
// file, per batch size and durability. With sync each Write pays bbolt's
// two fdatasyncs (data pages, then meta page), so batches/s sits near the
// disk's fsync rate and writes/s grows with the batch; without sync it is
// the cost of bbolt's copy-on-write commit alone. Keys cycle over a fixed
// set of 64k, as flow state is mostly overwritten, so the file stays
// bounded however long the run.
func BenchmarkBoltWrite(b *testing.B) {
	const keySpace = 1 << 16
	keys := make([]string, keySpace)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%05d", i)
	}
	flows := make([]string, 64)
	for i := range flows {
		flows[i] = fmt.Sprintf("flow-%02d", i)
	}
	val := make([]byte, 128)
	for _, sync := range []bool{true, false} {
		for _, size := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("sync=%t/batch=%d", sync, size), func(b *testing.B) {
				db, err := realnet.OpenBolt(b.TempDir(), time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				batch := make([]shard.Mutation, size)
				next := 0
				b.SetBytes(int64(size * len(val)))
				for b.Loop() {
					for i := range batch {
						batch[i] = shard.Mutation{Flow: flows[next%len(flows)], Key: keys[next%keySpace], Value: val}
						next++
					}
					if err := db.Write(batch, sync); err != nil {
						b.Fatal(err)
					}
				}
				secs := b.Elapsed().Seconds()
				b.ReportMetric(float64(b.N*size)/secs, "writes/s")
				b.ReportMetric(float64(b.N)/secs, "batches/s")
			})
		}
	}
}
