package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record is one record of a batch, as ForEachRecord decodes it. Key and
// Value alias the batch (or its decompressed copy); nil means null.
type Record struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
}

// ForEachRecord decodes the records of one batch (compressed or not) in
// order. For LogAppendTime batches every record carries the batch's
// maxTimestamp.
//
//	record: length varint | attributes i8 | timestampDelta varlong |
//	        offsetDelta varint | keyLength varint | key |
//	        valueLength varint | value | headers   (zigzag varints)
func ForEachRecord(batch []byte, fn func(Record) bool) error {
	data, err := BatchRecords(batch)
	if err != nil {
		return err
	}
	r := NewRecordReader(parseHeader(batch), data)
	for {
		rec, ok := r.Next()
		if !ok {
			return r.Err()
		}
		if !fn(rec) {
			return nil
		}
	}
}

// BatchRecords returns the records section of one batch: the batch's own
// bytes when it is uncompressed (no copy), else a decompressed copy.
func BatchRecords(batch []byte) ([]byte, error) {
	if len(batch) < batchHeaderLen {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a batch header", ErrCorruptBatch, len(batch))
	}
	h := parseHeader(batch)
	if err := checkFraming(h, len(batch)); err != nil {
		return nil, err
	}
	data, err := decompress(h.Compression(), batch[batchHeaderLen:h.Size()])
	if err != nil {
		return nil, fmt.Errorf("%w: batch %d: %w", ErrCorruptBatch, h.BaseOffset, err)
	}
	return data, nil
}

// RecordReader decodes, in order, the records of a batch whose header and
// records section (BatchRecords) it was given. It allocates nothing.
type RecordReader struct {
	h    BatchHeader
	data []byte
	i    int32
	err  error
}

// NewRecordReader reads records, the records section of the batch with
// header h.
func NewRecordReader(h BatchHeader, records []byte) RecordReader {
	return RecordReader{h: h, data: records}
}

// Next returns the next record, with its absolute offset and timestamp
// (for LogAppendTime batches the batch's maxTimestamp); false after the
// last one or at a malformed record (Err).
func (r *RecordReader) Next() (Record, bool) {
	if r.err != nil || r.i >= r.h.NumRecords {
		return Record{}, false
	}
	rec, rest, err := decodeRecord(r.data)
	if err != nil {
		r.err = fmt.Errorf("%w: batch %d record %d: %v", ErrCorruptBatch, r.h.BaseOffset, r.i, err)
		return Record{}, false
	}
	r.data = rest
	r.i++
	rec.Offset += r.h.BaseOffset
	rec.Timestamp += r.h.FirstTimestamp
	if r.h.IsLogAppendTime() {
		rec.Timestamp = r.h.MaxTimestamp
	}
	return rec, true
}

// Err is why Next stopped early, if it did.
func (r *RecordReader) Err() error { return r.err }

// decodeRecord reads one record; Offset and Timestamp are the deltas.
func decodeRecord(data []byte) (Record, []byte, error) {
	length, n := binary.Varint(data)
	if n <= 0 || length < 1 || length > int64(len(data)-n) {
		return Record{}, nil, fmt.Errorf("bad length")
	}
	rec, rest := data[n+1:n+int(length)], data[n+int(length):] // skip attributes
	var r Record
	var ok bool
	if r.Timestamp, rec, ok = varint(rec); !ok {
		return Record{}, nil, fmt.Errorf("bad timestamp delta")
	}
	if r.Offset, rec, ok = varint(rec); !ok {
		return Record{}, nil, fmt.Errorf("bad offset delta")
	}
	if r.Key, rec, ok = varBytes(rec); !ok {
		return Record{}, nil, fmt.Errorf("bad key")
	}
	if r.Value, _, ok = varBytes(rec); !ok {
		return Record{}, nil, fmt.Errorf("bad value")
	}
	return r, rest, nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, false
	}
	return v, b[n:], true
}

// varBytes reads a varint-length byte string; length -1 is null.
func varBytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := varint(b)
	switch {
	case !ok || l < -1 || l > int64(len(b)):
		return nil, nil, false
	case l == -1:
		return nil, b, true
	}
	return b[:l:l], b[l:], true
}

// KeyValue is a record the broker writes itself; a nil Value is a
// tombstone.
type KeyValue struct {
	Key, Value []byte
}

// BuildBatch encodes records as one uncompressed RecordBatch v2 with base
// offset 0 and every record at timestamp ts, as a producer without
// idempotence would send it; Append assigns the real offsets.
func BuildBatch(ts int64, records []KeyValue) []byte {
	return buildBatch(ts, records, 0, -1, -1)
}

// BuildTxnBatch is BuildBatch for records of producer id's transaction:
// a transactional batch of its id and epoch with no sequence, as a
// coordinator writes on a producer's behalf (transactional offsets).
func BuildTxnBatch(ts, producerID int64, producerEpoch int16, records []KeyValue) []byte {
	return buildBatch(ts, records, attrTransactional, producerID, producerEpoch)
}

// Control record types (the key's second int16): a transaction marker
// aborts or commits.
const (
	ControlAbort  = 0
	ControlCommit = 1
)

// BuildMarker encodes a transaction marker as Kafka writes it: a
// transactional control batch of one record, key (version 0, type),
// value (version 0, coordinator epoch), with the producer's id and epoch
// and base sequence -1.
func BuildMarker(ts, producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32) []byte {
	typ := int16(ControlAbort)
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	return buildBatch(ts, []KeyValue{{Key: key, Value: value}}, attrTransactional|attrControl, producerID, producerEpoch)
}

// MarkerType reads a control batch's record type (ControlAbort or
// ControlCommit); ok is false for a batch that is not a marker.
func MarkerType(batch []byte) (commit bool, ok bool) {
	if len(batch) < batchHeaderLen || !parseHeader(batch).IsControl() {
		return false, false
	}
	err := ForEachRecord(batch, func(r Record) bool {
		if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key) == 0 {
			commit, ok = binary.BigEndian.Uint16(r.Key[2:]) == ControlCommit, true
		}
		return false
	})
	return commit, ok && err == nil
}

func buildBatch(ts int64, records []KeyValue, attrs int16, producerID int64, producerEpoch int16) []byte {
	b := make([]byte, batchHeaderLen, batchHeaderLen+64*len(records))
	for i, kv := range records {
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = appendVarBytes(body, kv.Key)
		body = appendVarBytes(body, kv.Value)
		body = binary.AppendVarint(body, 0) // no headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-batchPrefixLen))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint32(b[offLastOffsetDelt:], uint32(len(records)-1))
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

func appendVarBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}
