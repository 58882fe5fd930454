package coalescer

import (
	"context"
	"sync"
	"testing"
	"unsafe"
)

func TestConcurrentReadsOfOneKeyShareOneRead(t *testing.T) {
	var freed freeLog
	c := newEnabled(t, Options{Free: freed.free})
	r := &reader{payload: "batch", watermark: 10, hold: make(chan struct{})}

	const n = 64
	start := make(chan struct{})
	outs := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			res, err := c.Read(context.Background(), baseKey(), 10, r.read)
			outs[i] = outcome{res: res, err: err}
		})
	}
	close(start)
	waitUntil(t, "every reader has joined", func() bool {
		s := statsOf(c, baseKey())
		return s.Insertions+s.InflightHits == n
	})
	close(r.hold)
	waitGroup(t, &wg)

	if got := r.calls.Load(); got != 1 {
		t.Fatalf("read called %d times, want 1", got)
	}
	if got, want := statsOf(c, baseKey()), (ShardStats{Insertions: 1, InflightHits: n - 1}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	first := outs[0].res
	for i, o := range outs {
		if o.err != nil {
			t.Fatalf("reader %d: %v", i, o.err)
		}
		if o.res != first || unsafe.SliceData(o.res.Data) != unsafe.SliceData(first.Data) {
			t.Fatalf("reader %d got a different result or buffer", i)
		}
	}
	if got := first.refs.Load(); got != n {
		t.Fatalf("refs = %d, want %d", got, n)
	}
	data := first.Data
	for _, o := range outs {
		o.res.Release()
	}
	if freed.count() != 1 || freed.timesFreed(data) != 1 {
		t.Fatalf("Free called %d times (%d with the data), want once", freed.count(), freed.timesFreed(data))
	}
}

func TestKeysDifferingInAnyFieldNeverShare(t *testing.T) {
	variants := []struct {
		name   string
		mutate func(*Key)
	}{
		{"topic id", func(k *Key) { k.TopicID = topic(2) }},
		{"partition", func(k *Key) { k.Partition++ }},
		{"offset", func(k *Key) { k.Offset++ }},
		{"max bytes", func(k *Key) { k.MaxBytes-- }},
		{"isolation", func(k *Key) { k.Isolation = 1 }},
		{"strict vs obligatory", func(k *Key) { k.Obligatory = false }},
	}
	for _, v := range variants {
		for _, baseInFlight := range []bool{true, false} {
			name := v.name + "/base ready"
			if baseInFlight {
				name = v.name + "/base in flight"
			}
			t.Run(name, func(t *testing.T) {
				c := newEnabled(t, Options{})
				other := baseKey()
				v.mutate(&other)

				base := &reader{payload: "base", watermark: 5}
				if baseInFlight {
					base.hold = make(chan struct{})
				}
				baseOut := readAsync(c, context.Background(), baseKey(), 5, base.read)
				waitUntil(t, "the base read starts", func() bool { return base.calls.Load() == 1 })
				var baseRes *Result
				if !baseInFlight {
					baseRes = receive(t, baseOut).res
					defer baseRes.Release()
				}

				r := &reader{payload: "other", watermark: 5}
				res := mustRead(t, c, other, 5, r.read)
				defer res.Release()
				if r.calls.Load() != 1 || string(res.Data) != "other#1" {
					t.Fatalf("%s read shared the base read: calls %d, data %q", v.name, r.calls.Load(), res.Data)
				}
				if got, want := lookups(SumStats(c.Stats())), (ShardStats{Insertions: 2}); got != want {
					t.Fatalf("stats = %+v, want %+v", got, want)
				}
				if baseInFlight {
					close(base.hold)
					o := receive(t, baseOut)
					if o.err != nil {
						t.Fatal(o.err)
					}
					o.res.Release()
				}
			})
		}
	}
}

