package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
)

// Offset index file (<base>.index). A sparse map from a batch's base offset
// to its byte position in the .log file; an entry is added once at least
// IndexIntervalBytes of log were written since the previous one, so a lookup
// lands at most about one interval before the target batch.
//
//	offset  size  field
//	     0     4  magic "WOIX"
//	     4     1  version (=2)
//	     5     3  reserved, zero
//	     8    12  entry 0: relativeOffset u32 (baseOffset - segment base) | position u32 | crc u32
//	    20    12  entry 1 ...
//
// crc is the CRC-32C of the segment's base offset (8 bytes) followed by
// the entry's first 8 bytes: sealed segments below the recovery point are
// opened from their indexes without reading their batches, so a damaged
// entry that still looked ordered, or a valid one from another segment's
// index, would send reads to the middle of a batch, and nothing else would
// notice. Version 1 had no crc; such files fail the header check and are
// rebuilt.
//
// The file is a cache: it is rebuilt from the .log whenever it is missing,
// has a bad header or length, or fails the sanity check in load. All entries
// are also held in memory (8 bytes per ~4 KiB of log) so lookups do no I/O.
const (
	indexHeaderLen  = 8
	indexEntryLen   = 12
	indexVersion    = 2
	offsetIndexMagc = "WOIX"
	entryCRCLen     = 4
)

var errInsaneIndex = errors.New("index failed sanity check")

type indexEntry struct {
	rel uint32 // batch base offset relative to the segment base
	pos uint32 // byte position of the batch in the .log file
}

type offsetIndex struct {
	f File
	// entries is appended only by the writer, under Log.mu held for
	// writing; readers search it under Log.mu held for reading.
	entries []indexEntry
	// broken is set when a file write failed; the file is then deleted on
	// close so the next Open rebuilds it instead of trusting a gap.
	broken bool
}

func indexHeader(magic string) []byte {
	h := make([]byte, indexHeaderLen)
	copy(h, magic)
	h[4] = indexVersion
	return h
}

func checkIndexHeader(b []byte, magic string, entryLen int) error {
	if len(b) < indexHeaderLen || string(b[:4]) != magic || b[4] != indexVersion {
		return fmt.Errorf("%w: bad header", errInsaneIndex)
	}
	if (len(b)-indexHeaderLen)%entryLen != 0 {
		return fmt.Errorf("%w: torn entry (size %d)", errInsaneIndex, len(b))
	}
	return nil
}

// loadOffsetIndex parses and sanity-checks an index against the size of its
// log file. Any failure means "rebuild", never "fail Open".
func loadOffsetIndex(b []byte, base, logSize int64) ([]indexEntry, error) {
	if err := checkIndexHeader(b, offsetIndexMagc, indexEntryLen); err != nil {
		return nil, err
	}
	n := (len(b) - indexHeaderLen) / indexEntryLen
	es := make([]indexEntry, n)
	for i := range es {
		p := b[indexHeaderLen+i*indexEntryLen:][:indexEntryLen]
		if !entryCRCValid(p, base) {
			return nil, fmt.Errorf("%w: entry %d fails its crc", errInsaneIndex, i)
		}
		es[i] = indexEntry{rel: binary.BigEndian.Uint32(p), pos: binary.BigEndian.Uint32(p[4:])}
		if int64(es[i].pos) >= logSize {
			return nil, fmt.Errorf("%w: position %d beyond log size %d", errInsaneIndex, es[i].pos, logSize)
		}
		if i > 0 && (es[i].rel <= es[i-1].rel || es[i].pos <= es[i-1].pos) {
			return nil, fmt.Errorf("%w: entries not increasing at %d", errInsaneIndex, i)
		}
	}
	return es, nil
}

// lookup returns the position of the last indexed batch whose base offset is
// <= rel, or 0 (the segment start) when there is none.
func lookupIndex(es []indexEntry, rel uint32) int64 {
	i := sort.Search(len(es), func(i int) bool { return es[i].rel > rel })
	if i == 0 {
		return 0
	}
	return int64(es[i-1].pos)
}

func encodeIndexEntries(dst []byte, base int64, es []indexEntry) []byte {
	for _, e := range es {
		start := len(dst)
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, e.pos)
		dst = binary.BigEndian.AppendUint32(dst, segmentCRC(base, dst[start:]))
	}
	return dst
}

// segmentCRC is the CRC-32C of a segment's base offset followed by b. The
// index files protect their entries (and the time index its header) with
// it, so that they are valid only in their own segment's index.
func segmentCRC(base int64, b []byte) uint32 {
	var prefix [8]byte
	binary.BigEndian.PutUint64(prefix[:], uint64(base))
	return crc32.Update(crc32.Checksum(prefix[:], crcTable), crcTable, b)
}

// entryCRCValid checks the crc that ends entry p of segment base's index.
func entryCRCValid(p []byte, base int64) bool {
	n := len(p) - entryCRCLen
	return segmentCRC(base, p[:n]) == binary.BigEndian.Uint32(p[n:])
}

// writeIndexFile replaces the whole content of an index file; used after a
// rebuild and on truncation.
func writeIndexFile(f File, magic string, body []byte) error {
	buf := append(indexHeader(magic), body...)
	if _, err := f.WriteAt(buf, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(buf)))
}

func openIndexFile(fsys FS, name string) (File, error) {
	return fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}
