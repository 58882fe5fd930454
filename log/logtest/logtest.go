package logtest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Batch describes a record batch to encode. Zero values give an
// uncompressed, non-idempotent batch of one record.
type Batch struct {
	Records       int   // number of records, at least 1
	ValueSize     int   // bytes of each record's value
	Timestamp     int64 // first timestamp, ms
	ProducerID    int64 // -1 or 0 with ProducerEpoch -1: not idempotent
	ProducerEpoch int16
	BaseSequence  int32
	Idempotent    bool
	// Transactional marks the batch part of its producer's transaction
	// (attributes bit 4); it needs Idempotent.
	Transactional bool
}

// Encode returns the batch as a producer sends it: base offset 0,
// partition leader epoch -1, CRC-32C over attributes to the end.
func (b Batch) Encode() []byte {
	n := max(b.Records, 1)
	var records []byte
	value := make([]byte, b.ValueSize)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for i := 0; i < n; i++ {
		records = appendRecord(records, int64(i), int64(i), value)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       b.Timestamp,
		MaxTimestamp:         b.Timestamp + int64(n-1),
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(n),
		Records:              records,
	}
	if b.Idempotent {
		rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence = b.ProducerID, b.ProducerEpoch, b.BaseSequence
	}
	if b.Transactional {
		rb.Attributes |= 0x10
	}
	raw := rb.AppendTo(nil)
	// Length counts everything after the length field itself.
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

// appendRecord encodes one record (null key, no headers) with its
// varint length prefix.
func appendRecord(dst []byte, offsetDelta, timestampDelta int64, value []byte) []byte {
	body := []byte{0} // attributes
	body = binary.AppendVarint(body, timestampDelta)
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

// Concat joins batches into one records field.
func Concat(batches ...[]byte) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}
