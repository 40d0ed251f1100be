package shard

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/halt"
)

// val is the test codec's value: "data|expiresAtMs" or "tomb|expiresAtMs".
type val struct {
	data string
	exp  int64
	tomb bool
}

type codec struct{}

func (codec) Encode(v val) []byte {
	if v.tomb {
		return []byte("tomb|" + strconv.FormatInt(v.exp, 10))
	}
	return []byte(v.data + "|" + strconv.FormatInt(v.exp, 10))
}

func (codec) Decode(b []byte) (val, error) {
	d, e, ok := strings.Cut(string(b), "|")
	exp, err := strconv.ParseInt(e, 10, 64)
	if !ok || err != nil {
		return val{}, fmt.Errorf("bad value %q", b)
	}
	return val{data: d, exp: exp, tomb: d == "tomb"}, nil
}

func (codec) Expiry(v val) (int64, bool) { return v.exp, !v.tomb }

type rig struct {
	t   *testing.T
	clk *clock.Manual
	mem *Memory
	s   *Shard[val]
	cfg Config
}

func newRig(t *testing.T, cfg Config) *rig {
	cfg = noLinger(cfg)
	r := &rig{t: t, clk: clock.NewManual(time.UnixMilli(1_000_000)), mem: NewMemory(), cfg: cfg}
	r.open()
	return r
}

// noLinger has the rigs write async writes at the writer's next turn, as
// their tests count on, unless a test sets the linger itself
// (TestAsyncWritesLingerForCompany).
func noLinger(cfg Config) Config {
	if cfg.AsyncDelay == 0 {
		cfg.AsyncDelay = -1
	}
	return cfg
}

func (r *rig) open() {
	s, err := Open[val](r.cfg, Env{Clock: r.clk, Backend: r.mem}, codec{})
	require.NoError(r.t, err)
	r.s = s
}

// restart closes the shard (everything written survives in Memory) and
// recovers a new one from the backend.
func (r *rig) restart() {
	require.NoError(r.t, r.s.Close())
	r.mem.Reopen()
	r.open()
}

func (r *rig) nowMs() int64 { return r.clk.Now().UnixMilli() }

func (r *rig) put(flow string, mode Mode, kv ...string) {
	r.t.Helper()
	ch := map[string]val{}
	for i := 0; i < len(kv); i += 2 {
		ch[kv[i]] = val{data: kv[i+1], exp: r.nowMs() + 10_000}
	}
	require.NoError(r.t, r.s.Put(flow, ch, nil, mode))
}

func (r *rig) stored(flow string) map[string]string {
	out := map[string]string{}
	require.NoError(r.t, r.mem.Scan(func(m Mutation) error {
		if m.Flow == flow && m.Key != metaKey {
			out[m.Key] = string(m.Value)
		}
		return nil
	}))
	return out
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Async, "async": Async, "sync": Sync, "none": None} {
		m, err := ParseMode(in)
		require.NoError(t, err)
		require.Equal(t, want, m)
	}
	_, err := ParseMode("fsync")
	require.ErrorIs(t, err, ErrBadMode)
	require.EqualError(t, err, `shard: unknown durability mode "fsync": want sync, async or none`)
}

// Sync writers that arrive while the writer waits share one fsync, and
// none of them is answered before it.
func TestSyncWritersShareOneFsync(t *testing.T) {
	r := newRig(t, Config{})
	answered := 0
	for i := range 100 {
		flow := fmt.Sprintf("f%d", i)
		r.put(flow, Sync, "k", "v")
		r.s.WhenDurable(flow, func(err error) { require.NoError(t, err); answered++ })
	}
	require.Zero(t, answered, "no sync write may be answered before its fsync")
	require.Zero(t, r.mem.Writes)
	r.clk.Advance(0)
	require.Equal(t, 100, answered)
	require.Equal(t, 1, r.mem.Writes)
	require.Equal(t, 1, r.mem.Syncs)
	require.Equal(t, uint64(100), r.s.Stats().SyncAcks)

	// Already durable: answered at once, no new fsync.
	r.s.WhenDurable("f1", func(error) { answered++ })
	require.Equal(t, 101, answered)
	require.Equal(t, 1, r.mem.Syncs)
}

