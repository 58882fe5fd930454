package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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
)

func TestBenchMemoryFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker or admin API is asked.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "0"}, "--partitions must be >= 1"},
		{[]string{"-r", "0"}, "--replication-factor must be positive or -1"},
		{[]string{"--record-size", "0"}, "--record-size must be positive"},
		{[]string{"--batch-max-bytes", "100"}, "--batch-max-bytes must be at least 1024"},
		{[]string{"--record-size", "1048576"}, "does not fit a batch"},
		{[]string{"--backlog-bytes", "100"}, "--backlog-bytes must hold at least one record"},
		{[]string{"--consumers", "0"}, "--consumers must be >= 1"},
		{[]string{"--stalled", "-1"}, "--stalled must be >= 0"},
		{[]string{"--producers", "-1"}, "--producers must be >= 0"},
		{[]string{"--produce-bytes", "-1"}, "--produce-bytes must be >= 0"},
		{[]string{"--produce-bytes", "1000"}, "less than one record"},
		{[]string{"--fetch-max-bytes", "0"}, "--fetch-max-bytes must be between"},
		{[]string{"--fetch-max-bytes", "2000000000"}, "--fetch-max-bytes must be between"},
		{[]string{"--fetch-max-partition-bytes", "0"}, "--fetch-max-partition-bytes must be positive"},
		{[]string{"--fetch-max-wait", "100us"}, "--fetch-max-wait must be between"},
		{[]string{"--fetch-min-bytes", "-1"}, "--fetch-min-bytes must be >= 0"},
		{[]string{"--sample", "1ms"}, "--sample must be at least 10ms"},
		{[]string{"--max-duration", "0s"}, "--max-duration must be positive"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "bench", "memory", "--admin-url", "127.0.0.1:1", "t"}, tc.args...)
		_, _, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := run(t, "", "bench", "memory"); err == nil {
		t.Error("TOPIC is required")
	}
	// No producers makes --produce-bytes irrelevant, however small.
	o := memoryDefaults(t)
	o.producers, o.produceBytes = 0, 0
	if err := o.validate(); err != nil {
		t.Errorf("--producers 0 --produce-bytes 0: %v", err)
	}
}

