package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

func TestRequestPool(t *testing.T) {
	p := newRequestPool(100)
	ctx := context.Background()
	if err := p.acquire(ctx, 101); !errors.Is(err, errRequestLargerThanPool) {
		t.Fatalf("larger than the pool: %v", err)
	}
	if err := p.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// 50 must wait; 10 would fit but waits behind it (arrival order).
	big, small := make(chan error, 1), make(chan error, 1)
	go func() { big <- p.acquire(ctx, 50) }()
	waitWaiters(t, p, 1)
	go func() { small <- p.acquire(ctx, 10) }()
	waitWaiters(t, p, 2)
	select {
	case err := <-small:
		t.Fatalf("a later small request overtook a waiting large one: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.release(60)
	for _, ch := range []chan error{big, small} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not granted after release")
		}
	}
	if _, used, waits := p.stats(); used != 60 || waits != 2 {
		t.Fatalf("used %d waits %d, want 60 and 2", used, waits)
	}

	// A waiter whose context ends leaves, and lets the next one in.
	cctx, cancel := context.WithCancel(ctx)
	gone, next := make(chan error, 1), make(chan error, 1)
	go func() { gone <- p.acquire(cctx, 90) }()
	waitWaiters(t, p, 1)
	go func() { next <- p.acquire(ctx, 40) }()
	waitWaiters(t, p, 2)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	select {
	case err := <-next:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind a cancelled one was not let in")
	}
	p.release(60)
	p.release(40)
	if _, used, _ := p.stats(); used != 0 {
		t.Fatalf("used %d after every release", used)
	}
}

func waitWaiters(t *testing.T, p *requestPool, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		got := len(p.waiters)
		p.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("never %d waiters", n)
}

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
		if _, used, _ := s.pool.stats(); used == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d bytes still reserved", used)
		}
	}
}