func TestAckBeforeSyncBugAnswersAtOnce(t *testing.T) {
	r := newRig(t, Config{Bugs: bugs.Set{AckBeforeSync: true}})
	r.put("f", Sync, "k", "v")
	answered := false
	r.s.WhenDurable("f", func(error) { answered = true })
	require.True(t, answered)
	require.Zero(t, r.mem.Syncs, "the bug acknowledges with nothing on disk")
}

// Async writes reach the backend at once without an fsync; one group
// fsync follows within SyncEvery.
func TestAsyncGroupFsyncEveryInterval(t *testing.T) {
	r := newRig(t, Config{SyncEvery: 50 * time.Millisecond})
	for i := range 10 {
		r.put(fmt.Sprintf("f%d", i), Async, "k", "v")
	}
	r.clk.Advance(0)
	require.Equal(t, 1, r.mem.Writes)
	require.Zero(t, r.mem.Syncs)
	r.clk.Advance(49 * time.Millisecond)
	require.Zero(t, r.mem.Syncs)
	r.clk.Advance(time.Millisecond)
	require.Equal(t, 1, r.mem.Syncs)
	// Quiet: no more group fsyncs; the clock floor alone, once per
	// PurgeEvery.
	r.clk.Advance(time.Second)
	require.Equal(t, 2, r.mem.Syncs)
	r.clk.Advance(time.Second)
	require.Equal(t, 3, r.mem.Syncs)
}

func TestNoneIsMemoryOnly(t *testing.T) {
	r := newRig(t, Config{})
	r.put("f", None, "k", "v")
	r.clk.Advance(time.Second)
	require.Zero(t, r.mem.Writes)
	require.Equal(t, "v", r.s.Get("f")["k"].data)

	// A none write over a key on disk deletes it there, so a restart
	// cannot bring the older value back.
	r.put("g", Sync, "k", "old")
	r.clk.Advance(0)
	require.Len(t, r.stored("g"), 1)
	r.put("g", None, "k", "new")
	r.clk.Advance(0)
	require.Empty(t, r.stored("g"))
}

func TestPutRefusesAtMaxPending(t *testing.T) {
	r := newRig(t, Config{MaxPending: 10})
	for i := range 4 {
		r.put(fmt.Sprintf("f%d", i), Async, "k", "v") // a key and the flow's metadata each
	}
	err := r.s.Put("over", map[string]val{"a": {data: "x", exp: r.nowMs() + 1000}, "b": {data: "y", exp: r.nowMs() + 1000}}, nil, Async)
	require.ErrorIs(t, err, ErrBusy)
	require.Nil(t, r.s.Peek("over"), "a refused put changes nothing")
	require.Equal(t, uint64(1), r.s.Stats().Busy)
	r.clk.Advance(0)
	r.put("over", Async, "a", "x")
}

// A copy larger than the whole queue is taken alone into an empty queue,
// and only there: refused always, a flow with more keys than MaxPending
// could never be adopted or moved.
func TestPutLargerThanTheQueueGoesAlone(t *testing.T) {
	r := newRig(t, Config{MaxPending: 3})
	big := map[string]val{}
	for _, k := range []string{"a", "b", "c", "d"} {
		big[k] = val{data: k, exp: r.nowMs() + 1000}
	}
	r.put("small", Async, "k", "v")
	require.ErrorIs(t, r.s.Put("big", big, nil, Async), ErrBusy, "behind another write, the big copy waits")
	require.Nil(t, r.s.Peek("big"))
	r.clk.Advance(0)
	require.Zero(t, r.s.Pending())
	require.NoError(t, r.s.Put("big", big, nil, Async), "into an empty queue it goes alone")
	require.Equal(t, 5, r.s.Pending(), "four keys and the flow's metadata")
	require.ErrorIs(t, r.s.Put("small", map[string]val{"k": {data: "w", exp: r.nowMs() + 1000}}, nil, Async), ErrBusy, "and nothing joins it")
	r.clk.Advance(0)
	require.Len(t, r.stored("big"), 4)
}

