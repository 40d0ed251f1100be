package recfile_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/recfile"
	"github.com/fenceline/fenceline/sim/simtest"
)

var testFormat = recfile.Format{Magic: "FLTEST", Version: 1}

// file is a record file of n records with bodies of assorted sizes, and
// where each record ends.
func file(n int) ([]byte, []int64) {
	buf := testFormat.AppendHeader(nil)
	var ends []int64
	for i := range n {
		var start int
		buf, start = recfile.Begin(buf)
		buf = append(buf, bytes.Repeat([]byte{byte('a' + i)}, 1+i*i*37%900)...)
		buf = recfile.End(buf, start)
		ends = append(ends, int64(len(buf)))
	}
	return buf, ends
}

// scan reads every record of b and returns the bodies, where the whole
// records end, whether the scan stopped at a tear, and its error.
func scan(t *testing.T, b []byte) ([][]byte, int64, bool, error) {
	t.Helper()
	m := simtest.NewMachine(t, 1, 0)
	m.Put("f", b)
	f, err := m.Disk().Open("f")
	require.NoError(t, err)
	short, err := testFormat.CheckHeader(f, "f", int64(len(b)))
	if err != nil || short {
		return nil, 0, false, err
	}
	sc := recfile.NewScanner(f, "f", int64(testFormat.HeaderSize()), int64(len(b)), 1<<20)
	var bodies [][]byte
	for {
		body, err := sc.Next()
		if err != nil {
			return bodies, sc.Off, sc.Torn, err
		}
		if body == nil {
			return bodies, sc.Off, sc.Torn, nil
		}
		bodies = append(bodies, body)
	}
}

func TestWholeFileReadsBack(t *testing.T) {
	b, ends := file(6)
	bodies, off, torn, err := scan(t, b)
	require.NoError(t, err)
	require.False(t, torn)
	require.Len(t, bodies, 6)
	require.Equal(t, ends[5], off)
	require.Equal(t, bytes.Repeat([]byte{'c'}, 1+2*2*37%900), bodies[2])
}

// A crash may keep any prefix of what was written, or zeros where the file
// grew past what was synced: at every length, and with zeros after every
// record, the scan keeps the whole records before the cut and calls the
// rest torn, never corrupt.
func TestEveryCrashPointIsATear(t *testing.T) {
	b, ends := file(5)
	whole := func(n int64) (k int, end int64) {
		end = int64(testFormat.HeaderSize())
		for _, e := range ends {
			if e <= n {
				k, end = k+1, e
			}
		}
		return k, end
	}
	for n := int64(testFormat.HeaderSize()); n <= int64(len(b)); n++ {
		k, end := whole(n)
		bodies, off, torn, err := scan(t, b[:n])
		require.NoError(t, err, "cut at %d", n)
		require.Len(t, bodies, k, "cut at %d", n)
		require.Equal(t, end, off, "cut at %d", n)
		require.Equal(t, n != end, torn, "cut at %d", n)

		// The file grew to its full length but nothing after the last
		// sync (a record's end) landed: zeros from there on. (Zeros that
		// start mid-record come only a whole block at a time: see the
		// hole test.)
		if n != end {
			continue
		}
		zeroed := append(bytes.Clone(b[:n]), make([]byte, int64(len(b))-n)...)
		bodies, off, _, err = scan(t, zeroed)
		require.NoError(t, err, "zeros from %d", n)
		require.Len(t, bodies, k, "zeros from %d", n)
		require.Equal(t, end, off, "zeros from %d", n)
	}
}

// A record damaged with whole records after it is corruption, named by
// its offset, whether the damage is in the header or the body.
func TestDamageBeforeTheTailIsCorrupt(t *testing.T) {
	b, ends := file(5)
	for _, at := range []int64{ends[1] + 2, ends[1] + recfile.RecordHeaderSize + 3} {
		bad := bytes.Clone(b)
		bad[at] ^= 0x40
		_, off, _, err := scan(t, bad)
		require.ErrorIs(t, err, recfile.ErrCorrupt, "flip at %d", at)
		require.ErrorContains(t, err, fmt.Sprintf("at offset %d", ends[1]))
		require.Equal(t, ends[1], off)
	}
}

// A hole a crash left inside the last records (a 4 KiB block of zeros the
// file system never wrote, with later blocks present) is a tear.
func TestAHoleUnderTheTailIsATear(t *testing.T) {
	var b []byte
	b = testFormat.AppendHeader(b)
	var ends []int64
	for i := range 4 {
		var start int
		b, start = recfile.Begin(b)
		b = append(b, bytes.Repeat([]byte{byte('k' + i)}, 3000)...)
		b = recfile.End(b, start)
		ends = append(ends, int64(len(b)))
	}
	holed := bytes.Clone(b)
	block := (ends[1]/recfile.BlockSize + 1) * recfile.BlockSize
	copy(holed[block:block+recfile.BlockSize], make([]byte, recfile.BlockSize))
	bodies, off, torn, err := scan(t, holed)
	require.NoError(t, err)
	require.True(t, torn)
	require.Len(t, bodies, 2)
	require.Equal(t, ends[1], off)
}

func TestHeaderIsChecked(t *testing.T) {
	b, _ := file(1)
	bad := bytes.Clone(b)
	copy(bad, "FLJRNL")
	_, _, _, err := scan(t, bad)
	require.ErrorIs(t, err, recfile.ErrCorrupt)
	bad = bytes.Clone(b)
	bad[6] = 9
	_, _, _, err = scan(t, bad)
	require.ErrorIs(t, err, recfile.ErrVersion)
}

// Whatever the bytes, a scan ends in a tear, a clean end or ErrCorrupt,
// and never allocates a length it has not checked.
func FuzzScan(f *testing.F) {
	b, _ := file(3)
	f.Add(b)
	f.Add(b[:len(b)-5])
	f.Fuzz(func(t *testing.T, data []byte) {
		b := append(testFormat.AppendHeader(nil), data...)
		_, off, _, err := scan(t, b)
		if err != nil {
			require.ErrorIs(t, err, recfile.ErrCorrupt)
		}
		require.LessOrEqual(t, off, int64(len(b)))
	})
}

// A declared length is never allocated before it is known to be inside
// the file and under the bound: past the end it is a tear, inside the
// file but over the bound it is corruption.
func TestHugeDeclaredLengthIsNotAllocated(t *testing.T) {
	b, ends := file(2)
	huge := append(bytes.Clone(b), recordHeader(1<<30-1)...)
	huge = append(huge, "a few body bytes"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	bodies, off, torn, err := scan(t, huge)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.True(t, torn)
	require.Len(t, bodies, 2)
	require.Equal(t, ends[1], off)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated by the scan")

	big := append(bytes.Clone(b), recordHeader(2<<20)...)
	big = append(big, make([]byte, 2<<20)...)
	big = append(big, b[testFormat.HeaderSize():]...) // whole records after it
	_, _, _, err = scan(t, big)
	require.ErrorIs(t, err, recfile.ErrCorrupt, "over the 1 MiB bound the scan was given")
}

// recordHeader is a record header whose checksums hold for a body of
// length bytes that is not there.
func recordHeader(length uint32) []byte {
	h := binary.LittleEndian.AppendUint32(nil, length)
	h = binary.LittleEndian.AppendUint32(h, 0)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, crc32.MakeTable(crc32.Castagnoli)))
}
