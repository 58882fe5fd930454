package memory

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"math"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

const (
	// memoryFetchVersion is the Fetch version the bench speaks: the last
	// that names topics (v13 and later take topic IDs), and flexible, as
	// every current client's requests are.
	memoryFetchVersion = 12

	// batchHeaderSize is the v2 record batch header: base offset (0),
	// batch length (8), partition leader epoch (12), magic (16), CRC (17),
	// attributes (21), last offset delta (23), base and max timestamps
	// (27, 35), producer ID (43) and epoch (51), base sequence (53) and
	// records count (57).
	batchHeaderSize = 61
	// batchLogOverhead is what precedes the batch length's count: the base
	// offset and the length itself.
	batchLogOverhead = 12

	batchAttrControl = 0x20

	// memoryReadBuffer is each connection's read buffer; a consumer's
	// answers stream through it, so it is all the memory a consumer holds.
	memoryReadBuffer = 256 << 10

	memoryClientID = "weirctl-bench-memory"
)

// batchHeader is what the bench reads of a record batch: enough to count
// and place its records without decoding them.
type batchHeader struct {
	BaseOffset      int64
	Length          int32 // the batch length field: bytes after it
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	Records         int32
}

// size is the batch's bytes in the log and on the wire.
func (h batchHeader) size() int64 { return batchLogOverhead + int64(h.Length) }

func (h batchHeader) lastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// parseBatchHeader reads the first batchHeaderSize bytes of a batch. The
// magic byte is at the same place in every message format, so an old one
// is recognised and refused rather than misread.
func parseBatchHeader(b []byte) (batchHeader, error) {
	if len(b) < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("record batch header of %d bytes, want %d", len(b), batchHeaderSize)
	}
	h := batchHeader{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[0:])),
		Length:          int32(binary.BigEndian.Uint32(b[8:])),
		Magic:           int8(b[16]),
		CRC:             binary.BigEndian.Uint32(b[17:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[21:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[23:])),
		Records:         int32(binary.BigEndian.Uint32(b[57:])),
	}
	switch {
	case h.Magic != 2:
		return h, fmt.Errorf("batch at offset %d is message format v%d; the bench reads v2 batches only", h.BaseOffset, h.Magic)
	case h.Length < batchHeaderSize-batchLogOverhead:
		return h, fmt.Errorf("batch at offset %d claims %d bytes, less than its own header", h.BaseOffset, h.Length)
	}
	return h, nil
}

// errShortMessage means a field runs past the end of its message.
var errShortMessage = errors.New("a field runs past the end of the response")

// wireReader reads one Kafka message from a stream, never past its
// length. The first error sticks: later reads return zeros, so a parser
// checks err once at the end (and before acting on a value).
type wireReader struct {
	r    *bufio.Reader
	left int64
	err  error
	buf  [batchHeaderSize]byte
}

func (w *wireReader) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// read returns the next n (at most batchHeaderSize) bytes, valid until
// the next call.
func (w *wireReader) read(n int) []byte {
	b := w.buf[:n]
	if w.err != nil {
		clear(b)
		return b
	}
	if int64(n) > w.left {
		w.fail(errShortMessage)
		clear(b)
		return b
	}
	if _, err := io.ReadFull(w.r, b); err != nil {
		w.fail(harness.NoEOF(err))
		clear(b)
		return b
	}
	w.left -= int64(n)
	return b
}

func (w *wireReader) int16() int16 { return int16(binary.BigEndian.Uint16(w.read(2))) }

func (w *wireReader) int32() int32 { return int32(binary.BigEndian.Uint32(w.read(4))) }

func (w *wireReader) int64() int64 { return int64(binary.BigEndian.Uint64(w.read(8))) }

func (w *wireReader) uvarint() uint64 {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		if w.err != nil {
			return 0
		}
		if w.left < 1 {
			w.fail(errShortMessage)
			return 0
		}
		c, err := w.r.ReadByte()
		if err != nil {
			w.fail(harness.NoEOF(err))
			return 0
		}
		w.left--
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			return x | uint64(c)<<(7*i)
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	w.fail(errors.New("an unsigned varint overflows 64 bits"))
	return 0
}

