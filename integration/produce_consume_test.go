package integration

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProduceConsume100k produces 100k records over 3 partitions with the
// default franz-go producer (acks=all, idempotent) and reads every record back
// in order per partition, at contiguous offsets starting at 0.
func TestProduceConsume100k(t *testing.T) {
	b := StartBroker(t)
	const (
		topic        = "pc-100k"
		partitions   = 3
		perPartition = 100_000 / partitions // 33,333 each, 99,999 in all
	)
	total := partitions * perPartition
	CreateTopic(t, b, topic, partitions, nil)

	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	start := time.Now()
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 90*time.Second)
	t.Logf("produced %d records in %v", total, time.Since(start).Round(time.Millisecond))

	hw := endOffsets(t, b.Admin(t), topic)
	for p := range int32(partitions) {
		if hw[p] != perPartition {
			t.Errorf("partition %d: high watermark %d, want %d", p, hw[p], perPartition)
		}
	}

	start = time.Now()
	got := consumeN(t, b, total, 90*time.Second, []string{topic})
	t.Logf("consumed %d records in %v", len(got), time.Since(start).Round(time.Millisecond))
	verifySeq(t, got, partitions, perPartition, true)
	// The first record of every partition must be at offset 0.
	firsts := map[int32]int64{}
	for _, r := range got {
		if _, ok := firsts[r.Partition]; !ok {
			firsts[r.Partition] = r.Offset
		}
	}
	for p := range int32(partitions) {
		if firsts[p] != 0 {
			t.Errorf("partition %d: first consumed offset %d, want 0", p, firsts[p])
		}
	}
}

// TestProduceAcks1 produces with acks=1 (non-idempotent) and reads all back
// in order.
func TestProduceAcks1(t *testing.T) {
	b := StartBroker(t)
	const (
		topic        = "pc-acks1"
		partitions   = 3
		perPartition = 3000
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.MaxProduceRequestsInflightPerBroker(1),
	)
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 60*time.Second)
	got := consumeN(t, b, partitions*perPartition, 60*time.Second, []string{topic})
	verifySeq(t, got, partitions, perPartition, true)
}

// TestProduceAcks0 produces with acks=0: the broker sends no response, and
// every record must still arrive exactly once.
func TestProduceAcks0(t *testing.T) {
	b := StartBroker(t)
	const (
		topic        = "pc-acks0"
		partitions   = 3
		perPartition = 3000
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.NoAck()),
		kgo.DisableIdempotentWrite(),
	)
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 60*time.Second)
	// acks=0 gives no completion signal: consumeN waits (bounded) for all.
	got := consumeN(t, b, partitions*perPartition, 60*time.Second, []string{topic})
	verifySeq(t, got, partitions, perPartition, false)

	// The connection used with acks=0 must still work for more produces
	// (the broker must not have written unsolicited responses that desync
	// the client, nor closed it).
	produceAll(t, prod, []*kgo.Record{{Topic: topic, Partition: 0, Key: []byte("p0"), Value: []byte("after")}}, 30*time.Second)
	hwDeadline := time.Now().Add(15 * time.Second)
	adm := b.Admin(t)
	for {
		hw := endOffsets(t, adm, topic)
		if hw[0] == perPartition+1 {
			break
		}
		if time.Now().After(hwDeadline) {
			t.Fatalf("partition 0 high watermark %d after one more acks=0 record, want %d", hw[0], perPartition+1)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
