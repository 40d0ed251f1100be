//fenceline:nomutate the planted JournalTrustTail bug's decoding: it runs only while that bug is on, so it defends nothing

package journal

import "github.com/fenceline/fenceline/core/recfile"

// trustTorn is the planted JournalTrustTail bug: it decodes a record
// whose body was cut short, reading the missing bytes as zeros and
// skipping the checksum. It returns nil if nothing decodes. The scanner
// kept the torn body only under the bug, and only up to the bound replay
// allocates anyway.
func trustTorn(sc *recfile.Scanner) *record {
	body, real := sc.TornBody, sc.TornReal
	if real == 0 {
		return nil
	}
	if kind(body[0]) == kindEntries {
		d := &decoder{b: body[1:]}
		ents := decodeTornEntries(d, real-1)
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

// decodeTornEntries reads an entries payload that was zero-padded from
// real bytes on, keeping, instead of failing, every entry whose term, type
// and data length lie within the real bytes; the last one's data may run
// into the padding.
func decodeTornEntries(d *decoder, real int) []Entry {
	startLen := len(d.b)
	realLeft := func(b []byte) int { return real - (startLen - len(b)) }
	first, count := decodeBatchHeader(d)
	if d.err == nil && realLeft(d.b) < 0 {
		d.fail("batch header torn")
	}
	if d.err != nil {
		return nil
	}
	var ents []Entry
	for i := range count {
		if realLeft(d.b) <= 0 {
			break
		}
		// The entry's header must lie within the real bytes.
		probe := decoder{b: d.b}
		probe.uvarint("term")
		probe.byte("type")
		probe.uvarint("data length")
		if probe.err != nil || realLeft(probe.b) < 0 {
			break
		}
		e, ok := decodeEntry(d, first+i)
		if !ok {
			d.err = nil // keep what came before this entry
			break
		}
		ents = append(ents, e)
	}
	d.b = nil // the padding after the last kept entry is not trailing garbage
	return ents
}
