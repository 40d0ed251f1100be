// Package recfile is the core's one record file: an append-only file of
// checksummed records behind a magic-and-version header, and the rules
// that tell, on replay, a tail a crash can leave (cut it) from damage no
// crash leaves (refuse it). core/journal (the raft log) and core/shard's
// Log (the FlowShard on any FS) keep only their record bodies; the
// framing, the scan and the storage seam they write through (FS, File)
// are here, once.
//
// # Format
//
//	file   = magic:6 bytes  version:u16le  record*
//	record = length:u32le bodycrc:u32le headcrc:u32le body  (12 + length bytes)
//
// headcrc is CRC-32C over length and bodycrc, bodycrc is CRC-32C over the
// body. The header has its own checksum so that a damaged length is caught
// as damage, instead of sending replay past the end of the file where it
// would look like a torn write.
//
// # A torn tail versus corruption
//
// A Scanner reads records in order until the end of the file or the first
// bad one, which is either a torn tail (Next returns no body and Torn
// reports it; the caller cuts the file there and syncs the cut) or
// corruption (an error wrapping ErrCorrupt that names the offset). A bad
// record is torn only when nothing after it can be a record some completed
// write put there:
//
//	what is wrong at offset off                     verdict
//	fewer than 12 bytes left                        torn
//	header checksum fails                           torn if every byte from off
//	                                                to EOF is zero, or a hole a
//	                                                crash left touches the header
//	                                                (HoleIn); else corrupt
//	header holds, body reaches past EOF             torn (whatever the length)
//	header holds, length 0 or over the bound        corrupt
//	body checksum fails                             torn if the record ends exactly
//	                                                at EOF, only zeros follow it,
//	                                                or a hole touches it; else
//	                                                corrupt
//	checksums hold, the body does not decode        corrupt (the caller's to say)
//
// A header is checked before its length is believed, so a damaged length
// is never mistaken for a tear, and no declared length is allocated before
// it is known to lie inside the file and under the bound. The zero and
// hole cases are for real file systems, which may grow a file before its
// data blocks reach the disk, and lose unsynced blocks one at a time; a
// bad last record that ends exactly at EOF is the last write landing with
// garbage in it. Everything else with bytes after it is damage a crash
// cannot cause, so a record before the tail is never dropped silently: it
// may hold an acknowledged write.
package recfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Errors a scan or a header check returns, wrapped with the file's name
// and the offset.
var (
	// ErrCorrupt is damage before the tail: bytes a crash cannot leave.
	ErrCorrupt = errors.New("record file corrupt")
	// ErrVersion: the file was written in a format version this code does
	// not read.
	ErrVersion = errors.New("record file: unsupported format version")
)

// RecordHeaderSize is the size of a record's header.
const RecordHeaderSize = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Format names one kind of record file: its magic and the format version
// this code writes and reads.
type Format struct {
	Magic   string // six bytes
	Version uint16
}

// HeaderSize is the size of the file header.
func (f Format) HeaderSize() int { return len(f.Magic) + 2 }

// AppendHeader appends the file header to buf.
func (f Format) AppendHeader(buf []byte) []byte {
	return binary.LittleEndian.AppendUint16(append(buf, f.Magic...), f.Version)
}

// CheckHeader reads the header of a file of size bytes. A file shorter
// than a header never held a record (a record file's header is synced
// before its name), which it reports as short; a wrong magic is
// ErrCorrupt; another version is ErrVersion.
func (f Format) CheckHeader(file File, name string, size int64) (short bool, err error) {
	if size < int64(f.HeaderSize()) {
		return true, nil
	}
	hdr := make([]byte, f.HeaderSize())
	if _, err := file.ReadAt(hdr, 0); err != nil {
		return false, fmt.Errorf("read %s: %w", name, err)
	}
	if string(hdr[:len(f.Magic)]) != f.Magic {
		return false, fmt.Errorf("%w: %s is not a %s file (magic %q)", ErrCorrupt, name, f.Magic, hdr[:len(f.Magic)])
	}
	if v := binary.LittleEndian.Uint16(hdr[len(f.Magic):]); v != f.Version {
		return false, fmt.Errorf("%w: %s has version %d, this code reads %d", ErrVersion, name, v, f.Version)
	}
	return false, nil
}

// Begin reserves a record header at the end of buf; the body follows it.
// It returns where the record starts, for End.
func Begin(buf []byte) ([]byte, int) {
	start := len(buf)
	return append(buf, make([]byte, RecordHeaderSize)...), start
}

// End fills in the header of the record that starts at start, once its
// body (everything after the header) is complete.
func End(buf []byte, start int) []byte {
	h := buf[start : start+RecordHeaderSize]
	body := buf[start+RecordHeaderSize:]
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(body, castagnoli))
	binary.LittleEndian.PutUint32(h[8:12], crc32.Checksum(h[0:8], castagnoli))
	return buf
}

// readBufMax bounds a scan's read buffer.
const readBufMax = 64 << 10

// Scanner reads a record file's records in order and classifies the first
// bad one as a torn tail or as corruption (see the package doc).
type Scanner struct {
	f       File
	name    string
	size    int64
	maxBody int
	br      *bufio.Reader

	// Off is where the record Next returns next starts; once Next has
	// returned no body, it is where the whole records end: the cut point,
	// if Torn.
	Off int64
	// Torn reports that the records stopped at a torn tail.
	Torn bool
	// Bugs are the planted bugs (core/bugs) the file's owner passes on.
	Bugs Bugs
	// TornBody, under Bugs.KeepTorn, is what was on disk of a torn
	// record whose header held but whose body the file cut short: the
	// real bytes, zero-padded to the declared length.
	TornBody []byte
	TornReal int

	end int64 // where the record last returned ends
}

