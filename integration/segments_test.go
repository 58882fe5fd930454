package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func segValue(i int) []byte {
	v := fmt.Appendf(nil, "seg-%06d|", i)
	return append(v, bytes.Repeat([]byte{'s'}, 140)...)
}

// TestSmallSegments: with segment.bytes=16384 a partition spans many
// segments; consuming, ListOffsets by timestamp, DeleteRecords in the
// middle of the log, and recovery after SIGKILL all work across segment
// boundaries.
func TestSmallSegments(t *testing.T) {
	b := StartBroker(t)
	const topic, n = "small-segments", 3000
	seg := "16384"
	CreateTopic(t, b, topic, 1, map[string]*string{"segment.bytes": &seg})
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(4096),
		kgo.ProducerBatchCompression(kgo.NoCompression()), // kgo defaults to snappy
	)
	base := time.Now().Add(-2 * time.Hour).UnixMilli()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: segValue(i), Timestamp: time.UnixMilli(base + int64(i))})
	}
	produceAll(t, prod, recs, 60*time.Second)
	// ~500 KB of records in 16 KiB segments: the log must have rolled.
	if segs := countSegmentFiles(t, b.DataDir); segs < 10 {
		t.Errorf("found %d segment (.log) files under %s after writing ~500 KB with segment.bytes=16384; want many", segs, b.DataDir)
	}

	check := func(t *testing.T, stage string, start int) {
		t.Helper()
		got := consumeN(t, b, n-start, 60*time.Second, []string{topic})
		for j, r := range got {
			i := start + j
			if r.Offset != int64(i) || !bytes.Equal(r.Value, segValue(i)) || r.Timestamp.UnixMilli() != base+int64(i) {
				t.Fatalf("%s: record %d: offset %d ts %d value %.12q, want offset %d ts %d value %.12q", stage, j, r.Offset, r.Timestamp.UnixMilli(), r.Value, i, base+int64(i), segValue(i))
			}
		}
		for _, i := range []int{start, start + 1, 1500, 2222, n - 1} {
			off, ts, ec := listOffsetRaw(t, b, topic, 0, base+int64(i), 0)
			if ec != 0 || off != int64(i) || ts != base+int64(i) {
				t.Errorf("%s: ListOffsets(timestamp of record %d): offset %d ts %d error %d, want %d %d 0", stage, i, off, ts, ec, i, base+int64(i))
			}
		}
		// A timestamp before every remaining record finds the log start.
		if off, ts, ec := listOffsetRaw(t, b, topic, 0, base-1000, 0); ec != 0 || off != int64(start) || ts != base+int64(start) {
			t.Errorf("%s: ListOffsets(before all): offset %d ts %d error %d, want %d %d", stage, off, ts, ec, start, base+int64(start))
		}
		if off, ts, ec := listOffsetRaw(t, b, topic, 0, -3, 0); ec != 0 || off != n-1 || ts != base+n-1 {
			t.Errorf("%s: ListOffsets(max timestamp): offset %d ts %d error %d, want %d %d", stage, off, ts, ec, n-1, base+n-1)
		}
		if off, _, ec := listOffsetRaw(t, b, topic, 0, -2, 0); ec != 0 || off != int64(start) {
			t.Errorf("%s: ListOffsets(earliest): %d error %d, want %d", stage, off, ec, start)
		}
	}

	t.Run("fresh", func(t *testing.T) { check(t, "fresh", 0) })

	const cut = 1234 // most likely in the middle of a batch and a segment
	t.Run("after DeleteRecords", func(t *testing.T) {
		resp, err := b.Admin(t).DeleteRecords(ctxTimeout(t, requestTimeout), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: cut}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resp.Lookup(topic, 0); r.Err != nil || r.LowWatermark != cut {
			t.Fatalf("DeleteRecords(%d): %+v", cut, r)
		}
		check(t, "after DeleteRecords", cut)
	})

	t.Run("after SIGKILL", func(t *testing.T) {
		b.Kill(t)
		b.Start(t)
		check(t, "after SIGKILL", cut)
		more := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("after kill")}
		cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl.ProduceSync(ctxTimeout(t, requestTimeout), more).FirstErr(); err != nil || more.Offset != n {
			t.Errorf("produce after restart: offset %d err %v, want offset %d", more.Offset, err, n)
		}
	})
}

// TestLogAppendTime: a topic with message.timestamp.type=LogAppendTime
// stamps records with the broker's clock.
func TestLogAppendTime(t *testing.T) {
	b := StartBroker(t)
	const topic = "log-append-time"
	typ := "LogAppendTime"
	CreateTopic(t, b, topic, 1, map[string]*string{"message.timestamp.type": &typ})
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	old := time.Now().Add(-365 * 24 * time.Hour)
	before := time.Now().Add(-time.Second)
	rs := []*kgo.Record{
		{Topic: topic, Partition: 0, Value: []byte("a"), Timestamp: old},
		{Topic: topic, Partition: 0, Value: []byte("b"), Timestamp: old},
	}
	if err := cl.ProduceSync(ctxTimeout(t, requestTimeout), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Second)
	got := consumeN(t, b, 2, 30*time.Second, []string{topic})
	for _, r := range got {
		if r.Timestamp.Before(before) || r.Timestamp.After(after) {
			t.Errorf("record %d: timestamp %v, want the broker's append time (between %v and %v)", r.Offset, r.Timestamp, before, after)
		}
		if r.Attrs.TimestampType() != 1 {
			t.Errorf("record %d: timestamp type %d, want 1 (LogAppendTime)", r.Offset, r.Attrs.TimestampType())
		}
	}
}

// countSegmentFiles counts Kafka-style segment files (<20 digits>.log).
func countSegmentFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if !d.IsDir() && strings.HasSuffix(name, ".log") && len(name) == 24 {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
	return n
}
