package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

// testRecordBatch encodes a v2 batch of n records with kmsg, with a
// correct length and CRC, as a producer would send it.
func testRecordBatch(t *testing.T, base int64, n, valueSize int) []byte {
	t.Helper()
	var recs []byte
	for i := range n {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after the 1-byte varint of 0
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		FirstOffset: base, Magic: 2, LastOffsetDelta: int32(n - 1), NumRecords: int32(n),
		FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000000 + int64(n-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-batchLogOverhead))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func streamOf(b []byte) *wireReader {
	return &wireReader{r: bufio.NewReaderSize(bytes.NewReader(b), 16), left: int64(len(b))}
}

func TestBatchHeaderWalk(t *testing.T) {
	var data []byte
	for _, b := range []struct {
		base int64
		n    int
	}{{0, 3}, {3, 1}, {4, 5}} {
		data = append(data, testRecordBatch(t, b.base, b.n, 100)...)
	}
	// franz-go, decoding the records in full, agrees with the walk.
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t"},
		&kmsg.FetchResponseTopicPartition{RecordBatches: data}, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil || len(fp.Records) != 9 || fp.Records[8].Offset != 8 {
		t.Fatalf("franz-go decodes %d records (err %v): the test batches are bad", len(fp.Records), fp.Err)
	}

	// A 16-byte reader buffer makes every header and skip span reads.
	w := streamOf(data)
	hs, partial := w.batches(int64(len(data)), nil)
	if w.err != nil || partial != 0 || w.left != 0 {
		t.Fatalf("walk: err %v, partial %d, left %d", w.err, partial, w.left)
	}
	if len(hs) != 3 {
		t.Fatalf("got %d headers, want 3", len(hs))
	}
	var offsets []int64
	var size int64
	for _, h := range hs {
		if h.Magic != 2 || h.Records != h.LastOffsetDelta+1 {
			t.Errorf("header %+v", h)
		}
		offsets = append(offsets, h.BaseOffset, h.lastOffset())
		size += h.size()
	}
	if fmt.Sprint(offsets) != "[0 2 3 3 4 8]" || size != int64(len(data)) {
		t.Errorf("offsets %v, size %d of %d", offsets, size, len(data))
	}
	if want := crc32.Checksum(data[21:hs[0].size()], crc32.MakeTable(crc32.Castagnoli)); hs[0].CRC != want {
		t.Errorf("CRC %x, want %x", hs[0].CRC, want)
	}

	// A trailing part of a batch is skipped, header or not.
	for _, cut := range []int{1, batchHeaderSize - 1, batchHeaderSize, batchHeaderSize + 50} {
		trunc := append(bytes.Clone(data), testRecordBatch(t, 9, 2, 100)[:cut]...)
		w := streamOf(trunc)
		hs, partial := w.batches(int64(len(trunc)), nil)
		if w.err != nil || len(hs) != 3 || partial != int64(cut) || w.left != 0 {
			t.Errorf("cut %d: err %v, %d headers, partial %d, left %d", cut, w.err, len(hs), partial, w.left)
		}
	}

	// Old message formats and impossible lengths are refused.
	old := testRecordBatch(t, 0, 1, 10)
	old[16] = 1
	if _, err := parseBatchHeader(old); err == nil || !strings.Contains(err.Error(), "message format v1") {
		t.Errorf("magic 1: %v", err)
	}
	short := testRecordBatch(t, 0, 1, 10)
	binary.BigEndian.PutUint32(short[8:], 10)
	w = streamOf(short)
	if w.batches(int64(len(short)), nil); w.err == nil || !strings.Contains(w.err.Error(), "less than its own header") {
		t.Errorf("length 10: %v", w.err)
	}
	// More batch bytes than the message holds is an error, not a hang.
	w = streamOf(data)
	w.left = 10
	if w.batches(int64(len(data)), nil); !errors.Is(w.err, errShortMessage) {
		t.Errorf("records longer than the message: %v", w.err)
	}
}

// encodeFetchResponse frames a response as a broker sends it: size,
// correlation ID, the flexible header's empty tags, then the body.
func encodeFetchResponse(resp *kmsg.FetchResponse, corr int32) []byte {
	body := resp.AppendTo(nil)
	out := binary.BigEndian.AppendUint32(nil, uint32(4+1+len(body)))
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	out = append(out, 0)
	return append(out, body...)
}

func testFetchResponse(t *testing.T) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = memoryFetchVersion
	resp.ThrottleMillis, resp.SessionID = 7, 0
	topic := kmsg.NewFetchResponseTopic()
	topic.Topic = "bench"
	p0 := kmsg.NewFetchResponseTopicPartition()
	p0.Partition, p0.HighWatermark, p0.LastStableOffset, p0.LogStartOffset = 0, 100, 100, 0
	p0.RecordBatches = append(testRecordBatch(t, 0, 2, 50), testRecordBatch(t, 2, 3, 50)...)
	p0.RecordBatches = append(p0.RecordBatches, testRecordBatch(t, 5, 1, 50)[:70]...)
	abort := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
	abort.ProducerID, abort.FirstOffset = 9, 1
	abort.UnknownTags.Set(5, []byte("xyz"))
	p0.AbortedTransactions = append(p0.AbortedTransactions, abort)
	p0.CurrentLeader.LeaderID, p0.CurrentLeader.LeaderEpoch = 1, 4 // tag 1
	p1 := kmsg.NewFetchResponseTopicPartition()
	p1.Partition, p1.ErrorCode, p1.HighWatermark = 3, kerr.NotLeaderForPartition.Code, -1
	topic.Partitions = append(topic.Partitions, p0, p1)
	topic.UnknownTags.Set(9, []byte{1, 2})
	resp.Topics = append(resp.Topics, topic)
	return resp
}

