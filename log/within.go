package log

import "encoding/binary"

// Within finds, inside records an earlier Read returned, the bytes that
// Read(offset, maxBytes, mode, upTo) would return now, and reports them
// as records[start:end]. ok is false when they do not lie within records,
// or when the answer would be empty; the caller then reads.
//
// It relies on what a Read returns: whole, consecutive batches of one
// segment, so that the batches after any of them are, in the log, the
// ones that follow it in records; and on offsets only growing, so that
// the batch after records in the log (if any) has a base offset of at
// least the end offset of records. Hence:
//
//   - the batch a Read at offset starts with is the first batch of
//     records whose last offset is at least offset, provided the first
//     batch of records starts at or before offset (else an earlier batch
//     of the segment might be it);
//   - the Read keeps whole batches while they fit its byte limit (the
//     first one whole when obligatory) and start below upTo; if that stops
//     at a batch of records, the answer lies within records; if it runs
//     to the end of records, it lies within only when the batch after
//     records could not be kept either: when upTo is at most the end
//     offset of records.
//
// Records of every batch below upTo are committed and never change, which
// is what makes the earlier bytes the right ones. The cleaner is the one
// exception: should a clean run between the two reads, the earlier bytes
// are the uncleaned form of what Read now returns (every record Read
// returns, at the same offsets, plus records cleaned since), which is
// still a valid answer for a fetch, as Kafka fetches may or may not see
// a clean. Holes in a cleaned log's offsets keep both assumptions above.
func Within(records []byte, offset int64, maxBytes int, mode ReadMode, upTo int64) (start, end int, ok bool) {
	if offset >= upTo || len(records) < batchHeaderLen {
		return 0, 0, false
	}
	if int64(binary.BigEndian.Uint64(records)) > offset {
		return 0, 0, false
	}
	// The first batch whose last offset reaches offset.
	pos := 0
	for {
		size, h, valid := batchAt(records, pos)
		if !valid {
			return 0, 0, false // offset lies past records
		}
		if h.LastOffset() >= offset {
			break
		}
		pos += size
	}
	limit := maxBytes
	first, _, _ := batchAt(records, pos)
	if first > limit {
		if mode == Strict {
			return 0, 0, false
		}
		limit = first
	}
	end, taken := pos, 0
	for {
		size, h, valid := batchAt(records, end)
		if !valid {
			// Ran to the end of records: the next batch in the log starts
			// at or after their end offset.
			next, _ := EndOffset(records)
			if next < upTo {
				return 0, 0, false
			}
			break
		}
		if h.BaseOffset >= upTo || taken+size > limit {
			break
		}
		end += size
		taken += size
	}
	if end == pos {
		return 0, 0, false
	}
	return pos, end, true
}

// batchAt reads the framing of the batch at pos in records: its size and
// header; valid is false past the last whole batch.
func batchAt(records []byte, pos int) (size int, h BatchHeader, valid bool) {
	if pos+batchHeaderLen > len(records) {
		return 0, BatchHeader{}, false
	}
	size = int(binary.BigEndian.Uint32(records[pos+offLength:])) + batchPrefixLen
	if size < batchHeaderLen || pos+size > len(records) {
		return 0, BatchHeader{}, false
	}
	return size, parseHeader(records[pos:]), true
}
