package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// compactSuffix names the sibling Compact writes before renaming it over
// the journal.
const compactSuffix = ".compact"

// Open opens the journal file name in fs, creating it if it does not exist,
// and replays it into memory. A torn tail is cut; corruption before the
// tail fails with ErrCorrupt (see the package doc for exactly which is
// which). Either way the file is synced before Open returns, so everything
// the journal then serves is durable. A sibling left by an interrupted
// compaction is removed first: the journal file itself is the whole truth.
func Open(fs FS, name string, cfg Config) (*Journal, error) {
	cfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := removeSibling(fs, name); err != nil {
		return nil, err
	}
	f, err := fs.Open(name)
	if errors.Is(err, ErrNotExist) {
		f, err = create(fs, name)
	}
	if err != nil {
		return nil, fmt.Errorf("journal: open %s: %w", name, err)
	}
	j := &Journal{fs: fs, name: name, cfg: cfg, f: f}
	if err := j.replay(); err != nil {
		_ = f.Close() // the replay error is the one worth reporting
		return nil, err
	}
	j.mustHoldInvariants(true)
	return j, nil
}

// create makes an empty journal. The header is synced before the name, so
// a name that survives a crash always has its header behind it.
func create(fs FS, name string) (File, error) {
	f, err := fs.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(appendFileHeader(nil)); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := fs.SyncDir(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func removeSibling(fs FS, name string) error {
	names, err := fs.List()
	if err != nil {
		return fmt.Errorf("journal: list: %w", err)
	}
	sib := name + compactSuffix
	for _, n := range names {
		if n != sib {
			continue
		}
		if err := fs.Remove(sib); err != nil {
			return fmt.Errorf("journal: remove leftover %s: %w", sib, err)
		}
		if err := fs.SyncDir(); err != nil {
			return fmt.Errorf("journal: remove leftover %s: %w", sib, err)
		}
	}
	return nil
}

// replay reads the file into j.st, cuts a torn tail, and leaves j.size at
// the end of the last whole record.
func (j *Journal) replay() error {
	size, err := j.f.Size()
	if err != nil {
		return fmt.Errorf("journal: size of %s: %w", j.name, err)
	}
	if size < int64(fileHeaderSize) {
		// create syncs the header before the name, so a shorter file
		// never held a record: start it over.
		return j.reset()
	}
	var hdr [fileHeaderSize]byte
	if _, err := j.f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("journal: read %s: %w", j.name, err)
	}
	if string(hdr[:len(fileMagic)]) != fileMagic {
		return fmt.Errorf("%w: %s: not a journal file (magic %q)", ErrCorrupt, j.name, hdr[:len(fileMagic)])
	}
	if v := binary.LittleEndian.Uint16(hdr[len(fileMagic):]); v != formatVersion {
		return fmt.Errorf("%w: %s has version %d, this code reads %d", ErrVersion, j.name, v, formatVersion)
	}

	sc := newScanner(j.f, j.name, int64(fileHeaderSize), size, j.cfg)
	for {
		rec, err := sc.next()
		if err != nil {
			return err
		}
		if rec == nil {
			break
		}
		if err := j.st.apply(rec); err != nil {
			return sc.corrupt(sc.off, "%s record does not fit the log: %v", rec.kind, err)
		}
		sc.off = sc.end
	}
	j.size = sc.off
	var tail []byte
	if sc.trusted != nil && j.st.apply(sc.trusted) == nil {
		// The planted bug: keep what decoded from the torn record, and
		// write it whole so the next replay reads it as data too.
		tail = appendRecordOf(sc.trusted)
	}
	return j.seal(tail)
}

// reset rewrites a file too short to hold a header.
func (j *Journal) reset() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: reset %s: %w", j.name, err)
	}
	j.size = 0
	return j.seal(appendFileHeader(nil))
}

// seal ends a replay: it cuts the file at j.size if a torn tail lies
// beyond, appends tail, and syncs. The cut must be durable before anything
// is appended after it, or a crash could bring the torn bytes back in
// front of new records, in the middle. The sync is needed even with
// nothing to cut: after a process restart (no machine crash) the file may
// hold records that were never synced, the journal is about to serve them
// and raft may act on them, and no later Save(sync) covers them (Sync
// covers what this journal wrote).
func (j *Journal) seal(tail []byte) error {
	size, err := j.f.Size()
	if err != nil {
		return fmt.Errorf("journal: size of %s: %w", j.name, err)
	}
	if size > j.size {
		if err := j.f.Truncate(j.size); err != nil {
			return fmt.Errorf("journal: cut torn tail of %s at %d: %w", j.name, j.size, err)
		}
	}
	if len(tail) > 0 {
		if err := j.write(tail); err != nil {
			return err
		}
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: sync %s: %w", j.name, err)
	}
	j.dirty = false
	return nil
}

// appendRecordOf encodes a decoded record again.
func appendRecordOf(r *record) []byte {
	switch r.kind {
	case kindEntries:
		return appendEntriesRecord(nil, r.entries)
	case kindHardState:
		return appendHardStateRecord(nil, r.hs)
	case kindTruncate:
		return appendTruncateRecord(nil, r.from)
	case kindSnapshot:
		return appendSnapshotRecord(nil, &r.snap)
	}
	panic(fmt.Sprintf("journal: bug: encode %s", r.kind))
}