func TestBackToBackReadWhileHeldIsReadyHit(t *testing.T) {
	var freed freeLog
	c := newEnabled(t, Options{Free: freed.free})
	r := &reader{payload: "batch", watermark: 7}

	first := mustRead(t, c, baseKey(), 7, r.read)
	second := mustRead(t, c, baseKey(), 7, r.read)
	if second != first || r.calls.Load() != 1 {
		t.Fatalf("second read: same result %v, read calls %d; want a ready hit", second == first, r.calls.Load())
	}
	if got, want := statsOf(c, baseKey()), (ShardStats{Insertions: 1, ReadyHits: 1}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	data := first.Data
	first.Release()
	if freed.count() != 0 {
		t.Fatal("data freed while a holder remains")
	}
	second.Release()
	if freed.timesFreed(data) != 1 {
		t.Fatal("data not freed after the last release")
	}
}

func TestReadAfterLastReleaseReinserts(t *testing.T) {
	var freed freeLog
	c := newEnabled(t, Options{Free: freed.free})
	r := &reader{payload: "batch", watermark: 7}

	res := mustRead(t, c, baseKey(), 7, r.read)
	data := res.Data
	res.Release()
	if freed.count() != 1 || freed.timesFreed(data) != 1 {
		t.Fatalf("Free called %d times (%d with the data), want once", freed.count(), freed.timesFreed(data))
	}
	if res.Data != nil {
		t.Fatal("last release kept Data")
	}

	again := mustRead(t, c, baseKey(), 7, r.read)
	defer again.Release()
	if again == res || r.calls.Load() != 2 || string(again.Data) != "batch#2" {
		t.Fatalf("expected a fresh read, got calls %d data %q", r.calls.Load(), again.Data)
	}
	if got, want := statsOf(c, baseKey()), (ShardStats{Insertions: 1, Reinsertions: 1}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	if freed.count() != 1 {
		t.Fatalf("Free called %d times, want 1", freed.count())
	}
}

func TestFreshnessOfReadyResult(t *testing.T) {
	tests := []struct {
		name    string
		current int64
		want    ShardStats
	}{
		{"behind the result", 9, ShardStats{Insertions: 1, ReadyHits: 1}},
		{"at the result", 10, ShardStats{Insertions: 1, ReadyHits: 1}},
		{"past the result", 11, ShardStats{Insertions: 1, Reinsertions: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newEnabled(t, Options{})
			r := &reader{payload: "batch", watermark: 10}
			held := mustRead(t, c, baseKey(), 10, r.read)
			defer held.Release()

			r.watermark = 11
			res := mustRead(t, c, baseKey(), tt.current, r.read)
			defer res.Release()
			if got := statsOf(c, baseKey()); got != tt.want {
				t.Fatalf("stats = %+v, want %+v", got, tt.want)
			}
			if res.Watermark < tt.current {
				t.Fatalf("watermark %d < current %d", res.Watermark, tt.current)
			}
			if held.Data == nil || string(held.Data) != "batch#1" {
				t.Fatal("reinsertion disturbed the earlier holder")
			}
		})
	}
}

// A waiter that joined a read in flight and finds its result stale reads
// again; the re-read started after it arrived, so it accepts that one
// whatever its watermark instead of looping.
func TestStaleInflightResultIsReadAgainOnce(t *testing.T) {
	c := newEnabled(t, Options{})
	r := &reader{payload: "batch", watermark: 10, hold: make(chan struct{})}

	initiator := readAsync(c, context.Background(), baseKey(), 10, r.read)
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	waiter := readAsync(c, context.Background(), baseKey(), 20, r.read)
	waitUntil(t, "the waiter joins", func() bool { return statsOf(c, baseKey()).InflightHits == 1 })
	close(r.hold)

	first := receive(t, initiator)
	stale := receive(t, waiter)
	if first.err != nil || stale.err != nil {
		t.Fatal(first.err, stale.err)
	}
	defer first.res.Release()
	defer stale.res.Release()
	if stale.res == first.res || r.calls.Load() != 2 {
		t.Fatalf("waiter got the stale result: read calls %d", r.calls.Load())
	}
	if got, want := statsOf(c, baseKey()), (ShardStats{Insertions: 1, InflightHits: 1, Reinsertions: 1}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
}

func TestEmptyResultIsSharedButNotRetained(t *testing.T) {
	var freed freeLog
	c := newEnabled(t, Options{Free: freed.free})
	r := &reader{empty: true, watermark: 3, hold: make(chan struct{})}

	a := readAsync(c, context.Background(), baseKey(), 3, r.read)
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	b := readAsync(c, context.Background(), baseKey(), 3, r.read)
	waitUntil(t, "the waiter joins", func() bool { return statsOf(c, baseKey()).InflightHits == 1 })
	close(r.hold)
	oa, ob := receive(t, a), receive(t, b)
	if oa.err != nil || ob.err != nil || oa.res != ob.res || len(oa.res.Data) != 0 {
		t.Fatalf("waiters did not share the empty result: %v %v", oa.err, ob.err)
	}

	// Still held, yet not findable: the next read reads again.
	again := mustRead(t, c, baseKey(), 3, r.read)
	if r.calls.Load() != 2 {
		t.Fatalf("read calls = %d, want 2", r.calls.Load())
	}
	if got, want := statsOf(c, baseKey()), (ShardStats{Insertions: 2, InflightHits: 1}); got != want {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	oa.res.Release()
	ob.res.Release()
	again.Release()
	if freed.count() != 2 {
		t.Fatalf("Free called %d times, want 2 (one per empty buffer)", freed.count())
	}
}
