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
// The update is recfile.Replace (write a sibling, sync, rename, sync the
// directory): a crash at any point leaves the old value or the new one. A file that fails its
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
	f, _, err = recfile.Replace(fs, epochFile, epochFile+".tmp", func(w io.Writer) error {
		_, err := w.Write(b[:])
		return err
	})
	if f != nil {
		_ = f.Close() // written and synced; only the name may be undurable
	}
	if err != nil {
		return 0, err
	}
	return next, nil
}
