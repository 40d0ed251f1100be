//fenceline:nomutate the planted RecfileBodyVouches bug: it runs only while that bug is on, so it defends nothing

package recfile

import (
	"encoding/binary"
	"hash/crc32"
)

// bodyVouches is the planted RecfileBodyVouches bug: it takes a record
// header whose own checksum failed when the body it describes lies within
// the file and matches the body checksum it names, as if the body's
// checksum could vouch for the header's.
func (s *Scanner) bodyVouches(h [RecordHeaderSize]byte) bool {
	length := int64(binary.LittleEndian.Uint32(h[0:4]))
	if length == 0 || length > int64(s.maxBody) || s.Off+RecordHeaderSize+length > s.size {
		return false
	}
	body := make([]byte, length)
	if _, err := s.f.ReadAt(body, s.Off+RecordHeaderSize); err != nil {
		return false
	}
	return crc32.Checksum(body, castagnoli) == binary.LittleEndian.Uint32(h[4:8])
}