// memoryDefaults returns the options as the command's defaults set them.
func memoryDefaults(t *testing.T) *memoryOptions {
	t.Helper()
	o := &memoryOptions{}
	cmd := newBenchMemoryCommand(&globalOptions{})
	fl := cmd.Flags()
	get := func(name string) string { return fl.Lookup(name).DefValue }
	parse := func(name string, dst any) {
		if _, err := fmt.Sscan(get(name), dst); err != nil {
			t.Fatalf("--%s default %q: %v", name, get(name), err)
		}
	}
	parse("partitions", &o.partitions)
	parse("replication-factor", &o.replicas)
	parse("backlog-bytes", &o.backlogBytes)
	parse("record-size", &o.recordSize)
	parse("batch-max-bytes", &o.batchMaxBytes)
	parse("consumers", &o.consumers)
	parse("stalled", &o.stalled)
	parse("producers", &o.producers)
	parse("produce-bytes", &o.produceBytes)
	parse("fetch-max-bytes", &o.fetch.MaxBytes)
	parse("fetch-max-partition-bytes", &o.fetch.MaxPartitionBytes)
	parse("fetch-min-bytes", &o.fetch.MinBytes)
	var err error
	if o.maxWait, err = time.ParseDuration(get("fetch-max-wait")); err != nil {
		t.Fatal(err)
	}
	if o.sample, err = time.ParseDuration(get("sample")); err != nil {
		t.Fatal(err)
	}
	if o.maxDuration, err = time.ParseDuration(get("max-duration")); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestBenchMemoryDefaults(t *testing.T) {
	cmd := newBenchMemoryCommand(&globalOptions{})
	for flag, want := range map[string]string{
		"partitions": "8", "replication-factor": "-1", "backlog-bytes": "2147483648", "record-size": "16384",
		"batch-max-bytes": "1048576", "consumers": "200", "stalled": "1", "producers": "4",
		"produce-bytes": "268435456", "fetch-max-bytes": "52428800", "fetch-max-partition-bytes": "10485760",
		"fetch-max-wait": "500ms", "fetch-min-bytes": "1", "sample": "100ms", "max-duration": "15m0s",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	o := memoryDefaults(t)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if o.fetch.MaxWaitMs != 500 {
		t.Errorf("max wait: got %d ms", o.fetch.MaxWaitMs)
	}
	// 2 GiB of 16 KiB records over 8 partitions; 256 MiB over 4 producers.
	if got := o.backlogRecords(8); got != 16384 {
		t.Errorf("backlog records per partition: got %d, want 16384", got)
	}
	if got := o.producerRecords(); got != 4096 {
		t.Errorf("records per producer: got %d, want 4096", got)
	}
	// Rounded up, never zero.
	o.backlogBytes, o.recordSize = 10, 3
	if got := o.backlogRecords(3); got != 2 { // 4 records over 3 partitions
		t.Errorf("backlog records per partition: got %d, want 2", got)
	}
	if got := o.backlogRecords(100); got != 1 {
		t.Errorf("backlog records per partition: got %d, want 1", got)
	}
}

func TestBenchMemoryAgainstDeadBrokerFailsFast(t *testing.T) {
	start := time.Now()
	out, stderr, err := run(t, "", "--brokers", "127.0.0.1:1", "--timeout", "500ms", "bench", "memory", "t", "--admin-url", "127.0.0.1:1")
	if err == nil {
		t.Error("want error")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if !strings.Contains(stderr, "broker figures unavailable") {
		t.Errorf("an unreachable admin API must be pointed out: %q", stderr)
	}
	if out != "" {
		t.Errorf("no summary before the consume phase, got %q", out)
	}
}

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
		rng   offsetRange
		steps []step
		next  int64
	}{
		{"contiguous over two answers", offsetRange{10, 20}, []step{
			{a: answer(h(10, 4), h(14, 2)), records: 6},
			{a: answer(h(16, 4)), records: 4},
		}, 20},
		{"the end falls inside a batch; later batches ignored", offsetRange{0, 5}, []step{
			{a: answer(h(0, 3), h(3, 4), h(7, 1)), records: 5},
		}, 5},
		{"the start falls inside a batch", offsetRange{12, 20}, []step{
			{a: answer(h(10, 5)), records: 3},
		}, 15},
		{"empty answer", offsetRange{0, 5}, []step{{a: answer(), records: 0}}, 0},
		{"gap", offsetRange{0, 10}, []step{
			{a: answer(h(0, 2), h(3, 2)), records: 2, err: "batch at offset 3 where 2 was due: offsets 2-2 missing"},
		}, 2},
		{"duplicate", offsetRange{0, 10}, []step{
			{a: answer(h(0, 2)), records: 2},
			{a: answer(h(0, 2)), err: "batch of offsets 0-1 delivered again (offset 2 was due)"},
		}, 2},
		{"holes inside a batch", offsetRange{0, 10}, []step{
			{a: answer(batchHeader{Magic: 2, Length: 100, LastOffsetDelta: 4, Records: 3}), err: "has 3 records for 5 offsets"},
		}, 0},
		{"control batch", offsetRange{0, 10}, []step{
			{a: answer(batchHeader{Magic: 2, Length: 100, Attributes: batchAttrControl, Records: 1}), err: "transaction markers"},
		}, 0},
		{"error code", offsetRange{0, 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, ErrorCode: kerr.OffsetOutOfRange.Code}, err: "OFFSET_OUT_OF_RANGE"},
		}, 0},
		{"high watermark short of the backlog", offsetRange{0, 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, HighWatermark: 5}, err: "high watermark 5 is below the backlog's end 10"},
		}, 0},
		{"only part of a batch", offsetRange{0, 10}, []step{
			{a: &fetchPartitionAnswer{Partition: 2, HighWatermark: 10, PartialBytes: 70}, err: "only 70 bytes of a batch"},
		}, 0},
		{"a trailing part after whole batches is fine", offsetRange{0, 10}, []step{
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
	a, b := newPartitionProgress(0, offsetRange{0, 6}), newPartitionProgress(0, offsetRange{0, 6})
	a.take(answer(h(0, 2), h(2, 2), h(4, 2)))
	b.take(answer(h(0, 2)))
	b.take(answer(h(2, 2), h(4, 2)))
	if a.crc != b.crc || a.bytes != 3*112 || b.bytes != a.bytes || a.records != 6 {
		t.Errorf("a: crc %x bytes %d records %d; b: crc %x bytes %d", a.crc, a.bytes, a.records, b.crc, b.bytes)
	}
	c := newPartitionProgress(0, offsetRange{0, 6})
	c.take(answer(h(0, 2), h(2, 2), batchHeader{BaseOffset: 4, Length: 100, Magic: 2, LastOffsetDelta: 1, Records: 2, CRC: 99}))
	if c.crc == a.crc {
		t.Error("a different batch CRC must change the checksum")
	}
}

func TestPendingPartsRotates(t *testing.T) {
	parts := []*partitionProgress{
		newPartitionProgress(0, offsetRange{0, 1}),
		newPartitionProgress(1, offsetRange{0, 0}), // done
		newPartitionProgress(2, offsetRange{0, 1}),
		newPartitionProgress(3, offsetRange{0, 1}),
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
	parts := []*partitionProgress{newPartitionProgress(4, offsetRange{7, 9}), newPartitionProgress(1, offsetRange{3, 9})}
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
	b := &memoryBench{g: &globalOptions{timeout: 5 * time.Second}, o: &memoryOptions{fetch: memoryFetch{MaxBytes: 1 << 20, MaxPartitionBytes: 1 << 20, MaxWaitMs: 10}},
		topic: "bench", errOut: io.Discard}
	layout := &memoryLayout{partitions: []int32{0, 1, 2}, leader: map[int32]int32{0: 1, 1: 1, 2: 1}, addr: map[int32]string{1: broker.ln.Addr().String()}}
	// The backlog stops inside the last batch of each partition but one.
	backlog := map[int32]offsetRange{0: {0, 20}, 1: {0, 18}, 2: {0, 20}}

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
	parts := []*partitionProgress{newPartitionProgress(0, offsetRange{0, 4})}
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

func metricsText(t *testing.T, text string) metricFamilies {
	t.Helper()
	fams, err := parseMetrics("text/plain; version=0.0.4", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func TestMemorySamplerFigures(t *testing.T) {
	page := func(rss, inUse, waits, trimmed float64) string {
		return fmt.Sprintf(`# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %g
# TYPE weir_fetch_memory_budget_bytes gauge
weir_fetch_memory_budget_bytes 268435456
# TYPE weir_fetch_memory_in_use_bytes gauge
weir_fetch_memory_in_use_bytes %g
# TYPE weir_fetch_memory_waits_total counter
weir_fetch_memory_waits_total %g
# TYPE weir_fetch_memory_wait_seconds_total counter
weir_fetch_memory_wait_seconds_total %g
# TYPE weir_fetch_memory_trimmed_reads_total counter
weir_fetch_memory_trimmed_reads_total %g
# TYPE weir_request_memory_in_use_bytes gauge
weir_request_memory_in_use_bytes 1024
`, rss, inUse, waits, waits/10, trimmed)
	}
	// Broker 1 exports everything; broker 2 predates the budget (RSS
	// only) and fails one scrape; broker 3 is down.
	brokers := []adminBroker{{NodeID: 1, IsAlive: true}, {NodeID: 2, IsAlive: true}, {NodeID: 3}}
	s := newMemorySampler(brokers)
	old := metricsText(t, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1e8\n")
	for i, sc := range [][3]brokerScrape{
		{{metrics: metricsText(t, page(100<<20, 0, 10, 1))}, {metrics: old}, {err: errBrokerNotAlive}},
		{{metrics: metricsText(t, page(900<<20, 256<<20, 40, 3))}, {err: errors.New("timeout")}, {err: errBrokerNotAlive}},
		{{metrics: metricsText(t, page(700<<20, 128<<20, 50, 7))}, {metrics: old}, {err: errBrokerNotAlive}},
	} {
		for k := range sc {
			sc[k].broker = brokers[k]
		}
		s.record(sc[:])
		if i == 1 {
			if rss, inUse := s.latest(); rss.v != 900<<20 || inUse.v != 256<<20 {
				t.Errorf("latest: rss %v, in use %v", rss, inUse)
			}
		}
	}
	figs := s.figures()
	if len(figs) != 3 {
		t.Fatalf("%d brokers", len(figs))
	}
	b1, b2, b3 := figs[0], figs[1], figs[2]
	if *b1.RSSBefore != 100<<20 || *b1.PeakRSS != 900<<20 || *b1.FetchBudget != 256<<20 || *b1.PeakFetchInUse != 256<<20 ||
		*b1.PeakFetchInUseOfBudget != 1 || *b1.FetchWaits != 40 || *b1.FetchTrimmedReads != 6 || *b1.PeakRequestInUse != 1024 ||
		*b1.FetchWaitSeconds != 4 || b1.RequestWaits != nil || len(b1.Notes) != 0 {
		t.Errorf("broker 1: %s", mustJSON(t, b1))
	}
	if *b2.PeakRSS != 1e8 || b2.FetchBudget != nil || b2.PeakFetchInUse != nil || b2.FetchWaits != nil || b2.PeakFetchInUseOfBudget != nil ||
		b2.FailedScrapes != 1 || len(b2.Notes) != 1 || !strings.Contains(b2.Notes[0], "1 of 3 scrapes failed (last: timeout)") {
		t.Errorf("broker 2: %s", mustJSON(t, b2))
	}
	if b3.PeakRSS != nil || b3.Scrapes != 3 || b3.FailedScrapes != 3 {
		t.Errorf("broker 3: %s", mustJSON(t, b3))
	}

	// A counter going backwards (a restart) voids the deltas, not the peaks.
	s = newMemorySampler(brokers[:1])
	for _, p := range []string{page(1, 1, 50, 5), page(2, 2, 3, 0)} {
		s.record([]brokerScrape{{broker: brokers[0], metrics: metricsText(t, p)}})
	}
	f := s.figures()[0]
	if f.FetchWaits != nil || f.FetchTrimmedReads != nil || *f.PeakRSS != 2 || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "restarted") {
		t.Errorf("reset: %s", mustJSON(t, f))
	}

	// An unbounded budget (0) has no ratio.
	s = newMemorySampler(brokers[:1])
	s.record([]brokerScrape{{broker: brokers[0], metrics: metricsText(t, strings.Replace(page(1, 5, 0, 0), "268435456", "0", 1))}})
	if f := s.figures()[0]; f.PeakFetchInUseOfBudget != nil || *f.FetchBudget != 0 || budgetCell(f.FetchBudget) != "unbounded" {
		t.Errorf("unbounded: %s", mustJSON(t, f))
	}

	var sum memorySummary
	sum.addBrokers(figs)
	if *sum.PeakRSS != 900<<20 || *sum.PeakFetchInUse != 256<<20 {
		t.Errorf("highest peaks: %d %d", *sum.PeakRSS, *sum.PeakFetchInUse)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMemorySummaryConsumers(t *testing.T) {
	ok := func(id int, took time.Duration) consumerResult {
		return consumerResult{id: id, completed: true, took: took, records: 100, bytes: 1 << 20, checksum: 0xabc}
	}
	var s memorySummary
	s.Consumers = 4
	s.addConsumers([]consumerResult{ok(0, 3*time.Second), ok(1, time.Second), ok(2, 4*time.Second), ok(3, 2*time.Second)}, 5*time.Second)
	if !s.Verified || s.ConsumersCompleted != 4 || s.DeliveredRecords != 400 || s.DeliveredBytes != 4<<20 || s.BacklogBytes != 1<<20 ||
		s.Checksum != "0000000000000abc" || len(s.Failures) != 0 {
		t.Errorf("summary: %s", mustJSON(t, s))
	}
	// Complete: the run lasted until the slowest consumer.
	if s.Seconds != 4 || s.MBPerSec != 1 || *s.FastestConsumerSeconds != 1 || *s.MedianConsumerSeconds != 2.5 || *s.SlowestConsumerSeconds != 4 {
		t.Errorf("times: %s", mustJSON(t, s))
	}
	if err := memoryRunFailure(context.Background(), context.Background(), &s); err != nil {
		t.Errorf("complete run: %v", err)
	}

	// One incomplete, one failed, one different: not verified, and the
	// run lasted as long as the phase.
	bad := ok(2, time.Second)
	bad.checksum = 0xdef
	s = memorySummary{Consumers: 4}
	s.addConsumers([]consumerResult{
		ok(0, 2*time.Second), {id: 1, records: 10, bytes: 100}, bad,
		{id: 3, records: 5, err: errors.New("consumer 3: partition 0: gap")},
	}, 10*time.Second)
	if s.Verified || s.ConsumersCompleted != 2 || s.DeliveredRecords != 215 || s.Seconds != 10 || *s.MedianConsumerSeconds != 1.5 || len(s.Failures) != 2 ||
		!strings.Contains(s.Failures[0], "consumer 2 received different batches") {
		t.Errorf("failed summary: %s", mustJSON(t, s))
	}
	err := memoryRunFailure(context.Background(), context.Background(), &s)
	wantErrContains(t, err, "2 of 4 consumers got every record; consumer 2 received different batches")
	wantErrContains(t, err, "and 1 more failures")

	// Out of time.
	s = memorySummary{Consumers: 2}
	s.addConsumers([]consumerResult{ok(0, time.Second), {id: 1}}, time.Minute)
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errMemoryMaxDuration)
	defer cancel()
	<-ctx.Done()
	if err := memoryRunFailure(context.Background(), ctx, &s); !errors.Is(err, errMemoryMaxDuration) || !strings.Contains(err.Error(), "1 of 2 consumers") {
		t.Errorf("max duration: %v", err)
	}
	if s.FastestConsumerSeconds == nil || s.Verified {
		t.Errorf("partial: %s", mustJSON(t, s))
	}

	// No consumer completed: no completion times.
	s = memorySummary{Consumers: 1}
	s.addConsumers([]consumerResult{{id: 0}}, time.Second)
	if s.FastestConsumerSeconds != nil || s.SlowestConsumerSeconds != nil || s.Verified {
		t.Errorf("none complete: %s", mustJSON(t, s))
	}
}

func TestMemorySummaryOutput(t *testing.T) {
	rss, budget, inUse := int64(300<<20), int64(256<<20), int64(200<<20)
	ratio, waits := 200.0/256, uint64(12)
	s := &memorySummary{
		Topic: "bench", Partitions: 8, Consumers: 2, Stalled: 1, Producers: 4, Fetch: memoryFetch{MaxBytes: 1, MaxPartitionBytes: 2, MaxWaitMs: 500, MinBytes: 1},
		ConsumersCompleted: 2, Verified: true, Stopped: memoryStoppedCompleted, PeakRSS: &rss,
		Brokers:  []memoryBrokerFigures{{NodeID: 1, Scrapes: 10, PeakRSS: &rss, FetchBudget: &budget, PeakFetchInUse: &inUse, PeakFetchInUseOfBudget: &ratio, FetchWaits: &waits}},
		Failures: []string{"a", "b", "c", "d", "e", "f", "g"},
	}
	var out bytes.Buffer
	if err := s.write(&out, formatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CONSUMERS COMPLETED       2/2", "PEAK BROKER RSS           300.0 MiB", "FETCH BUDGET                256.0 MiB",
		"PEAK FETCH IN USE           200.0 MiB (78% of budget)", "FETCH WAITS                 12", "FETCH TRIMMED READS         n/a",
		"max-wait 500ms", "NOTE  FAILED: e\nNOTE  FAILED: and 2 more",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := s.write(&out, formatJSON); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"consumers_completed", "delivered_bytes", "mb_per_sec", "slowest_consumer_seconds", "peak_rss_bytes", "brokers", "stopped", "failures"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if b := doc["brokers"].([]any)[0].(map[string]any); b["fetch_trimmed_reads"] != nil || b["peak_fetch_in_use_of_budget"] == nil {
		t.Errorf("broker JSON: %v", b)
	}
}
