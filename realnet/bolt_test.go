package realnet

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/fenceline/fenceline/core/shard"
)

func scanAll(t *testing.T, b *Bolt) []shard.Mutation {
	t.Helper()
	var got []shard.Mutation
	require.NoError(t, b.Scan(func(m shard.Mutation) error {
		got = append(got, m)
		return nil
	}))
	return got
}

func TestBoltRoundTripsThroughReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBolt(dir, time.Second)
	require.NoError(t, err)
	require.NoError(t, b.Write([]shard.Mutation{
		{Flow: "b", Key: "k1", Value: []byte("b1")},
		{Flow: "aa", Key: "k", Value: []byte("aa")},
		{Flow: "a", Key: "z", Value: []byte("az")},
		{Flow: "a", Key: "y", Value: []byte("ay")},
		{Flow: "a\x00x", Key: "", Value: []byte("nul")},
		{Flow: "", Key: "\xff", Value: []byte{}},
		{Flow: "gone", Key: "k", Value: []byte("x")},
	}, true))
	// Unsynced: Close must make it durable.
	require.NoError(t, b.Write([]shard.Mutation{
		{Flow: "gone", Key: "k", Value: nil},
		{Flow: "b", Key: "k1", Value: []byte("b1'")},
		{Flow: "a", Key: "y", Value: nil},
		{Flow: "a", Key: "y", Value: []byte("ay'")},
		{Flow: "never", Key: "stored", Value: nil},
	}, false))
	require.NoError(t, b.Close())

	b, err = OpenBolt(dir, time.Second)
	require.NoError(t, err)
	defer b.Close()
	want := []shard.Mutation{
		{Flow: "", Key: "\xff", Value: []byte{}},
		{Flow: "a", Key: "y", Value: []byte("ay'")},
		{Flow: "a", Key: "z", Value: []byte("az")},
		{Flow: "a\x00x", Key: "", Value: []byte("nul")},
		{Flow: "aa", Key: "k", Value: []byte("aa")},
		{Flow: "b", Key: "k1", Value: []byte("b1'")},
	}
	got := scanAll(t, b)
	require.Equal(t, want, got)
	require.NotNil(t, got[0].Value, "an empty value must not read back as a delete")
}

// TestBoltCompositeKeysSortAsTuples checks the key layout on the bytes most
// likely to break it: the escape and terminator bytes and prefixes.
func TestBoltCompositeKeysSortAsTuples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 0xFF, 'a'}
	str := func() string {
		s := make([]byte, r.IntN(4))
		for i := range s {
			s[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(s)
	}
	for range 20000 {
		f1, k1, f2, k2 := str(), str(), str(), str()
		c1, c2 := compositeKey(f1, k1), compositeKey(f2, k2)
		want := cmp.Or(strings.Compare(f1, f2), strings.Compare(k1, k2))
		require.Equal(t, want, bytes.Compare(c1, c2), "(%q,%q) vs (%q,%q)", f1, k1, f2, k2)
		f, k, ok := splitKey(c1)
		require.True(t, ok)
		require.Equal(t, [2]string{f1, k1}, [2]string{f, k})
	}
}

func TestBoltBatchIsAllOrNothing(t *testing.T) {
	b, err := OpenBolt(t.TempDir(), time.Second)
	require.NoError(t, err)
	defer b.Close()
	err = b.Write([]shard.Mutation{
		{Flow: "f", Key: "first", Value: []byte("1")},
		{Flow: "f", Key: strings.Repeat("k", bolt.MaxKeySize), Value: []byte("too long")},
	}, true)
	require.Error(t, err)
	require.Contains(t, err.Error(), "flow.db")
	require.Empty(t, scanAll(t, b), "the failed batch left part of itself behind")
}

func TestBoltSecondOpenFailsWithinTimeout(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBolt(dir, time.Second)
	require.NoError(t, err)
	defer b.Close()

	start := time.Now()
	_, err = OpenBolt(dir, 200*time.Millisecond)
	elapsed := time.Since(start)
	require.Error(t, err)
	require.Contains(t, err.Error(), filepath.Join(dir, "flow.db"))
	require.Contains(t, err.Error(), "another process holds")
	t.Logf("after %v: %v", elapsed, err)
	require.Less(t, elapsed, 2*time.Second)

	_, err = OpenBolt(dir, 0)
	require.ErrorContains(t, err, "timeout must be positive")
}

func TestBoltGarbageFileIsAnError(t *testing.T) {
	for name, data := range map[string][]byte{
		"short":   []byte("not a database"),
		"garbage": bytes.Repeat([]byte("fenceline garbage "), 4096),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "flow.db"), data, 0o644))
			b, err := OpenBolt(dir, time.Second)
			if err == nil {
				b.Close()
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "flow.db")
			t.Log(err)
		})
	}
}

const killChildEnv = "FENCELINE_BOLT_CHILD"

// batchSize mutations per batch in the kill test, so a torn batch shows.
const killBatchSize = 4

// TestBoltKillChild is the writer half of TestBoltSurvivesKill9. It does
// nothing in a normal run; re-executed with FENCELINE_BOLT_CHILD=dir it
// writes numbered sync batches into dir and prints each number once Write
// has returned, until it is killed (or, if the parent died first, for at
// most a minute).
func TestBoltKillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("helper process for TestBoltSurvivesKill9")
	}
	b, err := OpenBolt(dir, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	val := bytes.Repeat([]byte{'v'}, 128)
	batch := make([]shard.Mutation, killBatchSize)
	for n, deadline := 0, time.Now().Add(time.Minute); time.Now().Before(deadline); n++ {
		for i := range batch {
			batch[i] = shard.Mutation{Flow: fmt.Sprintf("flow-%d", i), Key: fmt.Sprintf("%09d", n), Value: val}
		}
		if err := b.Write(batch, true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// os.Stdout is unbuffered: the number is in the pipe on return.
		fmt.Println(n)
	}
	os.Exit(3)
}

// TestBoltSurvivesKill9 kills a writer process with SIGKILL mid-stream and
// checks that every batch it saw acknowledged is on disk, whole, and that
// the file reopens cleanly and passes bbolt's consistency check.
func TestBoltSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a writer process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := bufio.NewScanner(out)
	last := -1
	for last < 50 && lines.Scan() {
		n, err := strconv.Atoi(lines.Text())
		require.NoError(t, err, "child said %q", lines.Text())
		last = n
	}
	if last != 50 {
		// stderr is read only once the child is gone: exec's copier
		// goroutine writes it until then.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child stopped early at %d: %v\n%s", last, lines.Err(), stderr.String())
	}
	require.NoError(t, cmd.Process.Kill()) // SIGKILL on Unix
	// Numbers already in the pipe were acknowledged before the kill too.
	for lines.Scan() {
		if n, err := strconv.Atoi(lines.Text()); err == nil {
			last = n
		}
	}
	_ = cmd.Wait()
	t.Logf("child acknowledged batches 0..%d before SIGKILL", last)

	b, err := OpenBolt(dir, time.Second)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	}))
	perBatch := map[string]int{}
	for _, m := range scanAll(t, b) {
		perBatch[m.Key]++
	}
	for n := 0; n <= last; n++ {
		require.Equal(t, killBatchSize, perBatch[fmt.Sprintf("%09d", n)], "acknowledged batch %d", n)
	}
	keys := make([]string, 0, len(perBatch))
	for k := range perBatch {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		require.Equal(t, killBatchSize, perBatch[k], "batch %s is torn", k)
	}
}
