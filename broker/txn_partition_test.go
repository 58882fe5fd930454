package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/txn"
	"github.com/weir-broker/weir/log"
	"github.com/weir-broker/weir/log/logtest"
	"github.com/weir-broker/weir/raft"
)

// txnReplica drives a partition replica with entries as its group would.
type txnReplica struct {
	t     *testing.T
	p     *Partition
	index uint64
}

func (r *txnReplica) apply(data []byte) applyResult {
	r.t.Helper()
	r.index++
	return r.p.Apply(raft.Entry{Index: r.index, Term: 2, Data: data}).(applyResult)
}

func (r *txnReplica) mustApply(data []byte) AppendResult {
	r.t.Helper()
	res := r.apply(data)
	if res.err != nil {
		r.t.Fatalf("entry %d: %v", r.index, res.err)
	}
	return res.append
}

func txnBatch(pid int64, epoch int16, seq int32, records int) []byte {
	return logtest.Batch{Records: records, ValueSize: 10, Idempotent: true, Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}.Encode()
}

func (r *txnReplica) wantStable(lso, hw int64) {
	r.t.Helper()
	if got, gotHW := r.p.LastStableOffset(), r.p.HighWatermark(); got != lso || gotHW != hw {
		r.t.Fatalf("LSO %d, high watermark %d; want %d, %d", got, gotHW, lso, hw)
	}
}

// TestPartitionTransactions: transactional batches hold the LSO at their
// transaction's first offset until its marker; aborted transactions are
// listed for read_committed fetches as Kafka lists them; markers from an
// older producer epoch or coordinator epoch are fenced; a restart
// restores open transactions and the aborted list.
func TestPartitionTransactions(t *testing.T) {
	dir := t.TempDir()
	r := &txnReplica{t: t, p: openReplayPartition(t, dir)}
	r.mustApply(encodeAppend(0, txnBatch(7, 0, 0, 3)))               // 0-2, pid 7 opens
	r.mustApply(encodeAppend(0, logtest.Batch{Records: 2}.Encode())) // 3-4
	r.mustApply(encodeAppend(0, txnBatch(8, 0, 0, 1)))               // 5, pid 8 opens
	r.wantStable(0, 6)
	if res := r.apply(encodeAppend(0, logtest.Batch{Records: 1, Idempotent: true, ProducerID: 7, BaseSequence: 3}.Encode())); !errors.Is(res.err, kerr.InvalidTxnState) {
		t.Fatalf("a non-transactional batch of a producer with an open transaction: %v", res.err)
	}
	if m := r.mustApply(encodeMarker(1, 7, 0, false, 1)); m.BaseOffset != 6 { // abort pid 7
		t.Fatalf("marker at %d, want 6", m.BaseOffset)
	}
	r.wantStable(5, 7)
	r.mustApply(encodeMarker(1, 8, 0, true, 1)) // 7: commit pid 8
	r.wantStable(8, 8)
	if got := fmt.Sprint(r.p.abortedBetween(0, 8)); got != "[{7 0}]" {
		t.Fatalf("aborted between 0 and 8: %s", got)
	}
	if got := fmt.Sprint(r.p.abortedBetween(7, 8)); got != "[]" {
		t.Fatalf("aborted from 7: %s", got)
	}
	if got := fmt.Sprint(r.p.abortedBetween(0, 0)); got != "[]" {
		t.Fatalf("aborted below 0: %s", got)
	}
	// The marker on disk is Kafka's.
	data, err := r.p.log.Read(6, 1, log.Obligatory, 7)
	if err != nil {
		t.Fatal(err)
	}
	if commit, ok := log.MarkerType(data); !ok || commit {
		t.Fatalf("marker at 6: commit %v, marker %v", commit, ok)
	}

	// Fencing.
	r.mustApply(encodeAppend(0, txnBatch(7, 1, 0, 1))) // 8: pid 7 epoch 1 opens
	for _, tc := range []struct {
		entry []byte
		want  *kerr.Error
	}{
		{encodeMarker(1, 7, 0, true, 1), kerr.InvalidProducerEpoch},
		{encodeMarker(1, 8, 0, true, 0), kerr.TransactionCoordinatorFenced},
	} {
		if res := r.apply(tc.entry); !errors.Is(res.err, tc.want) {
			t.Fatalf("fenced marker: %v, want %v", res.err, tc.want)
		}
	}
	r.wantStable(8, 9)

	// A restart from the checkpoint keeps the open transaction and the
	// aborted list.
	r.p.appendMu.Lock()
	if err := r.p.checkpointLocked(); err != nil {
		t.Fatal(err)
	}
	r.p.appendMu.Unlock()
	if err := r.p.log.Close(); err != nil {
		t.Fatal(err)
	}
	r.p = openReplayPartition(t, dir)
	r.wantStable(8, 9)
	if got := fmt.Sprint(r.p.abortedBetween(0, 9)); got != "[{7 0}]" {
		t.Fatalf("aborted after a restart: %s", got)
	}
	r.mustApply(encodeMarker(1, 7, 1, false, 2)) // 9: abort pid 7 epoch 1
	r.wantStable(10, 10)
	if got := fmt.Sprint(r.p.abortedBetween(0, 10)); got != "[{7 0} {7 8}]" {
		t.Fatalf("aborted: %s", got)
	}
	// A new epoch after the marker starts at sequence 0.
	if res := r.apply(encodeAppend(0, txnBatch(7, 1, 5, 1))); !errors.Is(res.err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("sequence 5 after the marker: %v", res.err)
	}
	r.mustApply(encodeAppend(0, txnBatch(7, 1, 0, 1)))
}

