package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka error codes used by the tests.
const (
	errNone                    int16 = 0
	errOffsetOutOfRange        int16 = 1
	errCorruptMessage          int16 = 2
	errUnknownTopicOrPartition int16 = 3
	errMessageTooLarge         int16 = 10
	errUnsupportedVersion      int16 = 35
	errTopicAlreadyExists      int16 = 36
	errOutOfOrderSequence      int16 = 45
	errDuplicateSequence       int16 = 46
	errUnknownProducerID       int16 = 59
	errUnsupportedCompression  int16 = 76
	errUnknownTopicID          int16 = 100
)

// ---------------------------------------------------------------------------
// rawConn: a Kafka connection where the test controls every byte and the
// exact request version (kgo always negotiates the highest version).

type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("weir-integration"))}
}

func (r *rawConn) Close() { r.c.Close() }

// Write writes raw bytes with a bounded deadline.
func (r *rawConn) Write(p []byte) error {
	_ = r.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := r.c.Write(p)
	return err
}

// Send writes req at its current version and returns its correlation ID.
func (r *rawConn) Send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if err := r.Write(r.f.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatalf("writing request key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	return r.corr
}

// ReadFrame reads one size-prefixed frame within d.
func (r *rawConn) ReadFrame(d time.Duration) ([]byte, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	var sz [4]byte
	if _, err := io.ReadFull(r.c, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > 256<<20 {
		return nil, fmt.Errorf("bad response frame size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r.c, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// Recv reads the response for req (sent with correlation corr) and parses
// it at respVersion.
func (r *rawConn) Recv(req kmsg.Request, corr int32, respVersion int16, d time.Duration) kmsg.Response {
	r.t.Helper()
	frame, err := r.ReadFrame(d)
	if err != nil {
		r.t.Fatalf("reading response to key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	resp, err := parseResponse(req, frame, corr, respVersion)
	if err != nil {
		r.t.Fatalf("key %d v%d: %v", req.Key(), req.GetVersion(), err)
	}
	return resp
}

func parseResponse(req kmsg.Request, frame []byte, corr int32, respVersion int16) (kmsg.Response, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("response frame of %d bytes", len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(respVersion)
	// Response header v1 (tagged fields) for flexible versions, except
	// ApiVersions, whose response header is always v0.
	if resp.IsFlexible() && req.Key() != 18 {
		ntags, n := binary.Uvarint(body)
		if n <= 0 {
			return nil, errors.New("bad response header tags")
		}
		body = body[n:]
		for range ntags {
			_, n1 := binary.Uvarint(body)
			if n1 <= 0 {
				return nil, errors.New("bad response header tag")
			}
			body = body[n1:]
			l, n2 := binary.Uvarint(body)
			if n2 <= 0 || uint64(len(body)-n2) < l {
				return nil, errors.New("bad response header tag length")
			}
			body = body[n2+int(l):]
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %T v%d (%d bytes): %v", resp, respVersion, len(body), err)
	}
	return resp, nil
}

// Do sends req at its set version and returns the parsed response.
func (r *rawConn) Do(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	corr := r.Send(req)
	return r.Recv(req, corr, req.GetVersion(), requestTimeout)
}

// expectClosed asserts the peer closes the connection within d, discarding
// anything it sends first (at most a few frames).
func (r *rawConn) expectClosed(d time.Duration) error {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	total := 0
	for total < 1<<20 {
		n, err := r.c.Read(buf)
		total += n
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("connection still open after %v (%d bytes received)", d, total)
			}
			return nil // EOF or reset: closed
		}
	}
	return fmt.Errorf("peer sent over %d bytes without closing", total)
}

// apiVersions returns key -> [min, max] supported by the broker.
func apiVersions(t testing.TB, addr string) map[int16][2]int16 {
	t.Helper()
	rc := dialRaw(t, addr)
	defer rc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "weir-integration"
	req.ClientSoftwareVersion = "1.0.0"
	resp := rc.Do(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3: error %d", resp.ErrorCode)
	}
	m := make(map[int16][2]int16, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		m[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return m
}

// requireVersion skips unless the broker supports key at version v.
func requireVersion(t testing.TB, vers map[int16][2]int16, key, v int16) {
	t.Helper()
	r, ok := vers[key]
	if !ok || v < r[0] || v > r[1] {
		t.Fatalf("broker does not advertise api key %d version %d (advertised %v, present %v)", key, v, r, ok)
	}
}

// ---------------------------------------------------------------------------
// Record batches.

type rec struct {
	Key, Value []byte
	TsDelta    int64
}

type batchOpts struct {
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	FirstTs       int64
	Attributes    int16
	// Idempotent marks the producer fields as set: producer id 0 at
	// epoch 0 and sequence 0 is a real producer's first batch.
	Idempotent bool
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecords encodes records (uncompressed) with offset deltas 0..n-1.
func encodeRecords(recs []rec) []byte {
	var out []byte
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.TsDelta,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		// Length is a varint of everything after it: encode with 0 (one
		// byte), measure, re-encode.
		tmp := kr.AppendTo(nil)
		kr.Length = int32(len(tmp) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

// buildBatch builds a v2 record batch holding recs with a correct CRC.
func buildBatch(o batchOpts, recs []rec) []byte {
	if o.FirstTs == 0 {
		o.FirstTs = time.Now().UnixMilli()
	}
	maxTs := o.FirstTs
	for _, r := range recs {
		if o.FirstTs+r.TsDelta > maxTs {
			maxTs = o.FirstTs + r.TsDelta
		}
	}
	pid, epoch, seq := o.ProducerID, o.ProducerEpoch, o.BaseSequence
	if !o.Idempotent && pid == 0 && epoch == 0 && seq == 0 {
		pid, epoch, seq = -1, -1, -1
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           o.Attributes,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       o.FirstTs,
		MaxTimestamp:         maxTs,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(recs)),
		Records:              encodeRecords(recs),
	}
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(raw[21:], castagnoli))
	return rb.AppendTo(nil)
}

// zstdBatch builds a zstd-compressed v2 batch.
func zstdBatch(t testing.TB, recs []rec) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	compressed := enc.EncodeAll(encodeRecords(recs), nil)
	ts := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           4,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              compressed,
	}
	raw := rb.AppendTo(nil)
	rb.Length = int32(len(raw) - 12)
	raw = rb.AppendTo(nil)
	resealBatch(raw)
	return raw
}

// idemOpts builds batch options for an idempotent producer.
func idemOpts(pid int64, epoch int16, seq int32) batchOpts {
	return batchOpts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Idempotent: true}
}

// splitBatches splits fetched record-batch bytes into whole batches and
// reports the number of trailing bytes that do not form a whole batch.
func splitBatches(t testing.TB, data []byte) (batches [][]byte, partial int) {
	t.Helper()
	for len(data) > 0 {
		if len(data) < 12 {
			return batches, len(data)
		}
		l := int(int32(binary.BigEndian.Uint32(data[8:12])))
		if l < 0 {
			t.Fatalf("negative batch length %d", l)
		}
		total := 12 + l
		if total > len(data) {
			return batches, len(data)
		}
		batches = append(batches, data[:total])
		data = data[total:]
	}
	return batches, 0
}

func parseBatch(t testing.TB, raw []byte) kmsg.RecordBatch {
	t.Helper()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(raw); err != nil {
		t.Fatalf("parsing record batch: %v", err)
	}
	if rb.Magic != 2 {
		t.Fatalf("batch magic %d, want 2", rb.Magic)
	}
	if got := int32(crc32.Checksum(raw[21:], castagnoli)); got != rb.CRC {
		t.Fatalf("batch at offset %d: CRC %08x on the wire, computed %08x", rb.FirstOffset, uint32(rb.CRC), uint32(got))
	}
	return rb
}

type decodedRecord struct {
	Offset     int64
	Timestamp  int64
	Key, Value []byte
}

// decodeUncompressed decodes the records of an uncompressed batch.
func decodeUncompressed(t testing.TB, rb kmsg.RecordBatch) []decodedRecord {
	t.Helper()
	if rb.Attributes&7 != 0 {
		t.Fatalf("decodeUncompressed: batch is compressed (attributes %#x)", rb.Attributes)
	}
	data := rb.Records
	var out []decodedRecord
	for i := int32(0); i < rb.NumRecords; i++ {
		l, n := binary.Varint(data)
		if n <= 0 || int(l) > len(data)-n || l < 0 {
			t.Fatalf("record %d: bad length", i)
		}
		var kr kmsg.Record
		if err := kr.ReadFrom(data[:n+int(l)]); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		data = data[n+int(l):]
		out = append(out, decodedRecord{
			Offset:    rb.FirstOffset + int64(kr.OffsetDelta),
			Timestamp: rb.FirstTimestamp + kr.TimestampDelta64,
			Key:       kr.Key,
			Value:     kr.Value,
		})
	}
	if len(data) != 0 {
		t.Fatalf("%d trailing bytes after %d records", len(data), rb.NumRecords)
	}
	return out
}

// produceRaw sends one batch to topic/partition with a ProduceRequest at
// version v (3..12; names) and returns the partition response.
func produceRaw(t testing.TB, rc *rawConn, v int16, acks int16, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := produceRequestTo(v, acks, topic, partition, batch)
	return produceAnswer(t, req, rc.Do(req))
}

// produceRequestTo is a produce request at version v carrying batch to
// topic/partition, with a 10 s timeout.
func produceRequestTo(v, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceAnswer is the one partition's answer to req, a produceRequestTo.
func produceAnswer(t testing.TB, req *kmsg.ProduceRequest, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	pr := resp.(*kmsg.ProduceResponse)
	topic, partition := req.Topics[0].Topic, req.Topics[0].Partitions[0].Partition
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("produce v%d to %s/%d: response has %d topics, want 1 topic with 1 partition: %+v", req.Version, topic, partition, len(pr.Topics), pr.Topics)
	}
	if pr.Topics[0].Topic != topic {
		t.Fatalf("produce response topic %q, want %q", pr.Topics[0].Topic, topic)
	}
	return pr.Topics[0].Partitions[0]
}

// produceVersion picks the produce version used for raw produce requests:
// v9 (flexible, topic names) or the broker's max if lower.
func produceVersion(t testing.TB, vers map[int16][2]int16) int16 {
	t.Helper()
	r, ok := vers[0]
	if !ok {
		t.Fatalf("broker does not advertise Produce")
	}
	v := int16(9)
	if r[1] < v {
		v = r[1]
	}
	if v < 3 || v < r[0] {
		t.Fatalf("broker Produce versions %v: no v3..v9 to send v2 record batches by name", r)
	}
	return v
}

// resealBatch recomputes the CRC of a batch edited in place.
func resealBatch(raw []byte) {
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], castagnoli))
}
