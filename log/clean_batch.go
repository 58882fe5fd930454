package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Filtering and rewriting the batches of a pass (see clean.go).

// batchFilter decides, record by record, what a pass keeps.
type batchFilter struct {
	m                *offsetMap
	passEnd          int64 // records at or past it are kept
	pidLast          map[int64]producerLast
	txns             *txnScan       // the pass's transactions
	txnData          map[int64]bool // producer id -> a batch of its current transaction was met
	nowMs, horizonMs int64
	body             []byte       // scratch
	keep             []keptRecord // scratch
	out              []byte       // writeCleaned's buffer, kept between groups
}

// keptRecord is a record filter keeps: its whole encoding and its body.
type keptRecord struct{ raw, body []byte }

// filter appends the cleaned form of batch b (header h) to dst: b itself
// when nothing changes, a rewritten batch, an empty one kept for its
// producer, or nothing.
func (f *batchFilter) filter(dst, b []byte, h BatchHeader, st *CleanStats) ([]byte, error) {
	if h.IsControl() {
		return f.filterMarker(dst, b, h, st)
	}
	aborted := false
	if h.ProducerID >= 0 && h.IsTransactional() {
		f.txnData[h.ProducerID] = true
		aborted = f.txns.isAborted(h.ProducerID, h.BaseOffset)
	}
	data := b[batchHeaderLen:h.Size()]
	if h.Compression() != CompressionNone {
		var err error
		if data, err = decompressInto(h, b); err != nil {
			return dst, err
		}
	}
	hasHorizon := h.Attributes&attrDeleteHorizon != 0
	keep := f.keep[:0]
	defer func() { f.keep = keep[:0] }()
	dropped, tombstones := 0, 0
	for range h.NumRecords {
		r, rest, err := parseRawRecord(data)
		if err != nil {
			return dst, fmt.Errorf("%w: batch %d: %v", ErrCorruptBatch, h.BaseOffset, err)
		}
		data = rest
		off := h.BaseOffset + r.offDelta
		if off < f.passEnd && aborted {
			dropped++
			st.AbortedRecordsRemoved++
			continue
		}
		if off < f.passEnd && !r.hasKey {
			dropped++ // as Kafka's cleaner: nothing to keep it by
			continue
		}
		if off < f.passEnd {
			if latest, ok := f.m.get(r.key); ok && latest > off {
				dropped++
				continue
			}
			if r.value == nil {
				if hasHorizon && f.nowMs > h.FirstTimestamp {
					dropped++
					st.TombstonesRemoved++
					continue
				}
				tombstones++
			}
		}
		keep = append(keep, keptRecord{r.raw, r.body})
	}
	setHorizon := tombstones > 0 && !hasHorizon
	keepEmpty := h.ProducerID >= 0 && f.pidLast[h.ProducerID].keepsData(h)
	if dropped == 0 && !setHorizon && (len(keep) > 0 || keepEmpty) {
		return append(dst, b...), nil
	}
	st.RecordsRemoved += int64(dropped)
	if len(keep) == 0 {
		if !keepEmpty {
			// Also a batch emptied by an earlier pass for a producer
			// that has written since.
			st.BatchesRemoved++
			return dst, nil
		}
		st.EmptyBatchesKept++
		start := len(dst)
		dst = append(dst, b[:batchHeaderLen]...)
		out := dst[start:]
		binary.BigEndian.PutUint16(out[offAttributes:], uint16(h.Attributes&^attrCompressionMask))
		binary.BigEndian.PutUint32(out[offRecordCount:], 0)
		return finishBatch(dst, start), nil
	}
	return f.rewrite(dst, b, h, keep, setHorizon)
}

// filterMarker appends what is left of the transaction marker b: itself
// while data of its transaction is left before it, then itself with a
// delete horizon, then, past the horizon, nothing (see clean_txn.go).
func (f *batchFilter) filterMarker(dst, b []byte, h BatchHeader, st *CleanStats) ([]byte, error) {
	if h.ProducerID < 0 {
		return append(dst, b...), nil
	}
	had := f.txnData[h.ProducerID]
	delete(f.txnData, h.ProducerID)
	if had {
		return append(dst, b...), nil
	}
	if commit, ok := MarkerType(b); ok && !commit {
		st.EmptyAbortedTxns = append(st.EmptyAbortedTxns, h.BaseOffset)
	}
	if h.Attributes&attrDeleteHorizon != 0 {
		if f.nowMs > h.FirstTimestamp && !f.pidLast[h.ProducerID].keepsMarker(h) {
			st.MarkersRemoved++
			st.BatchesRemoved++
			return dst, nil
		}
		return append(dst, b...), nil
	}
	data, err := decompressInto(h, b)
	if err != nil {
		return dst, err
	}
	keep := f.keep[:0]
	defer func() { f.keep = keep[:0] }()
	for range h.NumRecords {
		r, rest, err := parseRawRecord(data)
		if err != nil {
			return dst, fmt.Errorf("%w: batch %d: %v", ErrCorruptBatch, h.BaseOffset, err)
		}
		data = rest
		keep = append(keep, keptRecord{r.raw, r.body})
	}
	return f.rewrite(dst, b, h, keep, true)
}

