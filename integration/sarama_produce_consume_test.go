package integration

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// sarama producing and consuming: SyncProducer round trips with every codec
// (optionally idempotent), read back with partition consumers and checked
// record by record.

const (
	saramaPartitions = 3
	saramaRecords    = 2000
	saramaWait       = 60 * time.Second // bound on producing or consuming one topic
)

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
