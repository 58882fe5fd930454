package walstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Segment header, at offset 0 of every segment file:
//
//	0        4     5          8                  16       20
//	+--------+-----+----------+------------------+--------+
//	| "wRWL" | ver | reserved |   seq (uint64)   | CRC-32C|
//	+--------+-----+----------+------------------+--------+
//
// seq repeats the number in the file name so a renamed or copied file is
// caught. The CRC covers bytes 0..16.
//
// A file may have been a segment before (segments are recycled,
// segments.go), so past its last record lie the records of an earlier
// life, each whole and checksummed. So that replay never takes them for
// this life's, a version 2 segment stores each record's CRC XORed with
// its own sequence (its salt): a record of another sequence fails the
// check as surely as a torn one. Version 1 segments, written before
// files were recycled, have salt 0. Records are encoded and relocated
// with plain CRCs; the writer salts them for the segment they go to
// (saltFrames), and every reader checks them against their segment's salt.
//
// Record, repeated after the header until the end of the file:
//
//	0          4          8      9       10          10+nlen
//	+----------+----------+------+-------+-----------+-----------------+
//	| len u32  | CRC-32C  | kind | nlen  | group     | payload         |
//	+----------+----------+------+-------+-----------+-----------------+
//	                      \__________ len counts these bytes ___________/
//
// CRC-32C (Castagnoli) covers the len field and everything after the CRC,
// so a torn length is caught as surely as torn contents (stored XORed
// with the segment's salt, above). All integers are
// big-endian. Payloads by kind:
//
//	kindEntry   index u64 | term u64 | type u8 | appendedAt i64 (Unix ns, 0 = zero time)
//	            | extLen uvarint | extensions | data (rest of the record)
//	kindDelete  min u64 | max u64                 (inclusive; DeleteRange)
//	kindStable  keyLen uvarint | key | value (rest of the record)
//	kindDrop    empty                             (DropGroup)
//
// One hraft.Log is one record, so an entry is read back with a single
// ReadAt of exactly its bytes and relocation copies records verbatim.
const (
	segMagic      = "wRWL"
	segVersion    = 2 // 1: records' CRCs unsalted
	segHeaderLen  = 20
	frameLen      = 8 // len + CRC
	recHeaderLen  = frameLen + 2
	entryFixedLen = 8 + 8 + 1 + 8

	kindEntry  byte = 1
	kindDelete byte = 2
	kindStable byte = 3
	kindDrop   byte = 4

	// maxRecordLen bounds one record (and so one hraft.Log): a length
	// field beyond it is damage, not data. Locations store lengths and
	// offsets as uint32.
	maxRecordLen = 1 << 30
	maxNameLen   = 255
	maxKeyLen    = 1 << 16
)

// crcTable is the CRC-32C (Castagnoli) table; crc32 caches it internally,
// so this only names it.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	errShortRecord = errors.New("short record")
	errBadCRC      = errors.New("checksum mismatch")
	errBadLength   = errors.New("implausible record length")
	errBadPayload  = errors.New("malformed payload")
	errBadHeader   = errors.New("bad segment header")
)

func encodeSegHeader(seq uint64) []byte {
	b := make([]byte, segHeaderLen)
	copy(b, segMagic)
	b[4] = segVersion
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint32(b[16:], crc32.Checksum(b[:16], crcTable))
	return b
}

// checkSegHeader checks the header of segment seq and returns the salt
// of its records' CRCs.
func checkSegHeader(b []byte, seq uint64) (uint32, error) {
	if len(b) < segHeaderLen || string(b[:4]) != segMagic {
		return 0, errBadHeader
	}
	if crc32.Checksum(b[:16], crcTable) != binary.BigEndian.Uint32(b[16:]) {
		return 0, fmt.Errorf("%w: checksum mismatch", errBadHeader)
	}
	if b[4] != 1 && b[4] != segVersion {
		return 0, fmt.Errorf("%w: unsupported version %d", errBadHeader, b[4])
	}
	if got := binary.BigEndian.Uint64(b[8:]); got != seq {
		return 0, fmt.Errorf("%w: sequence %d, file name says %d", errBadHeader, got, seq)
	}
	if b[4] == 1 {
		return 0, nil
	}
	return segSalt(uint32(seq)), nil
}

