package integration

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaCompat drives weir with IBM/sarama: sync producers with every
// codec (2,000 records over 3 partitions each) read back record by record
// with partition consumers (sarama has no group-less alternative, and weir
// has no groups yet), the ClusterAdmin calls sarama users rely on, and the
// idempotent producer.
//
// Each client runs at several sarama Versions, which pick the protocol
// versions sarama speaks:
//   - default (sarama.DefaultVersion, 2.8): Produce v9 and Fetch v12
//     (flexible, sessionless, no topic IDs), Metadata v11.
//   - 2.1: Produce v7, Fetch v10 (non-flexible), the oldest versions that
//     may carry zstd.
//   - 0.11: Produce v3, Fetch v5, the oldest record-batch (magic v2)
//     versions; no zstd; InitProducerId v0. Its admin calls run at 1.1
//     (see below).
//
// sarama sends ApiVersions at every Version but only lowers what the
// Version picks to the broker's maximum, never raises it.
func TestSaramaCompat(t *testing.T) {
	logs := captureSaramaLog(t)
	b := StartBroker(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- sarama log (last 32 KiB) ---\n%s", logs.tail(32<<10))
		}
	})

	for _, v := range saramaVersions {
		t.Run(v.name, func(t *testing.T) {
			for _, c := range saramaCodecs {
				if c.codec == sarama.CompressionZSTD && !v.version.IsAtLeast(sarama.V2_1_0_0) {
					continue // sarama refuses zstd below 2.1 (Produce v7), as Kafka does
				}
				t.Run(c.name, func(t *testing.T) {
					topic := fmt.Sprintf("sarama-%s-%s", v.name, c.name)
					saramaRoundTrip(t, b, v.version, c.codec, c.attr, topic, false)
				})
			}
			av, aname := v.version, v.name
			if !av.IsAtLeast(sarama.V1_1_0_0) {
				// Below 1.1 sarama's ListTopics and DescribeConfig send
				// DescribeConfigs v0, which Kafka 4 removed (KIP-896) and
				// weir, like Kafka 4, does not serve: its admin runs at
				// 1.1, the oldest version whose admin requests are all
				// inside Kafka 4's ranges.
				av, aname = sarama.V1_1_0_0, "v1.1"
			}
			t.Run("admin-"+aname, func(t *testing.T) { saramaAdmin(t, b, av, "sarama-admin-"+v.name) })
			t.Run("idempotent", func(t *testing.T) {
				codec, attr := sarama.CompressionLZ4, int8(3)
				if v.version.IsAtLeast(sarama.V2_1_0_0) {
					codec, attr = sarama.CompressionZSTD, 4
				}
				saramaRoundTrip(t, b, v.version, codec, attr, "sarama-idem-"+v.name, true)
			})
		})
	}
}

var saramaVersions = []struct {
	name    string
	version sarama.KafkaVersion
}{
	{"default", sarama.DefaultVersion},
	{"v2.1", sarama.V2_1_0_0},
	{"v0.11", sarama.V0_11_0_0},
}

var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
	attr  int8 // stored batch attributes & 7
}{
	{"none", sarama.CompressionNone, 0},
	{"gzip", sarama.CompressionGZIP, 1},
	{"snappy", sarama.CompressionSnappy, 2},
	{"lz4", sarama.CompressionLZ4, 3},
	{"zstd", sarama.CompressionZSTD, 4},
}

const (
	saramaPartitions = 3
	saramaRecords    = 2000
	saramaWait       = 60 * time.Second // bound on producing or consuming one topic
)

// saramaConfig is a sarama config with every network wait bounded well
// below the test's own bounds.
func saramaConfig(t testing.TB, v sarama.KafkaVersion) *sarama.Config {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.ClientID = "weir-sarama-compat"
	cfg.Version = v
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Net.ReadTimeout = 15 * time.Second
	cfg.Net.WriteTimeout = 15 * time.Second
	cfg.Metadata.Retry.Max = 5
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Timeout = 20 * time.Second
	cfg.Admin.Timeout = 10 * time.Second
	cfg.Admin.Retry.Max = 3
	cfg.Producer.Timeout = 10 * time.Second
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.MaxWaitTime = 500 * time.Millisecond
	return cfg
}

// saramaValue is record i of a partition: recognisable and compressible.
func saramaValue(topic string, p int32, i int) []byte {
	v := fmt.Appendf(nil, "%s|p%d|%08d|", topic, p, i)
	return append(v, bytes.Repeat([]byte("sarama-on-weir-"), 8)...)
}