func TestEvictsWholeLeastRecentlyUsedFlows(t *testing.T) {
	r := newRig(t, Config{MaxFlows: 3})
	for i := range 3 {
		r.put(fmt.Sprintf("f%d", i), Async, "a", "1", "b", "2", "c", "3")
	}
	r.clk.Advance(0)
	r.s.Get("f0") // f1 is now the least recently used
	r.put("f3", Async, "a", "1")
	r.clk.Advance(0)
	require.Equal(t, []string{"f0", "f2", "f3"}, r.s.Flows())
	require.Empty(t, r.stored("f1"), "an evicted flow leaves the backend too")
	require.Equal(t, 3, r.s.Live())
	require.Equal(t, uint64(1), r.s.Stats().Evicted)

	// The hook decides (an owner tombstones instead of dropping).
	var hooked []string
	r.s.OnEvict(func(flow string) { hooked = append(hooked, flow); r.s.Drop(flow) })
	r.put("f4", Async, "a", "1")
	r.clk.Advance(0)
	require.Equal(t, []string{"f2"}, hooked, "f0 was used after f2")
}

func TestEvictKeysBugTearsAFlow(t *testing.T) {
	r := newRig(t, Config{MaxFlows: 1, Bugs: bugs.Set{EvictKeys: true}})
	r.put("f0", Async, "a", "1", "b", "2")
	r.put("f1", Async, "a", "1")
	r.clk.Advance(0)
	require.Len(t, r.s.Peek("f0"), 1, "the bug leaves a flow with some of its keys")
}

// A flow whose values expired stops counting at once and is removed
// after its grace, from memory and from the backend.
func TestExpiredFlowsArePurgedAfterGrace(t *testing.T) {
	r := newRig(t, Config{GraceMs: 5_000, PurgeEvery: time.Second})
	r.put("f", Async, "k", "v") // expires in 10s
	r.clk.Advance(0)
	require.Equal(t, 1, r.s.Live())
	r.clk.Advance(10 * time.Second)
	require.Zero(t, r.s.Live(), "dead flows do not count against the cap")
	require.Equal(t, []string{"f"}, r.s.Flows(), "kept through the grace to shadow stale copies")
	r.clk.Advance(5 * time.Second)
	require.Empty(t, r.s.Flows())
	require.Equal(t, uint64(1), r.s.Stats().Purged)
	require.Empty(t, r.stored("f"))
}

func TestRecoveryRestoresFlowsAndDropsPurged(t *testing.T) {
	r := newRig(t, Config{GraceMs: 5_000})
	r.put("keep", Sync, "a", "1", "b", "2")
	require.NoError(t, r.s.Put("keep", nil, []byte("meta"), Sync))
	require.NoError(t, r.s.Put("old", map[string]val{"k": {data: "x", exp: r.nowMs() + 1}}, nil, Async))
	r.clk.Advance(0)
	r.clk.Set(r.clk.Now().Add(6 * time.Second)) // "old" is past its grace, "keep" is live
	r.restart()
	require.Equal(t, []string{"keep"}, r.s.Flows())
	require.Equal(t, 2, r.s.Stats().Recovered)
	meta, mode, ok := r.s.Meta("keep")
	require.True(t, ok)
	require.Equal(t, "meta", string(meta))
	require.Equal(t, Sync, mode)
	require.Equal(t, "2", r.s.Get("keep")["b"].data)
	r.clk.Advance(0)
	require.Empty(t, r.stored("old"), "recovery removes what it dropped")
}

func TestRecoveryRefusesUndecodableValues(t *testing.T) {
	r := newRig(t, Config{})
	require.NoError(t, r.mem.Write([]Mutation{{Flow: "f", Key: "k", Value: []byte("garbage")}}, true))
	_, err := Open[val](Config{}, Env{Clock: r.clk, Backend: r.mem}, codec{})
	require.ErrorContains(t, err, `flow "f" key "k"`)
}

func TestBackendFailureIsStickyAndAnswersWaiters(t *testing.T) {
	r := newRig(t, Config{})
	r.put("f", Sync, "k", "v")
	var got error
	r.s.WhenDurable("f", func(err error) { got = err })
	require.NoError(t, r.mem.Close()) // every later backend call fails
	r.clk.Advance(0)
	require.Error(t, got)
	require.Error(t, r.s.Put("f", map[string]val{"k": {data: "w", exp: r.nowMs() + 1}}, nil, Async))
	require.True(t, errors.Is(r.s.Put("g", nil, nil, Async), ErrClosed))
}

// failingSync is a backend whose fsyncs fail while fail is set.
type failingSync struct {
	*Memory
	fail bool
}

