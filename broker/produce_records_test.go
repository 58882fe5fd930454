package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
)

// testRecord is one record of batchOf.
type testRecord struct {
	key []byte // nil: no key
	ts  int64
}

// batchOf encodes records as one uncompressed batch a producer without
// idempotence sends, each record with its own timestamp, then in codec.
func batchOf(t *testing.T, codec int8, recs ...testRecord) []byte {
	t.Helper()
	b := make([]byte, 61)
	first, maxTs := recs[0].ts, recs[0].ts
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		body := []byte{0}
		body = binary.AppendVarint(body, r.ts-first)
		body = binary.AppendVarint(body, int64(i))
		if r.key == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.key)))
			body = append(body, r.key...)
		}
		body = binary.AppendVarint(body, 5)
		body = append(body, "value"...)
		body = binary.AppendVarint(body, 0)
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(len(recs)-1))
	binary.BigEndian.PutUint64(b[27:], uint64(first))
	binary.BigEndian.PutUint64(b[35:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(len(recs)))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return inCodec(t, b, codec)
}

// inCodec re-encodes a batch in codec.
func inCodec(t *testing.T, batch []byte, codec int8) []byte {
	t.Helper()
	var c log.Compressors
	data, err := log.BatchRecords(batch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Recompress(batch, data, codec, log.DefaultLevel(codec))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refusedRecords returns the indexes of the records err refuses, checking
// its code.
func refusedRecords(t *testing.T, err error, code *kerr.Error) ([]int32, []string) {
	t.Helper()
	var refused *RecordsRefusedError
	if !errors.As(err, &refused) || !errors.Is(err, code) {
		t.Fatalf("got %v, want %s naming records", err, code.Message)
	}
	var idx []int32
	var msgs []string
	for _, r := range refused.Records {
		idx, msgs = append(idx, r.Index), append(msgs, r.Message)
	}
	return idx, msgs
}

var allCodecs = map[string]int8{"uncompressed": log.CompressionNone, "gzip": log.CompressionGzip, "snappy": log.CompressionSnappy, "lz4": log.CompressionLZ4, "zstd": log.CompressionZstd}

// TestCompactedTopicRefusesKeylessRecords: a produce to a topic whose
// cleanup.policy includes compact is refused with INVALID_RECORD and
// Kafka's message when a record has no key, compressed or not; other
// topics take keyless records.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	now := time.Now().UnixMilli()
	mustCreate(t, b, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	mustCreate(t, b, "both", 1, map[string]string{"cleanup.policy": "delete,compact"})
	mustCreate(t, b, "plain", 1, nil)
	keyless := []testRecord{{[]byte("a"), now}, {nil, now}, {[]byte("b"), now}, {nil, now}}
	for name, codec := range allCodecs {
		batch := batchOf(t, codec, keyless...)
		for _, topic := range []string{"compacted", "both"} {
			_, err := b.Produce(context.Background(), topic, 0, batch, ProduceOptions{AllowZstd: true})
			idx, msgs := refusedRecords(t, err, kerr.InvalidRecord)
			if !reflect.DeepEqual(idx, []int32{1, 3}) || msgs[0] != "Compacted topic cannot accept message without key in topic partition "+topic+"-0" {
				t.Fatalf("%s to %s: records %v %q", name, topic, idx, msgs)
			}
			if !strings.Contains(err.Error(), "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message without key in topic partition "+topic+"-0')") {
				t.Fatalf("message: %v", err)
			}
			if _, err := b.Produce(context.Background(), topic, 0, batchOf(t, codec, testRecord{[]byte("k"), now}), ProduceOptions{AllowZstd: true}); err != nil {
				t.Fatalf("%s keyed record to %s: %v", name, topic, err)
			}
		}
		if _, err := b.Produce(context.Background(), "plain", 0, batch, ProduceOptions{AllowZstd: true}); err != nil {
			t.Fatalf("%s keyless records to a delete topic: %v", name, err)
		}
	}
}

// TestRecordTimestampBounds: with CreateTime, a record whose timestamp is
// more than message.timestamp.before.max.ms behind or
// message.timestamp.after.max.ms ahead of the leader's clock is refused
// with INVALID_TIMESTAMP (Kafka 4's defaults: unbounded behind, an hour
// ahead), each such record named, compressed or not.
func TestRecordTimestampBounds(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	now := time.UnixMilli(1_800_000_000_000)
	b.now = func() time.Time { return now }
	ms := now.UnixMilli()
	mustCreate(t, b, "bounded", 1, map[string]string{"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"})
	mustCreate(t, b, "defaults", 1, nil)
	mustCreate(t, b, "appendtime", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	for name, codec := range allCodecs {
		batch := batchOf(t, codec, testRecord{nil, ms - 1001}, testRecord{nil, ms - 1000}, testRecord{nil, ms + 500}, testRecord{nil, ms + 501}, testRecord{nil, -1})
		_, err := b.Produce(context.Background(), "bounded", 0, batch, ProduceOptions{AllowZstd: true})
		idx, msgs := refusedRecords(t, err, kerr.InvalidTimestamp)
		want := "Timestamp 1799999998999 of message with offset 0 is out of range. The timestamp should be within [1799999999000, 1800000000500]"
		if !reflect.DeepEqual(idx, []int32{0, 3}) || msgs[0] != want {
			t.Fatalf("%s: records %v %q", name, idx, msgs)
		}
		if _, err := b.Produce(context.Background(), "bounded", 0, batchOf(t, codec, testRecord{nil, ms - 1000}, testRecord{nil, ms + 500}), ProduceOptions{AllowZstd: true}); err != nil {
			t.Fatalf("%s: timestamps at the bounds: %v", name, err)
		}

		// Kafka 4's defaults: any age, up to an hour ahead.
		old := batchOf(t, codec, testRecord{nil, 5}, testRecord{nil, ms + time.Hour.Milliseconds()})
		if _, err := b.Produce(context.Background(), "defaults", 0, old, ProduceOptions{AllowZstd: true}); err != nil {
			t.Fatalf("%s: an old timestamp with the defaults: %v", name, err)
		}
		ahead := batchOf(t, codec, testRecord{nil, ms}, testRecord{nil, ms + time.Hour.Milliseconds() + 1})
		_, err = b.Produce(context.Background(), "defaults", 0, ahead, ProduceOptions{AllowZstd: true})
		if idx, _ := refusedRecords(t, err, kerr.InvalidTimestamp); !reflect.DeepEqual(idx, []int32{1}) {
			t.Fatalf("%s: more than an hour ahead: records %v", name, idx)
		}
		// LogAppendTime replaces the timestamps: nothing to check.
		if _, err := b.Produce(context.Background(), "appendtime", 0, ahead, ProduceOptions{AllowZstd: true}); err != nil {
			t.Fatalf("%s: LogAppendTime topic: %v", name, err)
		}
	}
}

// TestCompressionTypeRecompresses: a batch whose codec is not the topic's
// compression.type is stored re-encoded, with its offsets, producer id,
// epoch and sequence unchanged, so idempotent retries still find it;
// compression.type=producer keeps the batch's codec.
func TestCompressionTypeRecompresses(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	now := time.Now().UnixMilli()
	for typ, want := range allCodecs {
		topic := "ct-" + typ
		mustCreate(t, b, topic, 1, map[string]string{"compression.type": typ, "compression.gzip.level": "9", "compression.zstd.level": "19", "compression.lz4.level": "1"})
		for i, from := range []int8{log.CompressionNone, log.CompressionGzip, log.CompressionZstd} {
			src := logtest.Batch{Records: 3, ValueSize: 100, Timestamp: now, Idempotent: true, ProducerID: 7, BaseSequence: int32(3 * i)}.Encode()
			src = inCodec(t, src, from)
			res, err := b.Produce(context.Background(), topic, 0, src, ProduceOptions{AllowZstd: true})
			if err != nil || res.BaseOffset != int64(3*i) {
				t.Fatalf("%s from codec %d: offset %d, %v", topic, from, res.BaseOffset, err)
			}
			// A retry is answered with the original offsets.
			if res, err := b.Produce(context.Background(), topic, 0, src, ProduceOptions{AllowZstd: true}); err != nil || res.BaseOffset != int64(3*i) {
				t.Fatalf("%s: retry at offset %d, %v", topic, res.BaseOffset, err)
			}
		}
		hs, err := log.ValidateBatches(readAll(t, b.Topic(topic).Partition(0)))
		if err != nil || len(hs) != 3 {
			t.Fatalf("%s: %d batches, %v", topic, len(hs), err)
		}
		for i, h := range hs {
			if h.Compression() != want || h.ProducerID != 7 || h.BaseSequence != int32(3*i) || h.BaseOffset != int64(3*i) || h.NumRecords != 3 || h.FirstTimestamp != now {
				t.Fatalf("%s batch %d: %+v", topic, i, h)
			}
		}
	}
	mustCreate(t, b, "ct-producer", 1, nil)
	for _, codec := range allCodecs {
		if _, err := b.Produce(context.Background(), "ct-producer", 0, batchOf(t, codec, testRecord{nil, now}), ProduceOptions{AllowZstd: true}); err != nil {
			t.Fatal(err)
		}
	}
	hs, _ := log.ValidateBatches(readAll(t, b.Topic("ct-producer").Partition(0)))
	seen := map[int8]bool{}
	for _, h := range hs {
		seen[h.Compression()] = true
	}
	if len(seen) != len(allCodecs) {
		t.Fatalf("compression.type=producer stored codecs %v", seen)
	}
}

// TestRecompressedSizeLimit: max.message.bytes applies to the batch as
// re-encoded, as in Kafka.
func TestRecompressedSizeLimit(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "big", 1, map[string]string{"compression.type": "uncompressed", "max.message.bytes": "4096"})
	batch := inCodec(t, logtest.Batch{Records: 20, ValueSize: 1000, Timestamp: time.Now().UnixMilli()}.Encode(), log.CompressionGzip)
	if len(batch) > 4096 {
		t.Fatalf("gzip batch of %d bytes", len(batch))
	}
	_, err := b.Produce(context.Background(), "big", 0, batch, ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.MessageTooLarge)
}

// TestMinInsyncReplicasProduce: acks=all to a partition with fewer live
// in-sync replicas than min.insync.replicas is NOT_ENOUGH_REPLICAS; acks=1
// and 0 are not checked; the topic's value overrides the cluster's.
func TestMinInsyncReplicasProduce(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "single", 1, nil)
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "min_insync_replicas", Value: "2"}}, false); err != nil {
		t.Fatal(err)
	}
	batch := logtest.Batch{Records: 1, Timestamp: time.Now().UnixMilli()}.Encode()
	_, err := b.Produce(context.Background(), "single", 0, batch, ProduceOptions{Acks: -1})
	wantCode(t, err, kerr.NotEnoughReplicas)
	if !strings.Contains(err.Error(), "single-0 has 1 live in-sync replicas [0], fewer than min.insync.replicas=2") {
		t.Fatalf("message: %v", err)
	}
	for _, acks := range []int16{0, 1} {
		if _, err := b.Produce(context.Background(), "single", 0, batch, ProduceOptions{Acks: acks}); err != nil {
			t.Fatalf("acks=%d: %v", acks, err)
		}
	}
	if err := b.AlterTopicConfig("single", []ConfigOp{{Name: "min.insync.replicas", Value: "1"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(context.Background(), "single", 0, batch, ProduceOptions{Acks: -1}); err != nil {
		t.Fatalf("acks=-1 with min.insync.replicas=1: %v", err)
	}
}

// TestRecordChecksAllocateNothing: the per-record checks of a produce to
// a topic that is not compacted, whose batches keep their codec, cost no
// allocation: uncompressed batches are read in place, compressed ones
// judged by their header.
func TestRecordChecksAllocateNothing(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "hot", 1, nil)
	settings := b.produceSettings(tp)
	now := time.Now().UnixMilli()
	for name, codec := range allCodecs {
		batch := inCodec(t, logtest.Batch{Records: 16, ValueSize: 100, Timestamp: now}.Encode(), codec)
		hs, err := log.ValidateBatches(batch)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := b.checkRecords("hot", 0, batch, hs[0], settings); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per produce", name, allocs)
		}
	}
}

