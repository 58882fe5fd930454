package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log/logtest"
)

func TestTopicLifecyclePersists(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "orders", 2, map[string]string{"retention.ms": "60000"})
	produceBatch(t, b, "orders", 1, logtest.Batch{Records: 5})
	if err := b.CreatePartitions("orders", 4, false); err != nil {
		t.Fatal(err)
	}
	b.Close()

	b = openTestBroker(t, dir)
	got := b.Topic("orders")
	if got == nil || got.ID() != tp.ID() || len(got.Partitions()) != 4 {
		t.Fatalf("after restart: %+v", got)
	}
	if b.TopicByID(tp.ID()) != got {
		t.Fatal("lookup by id")
	}
	if hwm := got.Partition(1).HighWatermark(); hwm != 5 {
		t.Fatalf("data lost: hwm %d", hwm)
	}
	if v := configValue(b.TopicConfig(got), "retention.ms"); v != "60000" {
		t.Fatalf("retention.ms %q", v)
	}
	if err := b.DeleteTopic("orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.topicDir("orders", tp.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("files remain after delete: %v", err)
	}
	b.Close()
	b = openTestBroker(t, dir)
	if b.Topic("orders") != nil {
		t.Fatal("deleted topic came back")
	}
	// Created again: a new topic with a new id and no old data.
	again := mustCreate(t, b, "orders", 1, nil)
	if again.ID() == tp.ID() || again.Partition(0).HighWatermark() != 0 {
		t.Fatal("re-created topic is not new")
	}
}

func TestCreateTopicValidation(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "a.b", 1, nil)
	cases := []struct {
		req  CreateTopicRequest
		want *kerr.Error
	}{
		{CreateTopicRequest{Name: "a.b"}, kerr.TopicAlreadyExists},
		{CreateTopicRequest{Name: "a_b"}, kerr.InvalidTopicException},
		{CreateTopicRequest{Name: "bad/name"}, kerr.InvalidTopicException},
		{CreateTopicRequest{Name: ".."}, kerr.InvalidTopicException},
		{CreateTopicRequest{Name: string(make([]byte, 250))}, kerr.InvalidTopicException},
		{CreateTopicRequest{Name: "rf", ReplicationFactor: 3}, kerr.InvalidReplicationFactor},
		{CreateTopicRequest{Name: "cfg", Configs: map[string]string{"retention.ms": "soon"}}, kerr.InvalidConfig},
		{CreateTopicRequest{Name: "cfg", Configs: map[string]string{"cleanup.policy": "compact,expire"}}, kerr.InvalidConfig},
		{CreateTopicRequest{Name: "cfg", Configs: map[string]string{"no.such.config": "1"}}, kerr.InvalidConfig},
	}
	for _, tc := range cases {
		_, err := b.CreateTopic(tc.req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%+v: got %v, want %s", tc.req, err, tc.want.Message)
		}
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "dry", Partitions: 3, ValidateOnly: true}); err != nil || b.Topic("dry") != nil {
		t.Fatalf("validate only: err %v, created %v", err, b.Topic("dry") != nil)
	}
}

func TestProduceValidation(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "v", 1, map[string]string{"max.message.bytes": "2000"})
	_, err := b.Produce(context.Background(), "missing", 0, logtest.Batch{}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.UnknownTopicOrPartition)
	_, err = b.Produce(context.Background(), "v", 3, logtest.Batch{}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.UnknownTopicOrPartition)
	_, err = b.Produce(context.Background(), "v", 0, logtest.Batch{Records: 1, ValueSize: 5000}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.MessageTooLarge)
	corrupt := logtest.Batch{Records: 2}.Encode()
	corrupt[len(corrupt)-1] ^= 0xff
	_, err = b.Produce(context.Background(), "v", 0, corrupt, ProduceOptions{})
	wantCode(t, err, kerr.CorruptMessage)
	_, err = b.Produce(context.Background(), "v", 0, []byte{1, 2, 3}, ProduceOptions{})
	wantCode(t, err, kerr.CorruptMessage)
	// Damage the record checks see first (a first timestamp thousands of
	// years ahead, past message.timestamp.after.max.ms) is still answered
	// CORRUPT_MESSAGE, as Kafka answers it: the CRC settles it.
	future := logtest.Batch{Records: 2, Timestamp: time.Now().UnixMilli()}.Encode()
	future[27] ^= 0x01 // the top byte of firstTimestamp, under the CRC
	_, err = b.Produce(context.Background(), "v", 0, future, ProduceOptions{})
	wantCode(t, err, kerr.CorruptMessage)
	if hwm := b.Topic("v").Partition(0).HighWatermark(); hwm != 0 {
		t.Fatalf("refused produce wrote data: hwm %d", hwm)
	}
	// The CRC is checked as the entry is applied: the refused batch took
	// a Raft index and no offset.
	res, err := b.Produce(context.Background(), "v", 0, logtest.Batch{Records: 2}.Encode(), ProduceOptions{})
	if err != nil || res.BaseOffset != 0 {
		t.Fatalf("produce after a corrupt batch: offset %d, %v; want 0", res.BaseOffset, err)
	}
}