// segSalt is the salt of a version 2 segment's records: its sequence,
// which no other life of the same file had (sequences only grow, and
// are never 0).
func segSalt(seq uint32) uint32 { return seq }

// saltFrames XORs the CRC of each record in bufs, records laid back to
// back across them, with salt. A record's frame is never split between
// two buffers: it starts the header the record was encoded with.
func saltFrames(bufs [][]byte, salt uint32) {
	if salt == 0 {
		return
	}
	skip := 0 // bytes of the current record still to pass
	for _, b := range bufs {
		for i := 0; i < len(b); {
			if skip > 0 {
				k := min(skip, len(b)-i)
				i, skip = i+k, skip-k
				continue
			}
			frame := b[i : i+frameLen]
			crc := binary.BigEndian.Uint32(frame[4:]) ^ salt
			binary.BigEndian.PutUint32(frame[4:], crc)
			skip = frameLen + int(binary.BigEndian.Uint32(frame))
		}
	}
}

// beginRecord appends a record header with len and CRC left blank; the
// caller appends the payload and calls finishRecord with the start offset.
func beginRecord(b []byte, kind byte, group string) []byte {
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, kind, byte(len(group)))
	return append(b, group...)
}

func finishRecord(b []byte, start int) []byte {
	rec := b[start:]
	binary.BigEndian.PutUint32(rec[0:], uint32(len(rec)-frameLen))
	crc := crc32.Update(crc32.Checksum(rec[0:4], crcTable), crcTable, rec[frameLen:])
	binary.BigEndian.PutUint32(rec[4:], crc)
	return b
}

