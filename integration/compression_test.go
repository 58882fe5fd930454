package integration

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  int16 // batch attributes & 7
}{
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

func compressibleValue(p int32, i int) []byte {
	v := fmt.Appendf(nil, "p%d-%08d|", p, i)
	return append(v, bytes.Repeat([]byte("weir-compressible-"), 12)...)
}

// TestCompressionRoundTrip produces with each codec and reads back every
// record; the stored batches keep the producer's codec (compression.type
// defaults to "producer", as in Kafka).
func TestCompressionRoundTrip(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	requireVersion(t, vers, 1, 11)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "comp-" + c.name
			const partitions, perPartition = 2, 2000
			CreateTopic(t, b, topic, partitions, nil)
			prod := b.Client(t,
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(c.codec),
				kgo.ProducerLinger(20*time.Millisecond),
			)
			var recs []*kgo.Record
			for i := range perPartition {
				for p := range int32(partitions) {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d", p), Value: compressibleValue(p, i)})
				}
			}
			produceAll(t, prod, recs, 60*time.Second)
			got := consumeN(t, b, len(recs), 60*time.Second, []string{topic})
			next := map[int32]int{}
			for _, r := range got {
				i := next[r.Partition]
				if want := compressibleValue(r.Partition, i); !bytes.Equal(r.Value, want) {
					t.Fatalf("%s: partition %d offset %d: value %q, want %q", c.name, r.Partition, r.Offset, r.Value, want)
				}
				if r.Offset != int64(i) {
					t.Fatalf("%s: partition %d: record %d at offset %d", c.name, r.Partition, i, r.Offset)
				}
				next[r.Partition] = i + 1
			}

			// Raw fetch: every stored batch carries the codec.
			rc := dialRaw(t, b.KafkaAddr)
			resp := fetchV(t, rc, 11, fetchSpec{MaxBytes: 50 << 20, Parts: []fetchPart{{Topic: topic, Partition: 0, MaxBytes: 10 << 20}}})
			fp := onlyPartition(t, resp, topic, 0)
			if fp.ErrorCode != 0 {
				t.Fatalf("raw fetch %s/0: error %d", topic, fp.ErrorCode)
			}
			batches, partial := splitBatches(t, fp.RecordBatches)
			if len(batches) == 0 || partial != 0 {
				t.Fatalf("raw fetch %s/0: %d whole batches, %d partial bytes", topic, len(batches), partial)
			}
			nrec := 0
			for _, raw := range batches {
				rb := parseBatch(t, raw)
				if rb.Attributes&7 != c.attr {
					t.Errorf("%s: stored batch at offset %d has attributes %#x, want codec %d", c.name, rb.FirstOffset, rb.Attributes, c.attr)
				}
				nrec += int(rb.NumRecords)
			}
			if nrec != perPartition {
				t.Errorf("%s: raw fetch of partition 0 returned %d records in %d batches, want %d", c.name, nrec, len(batches), perPartition)
			}
		})
	}
}

// TestListOffsetsByTimestampCompressed: ListOffsets by timestamp finds the
// exact record inside compressed multi-record batches, and -3 (max
// timestamp) finds the record with the largest timestamp.
func TestListOffsetsByTimestampCompressed(t *testing.T) {
	b := StartBroker(t)
	const topic, n = "comp-ts", 1000
	CreateTopic(t, b, topic, 1, nil)
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(50*time.Millisecond),
	)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{
			Topic: topic, Partition: 0,
			Value:     compressibleValue(0, i),
			Timestamp: time.UnixMilli(base + int64(i)*10),
		})
	}
	produceAll(t, prod, recs, 60*time.Second)

	// The records must really be in multi-record batches for this to test
	// the in-batch search.
	rc := dialRaw(t, b.KafkaAddr)
	resp := fetchV(t, rc, 11, fetchSpec{MaxBytes: 50 << 20, Parts: []fetchPart{{Topic: topic, Partition: 0, MaxBytes: 10 << 20}}})
	batches, _ := splitBatches(t, onlyPartition(t, resp, topic, 0).RecordBatches)
	if len(batches) == 0 || len(batches) >= n/2 {
		t.Fatalf("%d records stored in %d batches; want multi-record batches", n, len(batches))
	}

	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
		wantTs     int64
	}{
		{"exact first", base, 0, base},
		{"before all", base - 100_000, 0, base},
		{"exact middle", base + 505*10, 505, base + 5050},
		{"between records", base + 505*10 - 5, 505, base + 5050},
		{"inside later batch", base + 987*10 - 1, 987, base + 9870},
		{"exact last", base + (n-1)*10, n - 1, base + (n-1)*10},
		{"after all", base + n*10 + 1, -1, -1},
		{"max timestamp (-3)", -3, n - 1, base + (n-1)*10},
	}
	for _, c := range cases {
		off, ts, ec := listOffsetRaw(t, b, topic, 0, c.ts, 0)
		if ec != 0 {
			t.Errorf("ListOffsets %s (timestamp %d): error %d", c.name, c.ts, ec)
			continue
		}
		if off != c.wantOffset || ts != c.wantTs {
			t.Errorf("ListOffsets %s (timestamp %d): offset %d timestamp %d, want offset %d timestamp %d", c.name, c.ts, off, ts, c.wantOffset, c.wantTs)
		}
	}
	if off, _, ec := listOffsetRaw(t, b, topic, 0, -1, 0); ec != 0 || off != n {
		t.Errorf("ListOffsets latest (-1): offset %d error %d, want %d", off, ec, n)
	}
	if off, _, ec := listOffsetRaw(t, b, topic, 0, -2, 0); ec != 0 || off != 0 {
		t.Errorf("ListOffsets earliest (-2): offset %d error %d, want 0", off, ec)
	}
}

// listOffsetRaw lists one partition's offset for timestamp ts through kgo
// (highest common version, which is >= 7 for -3).
func listOffsetRaw(t testing.TB, b *Broker, topic string, partition int32, ts int64, isolation int8) (offset, timestamp int64, errCode int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := b.RawRequest(t, req).(*kmsg.ListOffsetsResponse)
	for _, tt := range resp.Topics {
		if tt.Topic != topic {
			continue
		}
		for _, p := range tt.Partitions {
			if p.Partition == partition {
				return p.Offset, p.Timestamp, p.ErrorCode
			}
		}
	}
	t.Fatalf("ListOffsets %s/%d ts %d: partition missing from response %+v", topic, partition, ts, resp.Topics)
	return 0, 0, 0
}
