package log

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Time index file (<base>.timeindex). A sparse, strictly increasing map from
// "largest timestamp so far in this segment" to the base offset of the first
// batch that carried it. It is written at the same moments as the offset
// index (and once more when the segment is rolled), only when the largest
// timestamp grew.
//
//	offset  size  field
//	     0     4  magic "WTIX"
//	     4     1  version (=2)
//	     5     1  flags: bit 0 = sealed
//	     6     2  reserved, zero
//	     8     4  entries: how many entries the segment was sealed with
//	    12     4  crc of bytes 0-11
//	    16    16  entry 0: timestamp i64 | relativeOffset u32 | crc u32
//	    32    16  entry 1 ...
//
// Both crcs are CRC-32C of the segment's base offset (8 bytes) followed by
// the bytes they cover, as in index.go: valid only in this segment's time
// index, whose entries they protect. Open takes a
// sealed segment's largest timestamp from its last entry without reading
// its batches (see loadIndexes), and retention and ListOffsets trust that
// timestamp; so a damaged entry must not pass for a real one (the crc), nor
// may a file cut short at an entry boundary pass for a complete one: the
// header of a sealed segment records how many entries it has. Rolling a
// segment (or rebuilding a sealed one) writes that header; an active
// segment's says "not sealed", which is enough because Open always scans
// the last segment. Version 1 had neither; such files fail the header
// check and are rebuilt.
//
// Invariant used by lookups: for an entry (T, off) no batch up to and
// including off has a timestamp above T, so a search for the first batch
// with maxTimestamp >= target may start at the entry with the largest
// T < target.
const (
	timeIndexHeaderLen = 16
	timeEntryLen       = 16
	timeIndexMagic     = "WTIX"
	timeIndexSealed    = 1 // flags bit
)

type timeEntry struct {
	ts  int64
	rel uint32
}

type timeIndex struct {
	f       File
	entries []timeEntry // same locking rules as offsetIndex.entries
	broken  bool
}

// timeIndexHeader encodes segment base's header; entries counts only when
// sealed.
func timeIndexHeader(base int64, sealed bool, entries int) []byte {
	h := make([]byte, timeIndexHeaderLen)
	copy(h, timeIndexMagic)
	h[4] = indexVersion
	if sealed {
		h[5] = timeIndexSealed
		binary.BigEndian.PutUint32(h[8:], uint32(entries))
	}
	binary.BigEndian.PutUint32(h[12:], segmentCRC(base, h[:12]))
	return h
}

// loadTimeIndex parses and sanity-checks the time index of sealed segment
// base; maxRel is the segment's last offset relative to its base. Any
// failure means "rebuild".
func loadTimeIndex(b []byte, base int64, maxRel uint32) ([]timeEntry, error) {
	if len(b) < timeIndexHeaderLen || string(b[:4]) != timeIndexMagic || b[4] != indexVersion ||
		segmentCRC(base, b[:12]) != binary.BigEndian.Uint32(b[12:]) {
		return nil, fmt.Errorf("%w: bad time index header", errInsaneIndex)
	}
	if b[5]&timeIndexSealed == 0 {
		return nil, fmt.Errorf("%w: time index of a segment that was not sealed", errInsaneIndex)
	}
	if (len(b)-timeIndexHeaderLen)%timeEntryLen != 0 {
		return nil, fmt.Errorf("%w: torn time entry (size %d)", errInsaneIndex, len(b))
	}
	n := (len(b) - timeIndexHeaderLen) / timeEntryLen
	if sealedWith := binary.BigEndian.Uint32(b[8:]); uint64(n) != uint64(sealedWith) {
		return nil, fmt.Errorf("%w: %d time entries, sealed with %d", errInsaneIndex, n, sealedWith)
	}
	es := make([]timeEntry, n)
	for i := range es {
		p := b[timeIndexHeaderLen+i*timeEntryLen:][:timeEntryLen]
		if !entryCRCValid(p, base) {
			return nil, fmt.Errorf("%w: time entry %d fails its crc", errInsaneIndex, i)
		}
		es[i] = timeEntry{ts: int64(binary.BigEndian.Uint64(p)), rel: binary.BigEndian.Uint32(p[8:])}
		if es[i].rel > maxRel {
			return nil, fmt.Errorf("%w: time index offset %d beyond segment", errInsaneIndex, es[i].rel)
		}
		if i > 0 && (es[i].ts <= es[i-1].ts || es[i].rel < es[i-1].rel) {
			return nil, fmt.Errorf("%w: time entries not increasing at %d", errInsaneIndex, i)
		}
	}
	return es, nil
}

// writeTimeIndexFile replaces the whole content of segment base's time
// index file.
func writeTimeIndexFile(f File, base int64, sealed bool, es []timeEntry) error {
	buf := encodeTimeEntries(timeIndexHeader(base, sealed, len(es)), base, es)
	if _, err := f.WriteAt(buf, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(buf)))
}

// lookupTime returns the relative offset from which to scan for the first
// batch with maxTimestamp >= ts: the entry with the largest timestamp < ts,
// or the segment start.
func lookupTime(es []timeEntry, ts int64) (uint32, bool) {
	i := sort.Search(len(es), func(i int) bool { return es[i].ts >= ts })
	if i == 0 {
		return 0, false
	}
	return es[i-1].rel, true
}

func encodeTimeEntries(dst []byte, base int64, es []timeEntry) []byte {
	for _, e := range es {
		start := len(dst)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, segmentCRC(base, dst[start:]))
	}
	return dst
}
