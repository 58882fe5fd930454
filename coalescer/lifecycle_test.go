package coalescer

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

func TestNewValidatesAndDefaultsOptions(t *testing.T) {
	for _, opts := range []Options{
		{Shards: -1},
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

func TestCloseLetsReadsInFlightFinishThenRefusesReads(t *testing.T) {
	c := newEnabled(t, Options{Shards: 1})
	held := &reader{payload: "a", hold: make(chan struct{})}
	a := readAsync(c, context.Background(), keyAt(1), 0, held.read)
	waitUntil(t, "the read starts", func() bool { return held.calls.Load() == 1 })
	b := readAsync(c, context.Background(), keyAt(1), 0, held.read)
	waitUntil(t, "the waiter joins", func() bool { return c.Stats()[0].InflightHits == 1 })

	c.Close()
	close(held.hold)
	for _, ch := range []<-chan outcome{a, b} {
		o := receive(t, ch)
		if o.err != nil {
			t.Fatalf("read in flight failed on Close: %v", o.err)
		}
		if string(o.res.Data) != "a#1" {
			t.Fatalf("data %q, want the one read's", o.res.Data)
		}
		o.res.Release()
	}
	if _, err := c.Read(context.Background(), baseKey(), 0, held.read); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	c.Close() // idempotent
	c.SetEnabled(true)
	if c.Enabled() {
		t.Fatal("SetEnabled after Close took effect")
	}
}

func TestNewStartsNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	c, err := New(Options{Shards: 4, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines after New, %d before: reads run on the fetches' own", after, before)
	}
}
