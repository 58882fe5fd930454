package integration

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// sarama's ClusterAdmin against weir: DescribeCluster and the topic,
// partition, record-deletion and config calls sarama users rely on.

// saramaAdmin exercises sarama's ClusterAdmin: CreateTopic, ListTopics,
// DescribeTopics, DescribeConfig, CreatePartitions, DeleteRecords,
// DescribeCluster, DeleteTopic.
func saramaAdmin(t *testing.T, b *Broker, v sarama.KafkaVersion, topic string) {
	cfg := saramaConfig(t, v)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	client, err := sarama.NewClient([]string{b.KafkaAddr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewClient (version %s): %v", v, err)
	}
	defer client.Close()
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatalf("sarama.NewClusterAdminFromClient: %v", err)
	}
	// Closing the admin closes the client too; both are idempotent enough
	// for sarama to report ErrClosedClient on the second, which we ignore.
	defer adm.Close()

	// CreateTopic with a topic config.
	retention := "3600000"
	err = adm.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions:     3,
		ReplicationFactor: 1,
		ConfigEntries:     map[string]*string{"retention.ms": &retention},
	}, false)
	if err != nil {
		t.Fatalf("CreateTopic(%s): %v", topic, err)
	}
	// Creating it again is TOPIC_ALREADY_EXISTS.
	err = adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("CreateTopic(%s) again: %v, want %v", topic, err, sarama.ErrTopicAlreadyExists)
	}
	// Replication factor 2 on one node is INVALID_REPLICATION_FACTOR.
	err = adm.CreateTopic(topic+"-rf2", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 2}, false)
	if !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
		t.Errorf("CreateTopic(%s-rf2, RF 2): %v, want %v", topic, err, sarama.ErrInvalidReplicationFactor)
	}
	waitTopicReady(t, b, topic, 3)

	// ListTopics: partitions, replication factor and the topic config.
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	td, ok := topics[topic]
	if !ok {
		t.Fatalf("ListTopics: %s missing from %d topics", topic, len(topics))
	}
	if td.NumPartitions != 3 || td.ReplicationFactor != 1 {
		t.Errorf("ListTopics %s: %d partitions, replication factor %d, want 3 and 1", topic, td.NumPartitions, td.ReplicationFactor)
	}
	if got := td.ConfigEntries["retention.ms"]; got == nil || *got != retention {
		t.Errorf("ListTopics %s: retention.ms = %v, want %s", topic, derefStr(got), retention)
	}

	// DescribeTopics: every partition led by this node.
	md, err := adm.DescribeTopics([]string{topic})
	if err != nil {
		t.Fatalf("DescribeTopics: %v", err)
	}
	if len(md) != 1 || md[0].Name != topic || !errors.Is(md[0].Err, sarama.ErrNoError) {
		t.Fatalf("DescribeTopics(%s): %+v", topic, md)
	}
	if len(md[0].Partitions) != 3 {
		t.Fatalf("DescribeTopics(%s): %d partitions, want 3", topic, len(md[0].Partitions))
	}
	for _, pm := range md[0].Partitions {
		if !errors.Is(pm.Err, sarama.ErrNoError) || pm.Leader != int32(b.NodeID) ||
			!slices.Equal(pm.Replicas, []int32{int32(b.NodeID)}) || !slices.Equal(pm.Isr, []int32{int32(b.NodeID)}) {
			t.Errorf("DescribeTopics(%s) partition %d: err %v leader %d replicas %v isr %v, want leader/replica/isr %d",
				topic, pm.ID, pm.Err, pm.Leader, pm.Replicas, pm.Isr, b.NodeID)
		}
	}
	// An unknown topic is reported, not hidden.
	md, err = adm.DescribeTopics([]string{topic + "-missing"})
	if err != nil {
		t.Fatalf("DescribeTopics(missing): %v", err)
	}
	if len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("DescribeTopics(missing): %+v, want one topic with %v", md, sarama.ErrUnknownTopicOrPartition)
	}

	// DescribeConfig: the set value is a dynamic topic config, others are
	// defaults.
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("DescribeConfig(topic %s): %v", topic, err)
	}
	byName := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	if e, ok := byName["retention.ms"]; !ok || e.Value != retention || e.Default {
		t.Errorf("DescribeConfig %s retention.ms: %+v (present %v), want value %s, not default", topic, e, ok, retention)
	} else if v.IsAtLeast(sarama.V1_1_0_0) && e.Source != sarama.SourceTopic {
		t.Errorf("DescribeConfig %s retention.ms: source %v, want %v", topic, e.Source, sarama.SourceTopic)
	}
	if e, ok := byName["cleanup.policy"]; !ok || e.Value != "delete" {
		t.Errorf("DescribeConfig %s cleanup.policy: %+v (present %v), want delete", topic, e, ok)
	}
	// Only the named keys.
	only, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
	if err != nil {
		t.Fatalf("DescribeConfig(topic %s, [retention.ms]): %v", topic, err)
	}
	if len(only) != 1 || only[0].Name != "retention.ms" || only[0].Value != retention {
		t.Errorf("DescribeConfig(topic %s, [retention.ms]) = %+v", topic, only)
	}

	// CreatePartitions 3 -> 4.
	if err := adm.CreatePartitions(topic, 4, nil, false); err != nil {
		t.Fatalf("CreatePartitions(%s, 4): %v", topic, err)
	}
	waitTopicReady(t, b, topic, 4)

	// Produce 10 records to partition 0, DeleteRecords before offset 4.
	prod, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		t.Fatalf("NewSyncProducerFromClient: %v", err)
	}
	for i := range 10 {
		_, off, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("r%d", i))})
		if err != nil || off != int64(i) {
			t.Fatalf("SendMessage %d: offset %d, %v", i, off, err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatalf("closing producer: %v", err)
	}
	if err := adm.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		t.Fatalf("DeleteRecords(%s, {0: 4}): %v", topic, err)
	}
	if err := client.RefreshMetadata(topic); err != nil {
		t.Fatalf("RefreshMetadata: %v", err)
	}
	if lo, err := client.GetOffset(topic, 0, sarama.OffsetOldest); err != nil || lo != 4 {
		t.Errorf("after DeleteRecords: oldest offset of %s/0 = %d (%v), want 4", topic, lo, err)
	}
	if hi, err := client.GetOffset(topic, 0, sarama.OffsetNewest); err != nil || hi != 10 {
		t.Errorf("after DeleteRecords: newest offset of %s/0 = %d (%v), want 10", topic, hi, err)
	}
	// A consumer from OffsetOldest starts at the new log start.
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("NewConsumerFromClient: %v", err)
	}
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("ConsumePartition after DeleteRecords: %v", err)
	}
	select {
	case m := <-pc.Messages():
		if m.Offset != 4 || string(m.Value) != "r4" {
			t.Errorf("first record after DeleteRecords: offset %d value %q, want 4 r4", m.Offset, m.Value)
		}
	case cerr := <-pc.Errors():
		t.Errorf("consuming after DeleteRecords: %v", cerr)
	case <-time.After(15 * time.Second):
		t.Errorf("no record after DeleteRecords within 15s")
	}
	pc.AsyncClose()
	_ = cons.Close()

	// DescribeCluster: one broker, this node, which is the controller.
	brokers, controller, err := adm.DescribeCluster()
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if len(brokers) != 1 || brokers[0].ID() != int32(b.NodeID) || brokers[0].Addr() != b.KafkaAddr || controller != int32(b.NodeID) {
		var ids []string
		for _, br := range brokers {
			ids = append(ids, fmt.Sprintf("%d@%s", br.ID(), br.Addr()))
		}
		t.Errorf("DescribeCluster: brokers %v controller %d, want [%d@%s] controller %d", ids, controller, b.NodeID, b.KafkaAddr, b.NodeID)
	}

	// DeleteTopic, then it is gone (bounded wait), and deleting again is
	// UNKNOWN_TOPIC_OR_PARTITION.
	if err := adm.DeleteTopic(topic); err != nil {
		t.Fatalf("DeleteTopic(%s): %v", topic, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		topics, err := adm.ListTopics()
		if err != nil {
			t.Fatalf("ListTopics after DeleteTopic: %v", err)
		}
		if _, ok := topics[topic]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed 10s after DeleteTopic", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := adm.DeleteTopic(topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("DeleteTopic(%s) again: %v, want %v", topic, err, sarama.ErrUnknownTopicOrPartition)
	}
}
