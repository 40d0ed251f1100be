package journal

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fenceline/fenceline/core/recfile"
)

// format is the journal's record file (core/recfile): the header and
// framing are recfile's; the bodies are the journal's.
var format = recfile.Format{Magic: "FLJRNL", Version: 1}

// kind tags a record body. Stored on disk: never renumber, only add.
type kind uint8

const (
	kindEntries   kind = 1
	kindHardState kind = 2
	kindTruncate  kind = 3
	kindSnapshot  kind = 4
)

func (k kind) String() string {
	switch k {
	case kindEntries:
		return "entries"
	case kindHardState:
		return "hardstate"
	case kindTruncate:
		return "truncate"
	case kindSnapshot:
		return "snapshot"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// record is one decoded record; which field is set depends on kind.
type record struct {
	kind    kind
	entries []Entry   // kindEntries: contiguous, at least one
	hs      HardState // kindHardState
	from    uint64    // kindTruncate: the first index dropped
	snap    Snapshot  // kindSnapshot
}

// minEntryBytes is the smallest encoding of one entry in a batch: a one-byte
// term, the type, a one-byte data length. Decoding trusts a declared count
// only up to the bytes that could hold it, so a forged count cannot make it
// allocate.
const minEntryBytes = 3

// batchPrefixMax is the most an entries body spends before its first entry:
// kind, first index and count.
const batchPrefixMax = 1 + 2*binary.MaxVarintLen64

// beginRecord reserves a record header and writes the kind; endRecord fills
// the header in once the body is complete. It returns where the record
// starts.
func beginRecord(buf []byte, k kind) ([]byte, int) {
	buf, start := recfile.Begin(buf)
	return append(buf, byte(k)), start
}

func endRecord(buf []byte, start int) []byte { return recfile.End(buf, start) }

func appendBytes(buf, p []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(p)))
	return append(buf, p...)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func bytesLen(p []byte) int { return uvarintLen(uint64(len(p))) + len(p) }

// entryLen is the encoded size of e inside a batch.
func entryLen(e *Entry) int { return uvarintLen(e.Term) + 1 + bytesLen(e.Data) }

func appendHardStateRecord(buf []byte, hs HardState) []byte {
	buf, start := beginRecord(buf, kindHardState)
	buf = binary.AppendUvarint(buf, hs.Term)
	buf = binary.AppendUvarint(buf, hs.Vote)
	buf = binary.AppendUvarint(buf, hs.Commit)
	return endRecord(buf, start)
}

func appendTruncateRecord(buf []byte, from uint64) []byte {
	buf, start := beginRecord(buf, kindTruncate)
	buf = binary.AppendUvarint(buf, from)
	return endRecord(buf, start)
}

// snapshotBodyLen is the body size of snap's record.
func snapshotBodyLen(snap *Snapshot) int {
	return 1 + uvarintLen(snap.Meta.Index) + uvarintLen(snap.Meta.Term) + bytesLen(snap.Meta.ConfState) + bytesLen(snap.Data)
}

func appendSnapshotRecord(buf []byte, snap *Snapshot) []byte {
	buf, start := beginRecord(buf, kindSnapshot)
	buf = binary.AppendUvarint(buf, snap.Meta.Index)
	buf = binary.AppendUvarint(buf, snap.Meta.Term)
	buf = appendBytes(buf, snap.Meta.ConfState)
	buf = appendBytes(buf, snap.Data)
	return endRecord(buf, start)
}

// appendEntriesRecord encodes one batch of contiguous entries as one record.
func appendEntriesRecord(buf []byte, ents []Entry) []byte {
	buf, start := beginRecord(buf, kindEntries)
	buf = binary.AppendUvarint(buf, ents[0].Index)
	buf = binary.AppendUvarint(buf, uint64(len(ents)))
	for i := range ents {
		buf = binary.AppendUvarint(buf, ents[i].Term)
		buf = append(buf, ents[i].Type)
		buf = appendBytes(buf, ents[i].Data)
	}
	return endRecord(buf, start)
}

// splitEntries cuts a batch into runs whose records each fit in maxBody
// bytes. A crash may keep some runs and not others; each kept run still
// extends the log contiguously, so that is a prefix like any other.
func splitEntries(ents []Entry, maxBody int) ([][]Entry, error) {
	var runs [][]Entry
	start, size := 0, batchPrefixMax
	for i := range ents {
		n := entryLen(&ents[i])
		if batchPrefixMax+n > maxBody {
			return nil, fmt.Errorf("%w: entry %d encodes to %d bytes, max %d", ErrTooLarge, ents[i].Index, batchPrefixMax+n, maxBody)
		}
		if size+n > maxBody {
			runs = append(runs, ents[start:i])
			start, size = i, batchPrefixMax
		}
		size += n
	}
	if start < len(ents) {
		runs = append(runs, ents[start:])
	}
	return runs, nil
}

// decoder reads a record body. The first error sticks; later reads return
// zero values, so decoding code reads straight through and checks once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte(what string) uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("%s: body ends early", what)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// bytes reads a length-prefixed string. It aliases the body rather than
// copying: the body was allocated for this record alone.
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s: %d bytes declared, %d left", what, n, len(d.b))
		return nil
	}
	if n == 0 {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the payload", len(d.b))
	}
	return d.err
}

