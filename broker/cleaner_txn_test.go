package broker

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log"
)

// committedRecords is what a Kafka read_committed consumer
// (CompletedFetch) makes of one fetch answer: an aborted transaction's
// producer joins the aborted set at the first batch of a producer
// reaching its first offset and leaves it at its abort marker;
// transactional batches of producers in the set are skipped, and so
// are control batches. It sets the latest value of every key in out and
// returns the offset after the last batch.
func committedRecords(t *testing.T, data []byte, aborted []AbortedTxn, out map[string]string) (next int64) {
	t.Helper()
	queue := slices.Clone(aborted)
	slices.SortFunc(queue, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	abortedPIDs := map[int64]bool{}
	hs, err := log.ValidateStored(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		batch := data[:h.Size()]
		data = data[h.Size():]
		next = h.LastOffset() + 1
		if h.ProducerID >= 0 {
			for len(queue) > 0 && queue[0].FirstOffset <= h.LastOffset() {
				abortedPIDs[queue[0].ProducerID] = true
				queue = queue[1:]
			}
		}
		if h.IsControl() {
			if commit, ok := log.MarkerType(batch); ok && !commit {
				delete(abortedPIDs, h.ProducerID)
			}
			continue
		}
		if h.IsTransactional() && abortedPIDs[h.ProducerID] {
			continue
		}
		if err := log.ForEachRecord(batch, func(r log.Record) bool {
			out[string(r.Key)] = string(r.Value)
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return next
}

// readCommitted consumes partition 0 of tp read_committed from its start
// to its last stable offset; it returns every key's latest value and the
// aborted transactions the answers listed.
func readCommitted(t *testing.T, b *Broker, tp *Topic) (map[string]string, []AbortedTxn) {
	t.Helper()
	got := map[string]string{}
	var aborted []AbortedTxn
	p := tp.Partition(0)
	for off := p.LogStartOffset(); off < p.LastStableOffset(); {
		req := &FetchRequest{MaxBytes: 1 << 20, Isolation: ReadCommitted,
			Partitions: []FetchPartition{{Topic: tp, Partition: 0, Offset: off, MaxBytes: 1 << 20, LeaderEpoch: -1}}}
		out := make([]FetchResult, 1)
		b.Fetch(context.Background(), req, out)
		if out[0].Err != nil {
			t.Fatalf("fetch at %d: %v", off, out[0].Err)
		}
		aborted = append(aborted, out[0].Aborted...)
		next := committedRecords(t, out[0].Records, out[0].Aborted, got)
		out[0].Release()
		if next <= off {
			t.Fatalf("fetch at %d returned nothing", off)
		}
		off = next
	}
	return got, aborted
}

// TestCleanerTransactionsReadCommitted: the broker's cleaner on a
// compacted topic with transactions: it stops at an open transaction,
// removes aborted records, forgets an aborted transaction once its data
// is gone and removes its marker after delete.retention.ms; a
// read_committed consumer sees the latest committed value of every key
// all along, also after a restart rebuilds the aborted list from the log.
func TestCleanerTransactionsReadCommitted(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "txc", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024",
		// The cleaner runs pass after pass while the test adds dirty
		// bytes: the retention is what keeps the emptied abort marker
		// there long enough for the test to see it between the pass
		// that sets its horizon and the one that removes it.
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3000"})
	p := tp.Partition(0)
	ctx := context.Background()
	now := func() int64 { return time.Now().UnixMilli() }
	entry := func(e []byte) int64 {
		t.Helper()
		res, err := p.replicate(ctx, e)
		if err == nil {
			err = res.err
		}
		if err != nil {
			t.Fatal(err)
		}
		return res.append.BaseOffset
	}
	kv := func(k, v string) []log.KeyValue { return []log.KeyValue{{Key: []byte(k), Value: []byte(v)}} }
	filler := bytes.Repeat([]byte("f"), 400)
	fill := func(n int) {
		for range n {
			entry(encodeAppend(0, log.BuildBatch(now(), []log.KeyValue{{Key: []byte("f"), Value: filler}})))
		}
	}
	const p7, p8, p9 = 7, 8, 9
	entry(encodeAppend(0, log.BuildBatch(now(), kv("k1", "v0"))))
	aborted7 := entry(encodeAppend(0, log.BuildTxnBatch(now(), p7, 0, kv("k1", "a7"))))
	entry(encodeAppend(0, log.BuildTxnBatch(now(), p8, 0, append(kv("k1", "c8"), kv("k3", "c8")...))))
	abortMarker := entry(encodeMarker(now(), p7, 0, false, 0))
	entry(encodeMarker(now(), p8, 0, true, 0))
	fill(6) // closed segments below the open transaction
	open9 := entry(encodeAppend(0, log.BuildTxnBatch(now(), p9, 0, kv("k2", "open"))))
	fill(12)

	fetch := func() (map[string]string, []AbortedTxn) {
		t.Helper()
		return readCommitted(t, b, tp)
	}
	waitClean := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("the cleaner did not %s in 30 s (first dirty %d, LSO %d)", what, p.log.FirstDirtyOffset(), p.LastStableOffset())
			}
			fill(1)
			b.CleanLogs()
			time.Sleep(20 * time.Millisecond)
		}
	}
	hasBatchAt := func(off int64) bool {
		found := false
		if err := p.log.Batches(p.log.LogStartOffset(), func(h log.BatchHeader) bool {
			found = found || h.BaseOffset == off
			return h.BaseOffset < off
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}

	// The open transaction bounds the clean.
	waitClean("clean below the open transaction", func() bool { return p.log.FirstDirtyOffset() > 0 })
	if p.log.FirstDirtyOffset() > open9 {
		t.Fatalf("cleaned to %d past the open transaction at %d", p.log.FirstDirtyOffset(), open9)
	}
	if !hasBatchAt(open9) {
		t.Fatal("the open transaction's batch is gone")
	}
	if got, _ := fetch(); got["k1"] != "c8" || got["k3"] != "c8" || got["k2"] != "" {
		t.Fatalf("read_committed with an open transaction: %v", got)
	}

	// It commits; p7 writes and commits again.
	entry(encodeMarker(now(), p9, 0, true, 0))
	entry(encodeAppend(0, log.BuildTxnBatch(now(), p7, 1, kv("k4", "c7"))))
	entry(encodeMarker(now(), p7, 1, true, 0))
	fill(4)
	end := p.log.EndOffset()
	waitClean("clean past the transactions", func() bool { return p.log.FirstDirtyOffset() >= end-3 })
	want := map[string]string{"k1": "c8", "k2": "open", "k3": "c8", "k4": "c7", "f": string(filler)}
	if hasBatchAt(aborted7) {
		t.Fatal("the aborted batch is still there")
	}
	got, _ := fetch()
	if !maps.Equal(got, want) {
		t.Fatalf("read_committed after the clean: %v, want %v", got, want)
	}

	// The next clean finds p7's aborted transaction empty: it leaves the
	// list, and a later one removes its marker.
	waitClean("forget the empty aborted transaction", func() bool { return len(p.aborted.load()) == 0 })
	if !hasBatchAt(abortMarker) {
		t.Fatal("the abort marker went with its transaction's data")
	}
	waitClean("remove the abort marker", func() bool { return !hasBatchAt(abortMarker) })
	got, aborted := fetch()
	if !maps.Equal(got, want) || len(aborted) != 0 {
		t.Fatalf("read_committed after the marker went: %v, aborted %v; want %v", got, aborted, want)
	}
	// The cleaner counts a clean once log.Clean returns, a moment after
	// the swap that the reads above already see.
	for deadline := time.Now().Add(10 * time.Second); testutilCounter(b.cleaner.markersRemoved) < 1 || testutilCounter(b.cleaner.abortedRemoved) < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("removed markers metric %v, removed aborted records metric %v; want at least 1 and 1",
				testutilCounter(b.cleaner.markersRemoved), testutilCounter(b.cleaner.abortedRemoved))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := testutilCounter(b.cleaner.abortedRemoved); v != 1 {
		t.Fatalf("removed aborted records metric %v, want 1", v)
	}

	// A restart rebuilds the aborted list from the log: nothing to list.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	tp = b.Topic("txc")
	p = tp.Partition(0)
	if l := p.aborted.load(); len(l) != 0 {
		t.Fatalf("aborted list after a restart: %v", l)
	}
	got, aborted = fetch()
	if !maps.Equal(got, want) || len(aborted) != 0 {
		t.Fatalf("read_committed after a restart: %v, aborted %v; want %v", got, aborted, want)
	}
}

// TestCleanerTransactionsRestartMidway: a restart between the clean that
// removes an aborted transaction's data and the one that removes its
// marker lists nothing for it, and read_committed stays right.
func TestCleanerTransactionsRestartMidway(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	tp := mustCreate(t, b, "txr", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3600000"})
	p := tp.Partition(0)
	ctx := context.Background()
	for i, e := range [][]byte{
		encodeAppend(0, log.BuildBatch(1, []log.KeyValue{{Key: []byte("k"), Value: []byte("v0")}})),
		encodeAppend(0, log.BuildTxnBatch(1, 7, 0, []log.KeyValue{{Key: []byte("k"), Value: []byte("aborted")}})),
		encodeMarker(1, 7, 0, false, 0),
		encodeAppend(0, log.BuildTxnBatch(1, 7, 0, []log.KeyValue{{Key: []byte("j"), Value: []byte("committed")}})),
		encodeMarker(1, 7, 0, true, 0),
	} {
		if res, err := p.replicate(ctx, e); err != nil || res.err != nil {
			t.Fatalf("entry %d: %v %v", i, err, res.err)
		}
	}
	for range 12 {
		if res, err := p.replicate(ctx, encodeAppend(0, log.BuildBatch(1, []log.KeyValue{{Key: []byte("f"), Value: bytes.Repeat([]byte("f"), 400)}}))); err != nil || res.err != nil {
			t.Fatal(err, res.err)
		}
	}
	if fmt.Sprint(p.abortedBetween(0, 5)) != "[{7 1}]" {
		t.Fatalf("aborted list %v", p.abortedBetween(0, 5))
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.log.FirstDirtyOffset() < 5 {
		if time.Now().After(deadline) {
			t.Fatal("no clean in 30 s")
		}
		b.CleanLogs()
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	p = b.Topic("txr").Partition(0)
	// The marker is still there (an hour's horizon), its data is not.
	if l := p.aborted.load(); len(l) != 0 {
		t.Fatalf("aborted list after a restart: %v", l)
	}
	got, _ := readCommitted(t, b, b.Topic("txr"))
	if got["k"] != "v0" || got["j"] != "committed" {
		t.Fatalf("read_committed after a restart: %v", got)
	}
}

func testutilCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestGroupTopicCleanedWithTxnOffsets: __consumer_offsets holding
// offsets committed in transactions, some aborted: cleaning it (until
// the markers of the emptied transactions are gone too) leaves every
// group's committed offsets as they were, after a restart replays what
// is left. An aborted offset commit never shadows the group's earlier
// one.
func TestGroupTopicCleanedWithTxnOffsets(t *testing.T) {
	dir := t.TempDir()
	b := openTestBroker(t, dir)
	if err := b.AlterTopicConfig(GroupTopic, []ConfigOp{{Name: "segment.bytes", Value: "2048"}, {Name: "min.cleanable.dirty.ratio", Value: "0.01"}, {Name: "delete.retention.ms", Value: "0"}}, false); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, "t", 1, nil)
	// Groups of one partition of __consumer_offsets, so that its markers
	// are all there.
	part := b.Groups().Partition("g0")
	var groups []string
	for i := 0; len(groups) < 3; i++ {
		if g := fmt.Sprintf("g%d", i); b.Groups().Partition(g) == part {
			groups = append(groups, g)
		}
	}
	plainGroup, txnGroup, filler := groups[0], groups[1], groups[2]
	p := b.Topic(GroupTopic).Partition(part)
	commit := func(group string, offset int64) {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version = 9
		req.Group, req.Generation = group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		for _, tp := range b.Groups().OffsetCommit(req).Topics {
			for _, rp := range tp.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("commit %s: error %d", group, rp.ErrorCode)
				}
			}
		}
	}
	txnCommit := func(group string, pid int64, offset int64, commitTxn bool) {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 3
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = fmt.Sprint("app-", pid), group, pid, -1
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
		for _, tp := range b.Groups().TxnOffsetCommit(req).Topics {
			for _, rp := range tp.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("txn commit %s: error %d", group, rp.ErrorCode)
				}
			}
		}
		if res, err := p.replicate(context.Background(), encodeMarker(time.Now().UnixMilli(), pid, 0, commitTxn, 0)); err != nil || res.err != nil {
			t.Fatalf("marker: %v %v", err, res.err)
		}
	}
	fetch := func(group string) int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.RequireStable = 7, true
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		deadline := time.Now().Add(10 * time.Second)
		for {
			rp := b.Groups().OffsetFetch(req).Topics[0].Partitions[0]
			if rp.ErrorCode == 0 {
				return rp.Offset
			}
			if time.Now().After(deadline) {
				t.Fatalf("fetch %s: error %d", group, rp.ErrorCode)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	commit(plainGroup, 10)
	txnCommit(plainGroup, 100, 20, false) // aborted: 10 stays
	txnCommit(txnGroup, 101, 30, true)
	txnCommit(txnGroup, 102, 40, false) // aborted: 30 stays
	markersEnd := p.log.EndOffset()
	// The producers of the aborted commits write again: their aborted
	// batches are not their last, which the cleaner keeps.
	txnCommit(filler, 100, 1000, true)
	txnCommit(filler, 102, 1001, true)
	for i := range 60 {
		commit(filler, int64(i))
	}
	if got, got2 := fetch(plainGroup), fetch(txnGroup); got != 10 || got2 != 30 {
		t.Fatalf("before cleaning: %d, %d", got, got2)
	}
	markers := func() int {
		n := 0
		if err := p.log.Batches(p.log.LogStartOffset(), func(h log.BatchHeader) bool {
			if h.IsControl() && h.BaseOffset < markersEnd {
				n++
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := p.log.Size()
	// The aborted commits go, then the markers of their (empty)
	// transactions; p101's commit marker stays with its record.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; markers() > 1; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner left %d markers in 30 s (first dirty %d)", markers(), p.log.FirstDirtyOffset())
		}
		commit(filler, int64(100+i))
		b.CleanLogs()
		time.Sleep(20 * time.Millisecond)
	}
	if p.log.Size() >= before {
		t.Fatalf("log of %d bytes after cleaning, %d before", p.log.Size(), before)
	}
	if got, got2 := fetch(plainGroup), fetch(txnGroup); got != 10 || got2 != 30 {
		t.Fatalf("after cleaning: %d, %d; want 10, 30", got, got2)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBroker(t, dir)
	if got, got2 := fetch(plainGroup), fetch(txnGroup); got != 10 || got2 != 30 {
		t.Fatalf("after cleaning and a restart: %d, %d; want 10, 30", got, got2)
	}
}

// TestProducerStateRebuiltFromCleanedLog: a checkpoint of an earlier
// release has no producer table, so it is rebuilt from the log's batch
// headers. From a log cleaned past its markers' horizons the rebuild
// finds no open transaction, every producer at its epoch, and the same
// aborted transactions a fetch needs.
func TestProducerStateRebuiltFromCleanedLog(t *testing.T) {
	r := &txnReplica{t: t, p: openReplayPartition(t, t.TempDir())}
	kv := func(k, v string) []log.KeyValue { return []log.KeyValue{{Key: []byte(k), Value: []byte(v)}} }
	for round := range 30 {
		v := fmt.Sprint(round)
		r.mustApply(encodeAppend(0, log.BuildTxnBatch(1, 7, 0, kv("a", v))))
		r.mustApply(encodeAppend(0, log.BuildTxnBatch(1, 8, int16(round), kv("b", v))))
		r.mustApply(encodeMarker(1, 7, 0, round%3 != 0, 1))
		r.mustApply(encodeMarker(1, 8, int16(round), round%2 == 0, 1))
		r.mustApply(encodeAppend(0, log.BuildBatch(1, kv("c", strings.Repeat(v, 100)))))
	}
	r.mustApply(encodeMarker(1, 8, 30, false, 1)) // a bumped epoch with no data yet
	r.mustApply(encodeAppend(0, log.BuildBatch(1, kv("z", "z"))))
	now := int64(partReplayNowMs)
	for i := range 3 {
		// A clean runs a pass only over new dirty segments.
		for range 3 {
			r.mustApply(encodeAppend(0, log.BuildBatch(1, kv("d", strings.Repeat(fmt.Sprint(i), 600)))))
		}
		now += 1000
		opts := log.CleanOptions{UpTo: r.p.LastStableOffset(), DeleteRetention: time.Millisecond, Now: func() time.Time { return time.UnixMilli(now) }}
		st, err := r.p.log.Clean(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		r.p.forgetEmptyAborted(st.EmptyAbortedTxns)
	}
	var rebuilt producerTable
	if err := rebuilt.rebuild(r.p.log); err != nil {
		t.Fatal(err)
	}
	if rebuilt.firstOpen() != -1 {
		t.Fatalf("rebuilt producer state has a transaction open at %d", rebuilt.firstOpen())
	}
	for _, pid := range []int64{7, 8} {
		if got, want := rebuilt.m[pid], r.p.producers.m[pid]; got == nil || got.epoch != want.epoch {
			t.Fatalf("producer %d: rebuilt %+v, live %+v", pid, got, want)
		}
	}
	// Left: the aborted transactions of the producers' last data
	// batches, kept (empty) for their producers.
	if l := r.p.aborted.load(); len(l) == 0 || len(l) > 2 {
		t.Fatalf("aborted transactions after cleaning: %v", l)
	}
	live := fmt.Sprint(r.p.abortedBetween(0, r.p.log.EndOffset()))
	if err := r.p.rebuildAborted(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.p.abortedBetween(0, r.p.log.EndOffset())); got != live {
		t.Fatalf("aborted transactions rebuilt from the cleaned log %s, before %s", got, live)
	}
}