var errEIO = errors.New("EIO")

func (f *failingSync) Write(b []Mutation, sync bool) error {
	if sync && f.fail {
		return errEIO
	}
	return f.Memory.Write(b, sync)
}

func (f *failingSync) Sync() error {
	if f.fail {
		return errEIO
	}
	return f.Memory.Sync()
}

// A failed fsync stops the node (core/halt): the disk may have dropped
// what it held, so nothing after it can be trusted, and no waiter is told
// its write is durable.
func TestFailedSyncHaltsTheNode(t *testing.T) {
	r := newRig(t, Config{})
	fs := &failingSync{Memory: r.mem, fail: true}
	r.s.env.Backend = fs
	r.put("f", Sync, "k", "v")
	acked := false
	r.s.WhenDurable("f", func(err error) { acked = err == nil })
	defer func() {
		h, ok := recover().(halt.Halt)
		require.True(t, ok, "the writer must halt the node")
		require.ErrorIs(t, h.Reason, errEIO)
		require.False(t, acked)
	}()
	r.clk.Advance(0)
	t.Fatal("the writer carried on after a failed fsync")
}

// The planted bug retries instead, and acknowledges once a later fsync
// passes.
func TestRetryFailedSyncBugCarriesOn(t *testing.T) {
	r := newRig(t, Config{Bugs: bugs.Set{RetryFailedSync: true}})
	fs := &failingSync{Memory: r.mem, fail: true}
	r.s.env.Backend = fs
	r.put("f", Sync, "k", "v")
	acked := false
	r.s.WhenDurable("f", func(err error) { acked = err == nil })
	r.clk.Advance(0)
	require.False(t, acked)
	fs.fail = false
	r.clk.Advance(time.Second)
	require.True(t, acked, "the bug acknowledges after a retry")
}

func TestNowNeverGoesBack(t *testing.T) {
	r := newRig(t, Config{})
	before := r.s.NowMs()
	r.clk.Set(r.clk.Now().Add(-time.Hour))
	require.Equal(t, before, r.s.NowMs())
}

// The clamp survives a restart: every fsync records the clock's high
// water, and a node whose clock comes back behind starts from there.
func TestClockFloorSurvivesRestart(t *testing.T) {
	r := newRig(t, Config{})
	r.put("f", Sync, "k", "v")
	r.s.WhenDurable("f", func(error) {})
	r.clk.Advance(0)
	high := r.s.NowMs()
	r.clk.Set(r.clk.Now().Add(-time.Hour))
	r.restart()
	require.Equal(t, high, r.s.NowMs())
	require.Equal(t, []string{"f"}, r.s.Flows(), "the clock record is no flow")
}

// A batch is cut only between Puts: a crash between two backend writes
// never keeps half of one.
func TestBatchesNeverSplitAPut(t *testing.T) {
	r := newRig(t, Config{MaxBatch: 4})
	var sizes []int
	r.s.env.Backend = splitSpy{r.mem, &sizes}
	r.put("f", Async, "a", "1", "b", "2")                               // 2 keys + metadata: a unit of 3
	r.put("g", Async, "a", "1", "b", "2", "c", "3", "d", "4", "e", "5") // a unit of 6, over MaxBatch: whole
	r.put("h", Async, "a", "1")                                         // 2
	r.clk.Advance(0)
	require.Equal(t, []int{3, 6, 2}, sizes)
}

type splitSpy struct {
	*Memory
	sizes *[]int
}

func (s splitSpy) Write(batch []Mutation, sync bool) error {
	*s.sizes = append(*s.sizes, len(batch))
	return s.Memory.Write(batch, sync)
}

// A sync write nobody waits for (a replica's copy of a sync push) is
// still fsynced at the writer's next turn.
func TestSyncPutIsSyncedWithoutAWaiter(t *testing.T) {
	r := newRig(t, Config{})
	r.put("f", Sync, "k", "v")
	r.clk.Advance(0)
	require.Equal(t, 1, r.mem.Syncs)
}

