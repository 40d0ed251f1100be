package realnet

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/stretchr/testify/require"
)

func TestDirFSFollowsTheSeam(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	_, err = d.Open("journal")
	require.ErrorIs(t, err, recfile.ErrNotExist)

	f, err := d.Create("journal")
	require.NoError(t, err)
	_, err = f.Write([]byte("hello "))
	require.NoError(t, err)
	_, err = f.Write([]byte("world"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, d.SyncDir())
	require.NoError(t, f.Truncate(5))
	_, err = f.Write([]byte("!"))
	require.NoError(t, err)
	size, _ := f.Size()
	require.Equal(t, int64(6), size, "a write after a truncate goes to the new end")
	buf := make([]byte, 10)
	n, err := f.ReadAt(buf, 0)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, "hello!", string(buf[:n]))
	require.Error(t, f.Truncate(100), "truncate cannot grow a file")
	require.NoError(t, f.Close())

	g, err := d.Create("journal.tmp")
	require.NoError(t, err)
	_, _ = g.Write([]byte("new"))
	require.NoError(t, g.Sync())
	require.NoError(t, g.Close())
	require.NoError(t, d.Rename("journal.tmp", "journal"))
	require.NoError(t, d.SyncDir())
	names, err := d.List()
	require.NoError(t, err)
	require.Equal(t, []string{"journal"}, names)

	h, err := d.Open("journal")
	require.NoError(t, err)
	size, _ = h.Size()
	require.Equal(t, int64(3), size)
	require.NoError(t, h.Close())
	require.NoError(t, d.Remove("journal"))
	require.ErrorIs(t, d.Remove("journal"), recfile.ErrNotExist)
}

func TestDirFSRefusesPaths(t *testing.T) {
	d, err := OpenDir(t.TempDir())
	require.NoError(t, err)
	for _, bad := range []string{"", ".", "..", "../x", "a/b"} {
		_, err := d.Create(bad)
		require.Error(t, err, "%q", bad)
	}
}

// Finding 10 of issue 26: a joiner's data dir was 0755 and its files
// 0644, and the journal holds https imposters' private keys. The dirs a
// node opens are 0700 and their files 0600, made so if an older node
// left them open.
func TestDataIsTheOwnersAlone(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	raft := filepath.Join(root, "raft")
	require.NoError(t, os.MkdirAll(raft, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(raft, "old-segment"), []byte("x"), 0o644))
	d, err := OpenDir(raft)
	require.NoError(t, err)
	f, err := d.Create("new-segment")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	b, err := OpenBolt(root, time.Second)
	require.NoError(t, err)
	require.NoError(t, b.Close())
	for path, want := range map[string]os.FileMode{root: 0o700, raft: 0o700,
		filepath.Join(raft, "old-segment"): 0o600, filepath.Join(raft, "new-segment"): 0o600, filepath.Join(root, BoltFile): 0o600} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, want, fi.Mode().Perm(), path)
	}
}