// rewrite appends batch b with only the records keep, and with a delete
// horizon if setHorizon.
func (f *batchFilter) rewrite(dst, b []byte, h BatchHeader, keep []keptRecord, setHorizon bool) ([]byte, error) {
	body := f.body[:0]
	for _, r := range keep {
		if !setHorizon {
			body = append(body, r.raw...)
			continue
		}
		// Timestamp deltas become relative to the horizon.
		tsDelta, n := binary.Varint(r.body[1:])
		ts := h.FirstTimestamp + tsDelta
		var rec [binary.MaxVarintLen64 + 1]byte
		rec[0] = r.body[0]
		m := 1 + binary.PutVarint(rec[1:], ts-f.horizonMs)
		body = binary.AppendVarint(body, int64(m+len(r.body)-1-n))
		body = append(body, rec[:m]...)
		body = append(body, r.body[1+n:]...)
	}
	f.body = body
	enc, err := compress(h.Compression(), body)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = append(dst, b[:batchHeaderLen]...)
	dst = append(dst, enc...)
	out := dst[start:]
	if setHorizon {
		binary.BigEndian.PutUint16(out[offAttributes:], uint16(h.Attributes|attrDeleteHorizon))
		binary.BigEndian.PutUint64(out[offFirstTimestamp:], uint64(f.horizonMs))
	}
	binary.BigEndian.PutUint32(out[offRecordCount:], uint32(len(keep)))
	return finishBatch(dst, start), nil
}

// finishBatch sets the length and CRC of the batch at dst[start:].
func finishBatch(dst []byte, start int) []byte {
	out := dst[start:]
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-batchPrefixLen))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], crcTable))
	return dst
}

// decompressInto returns the records of batch b (its own bytes when
// uncompressed).
func decompressInto(h BatchHeader, b []byte) ([]byte, error) {
	out, err := decompress(h.Compression(), b[batchHeaderLen:h.Size()])
	if err != nil {
		return nil, fmt.Errorf("%w: batch %d: %w", ErrCorruptBatch, h.BaseOffset, err)
	}
	return out, nil
}

// rawRecord is one record as stored: raw is the whole encoding (length
// prefix included), body the part after the prefix (attributes first).
type rawRecord struct {
	raw, body  []byte
	offDelta   int64
	hasKey     bool
	key, value []byte // value nil: null
}

func parseRawRecord(data []byte) (rawRecord, []byte, error) {
	length, n := binary.Varint(data)
	if n <= 0 || length < 1 || length > int64(len(data)-n) {
		return rawRecord{}, nil, fmt.Errorf("bad record length")
	}
	r := rawRecord{raw: data[:n+int(length)], body: data[n : n+int(length)]}
	rest := data[n+int(length):]
	rec := r.body[1:]
	var ok bool
	if _, rec, ok = varint(rec); !ok {
		return rawRecord{}, nil, fmt.Errorf("bad timestamp delta")
	}
	if r.offDelta, rec, ok = varint(rec); !ok {
		return rawRecord{}, nil, fmt.Errorf("bad offset delta")
	}
	kl, rec, ok := varint(rec)
	if !ok || kl < -1 || kl > int64(len(rec)) {
		return rawRecord{}, nil, fmt.Errorf("bad key")
	}
	if kl >= 0 {
		r.hasKey, r.key, rec = true, rec[:kl], rec[kl:]
	}
	vl, rec, ok := varint(rec)
	if !ok || vl < -1 || vl > int64(len(rec)) {
		return rawRecord{}, nil, fmt.Errorf("bad value")
	}
	if vl >= 0 {
		r.value = rec[:vl:vl]
		if r.value == nil {
			r.value = []byte{}
		}
	}
	return r, rest, nil
}
