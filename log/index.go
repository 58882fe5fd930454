package log

import (
	"encoding/binary"
	"errors"
	"fmt"
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
//	     4     1  version (=1)
//	     5     3  reserved, zero
//	     8     8  entry 0: relativeOffset u32 (baseOffset - segment base) | position u32
//	    16     8  entry 1 ...
//
// The file is a cache: it is rebuilt from the .log whenever it is missing,
// has a bad header or length, or fails the sanity check in load. All entries
// are also held in memory (8 bytes per ~4 KiB of log) so lookups do no I/O.
const (
	indexHeaderLen  = 8
	indexEntryLen   = 8
	indexVersion    = 1
	offsetIndexMagc = "WOIX"
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
func loadOffsetIndex(b []byte, logSize int64) ([]indexEntry, error) {
	if err := checkIndexHeader(b, offsetIndexMagc, indexEntryLen); err != nil {
		return nil, err
	}
	n := (len(b) - indexHeaderLen) / indexEntryLen
	es := make([]indexEntry, n)
	for i := range es {
		p := b[indexHeaderLen+i*indexEntryLen:]
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

func encodeIndexEntries(dst []byte, es []indexEntry) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint32(dst, e.rel)
		dst = binary.BigEndian.AppendUint32(dst, e.pos)
	}
	return dst
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