func TestAutoCreate(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	_, err := b.Produce(context.Background(), "auto", 0, logtest.Batch{}.Encode(), ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.UnknownTopicOrPartition)
	if err := b.SetClusterProperty("auto_create_topics_enabled", "true"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetClusterProperty("default_topic_partitions", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(context.Background(), "auto", 2, logtest.Batch{}.Encode(), ProduceOptions{AllowZstd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.Topic("auto").Partitions()); n != 3 {
		t.Fatalf("auto-created with %d partitions", n)
	}
}

func TestLogAppendTimeTopic(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	now := time.UnixMilli(1_800_000_000_000)
	b.now = func() time.Time { return now }
	mustCreate(t, b, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	res, err := b.Produce(context.Background(), "lat", 0, logtest.Batch{Records: 2, Timestamp: 5}.Encode(), ProduceOptions{AllowZstd: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime != now.UnixMilli() {
		t.Fatalf("log append time %d, want %d", res.LogAppendTime, now.UnixMilli())
	}
	off, ts, _, err := b.ListOffset(b.Topic("lat").Partition(0), TimestampMax, ReadUncommitted)
	if err != nil || ts != now.UnixMilli() || off != 0 {
		t.Fatalf("max timestamp: offset %d ts %d err %v", off, ts, err)
	}
}

func TestDeleteRecordsAndListOffsets(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "dr", 1, nil)
	for i := 0; i < 4; i++ {
		produceBatch(t, b, "dr", 0, logtest.Batch{Records: 5, Timestamp: int64(1000 * (i + 1))})
	}
	p := tp.Partition(0)
	if off, _, _, _ := b.ListOffset(p, 2500, ReadUncommitted); off != 10 {
		t.Fatalf("offset for timestamp 2500: %d, want 10 (first record at or after)", off)
	}
	if off, _, _, _ := b.ListOffset(p, 99999, ReadUncommitted); off != -1 {
		t.Fatalf("offset for a future timestamp: %d, want -1", off)
	}
	low, err := b.DeleteRecords(context.Background(), p, 12)
	if err != nil || low != 12 {
		t.Fatalf("delete records: low %d err %v", low, err)
	}
	_, err = b.DeleteRecords(context.Background(), p, 21)
	wantCode(t, err, kerr.OffsetOutOfRange)
	if off, _, _, _ := b.ListOffset(p, TimestampEarliest, ReadUncommitted); off != 12 {
		t.Fatalf("earliest after delete: %d", off)
	}
	out := make([]FetchResult, 1)
	b.Fetch(t.Context(), &FetchRequest{MaxBytes: 1 << 20, Partitions: []FetchPartition{{Topic: tp, Offset: 5, MaxBytes: 1 << 20, LeaderEpoch: -1}}}, out)
	wantCode(t, out[0].Err, kerr.OffsetOutOfRange)
	b.Close()
	b = openTestBroker(t, dir)
	if start := b.Topic("dr").Partition(0).LogStartOffset(); start != 12 {
		t.Fatalf("log start after restart: %d", start)
	}
}

func TestOrphanTopicDirRemoved(t *testing.T) {
	dir := t.TempDir()
	orphan := filepath.Join(dir, topicsDir, "gone-AAAAAAAAAAAAAAAAAAAAAA")
	if err := os.MkdirAll(filepath.Join(orphan, "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	openTestBroker(t, dir)
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("orphan directory kept")
	}
}

// TestRetentionFollowsTopicConfig: a config change reaches the logs at
// once, and retention removes whole segments from the front.
func TestRetentionFollowsTopicConfig(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "ret", 1, map[string]string{"segment.bytes": "4096"})
	// Timestamps of now: retention.ms (7 days by default) keeps them.
	batch := logtest.Batch{Records: 1, ValueSize: 1000, Timestamp: time.Now().UnixMilli()}
	for i := 0; i < 20; i++ {
		produceBatch(t, b, "ret", 0, batch)
	}
	p := tp.Partition(0)
	b.EnforceRetention(t.Context())
	if start := p.LogStartOffset(); start != 0 {
		t.Fatalf("unlimited retention removed data: start %d", start)
	}
	if err := b.AlterTopicConfig("ret", []ConfigOp{{Name: "retention.bytes", Value: "5000"}}, false); err != nil {
		t.Fatal(err)
	}
	b.EnforceRetention(t.Context())
	start := p.LogStartOffset()
	if start == 0 || start >= 20 {
		t.Fatalf("retention.bytes=5000: start %d, want some but not all segments removed", start)
	}
	if size := p.Log().Size(); size > 5000+4096 {
		t.Fatalf("log is %d bytes after retention", size)
	}
	if err := b.AlterTopicConfig("ret", []ConfigOp{{Name: "retention.bytes", Value: "lots"}}, false); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("invalid value accepted: %v", err)
	}
}

// TestProducedBatchRules: what Kafka refuses from clients beyond CRC.
func TestProducedBatchRules(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "rules", 1, nil)
	two := logtest.Concat(logtest.Batch{}.Encode(), logtest.Batch{}.Encode())
	_, err := b.Produce(context.Background(), "rules", 0, two, ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.InvalidRecord)

	noSeq := logtest.Batch{Idempotent: true, ProducerID: 5, BaseSequence: -1}.Encode()
	_, err = b.Produce(context.Background(), "rules", 0, noSeq, ProduceOptions{AllowZstd: true})
	wantCode(t, err, kerr.InvalidRecord)

	if hwm := b.Topic("rules").Partition(0).HighWatermark(); hwm != 0 {
		t.Fatalf("refused batches were written: hwm %d", hwm)
	}
}

// TestProduceSeesConfigChanges: the produce path's cached settings follow
// topic config and cluster property changes.
func TestProduceSeesConfigChanges(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "limits", 1, nil)
	batch := logtest.Batch{Records: 1, ValueSize: 3000}
	produceBatch(t, b, "limits", 0, batch)
	if err := b.AlterTopicConfig("limits", []ConfigOp{{Name: "max.message.bytes", Value: "2000"}}, false); err != nil {
		t.Fatal(err)
	}
	_, err := b.Produce(context.Background(), "limits", 0, batch.Encode(), ProduceOptions{})
	wantCode(t, err, kerr.MessageTooLarge)
	if err := b.AlterTopicConfig("limits", []ConfigOp{{Name: "max.message.bytes", Op: 1}}, false); err != nil {
		t.Fatal(err)
	}
	produceBatch(t, b, "limits", 0, batch)
	if err := b.SetClusterProperty("kafka_batch_max_bytes", "2048"); err != nil {
		t.Fatal(err)
	}
	_, err = b.Produce(context.Background(), "limits", 0, batch.Encode(), ProduceOptions{})
	wantCode(t, err, kerr.MessageTooLarge)
}

// BenchmarkGroupOffsetCommit is a standalone commit of 8 partitions
// through the coordinator into __consumer_offsets: the loop hand-off plus
// one batch appended to the partition log.
func BenchmarkGroupOffsetCommit(b *testing.B) {
	br := openTestBroker(b, b.TempDir())
	mustCreate(b, br, "t", 8, nil)
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 9
	req.Group, req.Generation = "bench", -1
	rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for p := int32(0); p < 8; p++ {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, LeaderEpoch: -1})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for p := range rt.Partitions {
			rt.Partitions[p].Offset = int64(i)
		}
		if code := br.Groups().OffsetCommit(req).Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.Fatal(code)
		}
	}
}