// Bugs switches the scanner's planted bugs (core/bugs) on.
type Bugs struct {
	// KeepTorn keeps a torn record's bytes (TornBody) for
	// JournalTrustTail, which decodes them.
	KeepTorn bool
	// TearDamage (RecfileTearDamage) reads damage before the tail as a
	// torn tail: the records from it on are cut away.
	TearDamage bool
	// NoHoleCheck (RecfileNoHoleCheck) never looks for a hole a crash
	// left under a bad record: a torn tail with a hole in it is damage.
	NoHoleCheck bool
	// BodyVouches (RecfileBodyVouches) believes a record header whose
	// checksum fails when the body it describes checks out.
	BodyVouches bool
}

// NewScanner scans f, of size bytes, from off (the end of the file
// header), allowing bodies of at most maxBody bytes.
func NewScanner(f File, name string, off, size int64, maxBody int) *Scanner {
	bufSize := int(min(max(size-off, 16), readBufMax))
	return &Scanner{
		f: f, name: name, size: size, maxBody: maxBody, Off: off,
		br: bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), bufSize),
	}
}

// Corrupt is the error for damage at offset at, in the scanner's words.
func (s *Scanner) Corrupt(at int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, s.name, at, fmt.Sprintf(format, args...))
}

// Next returns the body of the record at Off and moves Off past it, or no
// body at the end of the records (a clean end, or a torn tail with Torn
// set). The body is the caller's: it was allocated for this record alone.
func (s *Scanner) Next() ([]byte, error) {
	rest := s.size - s.Off
	if rest == 0 {
		return nil, nil
	}
	if rest < RecordHeaderSize {
		return s.tear() // a header cut short
	}
	var h [RecordHeaderSize]byte
	if _, err := io.ReadFull(s.br, h[:]); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.name, s.Off, err)
	}
	length := binary.LittleEndian.Uint32(h[0:4])
	bodyCRC := binary.LittleEndian.Uint32(h[4:8])
	headerHolds := binary.LittleEndian.Uint32(h[8:12]) == crc32.Checksum(h[0:8], castagnoli)
	if !headerHolds && s.Bugs.BodyVouches {
		headerHolds = s.bodyVouches(h)
	}
	if !headerHolds {
		// The length cannot be trusted, so the record has no known end;
		// only zeros from here on, or a hole under the header, are a tear.
		return s.tornIfZeros(s.Off, s.Off+RecordHeaderSize, "record header checksum fails")
	}
	s.end = s.Off + RecordHeaderSize + int64(length)
	switch {
	case s.end > s.size:
		// A body cut short. Its length is checked before anything is
		// allocated: over the bound it is a record too large, cut short
		// all the same.
		if s.Bugs.KeepTorn && int(length) <= s.maxBody {
			s.TornBody = make([]byte, length)
			s.TornReal, _ = io.ReadFull(s.br, s.TornBody)
		}
		return s.tear()
	case length == 0 || int(length) > s.maxBody:
		// A header that checks out was written as it reads, and whole
		// records may follow it: a length the writer never writes (or
		// one written under a larger bound) must not be skipped.
		return nil, s.Corrupt(s.Off, "record length %d outside [1, %d]", length, s.maxBody)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.br, body); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.name, s.Off, err)
	}
	if crc32.Checksum(body, castagnoli) != bodyCRC {
		if s.end == s.size {
			return s.tear() // the last write landed with garbage in it
		}
		return s.tornIfZeros(s.end, s.end, "record body checksum fails")
	}
	s.Off = s.end
	return body, nil
}

// RecordStart is where the record Next returned last starts.
func (s *Scanner) RecordStart(body []byte) int64 {
	return s.Off - RecordHeaderSize - int64(len(body))
}

func (s *Scanner) tear() ([]byte, error) {
	s.Torn = true
	return nil, nil
}

// tornIfZeros tears at Off if every byte from `from` to the end of the
// file is zero, or if a hole a crash left (HoleIn) begins within the bad
// record, [Off, recEnd); it reports corruption otherwise.
func (s *Scanner) tornIfZeros(from, recEnd int64, why string) ([]byte, error) {
	if s.Bugs.TearDamage {
		return s.tear()
	}
	zero, err := s.zerosFrom(from)
	if err != nil {
		return nil, err
	}
	if !zero {
		if s.Bugs.NoHoleCheck {
			return nil, s.Corrupt(s.Off, "%s (no hole looked for)", why)
		}
		if zero, err = HoleIn(s.f, s.size, s.Off, recEnd); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.name, err)
		}
	}
	if zero {
		return s.tear()
	}
	return nil, s.Corrupt(s.Off, "%s, and %d bytes follow that a torn write cannot explain", why, s.size-s.Off)
}

func (s *Scanner) zerosFrom(off int64) (bool, error) {
	buf := make([]byte, min(s.size-off, readBufMax))
	for off < s.size {
		n := int(min(s.size-off, int64(len(buf))))
		if _, err := s.f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("read %s at %d: %w", s.name, off, err)
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(n)
	}
	return true, nil
}
