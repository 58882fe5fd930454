package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/log/logtest"
)

// txnProduce is a Produce request at version v carrying one
// transactional batch of one record.
func txnProduce(v int16, topic string, partition int32, id string, pid int64, epoch int16, seq int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = v, -1, 10000, kmsg.StringPtr(id)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = logtest.Batch{Records: 1, ValueSize: 10, Idempotent: true, Transactional: true,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}.Encode()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceCode sends req to broker b at its version and returns the
// partition's error code.
func produceCode(t *testing.T, b *Broker, req *kmsg.ProduceRequest) int16 {
	t.Helper()
	raw := dialRaw(t, b.KafkaAddr)
	defer raw.Close()
	resp := raw.Do(req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response: %+v", resp)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestTransactionsProduceVerification (KIP-890 part 1): on three brokers,
// a transactional batch carrying a real producer id and epoch from
// InitProducerId, sent to a partition the producer never added with
// AddPartitionsToTxn, is refused by the partition's leader once it has
// asked the coordinator (in process or on another broker, whichever
// leads the id's __transaction_state partition): INVALID_TXN_STATE at
// Produce v10, TRANSACTION_ABORTABLE at v11, and nothing is appended, so
// no transaction hangs there. After AddPartitionsToTxn the same batch is
// taken. kgo's transactional flow works with verification on.
func TestTransactionsProduceVerification(t *testing.T) {
	bs := StartCluster(t, 3, WithSet("transaction_state_log_num_partitions", "4"))
	const topic, id = "txn-verify", "verify-app"
	createReplicatedTopic(t, bs[0], topic, 3, 3, nil)
	parts := waitReplicatedLeaders(t, bs, bs, topic, 3, 3, leaderTimeout, nil)
	seeds := kafkaAddrs(bs)
	cl := bs[0].Client(t, kgo.SeedBrokers(seeds...))
	ctx, cancel := context.WithTimeout(context.Background(), 3*clusterTimeout)
	defer cancel()

	var pid int64
	var epoch int16
	pollUntil(t, clusterTimeout, "InitProducerId for "+id, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return nil
	})

	for p := range int32(3) {
		leader := brokerByID(t, bs, parts[p].Leader)
		if code := produceCode(t, leader, txnProduce(10, topic, p, id, pid, epoch, 0)); code != kerr.InvalidTxnState.Code {
			t.Errorf("partition %d (leader %d), Produce v10 without AddPartitionsToTxn: %v, want INVALID_TXN_STATE", p, leader.NodeID, kerr.ErrorForCode(code))
		}
		if code := produceCode(t, leader, txnProduce(11, topic, p, id, pid, epoch, 0)); code != kerr.TransactionAbortable.Code {
			t.Errorf("partition %d (leader %d), Produce v11 without AddPartitionsToTxn: %v, want TRANSACTION_ABORTABLE", p, leader.NodeID, kerr.ErrorForCode(code))
		}
		if code := produceCode(t, leader, txnProduce(11, topic, p, id, pid, epoch+1, 0)); code != kerr.InvalidProducerEpoch.Code {
			t.Errorf("partition %d (leader %d), Produce at an epoch the coordinator does not have: %v, want INVALID_PRODUCER_EPOCH", p, leader.NodeID, kerr.ErrorForCode(code))
		}
	}
	ends, err := kadmClient(t, bs).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != 0 {
			t.Errorf("partition %d: end offset %d (%v) after refused batches, want 0", o.Partition, o.Offset, o.Err)
		}
	})

	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 3
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	add.Topics = append(add.Topics, at)
	pollUntil(t, clusterTimeout, "AddPartitionsToTxn", func() error {
		resp, err := add.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	leader := brokerByID(t, bs, parts[0].Leader)
	if code := produceCode(t, leader, txnProduce(11, topic, 0, id, pid, epoch, 0)); code != 0 {
		t.Fatalf("partition 0 after AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := produceCode(t, leader, txnProduce(11, topic, 0, id, pid, epoch, 1)); code != 0 {
		t.Fatalf("partition 0, second batch of the transaction: %v", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, epoch, true
	pollUntil(t, clusterTimeout, "EndTxn", func() error {
		resp, err := end.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})

	prod := bs[1].Client(t, kgo.SeedBrokers(seeds...), kgo.TransactionalID("verify-kgo"), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second))
	for round := range 2 {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "r%d-%d", round, i)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("round %d: produce %d: %v", round, i, err)
			}
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
	}
	// Nothing hangs: read_committed reads every committed record.
	if got := consumeValues(t, bs[2], seeds, topic, kgo.ReadCommitted(), 62, clusterTimeout); len(got) != 62 {
		t.Fatalf("read_committed: %d records, want 62", len(got))
	}
}