// TestReadCommittedFetch: a read_committed fetch stops at the LSO and
// lists the aborted transactions of what it returns; read_uncommitted
// reads to the high watermark with no list.
func TestReadCommittedFetch(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "txn", 1, nil)
	p := tp.Partition(0)
	for _, e := range [][]byte{
		encodeAppend(0, txnBatch(7, 0, 0, 2)),               // 0-1
		encodeMarker(1, 7, 0, false, 0),                     // 2: abort
		encodeAppend(0, logtest.Batch{Records: 1}.Encode()), // 3
		encodeAppend(0, txnBatch(9, 0, 0, 1)),               // 4: open
		encodeAppend(0, logtest.Batch{Records: 1}.Encode()), // 5
	} {
		if _, err := p.replicate(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(isolation int8) FetchResult {
		req := &FetchRequest{MaxBytes: 1 << 20, Isolation: isolation,
			Partitions: []FetchPartition{{Topic: tp, Partition: 0, MaxBytes: 1 << 20, LeaderEpoch: -1}}}
		out := make([]FetchResult, 1)
		b.Fetch(context.Background(), req, out)
		t.Cleanup(out[0].Release)
		return out[0]
	}
	rc := fetch(ReadCommitted)
	end, _ := log.EndOffset(rc.Records)
	if rc.Err != nil || rc.LastStableOffset != 4 || rc.HighWatermark != 6 || end != 4 || fmt.Sprint(rc.Aborted) != "[{7 0}]" {
		t.Fatalf("read_committed: err %v, LSO %d, HW %d, records to %d, aborted %v", rc.Err, rc.LastStableOffset, rc.HighWatermark, end, rc.Aborted)
	}
	ru := fetch(ReadUncommitted)
	end, _ = log.EndOffset(ru.Records)
	if ru.Err != nil || end != 6 || ru.Aborted != nil {
		t.Fatalf("read_uncommitted: err %v, records to %d, aborted %v", ru.Err, end, ru.Aborted)
	}
}

// TestDescribeProducersShowsOpenTransaction: DescribeProducers shows
// where a producer's open transaction began and the coordinator epoch of
// its last marker, as Kafka does (kafka-transactions find-hanging reads
// the start offset); a producer known only from its marker has no
// sequence and no timestamp yet.
func TestDescribeProducersShowsOpenTransaction(t *testing.T) {
	r := &txnReplica{t: t, p: openReplayPartition(t, t.TempDir())}
	txn := func(pid int64, seq int32, records int, ts int64) []byte {
		return encodeAppend(0, logtest.Batch{Records: records, Timestamp: ts, Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq}.Encode())
	}
	r.mustApply(encodeAppend(0, logtest.Batch{Records: 2}.Encode())) // 0-1
	r.mustApply(txn(7, 0, 3, 1000))                                  // 2-4: pid 7 opens
	r.mustApply(txn(7, 3, 1, 2000))                                  // 5
	r.mustApply(txn(8, 0, 1, 3000))                                  // 6: pid 8 opens
	r.mustApply(encodeMarker(1, 8, 0, true, 4))                      // 7: commit pid 8
	r.mustApply(encodeMarker(1, 9, 2, false, 4))                     // 8: abort pid 9, nothing here
	got, err := r.p.describeProducers()
	if err != nil {
		t.Fatal(err)
	}
	want := []ProducerInfo{
		{ID: 7, Epoch: 0, LastSequence: 3, LastTimestamp: 2000, CoordinatorEpoch: -1, CurrentTxnStartOffset: 2},
		{ID: 8, Epoch: 0, LastSequence: 0, LastTimestamp: 3000, CoordinatorEpoch: 4, CurrentTxnStartOffset: -1},
		{ID: 9, Epoch: 2, LastSequence: -1, LastTimestamp: -1, CoordinatorEpoch: 4, CurrentTxnStartOffset: -1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("producers\n%+v\nwant\n%+v", got, want)
	}
}

// TestCoordinatorTxnAppendFencedEpoch: the group coordinator's
// transactional write (TxnOffsetCommit) of a producer older than the
// epoch its partition has seen fails with INVALID_PRODUCER_EPOCH, which
// the coordinator passes on to the client as Kafka does.
func TestCoordinatorTxnAppendFencedEpoch(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	mustCreate(t, b, "offsets", 1, nil)
	store := newInternalStore(b, "offsets")
	recs := []log.KeyValue{{Key: []byte("k"), Value: []byte("v")}}
	if _, err := store.AppendTxn(0, 7, 1, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := store.AppendTxn(0, 7, 0, recs); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("a write at an older epoch: %v, want INVALID_PRODUCER_EPOCH", err)
	}
}

// TestWriteTxnMarkersManyPartitions: one call writes a transaction's
// marker to every partition it names (proposed together, waited for
// together), each answering for itself: the LSO of every partition moves
// past the transaction, and a partition the topic does not have and a
// topic the broker does not know are errors of their own.
func TestWriteTxnMarkersManyPartitions(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "txn", 4, nil)
	var tps []txn.TopicPartition
	for i := range int32(4) {
		if _, err := tp.Partition(i).replicate(context.Background(), encodeAppend(0, txnBatch(7, 0, 0, 2))); err != nil {
			t.Fatal(err)
		}
		if lso := tp.Partition(i).LastStableOffset(); lso != 0 {
			t.Fatalf("partition %d: LSO %d with the transaction open", i, lso)
		}
		tps = append(tps, txn.TopicPartition{Topic: "txn", Partition: i})
	}
	tps = append(tps, txn.TopicPartition{Topic: "txn", Partition: 9}, txn.TopicPartition{Topic: "gone", Partition: 0})
	errs := b.WriteTxnMarkers(context.Background(), 7, 0, true, 1, tps)
	for i, err := range errs {
		if wantErr := i >= 4; (err != nil) != wantErr {
			t.Errorf("%v: %v", tps[i], err)
		}
	}
	if !errors.Is(errs[5], kerr.UnknownTopicOrPartition) {
		t.Errorf("a topic the broker does not know: %v, want UNKNOWN_TOPIC_OR_PARTITION", errs[5])
	}
	for i := range int32(4) {
		if lso, hw := tp.Partition(i).LastStableOffset(), tp.Partition(i).HighWatermark(); lso != 3 || hw != 3 {
			t.Errorf("partition %d after the marker: LSO %d, high watermark %d, want 3, 3", i, lso, hw)
		}
	}
}

// TestWriteTxnMarkersNotWrittenIsNotDone: a broker asked for a marker of a
// topic its table does not hold (yet: a restarted broker answers the RPC
// mux before its first reconcile) answers an error, not "written", so the
// coordinator retries; and the coordinator's own writer drops the
// partitions of a topic its table does not hold (deleted). Answering
// "written" made the coordinator complete transactions whose markers
// never reached the partition: their records stayed open (the LSO stuck
// for good) or joined the producer's next transaction there, committed
// or aborted with it (the chaos suite's transactional workload).
func TestWriteTxnMarkersNotWrittenIsNotDone(t *testing.T) {
	b := openTestBroker(t, t.TempDir())
	tp := mustCreate(t, b, "txn", 1, nil)
	if _, err := tp.Partition(0).replicate(context.Background(), encodeAppend(0, txnBatch(7, 0, 0, 2))); err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(markerRequest{ProducerID: 7, Commit: true, CoordinatorEpoch: 1, Partitions: []txn.TopicPartition{{Topic: "later", Partition: 0}}})
	resp, err := b.serveTxnMarkers(context.Background(), "", req)
	if err != nil || !strings.Contains(string(resp), kerr.UnknownTopicOrPartition.Message) {
		t.Fatalf("a marker for a topic the broker does not know: answer %q, %v; want UNKNOWN_TOPIC_OR_PARTITION", resp, err)
	}
	if err := (markerWriter{b}).WriteMarkers(context.Background(), txn.Marker{ProducerID: 7, Commit: true, CoordinatorEpoch: 1,
		Partitions: []txn.TopicPartition{{Topic: "txn", Partition: 0}, {Topic: "gone", Partition: 0}}}); err != nil {
		t.Fatalf("the coordinator's writer: %v; want the deleted topic dropped and the marker written", err)
	}
	if lso, hw := tp.Partition(0).LastStableOffset(), tp.Partition(0).HighWatermark(); lso != 3 || hw != 3 {
		t.Errorf("after the marker: LSO %d, high watermark %d, want 3, 3", lso, hw)
	}
}

// TestLastStableOffsetNotBelowLogStart: records deleted past the first
// offset of an open transaction leave the LSO at the new log start, as
// Kafka does, not at an offset that no longer exists; the marker then
// moves it to the high watermark.
func TestLastStableOffsetNotBelowLogStart(t *testing.T) {
	r := &txnReplica{t: t, p: openReplayPartition(t, t.TempDir())}
	r.mustApply(encodeAppend(0, txnBatch(7, 0, 0, 3)))               // 0-2, pid 7 opens
	r.mustApply(encodeAppend(0, logtest.Batch{Records: 2}.Encode())) // 3-4
	r.wantStable(0, 5)
	if res := r.apply(encodeDeleteRecords(4)); res.err != nil {
		t.Fatal(res.err)
	}
	if start := r.p.LogStartOffset(); start != 4 {
		t.Fatalf("log start %d after deleting records before 4", start)
	}
	r.wantStable(4, 5)
	r.mustApply(encodeMarker(1, 7, 0, true, 1)) // 5
	r.wantStable(6, 6)
}
