package coalescer

import (
	"context"
	"errors"
	"fmt"
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

func TestQueuedJobOfGoneInitiatorIsSkipped(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1, WorkersPerShard: 1})
	blocker := &reader{payload: "a", hold: make(chan struct{})}
	keyA, keyB := baseKey(), baseKey()
	keyB.Offset++

	a := readAsync(c, context.Background(), keyA, 0, blocker.read)
	waitUntil(t, "the worker is busy", func() bool { return blocker.calls.Load() == 1 })

	initiatorRead := &reader{payload: "initiator"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	initiator := readAsync(c, ctx, keyB, 0, initiatorRead.read)
	waitUntil(t, "the job is queued", func() bool { return len(c.shards[0].pool.jobs) == 1 })
	waiterRead := &reader{payload: "waiter"}
	waiter := readAsync(c, context.Background(), keyB, 0, waiterRead.read)
	waitUntil(t, "the waiter joins", func() bool { return c.Stats()[0].InflightHits == 1 })

	cancel()
	if o := receive(t, initiator); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("initiator: %v", o.err)
	}
	close(blocker.hold)
	o := receive(t, waiter)
	if o.err != nil {
		t.Fatalf("waiter: %v", o.err)
	}
	defer o.res.Release()
	if string(o.res.Data) != "waiter#1" {
		t.Fatalf("waiter data %q", o.res.Data)
	}
	if initiatorRead.calls.Load() != 0 {
		t.Fatal("the skipped job was read")
	}
	receive(t, a).res.Release()
}

func TestFullQueueSubmitterHonoursContext(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1, WorkersPerShard: 1, QueueDepth: 1})
	blocker := &reader{payload: "a", hold: make(chan struct{})}
	key := func(offset int64) Key { k := baseKey(); k.Offset = offset; return k }

	a := readAsync(c, context.Background(), key(1), 0, blocker.read)
	waitUntil(t, "the worker is busy", func() bool { return blocker.calls.Load() == 1 })
	queued := &reader{payload: "queued"}
	b := readAsync(c, context.Background(), key(2), 0, queued.read)
	waitUntil(t, "the queue is full", func() bool { return len(c.shards[0].pool.jobs) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck := &reader{payload: "stuck"}
	initiator := readAsync(c, ctx, key(3), 0, stuck.read)
	waitUntil(t, "the third read is submitting", func() bool { return c.Stats()[0].Insertions == 3 })
	waiterRead := &reader{payload: "waiter"}
	waiter := readAsync(c, context.Background(), key(3), 0, waiterRead.read)
	waitUntil(t, "the waiter joins", func() bool { return c.Stats()[0].InflightHits == 1 })

	cancel()
	if o := receive(t, initiator); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("submitter on a full queue: %v", o.err)
	}
	close(blocker.hold)
	for _, ch := range []<-chan outcome{a, b, waiter} {
		o := receive(t, ch)
		if o.err != nil {
			t.Fatal(o.err)
		}
		o.res.Release()
	}
	if stuck.calls.Load() != 0 || waiterRead.calls.Load() != 1 {
		t.Fatalf("calls: cancelled submitter %d, waiter %d; want 0 and 1", stuck.calls.Load(), waiterRead.calls.Load())
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
	c := newEnabled(t, Options{Shards: 1, WorkersPerShard: 1})
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
		t.Fatal("the worker did not survive the panic")
	}
}
