package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/txn"
)

// openTxnBroker opens a broker whose transaction coordinator serves, with
// a topic "t" of two partitions and transactional id "app" initialised.
func openTxnBroker(t *testing.T) (*Broker, *txn.Coordinator, int64, int16) {
	t.Helper()
	b := openTestBroker(t, t.TempDir())
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "transaction_state_log_num_partitions", Value: "2"}}, false); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, b, "t", 2, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := b.Transactions(); err == nil {
			res := c.InitProducerID(context.Background(), "app", 60000, -1, -1, 4)
			if res.Code == 0 {
				return b, c, res.ID, res.Epoch
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the transaction coordinator did not start serving")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func produceTxn(b *Broker, partition int32, pid int64, epoch int16, seq int32, version int16) error {
	_, err := b.Produce(context.Background(), "t", partition, txnBatch(pid, epoch, seq, 2), ProduceOptions{TransactionalID: "app", Version: version, Acks: -1})
	return err
}

func verifications(b *Broker, result string) float64 {
	var m dto.Metric
	if err := b.verifications.vec.WithLabelValues(result).Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestProduceVerification: the batch that opens a transaction on a
// partition is accepted once the coordinator has the partition in the
// producer's transaction, and the rest of the transaction needs no
// verification; a partition the producer never added is refused with
// INVALID_TXN_STATE before Produce v11 and TRANSACTION_ABORTABLE from it,
// a stale epoch with INVALID_PRODUCER_EPOCH, and none of them opens a
// transaction there.
func TestProduceVerification(t *testing.T) {
	b, c, pid, epoch := openTxnBroker(t)
	if code := c.AddPartitions("app", pid, epoch, []txn.TopicPartition{{Topic: "t", Partition: 0}}, 3); code != 0 {
		t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(code))
	}
	if err := produceTxn(b, 0, pid, epoch, 0, 9); err != nil {
		t.Fatalf("verified batch: %v", err)
	}
	if err := produceTxn(b, 0, pid, epoch, 2, 9); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	if n := verifications(b, "verified"); n != 1 {
		t.Errorf("%v verifications, want 1: the transaction was open for the second batch", n)
	}

	wantCode(t, produceTxn(b, 1, pid, epoch, 0, 10), kerr.InvalidTxnState)
	wantCode(t, produceTxn(b, 1, pid, epoch, 0, 11), kerr.TransactionAbortable)
	wantCode(t, produceTxn(b, 1, pid, epoch+1, 0, 11), kerr.InvalidProducerEpoch)
	if n := verifications(b, "not_in_transaction"); n != 2 {
		t.Errorf("%v refusals counted, want 2", n)
	}
	if n := verifications(b, "fenced"); n != 1 {
		t.Errorf("%v fenced counted, want 1", n)
	}
	p := b.Topic("t").Partition(1)
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); hw != 0 || lso != 0 {
		t.Errorf("partition 1: high watermark %d, LSO %d; want nothing appended", hw, lso)
	}

	// Verification off: the stray batch is taken, as before KIP-890.
	if err := b.AlterClusterProperties([]PropertyChange{{Name: "transaction_partition_verification_enable", Value: "false"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := produceTxn(b, 1, pid, epoch, 0, 11); err != nil {
		t.Fatalf("with verification off: %v", err)
	}
}

// TestProduceVerificationMarkerRace: a marker of the producer proposed
// between the coordinator's answer and the batch's proposal voids the
// verification: the batch is refused instead of opening a transaction
// that the marker already closed.
func TestProduceVerificationMarkerRace(t *testing.T) {
	b, c, pid, epoch := openTxnBroker(t)
	tps := []txn.TopicPartition{{Topic: "t", Partition: 0}}
	if code := c.AddPartitions("app", pid, epoch, tps, 3); code != 0 {
		t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(code))
	}
	verify := b.verifyTxn
	b.verifyTxn = func(ctx context.Context, id string, pid int64, epoch int16, tp txn.TopicPartition) int16 {
		code := verify(ctx, id, pid, epoch, tp)
		// The coordinator aborts (a timeout) right after answering.
		if err := errors.Join(b.WriteTxnMarkers(ctx, pid, epoch, false, 0, tps)...); err != nil {
			t.Errorf("marker: %v", err)
		}
		return code
	}
	err := produceTxn(b, 0, pid, epoch, 0, 11)
	wantCode(t, err, kerr.InvalidTxnState)
	if !errors.Is(err, errVerificationGuardLost) {
		t.Errorf("refused for %v, want the lost guard", err)
	}
	if n := verifications(b, "marker_raced"); n != 1 {
		t.Errorf("%v raced verifications counted, want 1", n)
	}
	p := b.Topic("t").Partition(0)
	if hw, lso := p.HighWatermark(), p.LastStableOffset(); lso != hw {
		t.Errorf("LSO %d below high watermark %d: a transaction was left open", lso, hw)
	}
	b.verifyTxn = verify

	// A marker proposed and not yet applied ends the open transaction as
	// far as the next batch is concerned: it is verified again.
	if code := c.AddPartitions("app", pid, epoch, tps, 3); code != 0 {
		t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(code))
	}
	if err := produceTxn(b, 0, pid, epoch, 0, 11); err != nil {
		t.Fatal(err)
	}
	tp := b.Topic("t").Partition(0)
	if !tp.txnOngoing(pid, epoch) {
		t.Error("the open transaction does not count as ongoing")
	}
	tp.appendMu.Lock()
	tp.txnGate.markersInFlight = map[int64]int{pid: 1}
	tp.appendMu.Unlock()
	if tp.txnOngoing(pid, epoch) {
		t.Error("a transaction with a marker in flight counts as ongoing")
	}
	tp.appendMu.Lock()
	tp.txnGate.markersInFlight = nil
	tp.appendMu.Unlock()
	if err := errors.Join(b.WriteTxnMarkers(context.Background(), pid, epoch, true, 0, tps)...); err != nil {
		t.Fatal(err)
	}
	tp.appendMu.Lock()
	n := len(tp.txnGate.markersInFlight)
	tp.appendMu.Unlock()
	if n != 0 {
		t.Errorf("%d producers with markers in flight after they were applied", n)
	}
}

// TestProduceVerificationRemote: a coordinator on another broker is
// asked over serviceTxnVerify and answers as the local check does.
func TestProduceVerificationRemote(t *testing.T) {
	b, c, pid, epoch := openTxnBroker(t)
	tp0, tp1 := txn.TopicPartition{Topic: "t", Partition: 0}, txn.TopicPartition{Topic: "t", Partition: 1}
	if code := c.AddPartitions("app", pid, epoch, []txn.TopicPartition{tp0}, 3); code != 0 {
		t.Fatalf("AddPartitions: %v", kerr.ErrorForCode(code))
	}
	local := b.newTxnVerifier()
	// The other broker is this one's own RPC listener.
	addr := b.ctrl.mux.Addr()
	calls := 0
	remote := local
	remote.coordinatorNode = func(int32) (int32, string, error) { return b.NodeID() + 1, addr, nil }
	call := remote.call
	remote.call = func(ctx context.Context, addr, service string, data []byte) ([]byte, error) {
		calls++
		return call(ctx, addr, service, data)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		tp    txn.TopicPartition
		epoch int16
		want  int16
	}{
		{tp0, epoch, 0},
		{tp1, epoch, kerr.TransactionAbortable.Code},
		{tp0, epoch + 1, kerr.ProducerFenced.Code},
	} {
		if got := local.verify(ctx, "app", pid, tc.epoch, tc.tp); got != tc.want {
			t.Errorf("local %v epoch %d: %v, want %v", tc.tp, tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
		if got := remote.verify(ctx, "app", pid, tc.epoch, tc.tp); got != tc.want {
			t.Errorf("remote %v epoch %d: %v, want %v", tc.tp, tc.epoch, kerr.ErrorForCode(got), kerr.ErrorForCode(tc.want))
		}
	}
	if calls != 3 {
		t.Errorf("%d calls over the RPC mux, want 3", calls)
	}
	remote.call = func(context.Context, string, string, []byte) ([]byte, error) { return nil, errors.New("unreachable") }
	got := remote.verify(ctx, "app", pid, epoch, tp0)
	wantCode(t, verificationError(got, 11), kerr.NotEnoughReplicas)
}

// TestVerificationErrors: the coordinator's answers as produce errors,
// by Produce version.
func TestVerificationErrors(t *testing.T) {
	for _, tc := range []struct {
		code    int16
		version int16
		want    *kerr.Error
	}{
		{kerr.TransactionAbortable.Code, 3, kerr.InvalidTxnState},
		{kerr.TransactionAbortable.Code, 10, kerr.InvalidTxnState},
		{kerr.TransactionAbortable.Code, 11, kerr.TransactionAbortable},
		{kerr.ProducerFenced.Code, 11, kerr.InvalidProducerEpoch},
		{kerr.ClusterAuthorizationFailed.Code, 11, kerr.InvalidTxnState},
		{kerr.ConcurrentTransactions.Code, 11, kerr.NotEnoughReplicas},
		{kerr.NotCoordinator.Code, 9, kerr.NotEnoughReplicas},
		{kerr.CoordinatorNotAvailable.Code, 9, kerr.NotEnoughReplicas},
		{kerr.CoordinatorLoadInProgress.Code, 9, kerr.NotEnoughReplicas},
		{kerr.NetworkException.Code, 9, kerr.NotEnoughReplicas},
		{kerr.InvalidProducerIDMapping.Code, 9, kerr.InvalidProducerIDMapping},
	} {
		if err := verificationError(tc.code, tc.version); !errors.Is(err, tc.want) {
			t.Errorf("%v at v%d: %v, want %v", kerr.ErrorForCode(tc.code), tc.version, err, tc.want)
		}
	}
	if err := verificationError(0, 11); err != nil {
		t.Errorf("verified: %v", err)
	}
}

// TestVerificationGuardPerProducer: verifications of one producer under
// way together are all voided by a marker of that producer, and only by
// one of it: another producer's verification goes on.
func TestVerificationGuardPerProducer(t *testing.T) {
	b, _, _, _ := openTxnBroker(t)
	p := b.Topic("t").Partition(0)
	ctx := context.Background()
	type outcome struct {
		pid int64
		err error
	}
	out := make(chan outcome, 3)
	started := make(chan struct{}, 3)
	release := make(chan struct{})
	verify := func(context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	}
	for i, pid := range []int64{100, 100, 200} {
		go func() {
			pe, asked, err := p.proposeTxnBatch(ctx, pid, 0, encodeAppend(0, txnBatch(pid, 0, int32(i)*2, 2)), verify)
			if err == nil {
				_, err = pe.wait(ctx)
			}
			if !asked {
				err = errors.New("not verified")
			}
			out <- outcome{pid, err}
		}()
	}
	for range 3 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("verifications did not start")
		}
	}
	if _, err := p.proposeMarker(ctx, 100, encodeMarker(1, 100, 0, false, 0)); err != nil {
		t.Fatal(err)
	}
	close(release)
	for range 3 {
		var o outcome
		select {
		case o = <-out:
		case <-time.After(30 * time.Second):
			t.Fatal("no outcome")
		}
		switch {
		case o.pid == 100 && !errors.Is(o.err, errVerificationGuardLost):
			t.Errorf("producer 100 after its marker: %v, want the lost guard", o.err)
		case o.pid == 200 && o.err != nil:
			t.Errorf("producer 200: %v", o.err)
		}
	}
	p.txnGate.mu.Lock()
	left := len(p.txnGate.verifying) + len(p.txnGate.gen)
	p.txnGate.mu.Unlock()
	if left != 0 {
		t.Errorf("%d guard entries left after every verification ended", left)
	}
}
