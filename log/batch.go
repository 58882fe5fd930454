package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sentinel errors. Callers match them with errors.Is; details are wrapped
// with %w so the broker can map them onto Kafka error codes.
var (
	// ErrOffsetOutOfRange maps to OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrCorruptBatch maps to CORRUPT_MESSAGE / INVALID_RECORD.
	ErrCorruptBatch = errors.New("log: corrupt record batch")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("log: closed")
	// ErrLogFailed is returned by writes after an fsync or roll failure:
	// once fsync has failed the page cache state is unknown, so the only
	// safe continuation is to reopen (and recover) the log.
	ErrLogFailed = errors.New("log: storage failed, reopen required")
	// ErrOffsetMismatch is returned by AppendReplicated when the batches
	// do not start at the log end offset or leave a gap or overlap between
	// each other. The log is unchanged.
	ErrOffsetMismatch = errors.New("log: replicated batches do not continue the log")
)

// crcTable is the CRC-32C (Castagnoli) table used by RecordBatch v2.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// RecordBatch v2 header layout. All integers are big-endian.
//
//	offset  size  field
//	     0     8  baseOffset
//	     8     4  batchLength          (bytes after this field)
//	    12     4  partitionLeaderEpoch
//	    16     1  magic (=2)
//	    17     4  crc                  (CRC-32C of bytes 21..end)
//	    21     2  attributes
//	    23     4  lastOffsetDelta
//	    27     8  firstTimestamp
//	    35     8  maxTimestamp
//	    43     8  producerId
//	    51     2  producerEpoch
//	    53     4  baseSequence
//	    57     4  recordCount
//	    61     -  records...
const (
	offBaseOffset     = 0
	offLength         = 8
	offLeaderEpoch    = 12
	offMagic          = 16
	offCRC            = 17
	offAttributes     = 21
	offLastOffsetDelt = 23
	offFirstTimestamp = 27
	offMaxTimestamp   = 35
	offProducerID     = 43
	offProducerEpoch  = 51
	offBaseSequence   = 53
	offRecordCount    = 57

	// batchHeaderLen is the full fixed header; a batch is never shorter.
	batchHeaderLen = 61
	// batchPrefixLen is baseOffset+batchLength, the part not counted by
	// batchLength.
	batchPrefixLen = 12

	// maxBatchSize bounds a single batch so a corrupt length field cannot
	// make recovery allocate gigabytes. Kafka's own ceiling is the
	// int32 message.max.bytes; 1 GiB is far above any sane setting.
	maxBatchSize = 1 << 30

	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	// attrDeleteHorizon says firstTimestamp holds the batch's delete
	// horizon (set by the cleaner; see clean.go), not its first record's
	// timestamp. Record timestamp deltas stay relative to the field.
	attrDeleteHorizon = 0x40
)

// Compression codecs as stored in attributes bits 0-2.
const (
	CompressionNone   int8 = 0
	CompressionGzip   int8 = 1
	CompressionSnappy int8 = 2
	CompressionLZ4    int8 = 3
	CompressionZstd   int8 = 4
)

// BatchHeader is the decoded fixed part of a RecordBatch v2.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// LastOffset is the offset of the last record in the batch.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the whole batch size including the 12-byte offset+length prefix.
func (h BatchHeader) Size() int { return int(h.Length) + batchPrefixLen }

// Compression returns the codec from attributes bits 0-2.
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & attrCompressionMask) }

// IsLogAppendTime reports whether the broker stamped the batch; every record
// then carries the batch MaxTimestamp.
func (h BatchHeader) IsLogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// IsTransactional reports attributes bit 4.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports attributes bit 5 (transaction markers).
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// parseHeader decodes the fixed header; b must hold at least batchHeaderLen
// bytes. It does no validation.
func parseHeader(b []byte) BatchHeader {
	_ = b[batchHeaderLen-1]
	return BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:               int32(binary.BigEndian.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:           int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(binary.BigEndian.Uint32(b[offLastOffsetDelt:])),
		FirstTimestamp:       int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
}

// checkFraming validates the header fields that can be checked without the
// body. avail is how many bytes of input remain from the batch start, so a
// length pointing past the input is reported as a partial batch.
func checkFraming(h BatchHeader, avail int) error {
	if h.Length < batchHeaderLen-batchPrefixLen || h.Size() > maxBatchSize {
		return fmt.Errorf("%w: batch at offset %d has invalid length %d", ErrCorruptBatch, h.BaseOffset, h.Length)
	}
	if h.Size() > avail {
		return fmt.Errorf("%w: partial batch: length %d, only %d bytes left", ErrCorruptBatch, h.Size(), avail)
	}
	if h.Magic != 2 {
		return fmt.Errorf("%w: unsupported magic %d", ErrCorruptBatch, h.Magic)
	}
	if h.Compression() > CompressionZstd {
		return fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, h.Compression())
	}
	// A stored batch may hold fewer records than its offset range: the
	// cleaner removes records but keeps lastOffsetDelta, and keeps some
	// batches with no record at all (see clean.go). Produced and
	// replicated batches must be full (checkFull).
	if h.NumRecords < 0 || h.LastOffsetDelta < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: record count %d inconsistent with last offset delta %d",
			ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}