// A node that only reads still records its clock's high water within
// PurgeEvery, so an expiry it has shown stays shown after a restart
// behind a clock step.
func TestClockFloorAdvancesWithoutWrites(t *testing.T) {
	r := newRig(t, Config{PurgeEvery: time.Second})
	require.NoError(t, r.s.Put("f", map[string]val{"k": {data: "v", exp: r.nowMs() + 5_000}}, nil, Sync))
	r.clk.Advance(0)
	r.clk.Advance(6 * time.Second) // reads now see k expired
	seen := r.s.NowMs()
	r.clk.Set(r.clk.Now().Add(-10 * time.Second))
	r.s.Stop() // a crash: only what was fsynced counts
	r.mem.Reopen()
	r.open()
	require.GreaterOrEqual(t, r.s.NowMs(), seen-1000, "the floor is at most one PurgeEvery behind")
	require.Greater(t, r.s.NowMs(), r.s.Get("f")["k"].exp, "k stays expired")
}

func TestBatchesAreBoundedInBytes(t *testing.T) {
	r := newRig(t, Config{MaxBatchBytes: 10})
	var sizes []int
	r.s.env.Backend = splitSpy{r.mem, &sizes}
	r.put("f", Async, "a", "1234567890") // one unit over the bound: whole
	r.put("g", Async, "a", "1")
	r.put("h", Async, "a", "1")
	r.clk.Advance(0)
	require.Equal(t, []int{2, 2, 2}, sizes)
}

// An eviction hook may keep a flow (an owner that may not write it now);
// the flow counts again and the cap waits for it.
func TestFlowsAnEvictHookKeepsCountAgain(t *testing.T) {
	r := newRig(t, Config{MaxFlows: 1})
	r.s.OnEvict(func(string) {})
	r.put("f0", Async, "a", "1")
	r.put("f1", Async, "a", "1")
	r.clk.Advance(0)
	require.Equal(t, 2, r.s.Live(), "kept, and counted")
	require.Equal(t, []string{"f0", "f1"}, r.s.Flows())
}

type disorderly struct{ *Memory }

func (d disorderly) Scan(fn func(Mutation) error) error {
	for _, m := range []Mutation{{Flow: "b", Key: "k", Value: []byte("x|1")}, {Flow: "a", Key: "k", Value: []byte("x|1")}} {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

func TestRecoveryRefusesAnOutOfOrderScan(t *testing.T) {
	_, err := Open[val](Config{}, Env{Clock: clock.NewManual(time.UnixMilli(0)), Backend: disorderly{NewMemory()}}, codec{})
	require.ErrorContains(t, err, "out of (flow, key) order")
}

func TestNoExpiryClampBugLetsTheClockGoBack(t *testing.T) {
	r := newRig(t, Config{Bugs: bugs.Set{NoExpiryClamp: true}})
	before := r.s.NowMs()
	r.clk.Set(r.clk.Now().Add(-time.Hour))
	require.Equal(t, before-3_600_000, r.s.NowMs())
}

// Every bound must be positive (a zero takes its default); Open refuses a
// configuration that breaks one, naming it, and opens nothing.
func TestOpenRefusesABoundThatIsNotPositive(t *testing.T) {
	for name, cfg := range map[string]Config{
		"max flows":       {MaxFlows: -1},
		"sync every":      {SyncEvery: -time.Millisecond},
		"commit delay":    {CommitDelay: -time.Millisecond},
		"max pending":     {MaxPending: -1},
		"max wait":        {MaxWait: -time.Millisecond},
		"max waiters":     {MaxWaiters: -1},
		"max batch":       {MaxBatch: -1},
		"max batch bytes": {MaxBatchBytes: -1},
		"purge every":     {PurgeEvery: -time.Second},
		"grace":           {GraceMs: -1},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorContains(t, cfg.Validate(), "every bound must be positive")
			mem := NewMemory()
			s, err := Open[val](cfg, Env{Clock: clock.NewManual(time.UnixMilli(1_000_000)), Backend: mem}, codec{})
			require.ErrorContains(t, err, "every bound must be positive")
			require.Nil(t, s)
		})
	}
	// The least legal values open.
	cfg := Config{MaxFlows: 1, SyncEvery: 1, CommitDelay: 0, MaxPending: 1, MaxWait: 1, MaxWaiters: 1, MaxBatch: 1, MaxBatchBytes: 1, PurgeEvery: 1, GraceMs: 0}
	require.NoError(t, cfg.Validate())
	s, err := Open[val](cfg, Env{Clock: clock.NewManual(time.UnixMilli(1_000_000)), Backend: NewMemory()}, codec{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
