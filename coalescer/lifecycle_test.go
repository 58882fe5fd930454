package coalescer

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestNewValidatesAndDefaultsOptions(t *testing.T) {
	for _, opts := range []Options{
		{Shards: -1},
		{WorkersPerShard: -1},
		{QueueDepth: -1},
		{IndexBytes: -1},
	} {
		if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", opts, err)
		}
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := len(c.Stats()); got != runtime.GOMAXPROCS(0) {
		t.Fatalf("%d shards, want GOMAXPROCS", got)
	}
	if got := cap(c.shards[0].pool.jobs); got != DefaultQueueDepth {
		t.Fatalf("queue depth %d", got)
	}
	if c.shards[0].indexBytes != DefaultIndexBytes {
		t.Fatalf("index bytes %d", c.shards[0].indexBytes)
	}
}

func TestReadRejectsNilReadFunc(t *testing.T) {
	c := newEnabled(t, Options{})
	if _, err := c.Read(context.Background(), baseKey(), 0, nil); !errors.Is(err, ErrNilRead) {
		t.Fatalf("got %v", err)
	}
}

func TestCloseFinishesQueuedJobsThenRefusesReads(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1, WorkersPerShard: 1})
	blocker := &reader{payload: "a", hold: make(chan struct{})}
	a := readAsync(c, context.Background(), keyAt(1), 0, blocker.read)
	waitUntil(t, "the worker is busy", func() bool { return blocker.calls.Load() == 1 })
	queued := &reader{payload: "b"}
	b := readAsync(c, context.Background(), keyAt(2), 0, queued.read)
	waitUntil(t, "the job is queued", func() bool { return len(c.shards[0].pool.jobs) == 1 })

	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned before the queued jobs ran")
	case <-time.After(20 * time.Millisecond):
	}
	close(blocker.hold)
	select {
	case <-closed:
	case <-time.After(testTimeout):
		t.Fatal("Close did not return")
	}
	for _, ch := range []<-chan outcome{a, b} {
		o := receive(t, ch)
		if o.err != nil {
			t.Fatalf("queued read failed on Close: %v", o.err)
		}
		o.res.Release()
	}
	if _, err := c.Read(context.Background(), baseKey(), 0, queued.read); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	c.Close() // idempotent
	c.SetEnabled(true)
	if c.Enabled() {
		t.Fatal("SetEnabled after Close took effect")
	}
}

func TestCloseStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := New(Options{Shards: 4, WorkersPerShard: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitUntil(t, "workers exit", func() bool { return runtime.NumGoroutine() <= before })
}