func TestReadFetchAnswer(t *testing.T) {
	resp := testFetchResponse(t)
	data := encodeFetchResponse(resp, 42)
	// Two answers back to back, read into one recycled fetchAnswer: the
	// second must not see the first's batches.
	second := kmsg.NewPtrFetchResponse()
	second.Version = memoryFetchVersion
	st := kmsg.NewFetchResponseTopic()
	st.Topic = "bench"
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition, sp.HighWatermark = 0, 100
	st.Partitions = append(st.Partitions, sp)
	second.Topics = append(second.Topics, st)
	data = append(data, encodeFetchResponse(second, 43)...)
	r := bufio.NewReaderSize(bytes.NewReader(data), 16)

	var a fetchAnswer
	if err := readFetchAnswer(r, 42, &a); err != nil {
		t.Fatal(err)
	}
	if a.ErrorCode != 0 || len(a.Partitions) != 2 {
		t.Fatalf("answer %+v", a)
	}
	p0, p1 := a.Partitions[0], a.Partitions[1]
	if p0.Topic != "bench" || p0.Partition != 0 || p0.HighWatermark != 100 || len(p0.Batches) != 2 || p0.PartialBytes != 70 {
		t.Errorf("partition 0: %+v", p0)
	}
	if p0.Batches[1].BaseOffset != 2 || p0.Batches[1].Records != 3 {
		t.Errorf("partition 0 second batch: %+v", p0.Batches[1])
	}
	if p1.Partition != 3 || p1.ErrorCode != kerr.NotLeaderForPartition.Code || len(p1.Batches) != 0 {
		t.Errorf("partition 3: %+v", p1)
	}
	if err := readFetchAnswer(r, 43, &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Partitions) != 1 || len(a.Partitions[0].Batches) != 0 || a.Partitions[0].PartialBytes != 0 {
		t.Errorf("second answer: %+v", a.Partitions)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Errorf("the reader must stop at the end of the second answer: %v", err)
	}

	for _, tc := range []struct {
		name string
		data func() []byte
		corr int32
		want string
	}{
		{"wrong correlation", func() []byte { return encodeFetchResponse(resp, 42) }, 41, "response to request 42 where 41 was due"},
		{"truncated stream", func() []byte { return encodeFetchResponse(resp, 42)[:300] }, 42, "unexpected EOF"},
		{"size past the fields", func() []byte {
			d := append(encodeFetchResponse(resp, 42), 0, 0)
			binary.BigEndian.PutUint32(d, binary.BigEndian.Uint32(d)+2)
			return d
		}, 42, "2 bytes after its last field"},
		{"size short of the fields", func() []byte {
			d := encodeFetchResponse(resp, 42)
			binary.BigEndian.PutUint32(d, binary.BigEndian.Uint32(d)-10)
			return d
		}, 42, "past the end of the response"},
	} {
		err := readFetchAnswer(bufio.NewReader(bytes.NewReader(tc.data())), tc.corr, &a)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want error mentioning %q, got %v", tc.name, tc.want, err)
		}
	}
}

