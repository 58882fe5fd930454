package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestartGraceful: everything acknowledged before a SIGTERM restart is
// readable afterwards, offsets continue where they stopped, and the topic
// survives with its partition count.
func TestRestartGraceful(t *testing.T) {
	testRestart(t, func(b *Broker) { b.Restart(t) })
}

// TestRestartAfterKill: a SIGKILL of the process (not of the machine) loses
// nothing that was acknowledged with acks=all: the data is in the page cache.
func TestRestartAfterKill(t *testing.T) {
	testRestart(t, func(b *Broker) {
		b.Kill(t)
		b.Start(t)
	})
}

func testRestart(t *testing.T, bounce func(*Broker)) {
	b := StartBroker(t)
	const (
		topic        = "restart"
		partitions   = 2
		perPartition = 5000
	)
	CreateTopic(t, b, topic, partitions, nil)
	prod := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	produceAll(t, prod, seqRecords(topic, partitions, perPartition), 60*time.Second)
	prod.Close()

	bounce(b)

	got := consumeN(t, b, partitions*perPartition, 60*time.Second, []string{topic})
	verifySeq(t, got, partitions, perPartition, true)
	hw := endOffsets(t, b.Admin(t), topic)
	if len(hw) != partitions {
		t.Fatalf("after restart the topic lists %d partitions, want %d", len(hw), partitions)
	}
	for p := range int32(partitions) {
		if hw[p] != perPartition {
			t.Errorf("after restart partition %d high watermark %d, want %d", p, hw[p], perPartition)
		}
	}

	// New records continue at the old end offset, with a new producer
	// (new producer ID) on the restarted broker.
	prod2 := b.Client(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	var more []*kgo.Record
	for p := range int32(partitions) {
		more = append(more, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d", p), Value: fmt.Appendf(nil, "p%d-%08d", p, perPartition)})
	}
	produceAll(t, prod2, more, 30*time.Second)
	for _, r := range more {
		if r.Offset != perPartition {
			t.Errorf("first record after restart on partition %d got offset %d, want %d", r.Partition, r.Offset, perPartition)
		}
	}
	got = consumeN(t, b, partitions*(perPartition+1), 60*time.Second, []string{topic})
	verifySeq(t, got, partitions, perPartition+1, true)
}

// TestRestartEmptyTopic: a broker restarted with no topics, and again
// with a topic that has no records, comes back ready with that state.
func TestRestartEmptyTopic(t *testing.T) {
	b := StartBroker(t)
	b.Restart(t)
	CreateTopic(t, b, "restart-empty", 4, nil)
	b.Restart(t)
	waitTopicReady(t, b, "restart-empty", 4)
	hw := endOffsets(t, b.Admin(t), "restart-empty")
	for p := range int32(4) {
		if off, ok := hw[p]; !ok || off != 0 {
			t.Errorf("empty topic after restart: partition %d end offset %d (present %v), want 0", p, off, ok)
		}
	}
}
