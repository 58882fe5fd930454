package broker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/raft"
)

// keyedRecord is one record read back from a log.
type keyedRecord struct {
	offset     int64
	key, value string
}

// logRecords reads every record of l.
func logRecords(t *testing.T, l *log.Log) []keyedRecord {
	t.Helper()
	var out []keyedRecord
	off, end := l.LogStartOffset(), l.EndOffset()
	for range 100_000 {
		if off >= end {
			return out
		}
		b, err := l.Read(off, 1<<20, log.Obligatory, end)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(b) == 0 {
			return out
		}
		hs, err := log.ValidateStored(b)
		if err != nil {
			t.Fatal(err)
		}
		pos := 0
		for _, h := range hs {
			err := log.ForEachRecord(b[pos:pos+h.Size()], func(r log.Record) bool {
				out = append(out, keyedRecord{r.Offset, string(r.Key), string(r.Value)})
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			pos += h.Size()
			off = h.LastOffset() + 1
		}
	}
	t.Fatal("log read did not finish")
	return nil
}

// checkCompacted: every key's latest record is there at its offset, and
// no record survives that a later record of its key below cleanedTo
// superseded. written is every record written, in offset order.
func checkCompacted(t *testing.T, got, written []keyedRecord, cleanedTo int64) {
	t.Helper()
	latest, latestBelow := map[string]keyedRecord{}, map[string]int64{}
	for _, r := range written {
		latest[r.key] = r
		if r.offset < cleanedTo {
			latestBelow[r.key] = r.offset
		}
	}
	found := map[string]bool{}
	for _, r := range got {
		want := latest[r.key]
		if r.offset == want.offset {
			if r.value != want.value {
				t.Fatalf("key %s at %d: %q, want %q", r.key, r.offset, r.value, want.value)
			}
			found[r.key] = true
		} else if r.offset < latestBelow[r.key] {
			t.Fatalf("key %s: record at %d survived, superseded at %d below the cleaned offset %d", r.key, r.offset, latestBelow[r.key], cleanedTo)
		}
	}
	for k, r := range latest {
		if !found[k] {
			t.Fatalf("key %s: latest record at %d is gone", k, r.offset)
		}
	}
}

// TestCleanerCompactsTopic: the broker's cleaner compacts a topic whose
// cleanup.policy is compact, up to what it checkpointed, and leaves a
// delete-policy topic alone.
func TestCleanerCompactsTopic(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	cfg := map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01", "retention.ms": "1"}
	mustCreate(t, b, "compacted", 1, cfg)
	mustCreate(t, b, "deleted", 1, map[string]string{"segment.bytes": "1024"})
	var written []keyedRecord
	for i := range 300 {
		kv := log.KeyValue{Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)}
		for _, topic := range []string{"compacted", "deleted"} {
			res, err := b.Produce(context.Background(), topic, 0, log.BuildBatch(time.Now().UnixMilli(), []log.KeyValue{kv}), ProduceOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if topic == "compacted" {
				written = append(written, keyedRecord{res.BaseOffset, string(kv.Key), string(kv.Value)})
			}
		}
	}
	p := b.Topic("compacted").Partition(0)
	deadline := time.Now().Add(30 * time.Second)
	for p.log.FirstDirtyOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cleaner did not clean the compacted topic in 30 s")
		}
		b.CleanLogs()
		time.Sleep(20 * time.Millisecond)
	}
	got := logRecords(t, p.log)
	checkCompacted(t, got, written, p.log.FirstDirtyOffset())
	if len(got) >= 300 || p.log.EndOffset() != 300 || p.log.LogStartOffset() != 0 {
		t.Fatalf("%d records left, log [%d, %d)", len(got), p.log.LogStartOffset(), p.log.EndOffset())
	}
	// compact alone: retention.ms=1 deleted nothing.
	b.EnforceRetention(context.Background())
	if p.log.LogStartOffset() != 0 {
		t.Fatalf("retention moved a compact-only topic's start to %d", p.log.LogStartOffset())
	}
	if d := b.Topic("deleted").Partition(0); d.log.FirstDirtyOffset() != 0 || len(logRecords(t, d.log)) != 300 {
		t.Fatalf("a delete-policy topic was cleaned: first dirty %d", d.log.FirstDirtyOffset())
	}
}