func TestPartitionProgressTake(t *testing.T) {
	h := func(base int64, n int32) batchHeader {
		return batchHeader{BaseOffset: base, Length: 100, Magic: 2, LastOffsetDelta: n - 1, Records: n, CRC: uint32(base)}
	}
	answer := func(hs ...batchHeader) *fetchPartitionAnswer {
		return &fetchPartitionAnswer{Partition: 2, HighWatermark: 1000, Batches: hs}
	}
	type step struct {
		a       *fetchPartitionAnswer
		records int64
		err     string
	}
	for _, tc := range []struct {
		name  string
		rng   harness.OffsetRange
		steps []step
		next  int64
	}{
		{"contiguous over two answers", harness.OffsetRange{Start: 10, End: 20}, []step{
			{a: answer(h(10, 4), h(14, 2)), records: 6},
			{a: answer(h(16, 4)), records: 4},
		}, 20},
		{"the end falls inside a batch; later batches ignored", harness.OffsetRange{Start: 0, End: 5}, []step{
			{a: answer(h(0, 3), h(3, 4), h(7, 1)), records: 5},
		}, 5},
		{"the start falls inside a batch", harness.OffsetRange{Start: 12, End: 20}, []step{
			{a: answer(h(10, 5)), records: 3},
		}, 15},
		{"empty answer", harness.OffsetRange{Start: 0, End: 5}, []step{{a: answer(), records: 0}}, 0},
		{"gap", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: answer(h(0, 2), h(3, 2)), records: 2, err: "batch at offset 3 where 2 was due: offsets 2-2 missing"},
		}, 2},
		{"duplicate", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: answer(h(0, 2)), records: 2},
			{a: answer(h(0, 2)), err: "batch of offsets 0-1 delivered again (offset 2 was due)"},
		}, 2},
		{"holes inside a batch", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: answer(batchHeader{Magic: 2, Length: 100, LastOffsetDelta: 4, Records: 3}), err: "has 3 records for 5 offsets"},
		}, 0},
		{"control batch", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: answer(batchHeader{Magic: 2, Length: 100, Attributes: batchAttrControl, Records: 1}), err: "transaction markers"},
		}, 0},
		{"error code", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, ErrorCode: kerr.OffsetOutOfRange.Code}, err: "OFFSET_OUT_OF_RANGE"},
		}, 0},
		{"high watermark short of the backlog", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, HighWatermark: 5}, err: "high watermark 5 is below the backlog's end 10"},
		}, 0},
		{"only part of a batch", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, HighWatermark: 10, PartialBytes: 70}, err: "only 70 bytes of a batch"},
		}, 0},
		{"a trailing part after whole batches is fine", harness.OffsetRange{Start: 0, End: 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, HighWatermark: 10, Batches: []batchHeader{h(0, 3)}, PartialBytes: 70}, records: 3},
		}, 3},
	} {
		p := newPartitionProgress(2, tc.rng)
		for i, s := range tc.steps {
			records, _, err := p.take(s.a)
			if s.err == "" && err != nil || s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)) {
				t.Errorf("%s, step %d: want error %q, got %v", tc.name, i, s.err, err)
			}
			if records != s.records {
				t.Errorf("%s, step %d: took %d records, want %d", tc.name, i, records, s.records)
			}
		}
		if p.next != tc.next {
			t.Errorf("%s: next %d, want %d", tc.name, p.next, tc.next)
		}
	}

	// Bytes count whole batches; the checksum depends on the batches, not
	// on how they were split over answers.
	a, b := newPartitionProgress(0, harness.OffsetRange{Start: 0, End: 6}), newPartitionProgress(0, harness.OffsetRange{Start: 0, End: 6})
	a.take(answer(h(0, 2), h(2, 2), h(4, 2)))
	b.take(answer(h(0, 2)))
	b.take(answer(h(2, 2), h(4, 2)))
	if a.crc != b.crc || a.bytes != 3*112 || b.bytes != a.bytes || a.records != 6 {
		t.Errorf("a: crc %x bytes %d records %d; b: crc %x bytes %d", a.crc, a.bytes, a.records, b.crc, b.bytes)
	}
	c := newPartitionProgress(0, harness.OffsetRange{Start: 0, End: 6})
	c.take(answer(h(0, 2), h(2, 2), batchHeader{BaseOffset: 4, Length: 100, Magic: 2, LastOffsetDelta: 1, Records: 2, CRC: 99}))
	if c.crc == a.crc {
		t.Error("a different batch CRC must change the checksum")
	}
}

