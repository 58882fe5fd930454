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
//	     4     1  version (=1)
//	     5     3  reserved, zero
//	     8    12  entry 0: timestamp i64 | relativeOffset u32
//	    20    12  entry 1 ...
//
// Invariant used by lookups: for an entry (T, off) no batch up to and
// including off has a timestamp above T, so a search for the first batch
// with maxTimestamp >= target may start at the entry with the largest
// T < target.
const (
	timeEntryLen   = 12
	timeIndexMagic = "WTIX"
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

func loadTimeIndex(b []byte, maxRel uint32) ([]timeEntry, error) {
	if err := checkIndexHeader(b, timeIndexMagic, timeEntryLen); err != nil {
		return nil, err
	}
	n := (len(b) - indexHeaderLen) / timeEntryLen
	es := make([]timeEntry, n)
	for i := range es {
		p := b[indexHeaderLen+i*timeEntryLen:]
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

func encodeTimeEntries(dst []byte, es []timeEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
	}
	return dst
}
