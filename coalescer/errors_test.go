package coalescer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestErrorGoesToEveryWaiterAndIsNotRetained(t *testing.T) {
	c := newEnabled(t, Options{})
	boom := errors.New("disk on fire")
	r := &reader{err: boom, hold: make(chan struct{})}

	const n = 8
	outs := []<-chan outcome{readAsync(c, context.Background(), baseKey(), 0, r.read)}
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	for range n - 1 {
		outs = append(outs, readAsync(c, context.Background(), baseKey(), 0, r.read))
	}
	waitUntil(t, "waiters join", func() bool { return statsOf(c, baseKey()).InflightHits == n-1 })
	close(r.hold)
	for i, ch := range outs {
		if o := receive(t, ch); o.err != boom || o.res != nil {
			t.Fatalf("waiter %d: got (%v, %v), want the read's error value", i, o.res, o.err)
		}
	}
	if r.calls.Load() != 1 {
		t.Fatalf("read calls = %d, want 1", r.calls.Load())
	}
	if _, err := c.Read(context.Background(), baseKey(), 0, r.read); err != boom {
		t.Fatalf("second read: %v", err)
	}
	if r.calls.Load() != 2 {
		t.Fatal("error was retained: second read did not read")
	}
}

// cancelOnce's first read blocks until its context ends and fails with the
// context's error, as a storage read would; later reads succeed.
type cancelOnce struct{ reader }

func (r *cancelOnce) read(ctx context.Context) ([]byte, int64, error) {
	if r.calls.Load() == 0 {
		r.calls.Add(1)
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(testTimeout):
			return nil, 0, errors.New("initiator never cancelled")
		}
	}
	return r.reader.read(ctx)
}

func TestInitiatorCancelledMidReadWaitersRetry(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			// Long enough for the waiters to join; the test then waits
			// for it instead of cancelling.
			return context.WithTimeout(context.Background(), time.Second)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newEnabled(t, Options{})
			r := &cancelOnce{reader{payload: "batch", watermark: 4}}
			ctx, cancel := tt.ctx()
			defer cancel()

			initiator := readAsync(c, ctx, baseKey(), 4, r.read)
			waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
			const n = 8
			var waiters []<-chan outcome
			for range n {
				waiters = append(waiters, readAsync(c, context.Background(), baseKey(), 4, r.read))
			}
			waitUntil(t, "waiters join", func() bool { return statsOf(c, baseKey()).InflightHits == n })
			if tt.wantErr == context.Canceled {
				cancel()
			}

			if o := receive(t, initiator); !errors.Is(o.err, tt.wantErr) {
				t.Fatalf("initiator: %v, want %v", o.err, tt.wantErr)
			}
			var held []*Result
			for i, ch := range waiters {
				o := receive(t, ch)
				if o.err != nil {
					t.Fatalf("waiter %d inherited the initiator's failure: %v", i, o.err)
				}
				if string(o.res.Data) != "batch#2" {
					t.Fatalf("waiter %d: data %q", i, o.res.Data)
				}
				held = append(held, o.res)
			}
			for _, res := range held {
				res.Release()
			}
			if r.calls.Load() != 2 {
				t.Fatalf("read calls = %d, want 2 (one extra read)", r.calls.Load())
			}
		})
	}
}

// A context error from the read while the initiator's context is alive is
// the read's own failure, and everyone gets it.
func TestContextErrorOfLiveInitiatorGoesToEveryWaiter(t *testing.T) {
	c := newEnabled(t, Options{})
	storageErr := fmt.Errorf("storage: %w", context.DeadlineExceeded)
	r := &reader{err: storageErr, hold: make(chan struct{})}

	a := readAsync(c, context.Background(), baseKey(), 0, r.read)
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	b := readAsync(c, context.Background(), baseKey(), 0, r.read)
	waitUntil(t, "the waiter joins", func() bool { return statsOf(c, baseKey()).InflightHits == 1 })
	close(r.hold)
	for _, ch := range []<-chan outcome{a, b} {
		if o := receive(t, ch); o.err != storageErr {
			t.Fatalf("got %v, want the read's error", o.err)
		}
	}
	if r.calls.Load() != 1 {
		t.Fatalf("read calls = %d, want 1", r.calls.Load())
	}
}

func TestInitiatorReadsWithItsContext(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	type marker struct{}
	ctx := context.WithValue(context.Background(), marker{}, "fetch-1")
	var sawCtx atomic.Bool
	res, err := c.Read(ctx, baseKey(), 0, func(rctx context.Context) ([]byte, int64, error) {
		sawCtx.Store(rctx.Value(marker{}) == "fetch-1")
		return []byte("x"), 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res.Release()
	if !sawCtx.Load() {
		t.Fatal("the read did not run with the initiating fetch's context")
	}
}

func TestInitiatorGoneBeforeReadingDoesNotRead(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{payload: "x"}
	// The context ends between the lookup (which Read checks first) and
	// the read: simulated by a flight led with a dead context.
	s := c.shards[0]
	s.mu.Lock()
	key := baseKey()
	f := s.newFlight(ctx, &key, nil, -1)
	s.mu.Unlock()
	cancel()
	s.lead(f, r.read)
	<-f.done
	if !f.cancelled || !errors.Is(f.err, context.Canceled) {
		t.Fatalf("flight outcome: err %v, cancelled %v", f.err, f.cancelled)
	}
	if r.calls.Load() != 0 {
		t.Fatal("a read whose initiator was gone was made")
	}
}

func TestWaiterTimeoutReturnsPromptlyWithoutDisturbingOthers(t *testing.T) {
	c := newEnabled(t, Options{})
	r := &reader{payload: "batch", hold: make(chan struct{})}

	initiator := readAsync(c, context.Background(), baseKey(), 0, r.read)
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	impatient := receive(t, readAsync(c, ctx, baseKey(), 0, r.read))
	if !errors.Is(impatient.err, context.DeadlineExceeded) {
		t.Fatalf("impatient waiter: %v", impatient.err)
	}
	if impatient.took > time.Second {
		t.Fatalf("impatient waiter took %v", impatient.took)
	}
	close(r.hold)
	o := receive(t, initiator)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if got := o.res.refs.Load(); got != 1 {
		t.Fatalf("refs = %d, want 1: the gone waiter must not be counted", got)
	}
	o.res.Release()
}

func TestReadFuncPanicBecomesEveryWaitersError(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	_, err := c.Read(context.Background(), baseKey(), 0, func(context.Context) ([]byte, int64, error) {
		panic("bad batch")
	})
	if !errors.Is(err, ErrReadPanicked) {
		t.Fatalf("got %v, want ErrReadPanicked", err)
	}
	r := &reader{payload: "ok"}
	res := mustRead(t, c, baseKey(), 0, r.read)
	defer res.Release()
	if string(res.Data) != "ok#1" {
		t.Fatal("the shard did not survive the panic")
	}
}