// scanner reads records one at a time and classifies the first bad one as
// a torn tail or as corruption.
type scanner struct {
	f       File
	name    string
	size    int64
	maxBody int
	trust   bool // Bugs.JournalTrustTail
	br      *bufio.Reader

	// off is where the record being read starts; after next returns nil
	// it is where the whole records end (the cut point, if torn).
	off int64
	// end is where the record next returned ends.
	end int64
	// torn reports that the records stopped at a torn tail.
	torn bool
	// trusted is what Bugs.JournalTrustTail decoded from the torn record.
	trusted *record
}

// readBufMax bounds replay's read buffer.
const readBufMax = 64 << 10

func newScanner(f File, name string, off, size int64, cfg Config) *scanner {
	bufSize := int(min(max(size-off, 16), readBufMax))
	return &scanner{
		f: f, name: name, size: size, off: off,
		maxBody: cfg.MaxRecordBytes,
		trust:   cfg.Bugs.JournalTrustTail,
		br:      bufio.NewReaderSize(io.NewSectionReader(f, off, size-off), bufSize),
	}
}

func (s *scanner) corrupt(at int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, s.name, at, fmt.Sprintf(format, args...))
}

// tear ends the scan at s.off: the bad record there is a torn tail.
func (s *scanner) tear() (*record, error) {
	s.torn = true
	return nil, nil
}

// next returns the record at s.off, or nil at the end of the records (a
// clean end, or a torn tail with s.torn set). The caller moves s.off to
// s.end after each record.
func (s *scanner) next() (*record, error) {
	rest := s.size - s.off
	if rest == 0 {
		return nil, nil
	}
	if rest < recordHeaderSize {
		return s.tear() // a header cut short
	}
	var h [recordHeaderSize]byte
	if _, err := io.ReadFull(s.br, h[:]); err != nil {
		return nil, fmt.Errorf("journal: read %s at %d: %w", s.name, s.off, err)
	}
	length, bodyCRC, headOK := parseRecordHeader(h[:])
	if !headOK {
		// The length cannot be trusted, so the record has no known end;
		// only zeros from here on, or a hole under the header, are a tear.
		return s.tornIfZeros(s.off, s.off+recordHeaderSize, "record header checksum fails")
	}
	s.end = s.off + recordHeaderSize + int64(length)
	switch {
	case s.end > s.size:
		// A body cut short. Its length is checked before anything is
		// allocated: over the bound it is a record too large for this
		// config, cut short all the same.
		if s.trust && int(length) <= s.maxBody {
			s.trusted = s.trustTorn(length)
		}
		return s.tear()
	case length == 0 || int(length) > s.maxBody:
		// A header that checks out was written as it reads, and whole
		// records follow it: a length the writer never writes (or one
		// written under a larger MaxRecordBytes) must not be skipped.
		return nil, s.corrupt(s.off, "record length %d outside [1, %d]", length, s.maxBody)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.br, body); err != nil {
		return nil, fmt.Errorf("journal: read %s at %d: %w", s.name, s.off, err)
	}
	if crc32.Checksum(body, castagnoli) != bodyCRC {
		if s.end == s.size {
			return s.tear() // the last write landed with garbage in it
		}
		return s.tornIfZeros(s.end, s.end, "record body checksum fails")
	}
	rec, err := decodeRecord(body)
	if err != nil {
		return nil, s.corrupt(s.off, "%v", err)
	}
	return &rec, nil
}

// tornIfZeros tears at s.off if every byte from `from` to the end of the
// file is zero, or if a hole a crash left (HoleIn) begins within the bad
// record, [s.off, recEnd); it reports corruption otherwise.
func (s *scanner) tornIfZeros(from, recEnd int64, why string) (*record, error) {
	zero, err := s.zerosFrom(from)
	if err != nil {
		return nil, err
	}
	if !zero {
		if zero, err = HoleIn(s.f, s.size, s.off, recEnd); err != nil {
			return nil, fmt.Errorf("journal: read %s: %w", s.name, err)
		}
	}
	if zero {
		return s.tear()
	}
	return nil, s.corrupt(s.off, "%s, and %d bytes follow that a torn write cannot explain", why, s.size-s.off)
}

func (s *scanner) zerosFrom(off int64) (bool, error) {
	buf := make([]byte, min(s.size-off, readBufMax))
	for off < s.size {
		n := int(min(s.size-off, int64(len(buf))))
		if _, err := s.f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("journal: read %s at %d: %w", s.name, off, err)
		}
		if !isZero(buf[:n]) {
			return false, nil
		}
		off += int64(n)
	}
	return true, nil
}

func isZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// trustTorn is the planted TrustTail bug: it decodes a record whose body
// was cut short, reading the missing bytes as zeros and skipping the
// checksum. It returns nil if nothing decodes. length is at most maxBody,
// so the padded body is within the bound replay allocates anyway.
func (s *scanner) trustTorn(length uint32) *record {
	body := make([]byte, length)
	real, _ := io.ReadFull(s.br, body)
	if real == 0 {
		return nil
	}
	if kind(body[0]) == kindEntries {
		d := &decoder{b: body[1:]}
		ents := decodeEntriesFrom(d, real-1)
		if d.err != nil || len(ents) == 0 {
			return nil
		}
		return &record{kind: kindEntries, entries: ents}
	}
	rec, err := decodeRecord(body)
	if err != nil {
		return nil
	}
	return &rec
}
