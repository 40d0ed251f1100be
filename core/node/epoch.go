package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/fenceline/fenceline/core/recfile"
)

// epochFile holds the node's boot counter: 8 bytes little-endian and a
// CRC-32C of them.
const epochFile = "node.epoch"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// nextEpoch reads the boot counter, adds one and makes the new value
// durable before the node serves anything. The flow store puts it in the
// high bits of the write counters it issues, so a restarted owner's writes
// outrank any its previous incarnation issued — including pushes still in
// flight when it crashed — and copies converge.
//
// The update is write-sibling, sync, rename, sync-directory: a crash at
// any point leaves the old value or the new one. A file that fails its
// checksum is an error, never a silent zero: a counter that went back
// would break the very ordering it exists for.
func nextEpoch(fs recfile.FS) (uint64, error) {
	var cur uint64
	f, err := fs.Open(epochFile)
	switch {
	case errors.Is(err, recfile.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		var b [12]byte
		n, rerr := f.ReadAt(b[:], 0)
		_ = f.Close()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, rerr
		}
		if n != len(b) || crc32.Checksum(b[:8], castagnoli) != binary.LittleEndian.Uint32(b[8:]) {
			return 0, fmt.Errorf("node: %s is damaged (%d bytes, bad checksum): refusing to guess the boot epoch", epochFile, n)
		}
		cur = binary.LittleEndian.Uint64(b[:8])
	}
	next := cur + 1
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], next)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b[:8], castagnoli))
	tmp := epochFile + ".tmp"
	t, err := fs.Create(tmp)
	if err != nil {
		return 0, err
	}
	if _, err := t.Write(b[:]); err != nil {
		return 0, err
	}
	if err := t.Sync(); err != nil {
		return 0, err
	}
	if err := t.Close(); err != nil {
		return 0, err
	}
	if err := fs.Rename(tmp, epochFile); err != nil {
		return 0, err
	}
	if err := fs.SyncDir(); err != nil {
		return 0, err
	}
	return next, nil
}