// TestSnapshotInstallFromCompactedLeader: a replica installing a snapshot
// from a leader that has since written more and cleaned past the
// snapshot's end copies the log with its holes (between batches, inside
// batches, and at the end of the range), ends exactly where the snapshot
// ends, survives a restart and then applies the later entries at the same
// offsets as the leader.
func TestSnapshotInstallFromCompactedLeader(t *testing.T) {
	leader := openReplayPartition(t, t.TempDir())
	apply := func(p *Partition, index uint64, data []byte) applyResult {
		t.Helper()
		r := p.Apply(raft.Entry{Index: index, Term: 1, Data: data}).(applyResult)
		if r.err != nil {
			t.Fatalf("entry %d: %v", index, r.err)
		}
		return r
	}
	// Three records a batch over seven keys: cleaning removes some
	// records of a batch and whole batches.
	var entries [][]byte
	for i := range 400 {
		var kvs []log.KeyValue
		for j := range 3 {
			key := fmt.Appendf(nil, "k%d", (3*i+j)%7)
			if j == 1 && i%10 == 3 && i < 190 {
				key = fmt.Appendf(nil, "once-%d", i) // never superseded
			}
			kvs = append(kvs, log.KeyValue{Key: key, Value: fmt.Appendf(nil, "value-%d-%d", i, j)})
		}
		entries = append(entries, encodeAppend(0, log.BuildBatch(partReplayNowMs, kvs)))
	}
	const snapAt = 200
	for i, e := range entries[:snapAt] {
		apply(leader, uint64(i+1), bytes.Clone(e))
	}
	snap, err := leader.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var meta bytes.Buffer
	if err := snap.Persist(&meta); err != nil {
		t.Fatal(err)
	}
	snapEnd := leader.log.EndOffset()
	for i, e := range entries[snapAt:] {
		apply(leader, uint64(snapAt+i+1), bytes.Clone(e))
	}
	if _, err := leader.log.Clean(context.Background(), log.CleanOptions{UpTo: leader.HighWatermark()}); err != nil {
		t.Fatal(err)
	}
	if leader.log.FirstDirtyOffset() <= snapEnd {
		t.Fatalf("the leader cleaned to %d, not past the snapshot's end %d", leader.log.FirstDirtyOffset(), snapEnd)
	}

	dir := t.TempDir()
	follower := openReplayPartition(t, dir)
	follower.pull = func(from, upTo int64) (recordChunk, error) {
		c, err := leader.readChunk(from, upTo)
		if err != nil {
			return c, err
		}
		return decodeRecordChunk(c.encode()) // as it travels
	}
	if err := follower.Restore(bytes.NewReader(meta.Bytes())); err != nil {
		t.Fatal(err)
	}
	if follower.log.EndOffset() != snapEnd {
		t.Fatalf("follower ends at %d, the snapshot at %d", follower.log.EndOffset(), snapEnd)
	}
	var want []keyedRecord
	for _, r := range logRecords(t, leader.log) {
		if r.offset < snapEnd {
			want = append(want, r)
		}
	}
	same := func(what string, got []keyedRecord) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %d records, the leader has %d below %d\n got %v\nwant %v", what, len(got), len(want), snapEnd, got, want)
		}
	}
	if len(want) < 19 {
		t.Fatalf("%d records left below the snapshot's end on the leader", len(want))
	}
	same("after the install", logRecords(t, follower.log))
	if err := follower.log.Close(); err != nil {
		t.Fatal(err)
	}
	follower = openReplayPartition(t, dir)
	same("after a restart", logRecords(t, follower.log))
	for i, e := range entries[snapAt:] {
		if r := apply(follower, uint64(snapAt+i+1), bytes.Clone(e)); r.append.BaseOffset != snapEnd+int64(3*i) {
			t.Fatalf("entry %d at offset %d on the follower, want %d", snapAt+i+1, r.append.BaseOffset, snapEnd+int64(3*i))
		}
	}
	if follower.log.EndOffset() != leader.log.EndOffset() {
		t.Fatalf("follower ends at %d, leader at %d", follower.log.EndOffset(), leader.log.EndOffset())
	}
}

// TestGroupTopicCompactedKeepsOffsets: __consumer_offsets is a compacted
// topic; the cleaner shrinks it and the committed offsets are the same
// after a restart replays what is left.
func TestGroupTopicCompactedKeepsOffsets(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	if got := configValue(b.TopicConfig(b.Topic(GroupTopic)), "cleanup.policy"); got != "compact" {
		t.Fatalf("__consumer_offsets cleanup.policy %q", got)
	}
	if err := b.AlterTopicConfig(GroupTopic, []ConfigOp{{Name: "segment.bytes", Value: "2048"}, {Name: "min.cleanable.dirty.ratio", Value: "0.01"}}, false); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, "t", 4, nil)
	commit := func(b *Broker, group string, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.Generation = group, -1
		rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
		for p := range int32(4) {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: offset + int64(p), LeaderEpoch: -1})
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
		for _, tp := range b.Groups().OffsetCommit(req).Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("commit %s: error %d", group, p.ErrorCode)
				}
			}
		}
	}
	fetch := func(b *Broker, group string) map[int32]int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3}}}
		out := map[int32]int64{}
		for _, tp := range b.Groups().OffsetFetch(req).Topics {
			for _, p := range tp.Partitions {
				out[p.Partition] = p.Offset
			}
		}
		return out
	}
	groups := []string{"alpha", "beta", "gamma"}
	for i := range 150 {
		commit(b, groups[i%3], int64(i))
	}
	want := map[string]map[int32]int64{}
	for _, g := range groups {
		want[g] = fetch(b, g)
	}
	p := b.Topic(GroupTopic).Partition(b.Groups().Partition("alpha"))
	records := len(logRecords(t, p.log))
	deadline := time.Now().Add(30 * time.Second)
	for p.log.FirstDirtyOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cleaner did not compact __consumer_offsets in 30 s")
		}
		b.CleanLogs()
		time.Sleep(20 * time.Millisecond)
	}
	if left := len(logRecords(t, p.log)); left >= records {
		t.Fatalf("%d records after compaction, %d before", left, records)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	for _, g := range groups {
		if got := fetch(b, g); fmt.Sprint(got) != fmt.Sprint(want[g]) {
			t.Fatalf("group %s after compaction and restart: %v, want %v", g, got, want[g])
		}
	}
}