// BenchmarkRecordChecks is what the record checks add to a produce of 16
// uncompressed records to a topic with Kafka 4's defaults (timestamps at
// most an hour ahead), and to a compacted one.
func BenchmarkRecordChecks(b *testing.B) {
	br := openTestBroker(b, b.TempDir())
	now := time.Now().UnixMilli()
	for _, topic := range []string{"delete", "compact"} {
		// Created once: with -count, b.Run calls the function below
		// again on the same broker.
		settings := br.produceSettings(mustCreate(b, br, topic, 1, map[string]string{"cleanup.policy": topic}))
		b.Run(topic, func(b *testing.B) {
			recs := make([]log.KeyValue, 16)
			for i := range recs {
				recs[i] = log.KeyValue{Key: []byte("key"), Value: make([]byte, 1000)}
			}
			batch := log.BuildBatch(now, recs)
			hs, err := log.ValidateBatches(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := br.checkRecords(topic, 0, batch, hs[0], settings); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestProducedEntriesRecycled: a produced batch's Raft entry goes back to
// the free list once it was applied, later batches reuse it, and reuse
// never reaches the log: batches started while earlier ones wait
// (pipelining) each keep their own entry until their apply, and every
// record reads back as produced.
func TestProducedEntriesRecycled(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	p := mustCreate(t, b, "recycled", 1, nil).Partition(0)
	ctx := context.Background()
	const rounds, inFlight = 8, 5
	want := map[string]string{}
	for r := range rounds {
		pending := make([]PendingAppend, 0, inFlight)
		for i := range inFlight {
			key := fmt.Sprintf("%d-%d", r, i)
			// Sizes differ a little, so buffers of one size class come
			// back holding other lengths.
			value := strings.Repeat(string(rune('a'+(r*inFlight+i)%26)), pooledEntryMin+r*7+i)
			want[key] = value
			batch := log.BuildBatch(time.Now().UnixMilli(), []log.KeyValue{{Key: []byte(key), Value: []byte(value)}})
			pa, err := b.StartProduce(ctx, "recycled", 0, batch, ProduceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, pa)
		}
		for _, pa := range pending {
			if _, err := pa.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reused := b.entries.Stats().Reused; reused < (rounds-1)*inFlight {
		t.Fatalf("%d entries taken from the free list, want at least %d", reused, (rounds-1)*inFlight)
	}
	got := map[string]string{}
	forEachLogRecord(t, p, func(r log.Record) { got[string(r.Key)] = string(r.Value) })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d records, want %d; records differ from what was produced", len(got), len(want))
	}
}