// checkFull requires a batch to hold one record per offset of its range,
// as every batch a producer sends does.
func checkFull(h BatchHeader) error {
	if h.NumRecords <= 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("%w: record count %d inconsistent with last offset delta %d",
			ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return nil
}

// checkBatch validates one whole batch (framing plus CRC). b starts at the
// batch and may extend past it.
func checkBatch(b []byte) (BatchHeader, error) {
	if len(b) < batchHeaderLen {
		return BatchHeader{}, fmt.Errorf("%w: partial batch header: %d bytes", ErrCorruptBatch, len(b))
	}
	h := parseHeader(b)
	if err := checkFraming(h, len(b)); err != nil {
		return h, err
	}
	if got := crc32.Checksum(b[offAttributes:h.Size()], crcTable); got != h.CRC {
		return h, fmt.Errorf("%w: crc mismatch at offset %d: stored %08x, computed %08x",
			ErrCorruptBatch, h.BaseOffset, h.CRC, got)
	}
	return h, nil
}

// ValidateBatches checks one or more concatenated RecordBatch v2: framing
// (no partial batch, no trailing bytes), magic 2, CRC-32C and a record count
// consistent with lastOffsetDelta. Errors wrap ErrCorruptBatch.
func ValidateBatches(records []byte) ([]BatchHeader, error) {
	return validateBatches(records, true, true)
}

// CheckCRC checks the CRC-32C of every batch in records, which
// ParseBatches framed; it allocates nothing.
func CheckCRC(records []byte) error {
	for rest := records; len(rest) >= batchHeaderLen; {
		h, err := checkBatch(rest)
		if err != nil {
			return err
		}
		rest = rest[h.Size():]
	}
	return nil
}

// ParseBatches is ValidateBatches without the CRC: for a proposer whose
// batches every replica validates in full before it appends them (a
// partition's Raft entries), so that the records are checksummed once
// on the way in, not twice on the leader.
func ParseBatches(records []byte) ([]BatchHeader, error) {
	return validateBatches(records, true, false)
}

// ValidateStored checks batches as a log stores and serves them:
// ValidateBatches except that a batch may hold fewer records than its
// offset range, or none, where the cleaner removed records (see
// checkFraming). Replicas copying a compacted log and readers of one use
// it; produced batches never pass through it.
func ValidateStored(records []byte) ([]BatchHeader, error) {
	return validateBatches(records, false, true)
}

func validateBatches(records []byte, full, crc bool) ([]BatchHeader, error) {
	if len(records) == 0 {
		return nil, fmt.Errorf("%w: no batches", ErrCorruptBatch)
	}
	// Counting first keeps the result to a single allocation.
	n := 0
	for rest := records; len(rest) > 0; n++ {
		if len(rest) < batchHeaderLen {
			return nil, fmt.Errorf("%w: partial batch header: %d trailing bytes", ErrCorruptBatch, len(rest))
		}
		h := parseHeader(rest)
		if err := checkFraming(h, len(rest)); err != nil {
			return nil, err
		}
		if full {
			if err := checkFull(h); err != nil {
				return nil, err
			}
		}
		rest = rest[h.Size():]
	}
	hs := make([]BatchHeader, 0, n)
	for rest := records; len(rest) > 0; {
		h := parseHeader(rest)
		if crc {
			var err error
			if h, err = checkBatch(rest); err != nil {
				return nil, err
			}
		}
		hs = append(hs, h)
		rest = rest[h.Size():]
	}
	return hs, nil
}

// rewriteBatch stamps broker-assigned fields into a validated batch.
// logAppendTime > 0 marks the batch LogAppendTime and sets maxTimestamp,
// exactly as Kafka's LogValidator does (firstTimestamp is left alone;
// readers must use maxTimestamp for such batches), and only then is the
// CRC computed again: it covers the attributes onwards, not the base
// offset or leader epoch before them, so a CreateTime batch's stays the
// one its producer computed and its replica checked.
func rewriteBatch(b []byte, baseOffset int64, leaderEpoch int32, logAppendTime int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
	if logAppendTime > 0 {
		attrs := binary.BigEndian.Uint16(b[offAttributes:]) | attrLogAppendTime
		binary.BigEndian.PutUint16(b[offAttributes:], attrs)
		binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(logAppendTime))
		size := int(binary.BigEndian.Uint32(b[offLength:])) + batchPrefixLen
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:size], crcTable))
	}
}

// EndOffset returns the offset after the last record of the whole
// batches at the start of records (what Read returns), and false when
// records holds no whole batch.
func EndOffset(records []byte) (int64, bool) {
	end, ok := int64(0), false
	for len(records) >= batchHeaderLen {
		size := int64(binary.BigEndian.Uint32(records[offLength:])) + batchPrefixLen
		if size < batchHeaderLen || size > int64(len(records)) {
			break
		}
		h := parseHeader(records)
		end, ok = h.LastOffset()+1, true
		records = records[size:]
	}
	return end, ok
}
