package broker

import (
	"fmt"
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
)

// Per-record rules of a produced batch, as Kafka's LogValidator applies
// them, and compression.type.
//
// Records are decoded only when a rule needs them: an uncompressed batch
// is read in place (no allocation) whenever its timestamps are bounded or
// its topic is compacted; a compressed one is decompressed for a
// compacted topic (every record needs a key), for a codec other than the
// topic's compression.type (it is re-encoded), or when its timestamps
// must be checked record by record. Otherwise a compressed batch's
// timestamps are judged by its header: the producer writes the largest
// record timestamp there (maxTimestamp), which is all that
// message.timestamp.after.max.ms needs; message.timestamp.before.max.ms,
// when set, needs the smallest, which only the records hold. A header
// out of bounds is checked record by record too, so the refusal names
// the records as Kafka's does.

// RecordError is one record of a refused batch, by its index in the
// batch (Kafka's ProduceResponse record_errors).
type RecordError struct {
	Index   int32
	Message string
}

// RecordsRefusedError is a produced batch refused for some of its records
// (Kafka's RecordValidationException): INVALID_TIMESTAMP when a timestamp
// is out of bounds, else INVALID_RECORD.
type RecordsRefusedError struct {
	Code    *kerr.Error
	Records []RecordError
}

func (e *RecordsRefusedError) Error() string {
	return e.Code.Error() + ": " + e.summary()
}

func (e *RecordsRefusedError) Unwrap() error { return e.Code }

// summary is Kafka's message, and for timestamps the first record's
// problem too, as the response of a produce below v8 carries no record
// errors.
func (e *RecordsRefusedError) summary() string {
	if e.Code == kerr.InvalidTimestamp {
		return "One or more records have been rejected due to invalid timestamp: " + e.Records[0].Message
	}
	var b strings.Builder
	fmt.Fprintf(&b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", len(e.Records))
	for i, r := range e.Records[:min(len(e.Records), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "RecordError(batchIndex=%d, message='%s')", r.Index, r.Message)
	}
	b.WriteString("]")
	return b.String()
}

// add records one more refused record, making e on the first; any bad
// timestamp makes the batch's error INVALID_TIMESTAMP, as in Kafka.
func (e *RecordsRefusedError) add(code *kerr.Error, index int32, msg string) *RecordsRefusedError {
	if e == nil {
		e = &RecordsRefusedError{Code: code}
	}
	if code == kerr.InvalidTimestamp {
		e.Code = code
	}
	e.Records = append(e.Records, RecordError{Index: index, Message: msg})
	return e
}

// checkRecords applies the topic's per-record rules to a produced batch h
// (keys on compacted topics, CreateTime bounds) and re-encodes it when its
// codec is not the topic's compression.type, returning what to append.
func (pp *ProducePath) checkRecords(topic string, partition int32, batch []byte, h log.BatchHeader, s *produceSettings) ([]byte, error) {
	now := pp.now().UnixMilli()
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	boundTimes := !s.logAppendTime && (s.timestampBeforeMs != math.MaxInt64 || s.timestampAfterMs != math.MaxInt64)
	if boundTimes {
		lo, hi = subSaturating(now, s.timestampBeforeMs), addSaturating(now, s.timestampAfterMs)
	}
	recompress := s.compression != keepCodec && s.compression != h.Compression()
	var readRecords bool
	switch {
	case s.compacted || recompress:
		readRecords = true
	case !boundTimes:
	case h.Compression() == log.CompressionNone || s.timestampBeforeMs != math.MaxInt64:
		readRecords = true
	default:
		// The header's maxTimestamp bounds every record from above.
		readRecords = h.MaxTimestamp != -1 && h.MaxTimestamp > hi
	}
	if !readRecords {
		return batch, nil
	}
	// StartProduce only parsed the framing. A batch to be re-encoded has
	// its CRC checked before its records are read: the new batch gets a
	// fresh CRC, which must not cover damaged records. A batch only read
	// here is checked by every replica's apply, like any other; its CRC
	// is computed here only when the read refuses it, so that a damaged
	// batch is answered CORRUPT_MESSAGE, as Kafka answers it, and not
	// with whatever its damaged bytes seemed to break. (With Kafka 4's
	// default message.timestamp.after.max.ms every uncompressed batch is
	// read, and the leader would otherwise compute every CRC twice.)
	if recompress {
		if err := log.CheckCRC(batch); err != nil {
			return nil, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
	}
	data, err := log.BatchRecords(batch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	var refused *RecordsRefusedError
	r := log.NewRecordReader(h, data)
	for i := int32(0); ; i++ {
		rec, ok := r.Next()
		if !ok {
			break
		}
		if s.compacted && rec.Key == nil {
			refused = refused.add(kerr.InvalidRecord, i, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s-%d", topic, partition))
			continue
		}
		if rec.Timestamp != -1 && (rec.Timestamp < lo || rec.Timestamp > hi) {
			refused = refused.add(kerr.InvalidTimestamp, i, fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]", rec.Timestamp, rec.Offset, lo, hi))
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
	}
	if refused != nil {
		if err := log.CheckCRC(batch); err != nil {
			return nil, fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
		}
		return nil, refused
	}
	if !recompress {
		return batch, nil
	}
	out, err := pp.compressors.Recompress(batch, data, s.compression, s.compressionLevel)
	if err != nil {
		return nil, fmt.Errorf("%w: compression.type: %w", kerr.UnknownServerError, err)
	}
	// Kafka checks the sizes again after re-encoding.
	if int64(len(out)) > s.maxMessageBytes {
		return nil, fmt.Errorf("%w: batch of %d bytes once re-encoded for compression.type is above max.message.bytes %d", kerr.MessageTooLarge, len(out), s.maxMessageBytes)
	}
	if int64(len(out)) > s.segmentBytes {
		return nil, fmt.Errorf("%w: %d bytes once re-encoded for compression.type is above segment.bytes %d", kerr.RecordListTooLarge, len(out), s.segmentBytes)
	}
	return out, nil
}

func addSaturating(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func subSaturating(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}