// saramaRoundTrip produces saramaRecords records to a new 3-partition topic
// with a SyncProducer (acks=all), checks every assigned partition and
// offset, reads everything back with sarama partition consumers from
// OffsetOldest, then checks with a franz-go consumer that the stored
// batches carry the codec (and, if idempotent, a producer ID).
func saramaRoundTrip(t *testing.T, b *Broker, v sarama.KafkaVersion, codec sarama.CompressionCodec, attr int8, topic string, idempotent bool) {
	CreateTopic(t, b, topic, saramaPartitions, nil)

	cfg := saramaConfig(t, v)
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Compression = codec
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = 100 // several batches per partition
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	if idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Retry.Max = 5
	}

	prod, err := sarama.NewSyncProducer([]string{b.KafkaAddr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer (version %s, %s): %v", v, codec, err)
	}
	prodClosed := false
	closeProd := func() {
		if !prodClosed {
			prodClosed = true
			if err := prod.Close(); err != nil {
				t.Errorf("closing the sync producer: %v", err)
			}
		}
	}
	defer closeProd()

	// Timestamps are whole milliseconds so that they survive the trip.
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	msgs := make([]*sarama.ProducerMessage, 0, saramaRecords)
	perPart := make([]int, saramaPartitions)
	for n := range saramaRecords {
		p := int32(n % saramaPartitions)
		i := perPart[p]
		perPart[p]++
		msgs = append(msgs, &sarama.ProducerMessage{
			Topic:     topic,
			Partition: p,
			Key:       sarama.StringEncoder(fmt.Sprintf("p%d", p)),
			Value:     sarama.ByteEncoder(saramaValue(topic, p, i)),
			Headers:   []sarama.RecordHeader{{Key: []byte("seq"), Value: []byte(strconv.Itoa(i))}},
			Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Metadata:  i,
		})
	}

	start := time.Now()
	sendErr := make(chan error, 1)
	go func() { sendErr <- prod.SendMessages(msgs) }()
	select {
	case err := <-sendErr:
		if err != nil {
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) && len(perrs) > 0 {
				t.Fatalf("SendMessages: %d of %d records failed; first: partition %d: %v", len(perrs), len(msgs), perrs[0].Msg.Partition, perrs[0].Err)
			}
			t.Fatalf("SendMessages: %v", err)
		}
	case <-time.After(saramaWait):
		t.Fatalf("SendMessages of %d records did not return within %v", len(msgs), saramaWait)
	}
	t.Logf("produced %d records (version %s, %s, idempotent=%v) in %v", len(msgs), v, codec, idempotent, time.Since(start).Round(time.Millisecond))
	closeProd()

	// The producer must report the partition and offset of every record:
	// partition p's record i is at offset i (fresh topic, in order).
	for _, m := range msgs {
		i := m.Metadata.(int)
		if m.Offset != int64(i) {
			t.Fatalf("producer reported partition %d record %d at offset %d, want %d", m.Partition, i, m.Offset, i)
		}
	}

	saramaConsumeAll(t, b, v, topic, perPart, base)

	// The stored batches carry sarama's codec (compression.type defaults
	// to "producer") and, for the idempotent producer, its producer ID.
	got := consumeN(t, b, saramaRecords, saramaWait, []string{topic})
	for _, r := range got {
		if a := int8(r.Attrs.CompressionType()); a != attr {
			t.Fatalf("%s/%d offset %d stored with codec %d, want %d (%s)", topic, r.Partition, r.Offset, a, attr, codec)
		}
		if idempotent && r.ProducerID < 0 {
			t.Fatalf("%s/%d offset %d: producer ID %d, want the idempotent producer's", topic, r.Partition, r.Offset, r.ProducerID)
		}
		if !idempotent && r.ProducerID != -1 {
			t.Fatalf("%s/%d offset %d: producer ID %d, want -1", topic, r.Partition, r.Offset, r.ProducerID)
		}
	}
}

