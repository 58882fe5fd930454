package group

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnCommit(c *Coordinator, group string, pid int64, topic string, offsets map[int32]int64) *kmsg.TxnOffsetCommitResponse {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.Generation = "app", group, pid, -1
	rt := kmsg.TxnOffsetCommitRequestTopic{Topic: topic}
	for p, o := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitRequestTopicPartition{Partition: p, Offset: o, LeaderEpoch: -1})
	}
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
	return c.TxnOffsetCommit(req)
}

func fetchStable(c *Coordinator, group, topic string, partition int32) (int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = 7, true
	req.Group = group
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	p := c.OffsetFetch(req).Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// waitOffset waits for the group's committed offset of t/0 to be want
// (markers settle on their own goroutine).
func waitOffset(t *testing.T, c *Coordinator, group string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, ok := fetchOffsets(c, group)["t"][0]
		if !ok {
			got = -1
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: offset %d, want %d", group, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTxnOffsets: offsets committed in a transaction are invisible (and
// unstable for require_stable) until a COMMIT marker after them, dropped
// by an ABORT, and a replay of the partition reaches the same state,
// offsets still pending included.
func TestTxnOffsets(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoordinator(t, store, testSettings())
	commit(c, "g", "", -1, "t", map[int32]int64{0: 5})
	if r := txnCommit(c, "g", 7, "t", map[int32]int64{0: 10}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("txn commit: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	if got := fetchOffsets(c, "g")["t"][0]; got != 5 {
		t.Fatalf("offset before the marker: %d", got)
	}
	if _, code := fetchStable(c, "g", "t", 0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable while pending: %d", code)
	}
	// A marker of another producer, or one before the record, decides
	// nothing.
	c.TxnMarker(0, store.appendMarker(0, 8, true), 8, true)
	c.TxnMarker(0, 0, 7, true)
	time.Sleep(20 * time.Millisecond)
	if got := fetchOffsets(c, "g")["t"][0]; got != 5 {
		t.Fatalf("offset after unrelated markers: %d", got)
	}
	c.TxnMarker(0, store.appendMarker(0, 7, true), 7, true)
	waitOffset(t, c, "g", 10)
	if off, code := fetchStable(c, "g", "t", 0); code != 0 || off != 10 {
		t.Fatalf("require_stable after the commit: %d %d", off, code)
	}

	// Aborted: dropped.
	txnCommit(c, "g", 7, "t", map[int32]int64{0: 20})
	c.TxnMarker(0, store.appendMarker(0, 7, false), 7, false)
	waitStable(t, c, "g")
	waitOffset(t, c, "g", 10)

	// Pending at a restart: still pending after the replay, and settled
	// by the marker that comes later.
	txnCommit(c, "g", 9, "t", map[int32]int64{0: 30})
	c.Close()
	c = newTestCoordinator(t, store, testSettings())
	waitOffset(t, c, "g", 10)
	if _, code := fetchStable(c, "g", "t", 0); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable after a replay with a pending commit: %d", code)
	}
	c.TxnMarker(0, store.appendMarker(0, 9, true), 9, true)
	waitOffset(t, c, "g", 30)
	// And a replay of the whole history ends there too.
	c.Close()
	c = newTestCoordinator(t, store, testSettings())
	waitOffset(t, c, "g", 30)
	if _, code := fetchStable(c, "g", "t", 0); code != 0 {
		t.Fatalf("require_stable after the full replay: %d", code)
	}
}

// TestTxnOffsetsLaterRecordWins: of a transactional and a plain commit
// of the same partition, the one whose record is later in the log is the
// group's offset once the transaction commits, as in Kafka: a consumer's
// own commit written after the transaction's is not undone by its
// marker, and a transaction's commit written after a plain one replaces
// it. A replay of the partition reaches the same offsets.
func TestTxnOffsetsLaterRecordWins(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoordinator(t, store, testSettings())

	// Transactional 10, then plain 20, then the COMMIT: 20 stays.
	txnCommit(c, "g", 7, "t", map[int32]int64{0: 10})
	commit(c, "g", "", -1, "t", map[int32]int64{0: 20})
	waitOffset(t, c, "g", 20)
	c.TxnMarker(0, store.appendMarker(0, 7, true), 7, true)
	waitStable(t, c, "g")
	waitOffset(t, c, "g", 20)

	// Plain 30, then transactional 25, then the COMMIT: 25, the later
	// record.
	commit(c, "g", "", -1, "t", map[int32]int64{0: 30})
	txnCommit(c, "g", 7, "t", map[int32]int64{0: 25})
	c.TxnMarker(0, store.appendMarker(0, 7, true), 7, true)
	waitOffset(t, c, "g", 25)

	// Transactional 40 and plain 50 on a second producer's marker that
	// comes after both: 50 stays.
	txnCommit(c, "g", 8, "t", map[int32]int64{0: 40})
	commit(c, "g", "", -1, "t", map[int32]int64{0: 50})
	c.TxnMarker(0, store.appendMarker(0, 8, true), 8, true)
	waitStable(t, c, "g")
	waitOffset(t, c, "g", 50)

	c.Close()
	c = newTestCoordinator(t, store, testSettings())
	waitOffset(t, c, "g", 50)
}

// waitStable waits until no transaction holds an offset of the group's
// t/0 (markers settle on their own goroutine).
func waitStable(t *testing.T, c *Coordinator, group string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, code := fetchStable(c, group, "t", 0); code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: offsets still pending", group)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTxnOffsetCommitAppendErrors: a TxnOffsetCommit whose records could
// not be written answers as Kafka's group coordinator does: a fenced
// producer (the partition has seen a newer epoch) gets
// INVALID_PRODUCER_EPOCH, not a retriable code it would retry until its
// transaction times out; a moved partition NOT_COORDINATOR. Nothing is
// left pending.
func TestTxnOffsetCommitAppendErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *kerr.Error
	}{
		{fmt.Errorf("%w: producer 7 epoch 0 is older than 1", kerr.InvalidProducerEpoch), kerr.InvalidProducerEpoch},
		{fmt.Errorf("%w: not the leader", kerr.NotCoordinator), kerr.NotCoordinator},
		{fmt.Errorf("%w: too big", kerr.MessageTooLarge), kerr.InvalidCommitOffsetSize},
		{errors.New("disk on fire"), kerr.CoordinatorNotAvailable},
	} {
		store := newMemStore(1)
		c := newTestCoordinator(t, store, testSettings())
		store.mu.Lock()
		store.txnErr = tc.err
		store.mu.Unlock()
		r := txnCommit(c, "g", 7, "t", map[int32]int64{0: 10})
		if got := r.Topics[0].Partitions[0].ErrorCode; got != tc.want.Code {
			t.Errorf("append failing with %q: %v, want %v", tc.err, kerr.ErrorForCode(got), tc.want)
		}
		if _, code := fetchStable(c, "g", "t", 0); code != 0 {
			t.Errorf("append failing with %q: require_stable answers %v, want no pending offset", tc.err, kerr.ErrorForCode(code))
		}
	}
}