func TestPendingPartsRotates(t *testing.T) {
	parts := []*partitionProgress{
		newPartitionProgress(0, harness.OffsetRange{Start: 0, End: 1}),
		newPartitionProgress(1, harness.OffsetRange{Start: 0, End: 0}), // done
		newPartitionProgress(2, harness.OffsetRange{Start: 0, End: 1}),
		newPartitionProgress(3, harness.OffsetRange{Start: 0, End: 1}),
	}
	ids := func(ps []*partitionProgress) string {
		var s []int32
		for _, p := range ps {
			s = append(s, p.partition)
		}
		return fmt.Sprint(s)
	}
	var buf []*partitionProgress
	for rotate, want := range []string{"[0 2 3]", "[2 3 0]", "[2 3 0]", "[3 0 2]", "[0 2 3]"} {
		if buf = pendingParts(parts, rotate, buf); ids(buf) != want {
			t.Errorf("rotate %d: got %s, want %s", rotate, ids(buf), want)
		}
	}
}

func TestFetchRequestEncoding(t *testing.T) {
	parts := []*partitionProgress{newPartitionProgress(4, harness.OffsetRange{Start: 7, End: 9}), newPartitionProgress(1, harness.OffsetRange{Start: 3, End: 9})}
	f := memoryFetch{MaxBytes: 50 << 20, MaxPartitionBytes: 10 << 20, MaxWaitMs: 500, MinBytes: 1}
	raw := kmsg.NewRequestFormatter(kmsg.FormatterClientID(memoryClientID)).AppendRequest(nil, fetchRequest("bench", f, parts), 77)
	if int(binary.BigEndian.Uint32(raw)) != len(raw)-4 {
		t.Fatalf("size prefix %d for %d bytes", binary.BigEndian.Uint32(raw), len(raw)-4)
	}
	// Request header v2: key, version, correlation ID, client ID, tags.
	key, version, corr := int16(binary.BigEndian.Uint16(raw[4:])), int16(binary.BigEndian.Uint16(raw[6:])), int32(binary.BigEndian.Uint32(raw[8:]))
	idLen := int(binary.BigEndian.Uint16(raw[12:]))
	if key != 1 || version != memoryFetchVersion || corr != 77 || string(raw[14:14+idLen]) != memoryClientID || raw[14+idLen] != 0 {
		t.Fatalf("header: key %d version %d corr %d", key, version, corr)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if err := req.ReadFrom(raw[15+idLen:]); err != nil {
		t.Fatal(err)
	}
	if req.ReplicaID != -1 || req.MaxWaitMillis != 500 || req.MinBytes != 1 || req.MaxBytes != 50<<20 || req.SessionID != 0 || req.SessionEpoch != -1 {
		t.Errorf("request: %+v", req)
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != "bench" || len(req.Topics[0].Partitions) != 2 {
		t.Fatalf("topics: %+v", req.Topics)
	}
	for i, want := range []struct{ p, offset int64 }{{4, 7}, {1, 3}} {
		got := req.Topics[0].Partitions[i]
		if int64(got.Partition) != want.p || got.FetchOffset != want.offset || got.PartitionMaxBytes != 10<<20 {
			t.Errorf("partition %d: %+v", i, got)
		}
	}
}

// fakeFetchBroker answers Fetch v12 requests from an in-memory log of
// batches per partition: up to maxBatches batches per partition per
// answer, with an optional trailing part of the next batch.
type fakeFetchBroker struct {
	ln         net.Listener
	logs       map[int32][][]byte // partition -> batches, batch i at offset i*perBatch
	perBatch   int64
	maxBatches int
	partial    bool
	requests   atomic.Int64
	// corrupt, when set, changes an answer's batches before they are sent.
	corrupt func(partition int32, batches [][]byte) [][]byte
}

func newFakeFetchBroker(t *testing.T, partitions, batches int, perBatch int64) *fakeFetchBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFetchBroker{ln: ln, logs: map[int32][][]byte{}, perBatch: perBatch, maxBatches: 2, partial: true}
	for p := range int32(partitions) {
		for i := range batches {
			f.logs[p] = append(f.logs[p], testRecordBatch(t, int64(i)*perBatch, int(perBatch), 64))
		}
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeFetchBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		f.requests.Add(1)
		corr := int32(binary.BigEndian.Uint32(msg[4:]))
		idLen := int(binary.BigEndian.Uint16(msg[8:]))
		req := kmsg.NewPtrFetchRequest()
		req.Version = int16(binary.BigEndian.Uint16(msg[2:]))
		if err := req.ReadFrom(msg[11+idLen:]); err != nil {
			return
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				log := f.logs[rp.Partition]
				sp.HighWatermark = int64(len(log)) * f.perBatch
				first := int(rp.FetchOffset / f.perBatch)
				last := min(first+f.maxBatches, len(log))
				batches := log[first:last]
				if f.corrupt != nil {
					batches = f.corrupt(rp.Partition, batches)
				}
				for _, b := range batches {
					sp.RecordBatches = append(sp.RecordBatches, b...)
				}
				if f.partial && last < len(log) {
					sp.RecordBatches = append(sp.RecordBatches, log[last][:80]...)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if _, err := conn.Write(encodeFetchResponse(resp, corr)); err != nil {
			return
		}
	}
}

func TestMemoryConsumerAgainstFakeBroker(t *testing.T) {
	const partitions, batches, perBatch = 3, 5, 4
	broker := newFakeFetchBroker(t, partitions, batches, perBatch)
	b := &memoryBench{g: &cli.Options{Timeout: 5 * time.Second}, o: &memoryOptions{fetch: memoryFetch{MaxBytes: 1 << 20, MaxPartitionBytes: 1 << 20, MaxWaitMs: 10}},
		topic: "bench", errOut: io.Discard}
	layout := &harness.Layout{Partitions: []int32{0, 1, 2}, Leader: map[int32]int32{0: 1, 1: 1, 2: 1}, Addr: map[int32]string{1: broker.ln.Addr().String()}}
	// The backlog stops inside the last batch of each partition but one.
	backlog := map[int32]harness.OffsetRange{0: {Start: 0, End: 20}, 1: {Start: 0, End: 18}, 2: {Start: 0, End: 20}}

	consume := func(id int) consumerResult {
		t.Helper()
		c, err := b.newMemoryConsumer(context.Background(), id, layout, backlog)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.conns) != 1 {
			t.Fatalf("one leader, %d connections", len(c.conns))
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		run := &memoryRun{started: time.Now(), cancel: cancel}
		c.consume(ctx, b, run)
		if run.records.Load() != c.result().records {
			t.Errorf("progress counted %d records, the consumer %d", run.records.Load(), c.result().records)
		}
		return c.result()
	}
	r0, r1 := consume(0), consume(1)
	for _, r := range []consumerResult{r0, r1} {
		if r.err != nil || !r.completed || r.records != 58 {
			t.Fatalf("consumer %d: %+v", r.id, r)
		}
	}
	if r0.checksum != r1.checksum || r0.bytes != r1.bytes {
		t.Errorf("consumers disagree: %x/%d vs %x/%d", r0.checksum, r0.bytes, r1.checksum, r1.bytes)
	}
	if n := broker.requests.Load(); n < 2*3 {
		t.Errorf("%d requests: want at least 3 per consumer (2 batches per answer)", n)
	}

	// A lost batch is a failure naming the gap.
	broker.corrupt = func(p int32, bs [][]byte) [][]byte {
		if p == 1 && len(bs) == 2 && binary.BigEndian.Uint64(bs[0]) == 8 {
			return bs[1:]
		}
		return bs
	}
	if r := consume(2); r.completed || r.err == nil || !strings.Contains(r.err.Error(), "partition 1: batch at offset 12 where 8 was due") {
		t.Errorf("gap: %+v", r)
	}
}

func TestMemoryStalledConnectionIsNeverRead(t *testing.T) {
	// The stalled side sends a request and returns; nothing reads the
	// answer, and closing is all that happens to the connection.
	broker := newFakeFetchBroker(t, 1, 2, 2)
	parts := []*partitionProgress{newPartitionProgress(0, harness.OffsetRange{Start: 0, End: 4})}
	c, err := dialMemoryConn(context.Background(), time.Second, 1, broker.ln.Addr().String(), parts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.conn.Close()
	if _, err := c.send("bench", memoryFetch{MaxBytes: 1, MaxPartitionBytes: 1}, time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for broker.requests.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if broker.requests.Load() != 1 || c.r.Buffered() != 0 {
		t.Errorf("requests %d, buffered %d", broker.requests.Load(), c.r.Buffered())
	}
}