// decodeRecord decodes a record body whose checksum held. Any failure here
// is corruption, never a tear: the writer produced these exact bytes.
func decodeRecord(body []byte) (record, error) {
	if len(body) == 0 {
		return record{}, fmt.Errorf("empty body")
	}
	r := record{kind: kind(body[0])}
	d := &decoder{b: body[1:]}
	switch r.kind {
	case kindEntries:
		r.entries = decodeEntries(d)
	case kindHardState:
		r.hs.Term = d.uvarint("term")
		r.hs.Vote = d.uvarint("vote")
		r.hs.Commit = d.uvarint("commit")
	case kindTruncate:
		r.from = d.uvarint("from")
		if d.err == nil && r.from == 0 {
			d.fail("truncate from index 0")
		}
	case kindSnapshot:
		r.snap.Meta.Index = d.uvarint("index")
		r.snap.Meta.Term = d.uvarint("term")
		r.snap.Meta.ConfState = d.bytes("confstate")
		r.snap.Data = d.bytes("data")
		if d.err == nil && r.snap.Meta.Index == 0 {
			d.fail("snapshot at index 0")
		}
	default:
		return record{}, fmt.Errorf("unknown record kind %d", body[0])
	}
	if err := d.finish(); err != nil {
		return record{}, fmt.Errorf("%s record: %w", r.kind, err)
	}
	return r, nil
}

// decodeEntries reads an entries payload strictly: any malformation fails.
func decodeEntries(d *decoder) []Entry {
	first, count := decodeBatchHeader(d)
	if d.err == nil && count > uint64(len(d.b)/minEntryBytes) {
		d.fail("%d entries declared in %d bytes", count, len(d.b))
	}
	if d.err != nil {
		return nil
	}
	ents := make([]Entry, 0, count)
	for i := range count {
		e, ok := decodeEntry(d, first+i)
		if !ok {
			break
		}
		ents = append(ents, e)
	}
	return ents
}

// decodeBatchHeader reads an entries payload's first index and count,
// failing d unless they name a batch: not empty, from index 1 up, within
// the index space.
func decodeBatchHeader(d *decoder) (first, count uint64) {
	first = d.uvarint("first index")
	count = d.uvarint("count")
	switch {
	case d.err != nil:
	case first == 0:
		d.fail("entries from index 0")
	case count == 0:
		d.fail("empty batch")
	case first > math.MaxUint64-count:
		d.fail("indexes overflow: %d entries from %d", count, first)
	}
	return first, count
}

// decodeEntry reads one entry of a batch, at index; ok is false once d
// has failed (it says why).
func decodeEntry(d *decoder, index uint64) (e Entry, ok bool) {
	term := d.uvarint("term")
	typ := d.byte("type")
	n := d.uvarint("data length")
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("data: %d bytes declared, %d left", n, len(d.b))
	}
	if d.err != nil {
		return Entry{}, false
	}
	var data []byte
	if n > 0 {
		data = d.b[:n:n]
	}
	d.b = d.b[n:]
	return Entry{Index: index, Term: term, Type: typ, Data: data}, true
}
