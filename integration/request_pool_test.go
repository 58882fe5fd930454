package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRequestLargerThanPool: with queued_max_request_bytes at 1 MiB, a
// producer sending a 2 MiB request is refused (its connection closed, the
// produce fails) and the broker stays healthy: other clients produce and
// consume, and no request memory stays reserved.
func TestRequestLargerThanPool(t *testing.T) {
	b := StartBroker(t, WithSet("queued_max_request_bytes", "1048576"))
	const topic = "pool"
	createTopicVia(t, b, topic, 1)

	big := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(4<<20), kgo.BrokerMaxWriteBytes(8<<20),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.RecordRetries(2),
		// An idempotent producer may not fail a record it may have sent
		// (its sequence numbers would break), so it would retry forever.
		kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := make([]byte, 2<<20)
	rand.Read(value) // incompressible: the request stays 2 MiB
	if err := big.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err == nil {
		t.Fatal("a 2 MiB request was accepted with a 1 MiB request pool")
	} else {
		t.Logf("refused: %v", err)
	}

	cl := b.Client(t, kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refused request: %v", err)
	}
	recs := consumeN(t, b, 1, 30*time.Second, []string{topic})
	if string(recs[0].Value) != "small" {
		t.Fatalf("consumed %q", recs[0].Value)
	}
	pollUntil(t, 10*time.Second, "no request memory reserved", func() error {
		s := scrapeMetrics(t, b)
		if v, ok := s.value("weir_request_memory_in_use_bytes"); !ok || v != 0 {
			return fmt.Errorf("weir_request_memory_in_use_bytes %v (present %v)", v, ok)
		}
		if v, _ := s.value("weir_request_memory_pool_bytes"); v != 1<<20 {
			return fmt.Errorf("weir_request_memory_pool_bytes %v", v)
		}
		return nil
	})
}
