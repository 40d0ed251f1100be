package realnet

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/fenceline/fenceline/core/shard"
)

// shardKillEnv selects the child mode of TestShardKillChild: "<mode>:<dir>".
const shardKillEnv = "FENCELINE_SHARD_KILL_CHILD"

const (
	shardKillWriters    = 8    // concurrent writers in the child, so sync acks come from group fsyncs
	shardKillKeysInFlow = 100  // each writer moves to a new flow every this many keys
	shardKillAcks       = 1000 // acks the parent waits for before SIGKILL
)

// shardKillFlow and shardKillKey name writer w's i-th write: one new key
// per write, so every acknowledged write has its own entry to look for.
func shardKillFlow(w, i int) string { return fmt.Sprintf("w%02d-%04d", w, i/shardKillKeysInFlow) }
func shardKillKey(i int) string     { return fmt.Sprintf("%07d", i) }

// shardKillValue is the value of writer w's i-th write (about 100 bytes).
func shardKillValue(w, i int) []byte {
	return []byte(fmt.Sprintf("w=%02d i=%07d %s", w, i, strings.Repeat("v", 80)))
}

// parseShardKillEntry inverts shardKillFlow and shardKillKey.
func parseShardKillEntry(flow, key string) (w, i int, ok bool) {
	ws, fs, found := strings.Cut(flow, "-")
	if !found || !strings.HasPrefix(ws, "w") {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(ws[1:])
	fi, err2 := strconv.Atoi(fs)
	i, err3 := strconv.Atoi(key)
	if err1 != nil || err2 != nil || err3 != nil || fi != i/shardKillKeysInFlow || shardKillFlow(w, i) != flow {
		return 0, 0, false
	}
	return w, i, true
}

// TestShardKillChild is the writer half of TestShardSurvivesKill9. It does
// nothing in a normal run; re-executed with FENCELINE_SHARD_KILL_CHILD set
// it opens a shard on a loop over dir's bbolt store, and runs writers that
// each Put one new key per write in the given mode and print "flow key"
// once the write is acknowledged (sync: after WhenDurable answered; async:
// after Put returned), until it is killed (or, if the parent died first,
// for at most a minute).
func TestShardKillChild(t *testing.T) {
	spec := os.Getenv(shardKillEnv)
	if spec == "" {
		t.Skip("helper process for TestShardSurvivesKill9")
	}
	die := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	modeName, dir, _ := strings.Cut(spec, ":")
	mode, err := shard.ParseMode(modeName)
	if err != nil {
		die(err)
	}
	l, sh, err := openLoopShard(dir, 4*shardKillWriters)
	if err != nil {
		die(err)
	}
	for w := range shardKillWriters {
		go func() {
			ack := make(chan error, 1)
			answer := func(err error) { ack <- err }
			for i := 0; ; i++ {
				flow, key, val := shardKillFlow(w, i), shardKillKey(i), shardKillValue(w, i)
				if err := postPut(l, sh, flow, key, val, mode, answer); err != nil {
					die(err)
				}
				if err := <-ack; err != nil {
					die(err)
				}
				// os.Stdout is unbuffered and the line is one write, shorter
				// than PIPE_BUF: it is in the pipe, whole, on return.
				fmt.Printf("%s %s\n", flow, key)
			}
		}()
	}
	time.Sleep(time.Minute)
	os.Exit(3)
}

// TestShardSurvivesKill9 kills a shard's process with SIGKILL while its
// writers run, reopens the store, and checks the shard's promises across
// a process death:
//
//   - sync: every write acknowledged before the kill is recovered, with
//     its value;
//   - both modes: the shard reopens without error, the bbolt file passes
//     its consistency check, every recovered value is one the child wrote
//     under that key, and each writer's recovered writes are a prefix of
//     the writes it issued (batches are ordered and atomic, so a crash can
//     only cut the sequence, never leave a hole in it).
func TestShardSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a writer process")
	}
	for _, mode := range []shard.Mode{shard.Sync, shard.Async} {
		t.Run(mode.String(), func(t *testing.T) { testShardKill9(t, mode) })
	}
}

func testShardKill9(t *testing.T, mode shard.Mode) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShardKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), shardKillEnv+"="+mode.String()+":"+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// A child that wedges must not hang the test: the kill closes the pipe.
	watchdog := time.AfterFunc(15*time.Second, func() { _ = cmd.Process.Kill() })
	defer watchdog.Stop()

	type entry struct{ flow, key string }
	var acked []entry
	record := func(line string) {
		flow, key, ok := strings.Cut(line, " ")
		_, _, valid := parseShardKillEntry(flow, key)
		require.True(t, ok && valid, "child said %q", line)
		acked = append(acked, entry{flow, key})
	}
	lines := bufio.NewScanner(out)
	for len(acked) < shardKillAcks && lines.Scan() {
		record(lines.Text())
	}
	if len(acked) < shardKillAcks {
		// stderr is read only once Wait has stopped the goroutine copying it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child stopped after %d acks: %v\n%s", len(acked), lines.Err(), stderr.String())
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL on Unix
	// Lines already in the pipe were acknowledged before the kill too.
	for lines.Scan() {
		record(lines.Text())
	}
	_ = cmd.Wait()
	require.True(t, watchdog.Stop(), "the watchdog killed the child")
	t.Logf("child acknowledged %d %s writes before SIGKILL", len(acked), mode)

	db, err := OpenBolt(dir, time.Second)
	require.NoError(t, err)
	require.NoError(t, db.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
	require.NoError(t, db.Close())

	// Reopen as a node would: the shard on a loop, over the same store.
	l, sh, err := openLoopShard(dir, 16)
	require.NoError(t, err)
	defer l.Stop()
	got := map[entry][]byte{}
	modes := map[string]shard.Mode{}
	require.NoError(t, runOnLoop(l, func() {
		for _, flow := range sh.Flows() {
			_, m, _ := sh.Meta(flow)
			modes[flow] = m
			for key, v := range sh.Peek(flow) {
				got[entry{flow, key}] = v
			}
		}
	}))

	// Every recovered value is one the child wrote, and per writer the
	// recovered writes are 0..n-1 with no hole.
	perWriter := map[int][]int{}
	for e, v := range got {
		w, i, ok := parseShardKillEntry(e.flow, e.key)
		require.True(t, ok, "recovered an entry the child never wrote: %q %q", e.flow, e.key)
		require.Equal(t, string(shardKillValue(w, i)), string(v), "value of %q %q", e.flow, e.key)
		require.Equal(t, mode, modes[e.flow], "mode of flow %q", e.flow)
		perWriter[w] = append(perWriter[w], i)
	}
	recovered := make([]int, shardKillWriters)
	for w, is := range perWriter {
		slices.Sort(is)
		for n, i := range is {
			require.Equal(t, n, i, "writer %d: recovered writes are not a prefix (write %d missing)", w, n)
		}
		recovered[w] = len(is)
	}

	lost := 0
	for _, e := range acked {
		if _, ok := got[e]; !ok {
			lost++
			require.NotEqual(t, shard.Sync, mode, "acknowledged sync write %q %q lost", e.flow, e.key)
		}
	}
	t.Logf("recovered %d writes (per writer %v); %d acknowledged writes lost", len(got), recovered, lost)

	var cerr error
	require.NoError(t, runOnLoop(l, func() { cerr = sh.Close() }))
	require.NoError(t, cerr)
}
