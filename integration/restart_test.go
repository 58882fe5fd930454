package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// TestRestartKeepsState: topic configs, added partitions, the log start
// offset moved by DeleteRecords and idempotent producer state all survive a
// restart.
func TestRestartKeepsState(t *testing.T) {
	b := StartBroker(t)
	vers := apiVersions(t, b.KafkaAddr)
	const topic = "restart-state"
	ret := "3600000"
	CreateTopic(t, b, topic, 1, map[string]*string{"retention.ms": &ret})
	adm := b.Admin(t)
	if resp, err := adm.CreatePartitions(ctxTimeout(t, requestTimeout), 1, topic); err != nil || resp[topic].Err != nil {
		t.Fatalf("CreatePartitions: %v %v", err, resp[topic].Err)
	}
	waitTopicReady(t, b, topic, 2)

	rc := dialRaw(t, b.KafkaAddr)
	pv := produceVersion(t, vers)
	pid, epoch := initProducerID(t, rc, vers)
	batches := make([][]byte, 4)
	for i := range batches {
		batches[i] = buildBatch(idemOpts(pid, epoch, int32(i*10)), idemRecs(i, 10))
		if r := produceRaw(t, rc, pv, -1, topic, 0, batches[i]); r.ErrorCode != 0 || r.BaseOffset != int64(i*10) {
			t.Fatalf("batch %d: error %d offset %d", i, r.ErrorCode, r.BaseOffset)
		}
	}
	dr, err := adm.DeleteRecords(ctxTimeout(t, requestTimeout), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 15}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dr.Lookup(topic, 0); r.Err != nil || r.LowWatermark != 15 {
		t.Fatalf("DeleteRecords(15): %+v", r)
	}
	rc.Close()

	b.Restart(t)

	waitTopicReady(t, b, topic, 2)
	adm2 := b.Admin(t)
	if so := startOffsets(t, adm2, topic); so[0] != 15 {
		t.Errorf("log start offset after restart: %d, want 15 (DeleteRecords not persisted)", so[0])
	}
	if eo := endOffsets(t, adm2, topic); eo[0] != 40 || eo[1] != 0 {
		t.Errorf("end offsets after restart: %v, want partition 0: 40, partition 1: 0", eo)
	}
	rcs, err := adm2.DescribeTopicConfigs(ctxTimeout(t, requestTimeout), topic)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, _ := rcs.On(topic, nil)
	found := false
	for _, c := range rcfg.Configs {
		if c.Key == "retention.ms" {
			found = true
			if c.MaybeValue() != ret {
				t.Errorf("retention.ms after restart: %q, want %q", c.MaybeValue(), ret)
			}
		}
	}
	if !found {
		t.Errorf("retention.ms missing from DescribeConfigs after restart")
	}

	// The producer's last batch retried after the restart is still
	// recognised as a duplicate (state rebuilt from the log), and the next
	// sequence continues.
	rc2 := dialRaw(t, b.KafkaAddr)
	if r := produceRaw(t, rc2, pv, -1, topic, 0, batches[3]); r.ErrorCode != 0 || r.BaseOffset != 30 {
		t.Errorf("retry of the last idempotent batch after restart: error %d base offset %d, want 0 and 30 (original offset)", r.ErrorCode, r.BaseOffset)
	}
	if eo := endOffsets(t, b.Admin(t), topic); eo[0] != 40 {
		t.Errorf("end offset after retrying the last batch post-restart: %d, want 40 (duplicate appended)", eo[0])
	}
	next := buildBatch(idemOpts(pid, epoch, 40), idemRecs(4, 10))
	if r := produceRaw(t, rc2, pv, -1, topic, 0, next); r.ErrorCode != 0 || r.BaseOffset != 40 {
		t.Errorf("next idempotent batch (seq 40) after restart: error %d base offset %d, want 0 and 40", r.ErrorCode, r.BaseOffset)
	}
	gap := buildBatch(idemOpts(pid, epoch, 70), idemRecs(7, 10))
	if r := produceRaw(t, rc2, pv, -1, topic, 0, gap); r.ErrorCode != errOutOfOrderSequence {
		t.Errorf("sequence gap after restart (seq 70, expected 50): error %d base offset %d, want %d", r.ErrorCode, r.BaseOffset, errOutOfOrderSequence)
	}
}