// saramaConsumeAll reads every partition of topic from OffsetOldest with
// sarama.NewConsumer + ConsumePartition and verifies the records one by
// one: offset, key, value, header, timestamp, order; then that nothing
// more arrives.
func saramaConsumeAll(t *testing.T, b *Broker, v sarama.KafkaVersion, topic string, perPart []int, base time.Time) {
	t.Helper()
	cfg := saramaConfig(t, v)
	cons, err := sarama.NewConsumer([]string{b.KafkaAddr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumer (version %s): %v", v, err)
	}
	defer func() {
		if err := cons.Close(); err != nil {
			t.Errorf("closing the consumer: %v", err)
		}
	}()
	parts, err := cons.Partitions(topic)
	if err != nil {
		t.Fatalf("consumer.Partitions(%s): %v", topic, err)
	}
	if !slices.Equal(parts, []int32{0, 1, 2}) {
		t.Fatalf("consumer.Partitions(%s) = %v, want [0 1 2]", topic, parts)
	}

	start := time.Now()
	pcs := make([]sarama.PartitionConsumer, saramaPartitions)
	for p := range int32(saramaPartitions) {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("ConsumePartition(%s, %d, OffsetOldest): %v", topic, p, err)
		}
		pcs[p] = pc
	}
	deadline := time.NewTimer(saramaWait)
	defer deadline.Stop()
	for p, pc := range pcs {
		p := int32(p)
		want := perPart[p]
		for i := 0; i < want; {
			select {
			case m := <-pc.Messages():
				saramaCheckMessage(t, m, topic, p, i, base)
				i++
			case cerr := <-pc.Errors():
				t.Fatalf("partition consumer %s/%d after %d of %d records: %v", topic, p, i, want, cerr)
			case <-deadline.C:
				t.Fatalf("partition consumer %s/%d: %d of %d records within %v", topic, p, i, want, saramaWait)
			}
		}
	}
	// Nothing beyond the produced records.
	time.Sleep(300 * time.Millisecond)
	for p, pc := range pcs {
		select {
		case m := <-pc.Messages():
			t.Fatalf("%s/%d: unexpected extra record at offset %d: %q", topic, p, m.Offset, m.Value)
		case cerr := <-pc.Errors():
			t.Fatalf("partition consumer %s/%d after all records: %v", topic, p, cerr)
		default:
		}
		if hw := pc.HighWaterMarkOffset(); hw != int64(perPart[p]) {
			t.Errorf("%s/%d: consumer's high watermark %d, want %d", topic, p, hw, perPart[p])
		}
	}
	for p, pc := range pcs {
		if err := pc.Close(); err != nil {
			t.Errorf("closing partition consumer %s/%d: %v", topic, p, err)
		}
	}
	t.Logf("consumed %d records (version %s) in %v", saramaRecords, v, time.Since(start).Round(time.Millisecond))
}

func saramaCheckMessage(t *testing.T, m *sarama.ConsumerMessage, topic string, p int32, i int, base time.Time) {
	t.Helper()
	where := fmt.Sprintf("%s/%d record %d", topic, p, i)
	if m.Topic != topic || m.Partition != p {
		t.Fatalf("%s: message from %s/%d", where, m.Topic, m.Partition)
	}
	if m.Offset != int64(i) {
		t.Fatalf("%s: offset %d, want %d (out of order or offsets not contiguous)", where, m.Offset, i)
	}
	if want := fmt.Sprintf("p%d", p); string(m.Key) != want {
		t.Fatalf("%s: key %q, want %q", where, m.Key, want)
	}
	if want := saramaValue(topic, p, i); !bytes.Equal(m.Value, want) {
		t.Fatalf("%s: value %q, want %q", where, m.Value, want)
	}
	if len(m.Headers) != 1 || string(m.Headers[0].Key) != "seq" || string(m.Headers[0].Value) != strconv.Itoa(i) {
		var hs []string
		for _, h := range m.Headers {
			hs = append(hs, fmt.Sprintf("%s=%s", h.Key, h.Value))
		}
		t.Fatalf("%s: headers %v, want [seq=%d]", where, hs, i)
	}
	if want := base.Add(time.Duration(i) * time.Millisecond); !m.Timestamp.Equal(want) {
		t.Fatalf("%s: timestamp %v, want %v", where, m.Timestamp, want)
	}
}

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

// saramaLog collects sarama's global log for the duration of a test.
type saramaLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *saramaLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *saramaLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.buf.Bytes()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return string(s)
}

func captureSaramaLog(t *testing.T) *saramaLog {
	l := &saramaLog{}
	prev := sarama.Logger
	sarama.Logger = log.New(l, "[sarama] ", log.Ltime|log.Lmicroseconds)
	t.Cleanup(func() { sarama.Logger = prev })
	return l
}