// BenchmarkProduceWhileCleaning: produce (a batch of 64 records of 1 KiB,
// fsynced before it is acknowledged) and read back one partition of a
// broker where nothing else happens (idle), where another producer
// writes keyed records to a compacted partition without pause (writer:
// 16 MiB at a time), and where that partition is also cleaned after every
// 16 MiB (writer+cleaner). writer+cleaner against writer, same run, is
// what cleaning costs the produce and fetch paths.
func BenchmarkProduceWhileCleaning(b *testing.B) {
	for _, mode := range []string{"idle", "writer", "writer+cleaner"} {
		b.Run(mode, func(b *testing.B) {
			br := openTestBroker(b, b.TempDir())
			if err := br.props.Set("log_cleaner_enabled", "false"); err != nil {
				b.Fatal(err)
			}
			hot := mustCreate(b, br, "hot", 1, nil).Partition(0)
			dirty := mustCreate(b, br, "dirty", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576"}).Partition(0)
			value := bytes.Repeat([]byte("v"), 1024)
			var kvs []log.KeyValue
			for i := range 64 {
				kvs = append(kvs, log.KeyValue{Key: fmt.Appendf(nil, "key-%d", i), Value: value})
			}
			batch := log.BuildBatch(time.Now().UnixMilli(), kvs)
			var dirtyBatches [][]byte
			for i := range 256 { // 256 batches of 64 KiB: 16 MiB over 2,000 keys
				dkv := make([]log.KeyValue, 64)
				for j := range dkv {
					dkv[j] = log.KeyValue{Key: fmt.Appendf(nil, "d-%d", (i*64+j)%2000), Value: value}
				}
				dirtyBatches = append(dirtyBatches, log.BuildBatch(time.Now().UnixMilli(), dkv))
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			var cleaned int64
			go func() {
				defer close(done)
				for mode != "idle" && ctx.Err() == nil {
					for _, d := range dirtyBatches {
						if _, err := br.Produce(ctx, "dirty", 0, bytes.Clone(d), ProduceOptions{}); err != nil {
							return
						}
					}
					if mode == "writer+cleaner" {
						st, err := dirty.log.Clean(ctx, log.CleanOptions{UpTo: dirty.HighWatermark()})
						if err != nil {
							return
						}
						cleaned += st.BytesRead
					}
				}
			}()
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				res, err := br.Produce(context.Background(), "hot", 0, bytes.Clone(batch), ProduceOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if got, err := hot.log.Read(res.BaseOffset, 1<<20, log.Obligatory, hot.HighWatermark()); err != nil || len(got) == 0 {
					b.Fatalf("read back at %d: %d bytes, %v", res.BaseOffset, len(got), err)
				}
			}
			b.StopTimer()
			cancel()
			<-done
			b.ReportMetric(float64(cleaned)/(1<<20), "cleaned-MiB")
		})
	}
}

// TestDeleteRecordsCompactOnly: DeleteRecords on a topic whose policy is
// compact alone is POLICY_VIOLATION (Kafka's rule); with delete too it
// moves the log start.
func TestDeleteRecordsCompactOnly(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	for policy, want := range map[string]*kerr.Error{"compact": kerr.PolicyViolation, "compact,delete": nil} {
		name := "dr-" + strings.ReplaceAll(policy, ",", "-")
		p := mustCreate(t, b, name, 1, map[string]string{"cleanup.policy": policy}).Partition(0)
		for i := range 3 {
			kv := log.KeyValue{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
			if _, err := b.Produce(context.Background(), name, 0, log.BuildBatch(time.Now().UnixMilli(), []log.KeyValue{kv}), ProduceOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		low, err := b.DeleteRecords(context.Background(), p, 2)
		switch {
		case want != nil:
			wantCode(t, err, want)
		case err != nil || low != 2:
			t.Fatalf("%s: low watermark %d, %v", policy, low, err)
		}
	}
}
