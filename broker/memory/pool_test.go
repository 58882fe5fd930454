package memory

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestAcquireInArrivalOrder(t *testing.T) {
	p := NewPool(100)
	ctx := context.Background()
	if err := p.Acquire(ctx, 101); !errors.Is(err, ErrLargerThanPool) {
		t.Fatalf("larger than the pool: %v", err)
	}
	if err := p.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// 50 must wait; 10 would fit but waits behind it (arrival order).
	big, small := make(chan error, 1), make(chan error, 1)
	go func() { big <- p.Acquire(ctx, 50) }()
	waitWaiters(t, p, 1)
	go func() { small <- p.Acquire(ctx, 10) }()
	waitWaiters(t, p, 2)
	select {
	case err := <-small:
		t.Fatalf("a later small reservation overtook a waiting large one: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := p.TryAcquireUpTo(5); got != 0 {
		t.Fatalf("TryAcquireUpTo overtook waiters: got %d", got)
	}
	p.Release(60)
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
	if s := p.Stats(); s.Used != 60 || s.Waits != 2 || s.Waited <= 0 || s.Peak != 60 {
		t.Fatalf("stats %+v, want 60 used, 2 waits, some time waited, peak 60", s)
	}

	// A waiter whose context ends leaves, and lets the next one in.
	cctx, cancel := context.WithCancel(ctx)
	gone, next := make(chan error, 1), make(chan error, 1)
	go func() { gone <- p.Acquire(cctx, 90) }()
	waitWaiters(t, p, 1)
	go func() { next <- p.Acquire(ctx, 40) }()
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
	p.Release(60)
	p.Release(40)
	if s := p.Stats(); s.Used != 0 || s.Waiting != 0 {
		t.Fatalf("after every release: %+v", s)
	}
}

func TestTryAcquireUpToAndCharge(t *testing.T) {
	p := NewPool(100)
	if got := p.TryAcquireUpTo(70); got != 70 {
		t.Fatalf("got %d of 70 free bytes", got)
	}
	if got := p.TryAcquireUpTo(50); got != 30 {
		t.Fatalf("got %d, want the 30 left", got)
	}
	if got := p.TryAcquireUpTo(1); got != 0 {
		t.Fatalf("got %d from a spent pool", got)
	}
	// Charge goes past the size and counts the overdraft.
	p.Charge(25)
	if s := p.Stats(); s.Used != 125 || s.Overdraw != 25 || s.Trimmed != 2 || s.Peak != 125 {
		t.Fatalf("stats %+v", s)
	}
	// A waiter is let in only once the overdraft is paid back too.
	done := make(chan error, 1)
	go func() { done <- p.Acquire(context.Background(), 20) }()
	waitWaiters(t, p, 1)
	p.Release(25)
	select {
	case err := <-done:
		t.Fatalf("granted while the pool was still spent: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	p.Release(30)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.Release(70)
	p.Release(20)
	if s := p.Stats(); s.Used != 0 {
		t.Fatalf("used %d after every release", s.Used)
	}
}

func TestUnboundedPoolCounts(t *testing.T) {
	p := NewPool(0)
	if got := p.TryAcquireUpTo(1 << 40); got != 1<<40 {
		t.Fatalf("unbounded pool granted %d", got)
	}
	if err := p.Acquire(context.Background(), 1<<50); err != nil {
		t.Fatal(err)
	}
	p.Charge(10)
	if s := p.Stats(); s.Size != 0 || s.Used != 1<<40+1<<50+10 || s.Overdraw != 0 || s.Trimmed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPoolConcurrent: many goroutines reserving and releasing never see
// more than the size in use (bar charges) and end at zero.
func TestPoolConcurrent(t *testing.T) {
	p := NewPool(1000)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				n := int64(1 + (g*31+i*17)%300)
				switch i % 3 {
				case 0:
					if err := p.Acquire(context.Background(), n); err != nil {
						t.Error(err)
						return
					}
				case 1:
					n = p.TryAcquireUpTo(n)
				case 2:
					p.Charge(n)
				}
				p.Release(n)
			}
		}()
	}
	wg.Wait()
	if s := p.Stats(); s.Used != 0 || s.Waiting != 0 {
		t.Fatalf("after the storm: %+v", s)
	}
}

func waitWaiters(t *testing.T, p *Pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p.Stats().Waiting == n {
			return
		}
	}
	t.Fatalf("never %d waiters", n)
}
