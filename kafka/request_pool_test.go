package kafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// TestRequestLargerThanPool: a request larger than the request memory pool
// (but within max_request_bytes) closes its connection without waiting
// forever; the broker serves other connections, and every reserved byte
// comes back.
func TestRequestLargerThanPool(t *testing.T) {
	_, b, _ := startServer(t)
	s, addr := serveKafka(t, b, Options{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 64 << 10, AdvertisedAddr: "127.0.0.1:9092"})
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "pool", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	big := dial(t, addr)
	big.send(produceRequest(9, -1, "pool", logtest.Batch{Records: 1, ValueSize: 100 << 10}.Encode()))
	big.expectClosed()

	c := dial(t, addr)
	resp := c.roundTrip(produceRequest(9, -1, "pool", logtest.Batch{Records: 1, ValueSize: 10}.Encode())).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce after the refused request: error %d", code)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if used := s.pool.Stats().Used; used == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved", used)
		}
	}
}