// entryRecordLen is the length of l's record, as appendEntryRecord
// writes it.
func entryRecordLen(group string, l *hraft.Log) int {
	ext := len(l.Extensions)
	return recHeaderLen + len(group) + entryFixedLen + uvarintLen(uint64(ext)) + ext + len(l.Data)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// inlineDataMin is the data size from which an entry's data is written
// from its own slice rather than copied into the record buffer: below
// it, a copy costs less than one more buffer in the write.
const inlineDataMin = 4 << 10

func appendEntryRecord(b []byte, group string, l *hraft.Log) []byte {
	start := len(b)
	b = appendEntryFields(b, group, l)
	b = append(b, l.Data...)
	return finishRecord(b, start)
}

// appendEntryHeader appends l's record up to its data, with the length
// and CRC of the whole record: the data follows it in the file, written
// from l.Data.
func appendEntryHeader(b []byte, group string, l *hraft.Log) []byte {
	start := len(b)
	b = appendEntryFields(b, group, l)
	rec := b[start:]
	binary.BigEndian.PutUint32(rec[0:], uint32(len(rec)-frameLen+len(l.Data)))
	crc := crc32.Update(crc32.Checksum(rec[0:4], crcTable), crcTable, rec[frameLen:])
	binary.BigEndian.PutUint32(rec[4:], crc32.Update(crc, crcTable, l.Data))
	return b
}

// appendEntryFields appends the start of l's record: the frame left
// blank, kind, group, and the entry's fields before its data.
func appendEntryFields(b []byte, group string, l *hraft.Log) []byte {
	b = beginRecord(b, kindEntry, group)
	b = binary.BigEndian.AppendUint64(b, l.Index)
	b = binary.BigEndian.AppendUint64(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

func appendDeleteRecord(b []byte, group string, min, max uint64) []byte {
	start := len(b)
	b = beginRecord(b, kindDelete, group)
	b = binary.BigEndian.AppendUint64(b, min)
	b = binary.BigEndian.AppendUint64(b, max)
	return finishRecord(b, start)
}

func appendStableRecord(b []byte, group string, key, val []byte) []byte {
	start := len(b)
	b = beginRecord(b, kindStable, group)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = append(b, val...)
	return finishRecord(b, start)
}

func appendDropRecord(b []byte, group string) []byte {
	start := len(b)
	b = beginRecord(b, kindDrop, group)
	return finishRecord(b, start)
}

// recordSize returns the length of the whole record whose frame starts
// b, or an error if the length field cannot be right.
func recordSize(frame []byte) (int, error) {
	n := binary.BigEndian.Uint32(frame)
	if n < 2 || n > maxRecordLen {
		return 0, errBadLength
	}
	return frameLen + int(n), nil
}

// record is a parsed, checksummed record. Its slices alias the input.
type record struct {
	kind    byte
	group   []byte
	payload []byte
}

// parseRecord checks one whole record (as sized by recordSize) of a
// segment whose salt is salt.
func parseRecord(rec []byte, salt uint32) (record, error) {
	if len(rec) < recHeaderLen {
		return record{}, errShortRecord
	}
	if int(binary.BigEndian.Uint32(rec))+frameLen != len(rec) {
		return record{}, errBadLength
	}
	crc := crc32.Update(crc32.Checksum(rec[0:4], crcTable), crcTable, rec[frameLen:])
	if crc^salt != binary.BigEndian.Uint32(rec[4:]) {
		return record{}, errBadCRC
	}
	nlen := int(rec[9])
	if recHeaderLen+nlen > len(rec) {
		return record{}, errBadPayload
	}
	r := record{kind: rec[8], group: rec[recHeaderLen : recHeaderLen+nlen], payload: rec[recHeaderLen+nlen:]}
	switch r.kind {
	case kindEntry:
		if len(r.payload) < entryFixedLen+1 {
			return record{}, errBadPayload
		}
	case kindDelete:
		if len(r.payload) != 16 {
			return record{}, errBadPayload
		}
	case kindStable:
		klen, n := binary.Uvarint(r.payload)
		if n <= 0 || klen > uint64(len(r.payload)-n) {
			return record{}, errBadPayload
		}
	case kindDrop:
		if len(r.payload) != 0 {
			return record{}, errBadPayload
		}
	default:
		return record{}, fmt.Errorf("%w: unknown kind %d", errBadPayload, r.kind)
	}
	if !validName(r.group) {
		return record{}, fmt.Errorf("%w: bad group name", errBadPayload)
	}
	return r, nil
}

func entryIndex(payload []byte) uint64 { return binary.BigEndian.Uint64(payload) }

// decodeEntry fills l from a kindEntry payload. Data and Extensions alias
// payload, which the caller owns.
func decodeEntry(payload []byte, l *hraft.Log) error {
	l.Index = binary.BigEndian.Uint64(payload[0:])
	l.Term = binary.BigEndian.Uint64(payload[8:])
	l.Type = hraft.LogType(payload[16])
	if at := int64(binary.BigEndian.Uint64(payload[17:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	} else {
		l.AppendedAt = time.Time{}
	}
	rest := payload[entryFixedLen:]
	elen, n := binary.Uvarint(rest)
	if n <= 0 || elen > uint64(len(rest)-n) {
		return errBadPayload
	}
	rest = rest[n:]
	l.Extensions = nil
	if elen > 0 {
		l.Extensions = rest[:elen:elen]
	}
	l.Data = nil
	if d := rest[elen:]; len(d) > 0 {
		l.Data = d
	}
	return nil
}

func decodeDelete(payload []byte) (min, max uint64) {
	return binary.BigEndian.Uint64(payload), binary.BigEndian.Uint64(payload[8:])
}

func decodeStable(payload []byte) (key, val []byte) {
	klen, n := binary.Uvarint(payload)
	return payload[n : n+int(klen)], payload[n+int(klen):]
}

// validName reports whether b may name a group: 1..255 bytes of
// [A-Za-z0-9._-], so it fits the one-byte length and any file tooling.
func validName[T string | []byte](b T) bool {
	if len(b) == 0 || len(b) > maxNameLen {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
