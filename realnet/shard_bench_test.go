package realnet

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/shard"
)

// shardBytesCodec is the smallest codec a shard accepts: the value is its
// own encoding, and every value lives until far in the future, so nothing
// expires, is purged or is evicted while a benchmark or test runs.
type shardBytesCodec struct{}

var shardFarFutureMs = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func (shardBytesCodec) Encode(v []byte) []byte          { return v }
func (shardBytesCodec) Decode(b []byte) ([]byte, error) { return b, nil } // Scan's Value is a copy the shard may keep
func (shardBytesCodec) Expiry(v []byte) (int64, bool)   { return shardFarFutureMs, true }

// postPut writes key=val to flow on the shard's loop and answers as a
// flow owner would: a sync write once it is durable, any other at once.
func postPut(l *Loop, sh *shard.Shard[[]byte], flow, key string, val []byte, mode shard.Mode, answer func(error)) error {
	return l.Post(func() {
		if err := sh.Put(flow, map[string][]byte{key: val}, nil, mode); err != nil {
			answer(err)
			return
		}
		if mode == shard.Sync {
			sh.WhenDurable(flow, answer)
		} else {
			answer(nil)
		}
	})
}

// runOnLoop runs f on l and waits for it: everything that touches a shard
// (open, stats, close) runs on its loop, as the shard has one writer.
func runOnLoop(l *Loop, f func()) error {
	done := make(chan struct{})
	if err := l.Post(func() { defer close(done); f() }); err != nil {
		return err
	}
	<-done
	return nil
}

// openLoopShard opens a shard over the bbolt store in dir on a fresh loop
// whose wall clock posts its timers to that loop, as a real node does.
func openLoopShard(dir string, mailbox int) (*Loop, *shard.Shard[[]byte], error) {
	db, err := OpenBolt(dir, time.Second)
	if err != nil {
		return nil, nil, err
	}
	l := NewLoop(mailbox)
	clk := clock.NewWall(l.PostTimer)
	// The worker, as a node runs it; it exits when the loop stops.
	w := NewWorker(l)
	go func() { <-l.done; w.Close() }()
	var sh *shard.Shard[[]byte]
	if perr := runOnLoop(l, func() {
		sh, err = shard.Open(shard.Config{}, shard.Env{Clock: clk, Backend: db, Worker: w}, shardBytesCodec{})
	}); perr != nil {
		err = perr
	}
	if err != nil {
		l.Stop()
		_ = db.Close()
		return nil, nil, err
	}
	return l, sh, nil
}

// shardBenchFlows is how many flows each writer cycles over.
const shardBenchFlows = 64

// BenchmarkShard measures the FlowShard on the real bbolt backend and the
// real loop: W writers each post a one-key Put (100-byte value) to the
// node's loop and wait for its answer (for sync, the WhenDurable that
// follows the group fsync; for async and none, the Put's return), then
// issue the next. b.N is the total of answered writes.
//
// writes/fsync shows group commit at work: sync acks per fsync for sync,
// Puts per fsync for async (whose fsync runs every SyncEvery). The
// baseline is one sync bbolt Write per write, one writer: what a store
// without group commit would do.
func BenchmarkShard(b *testing.B) {
	b.Run("baseline=fsync-per-write", benchShardBaseline)
	for _, mode := range []shard.Mode{shard.Sync, shard.Async, shard.None} {
		for _, writers := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("mode=%s/writers=%d", mode, writers), func(b *testing.B) {
				benchShard(b, mode, writers)
			})
		}
	}
}

func benchShardFlowNames(writer int) []string {
	names := make([]string, shardBenchFlows)
	for i := range names {
		names[i] = fmt.Sprintf("flow-%d-%d", writer, i)
	}
	return names
}

func benchShard(b *testing.B, mode shard.Mode, writers int) {
	l, sh, err := openLoopShard(b.TempDir(), writers+64)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	val := bytes.Repeat([]byte{'v'}, 100)
	names := make([][]string, writers)
	for w := range names {
		names[w] = benchShardFlowNames(w)
	}
	lat := make([]time.Duration, b.N)
	var (
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; next.Store(int64(b.N)) }) }

	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			ack := make(chan error, 1)
			answer := func(err error) { ack <- err }
			for i := 0; ; i++ {
				n := next.Add(1) - 1
				if n >= int64(b.N) {
					return
				}
				flow := names[w][i%shardBenchFlows]
				t0 := time.Now()
				if err := postPut(l, sh, flow, "k", val, mode, answer); err != nil {
					fail(err)
					return
				}
				if err := <-ack; err != nil {
					fail(err)
					return
				}
				lat[n] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}

	var st shard.Stats
	var cerr error
	if err := runOnLoop(l, func() { st = sh.Stats(); cerr = sh.Close() }); err != nil {
		b.Fatal(err)
	}
	if cerr != nil {
		b.Fatal(cerr)
	}
	reportShardLatencies(b, lat, elapsed)
	switch {
	case mode == shard.Sync && st.Fsyncs > 0:
		b.ReportMetric(float64(st.SyncAcks)/float64(st.Fsyncs), "writes/fsync")
	case mode == shard.Async && st.Fsyncs > 0:
		b.ReportMetric(float64(st.Puts)/float64(st.Fsyncs), "writes/fsync")
	}
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Puts)/float64(st.Batches), "writes/batch")
	}
}

// benchShardBaseline is one fsynced bbolt write per write, sequentially,
// over the same flows as the 256-writer runs (so the same tree size).
func benchShardBaseline(b *testing.B) {
	db, err := OpenBolt(b.TempDir(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var names []string
	for w := range 256 {
		names = append(names, benchShardFlowNames(w)...)
	}
	val := bytes.Repeat([]byte{'v'}, 100)
	lat := make([]time.Duration, b.N)
	batch := make([]shard.Mutation, 1)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		batch[0] = shard.Mutation{Flow: names[i%len(names)], Key: "k", Value: val}
		t0 := time.Now()
		if err := db.Write(batch, true); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportShardLatencies(b, lat, elapsed)
	b.ReportMetric(1, "writes/fsync")
}

func reportShardLatencies(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := min(len(lat)-1, int(p*float64(len(lat))))
		return float64(lat[i]) / float64(time.Microsecond)
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "writes/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