func (w *wireReader) skip(n int64) {
	switch {
	case w.err != nil:
		return
	case n < 0 || n > w.left:
		w.fail(errShortMessage)
		return
	}
	for n > 0 {
		k, err := w.r.Discard(int(min(n, math.MaxInt32)))
		w.left -= int64(k)
		n -= int64(k)
		if err != nil {
			w.fail(harness.NoEOF(err))
			return
		}
	}
}

// compactLen reads a compact (flexible-version) length: the varint holds
// length+1, and 0 means null, returned as -1. A length the message cannot
// hold is an error.
func (w *wireReader) compactLen() int64 {
	u := w.uvarint()
	if u == 0 || w.err != nil {
		return -1
	}
	if u-1 > uint64(w.left) {
		w.fail(fmt.Errorf("a length of %d runs past the end of the response (%d bytes left)", u-1, w.left))
		return -1
	}
	return int64(u - 1)
}

// compactArrayLen is compactLen for arrays: null is empty.
func (w *wireReader) compactArrayLen() int64 { return max(w.compactLen(), 0) }

func (w *wireReader) compactString() string {
	n := w.compactLen()
	if n <= 0 || w.err != nil {
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(w.r, b); err != nil {
		w.fail(harness.NoEOF(err))
		return ""
	}
	w.left -= n
	return string(b)
}

// tags skips a tagged-field section: a count, then each tag's number,
// size and bytes.
func (w *wireReader) tags() {
	for n := w.uvarint(); n > 0 && w.err == nil; n-- {
		w.uvarint()
		size := w.uvarint()
		if size > uint64(w.left) {
			w.fail(errShortMessage)
			return
		}
		w.skip(int64(size))
	}
}

// batches walks n bytes of record batches, appending each complete
// batch's header to dst and skipping its records. A broker may end the
// data with part of a batch; its bytes are skipped and returned as
// partial.
func (w *wireReader) batches(n int64, dst []batchHeader) (_ []batchHeader, partial int64) {
	if n > w.left {
		w.fail(errShortMessage)
		return dst, 0
	}
	for n > 0 && w.err == nil {
		if n < batchHeaderSize {
			w.skip(n)
			return dst, n
		}
		h, err := parseBatchHeader(w.read(batchHeaderSize))
		if w.err != nil {
			return dst, 0
		}
		if err != nil {
			w.fail(err)
			return dst, 0
		}
		if h.size() > n {
			w.skip(n - batchHeaderSize)
			return dst, n
		}
		w.skip(h.size() - batchHeaderSize)
		n -= h.size()
		dst = append(dst, h)
	}
	return dst, 0
}

// fetchPartitionAnswer is one partition of a Fetch response, with its
// record batches reduced to their headers.
type fetchPartitionAnswer struct {
	Topic         string
	Partition     int32
	ErrorCode     int16
	HighWatermark int64
	Batches       []batchHeader
	// PartialBytes is a trailing incomplete batch, skipped.
	PartialBytes int64
}

// fetchAnswer is a Fetch response as the bench reads it.
type fetchAnswer struct {
	ErrorCode  int16
	Partitions []fetchPartitionAnswer
}

// readFetchAnswer reads one Fetch v12 response (size, header with
// correlationID, body) from r into a, reusing a's slices. Records stream
// through r's buffer: only batch headers are kept.
func readFetchAnswer(r *bufio.Reader, correlationID int32, a *fetchAnswer) error {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 4 {
		return fmt.Errorf("response of %d bytes", size)
	}
	w := &wireReader{r: r, left: int64(size)}
	if got := w.int32(); w.err == nil && got != correlationID {
		return fmt.Errorf("response to request %d where %d was due", got, correlationID)
	}
	w.tags()  // response header v1
	w.int32() // throttle_time_ms
	a.ErrorCode = w.int16()
	w.int32() // session_id
	parts := a.Partitions[:0]
	for t := w.compactArrayLen(); t > 0 && w.err == nil; t-- {
		topic := w.compactString()
		for n := w.compactArrayLen(); n > 0 && w.err == nil; n-- {
			// Reuse a recycled entry's batch slice.
			if len(parts) < cap(parts) {
				parts = parts[:len(parts)+1]
			} else {
				parts = append(parts, fetchPartitionAnswer{})
			}
			p := &parts[len(parts)-1]
			*p = fetchPartitionAnswer{Batches: p.Batches[:0]}
			p.Topic = topic
			p.Partition = w.int32()
			p.ErrorCode = w.int16()
			p.HighWatermark = w.int64()
			w.skip(8 + 8) // last_stable_offset, log_start_offset
			for n := w.compactArrayLen(); n > 0 && w.err == nil; n-- {
				w.skip(8 + 8) // aborted transaction: producer_id, first_offset
				w.tags()
			}
			w.skip(4) // preferred_read_replica
			if n := w.compactLen(); n > 0 {
				p.Batches, p.PartialBytes = w.batches(n, p.Batches)
			}
			w.tags()
		}
		w.tags()
	}
	w.tags()
	a.Partitions = parts
	switch {
	case w.err != nil:
		return fmt.Errorf("reading a Fetch response: %w", w.err)
	case w.left != 0:
		return fmt.Errorf("reading a Fetch response: %d bytes after its last field", w.left)
	}
	return nil
}

// partitionProgress is one consumer's position in one partition: next
// is the offset due, end the backlog's end.
type partitionProgress struct {
	partition int32
	next, end int64
	records   int64
	bytes     int64
	// crc is the CRC-64 of (base offset, length, batch CRC) of every
	// batch taken, in order: equal across consumers when they received
	// the same batches, without reading the records.
	crc uint64
}

func newPartitionProgress(partition int32, backlog harness.OffsetRange) *partitionProgress {
	return &partitionProgress{partition: partition, next: backlog.Start, end: backlog.End}
}

func (p *partitionProgress) done() bool { return p.next >= p.end }

var crc64Table = crc64.MakeTable(crc64.ECMA)

// take applies one answer for the partition: it accepts exactly the
// offsets due next, counts records without decoding them, and returns
// what this answer added. Offsets past end (records produced during the
// run) are ignored.
func (p *partitionProgress) take(a *fetchPartitionAnswer) (records, bytes int64, err error) {
	if a.ErrorCode != 0 {
		return 0, 0, fmt.Errorf("partition %d at offset %d: %s", p.partition, p.next, cli.StatusCell(kerr.ErrorForCode(a.ErrorCode), ""))
	}
	if !p.done() && a.HighWatermark < p.end {
		return 0, 0, fmt.Errorf("partition %d: high watermark %d is below the backlog's end %d (were records deleted?)", p.partition, a.HighWatermark, p.end)
	}
	for _, h := range a.Batches {
		if p.done() {
			break
		}
		last := h.lastOffset()
		switch {
		case h.Attributes&batchAttrControl != 0:
			return records, bytes, fmt.Errorf("partition %d: control batch at offset %d: TOPIC holds transaction markers, which the bench does not expect", p.partition, h.BaseOffset)
		case h.LastOffsetDelta < 0 || int64(h.Records) != int64(h.LastOffsetDelta)+1:
			return records, bytes, fmt.Errorf("partition %d: batch at offset %d has %d records for %d offsets: offsets missing inside it (compacted?)",
				p.partition, h.BaseOffset, h.Records, int64(h.LastOffsetDelta)+1)
		case h.BaseOffset > p.next:
			return records, bytes, fmt.Errorf("partition %d: batch at offset %d where %d was due: offsets %d-%d missing",
				p.partition, h.BaseOffset, p.next, p.next, h.BaseOffset-1)
		case last < p.next:
			return records, bytes, fmt.Errorf("partition %d: batch of offsets %d-%d delivered again (offset %d was due)",
				p.partition, h.BaseOffset, last, p.next)
		}
		upto := min(last+1, p.end)
		records += upto - p.next
		bytes += h.size()
		p.next = upto
		var id [16]byte
		binary.BigEndian.PutUint64(id[0:], uint64(h.BaseOffset))
		binary.BigEndian.PutUint32(id[8:], uint32(h.Length))
		binary.BigEndian.PutUint32(id[12:], h.CRC)
		p.crc = crc64.Update(p.crc, crc64Table, id[:])
	}
	if !p.done() && len(a.Batches) == 0 && a.PartialBytes > 0 {
		// The broker must return at least one whole batch; a consumer
		// given only part of one would ask for the same offset forever.
		return records, bytes, fmt.Errorf("partition %d at offset %d: the answer holds only %d bytes of a batch, no whole batch", p.partition, p.next, a.PartialBytes)
	}
	p.records += records
	p.bytes += bytes
	return records, bytes, nil
}

// fetchRequest asks for parts from their next offsets, in the given
// order, without a fetch session.
func fetchRequest(topic string, f memoryFetch, parts []*partitionProgress) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = memoryFetchVersion
	req.ReplicaID = -1
	req.MaxWaitMillis = f.MaxWaitMs
	req.MinBytes = f.MinBytes
	req.MaxBytes = f.MaxBytes
	req.IsolationLevel = 0 // read_uncommitted: the producers are not transactional
	req.SessionID = 0
	req.SessionEpoch = -1 // no session: every request is a full fetch
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p.partition
		fp.FetchOffset = p.next
		fp.PartitionMaxBytes = f.MaxPartitionBytes
		t.Partitions = append(t.Partitions, fp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// pendingParts lists the partitions not yet done, starting at the
// rotate-th (modulo their number): rotating the order of each request, as
// Kafka clients do, keeps the first partitions from taking every answer's
// max_bytes while the others wait.
func pendingParts(parts []*partitionProgress, rotate int, dst []*partitionProgress) []*partitionProgress {
	dst = dst[:0]
	for i := range parts {
		if p := parts[(rotate+i)%len(parts)]; !p.done() {
			dst = append(dst, p)
		}
	}
	return dst
}

// memoryConn is one connection of a consumer: to one partition leader,
// for the partitions it leads.
type memoryConn struct {
	leader int32
	addr   string
	conn   net.Conn
	r      *bufio.Reader
	parts  []*partitionProgress

	formatter *kmsg.RequestFormatter
	corr      int32
	reqBuf    []byte
	answer    fetchAnswer
	pending   []*partitionProgress
}

// dialMemoryConn connects to a leader; the Kafka protocol needs no
// handshake before Fetch (no ApiVersions, no SASL).
func dialMemoryConn(ctx context.Context, timeout time.Duration, leader int32, addr string, parts []*partitionProgress) (*memoryConn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to broker %d at %s: %w", leader, addr, err)
	}
	return &memoryConn{
		leader:    leader,
		addr:      addr,
		conn:      conn,
		r:         bufio.NewReaderSize(conn, memoryReadBuffer),
		parts:     parts,
		formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(memoryClientID)),
	}, nil
}

// send writes a Fetch request for every pending partition, bounded by
// timeout; it returns the request's correlation ID.
func (c *memoryConn) send(topic string, f memoryFetch, timeout time.Duration) (int32, error) {
	c.pending = pendingParts(c.parts, int(c.corr), c.pending)
	c.corr++
	c.reqBuf = c.formatter.AppendRequest(c.reqBuf[:0], fetchRequest(topic, f, c.pending), c.corr)
	if err := c.conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := c.conn.Write(c.reqBuf); err != nil {
		return 0, fmt.Errorf("sending a Fetch request to broker %d: %w", c.leader, err)
	}
	return c.corr, nil
}
