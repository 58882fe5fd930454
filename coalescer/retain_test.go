package coalescer

import (
	"context"
	"testing"
	"time"
)

// exact reads p into a buffer of exactly its length, so that retention
// (which counts capacity) sees len(p) bytes.
func exact(p string) ReadFunc {
	return func(context.Context) ([]byte, int64, error) {
		b := make([]byte, len(p))
		copy(b, p)
		return b, 0, nil
	}
}

func TestRetainedResultServesLaterFetches(t *testing.T) {
	freed := &freeLog{}
	c := newEnabled(t, Options{Shards: 1, RetainBytes: 1 << 20, Free: freed.free})
	r := &reader{payload: "batch", watermark: 5}
	mustRead(t, c, baseKey(), 5, r.read).Release()
	if freed.count() != 0 || c.RetainedBytes() == 0 {
		t.Fatalf("freed %d, retained %d: the result must outlive its fetch", freed.count(), c.RetainedBytes())
	}
	later := mustRead(t, c, baseKey(), 5, r.read)
	if string(later.Data) != "batch#1" || r.calls.Load() != 1 {
		t.Fatalf("later fetch got %q after %d reads, want the retained result", later.Data, r.calls.Load())
	}
	later.Release()
	if got := statsOf(c, baseKey()); got != (ShardStats{Insertions: 1, ReadyHits: 1}) {
		t.Fatalf("stats %+v", got)
	}
	// Retained, but stale for a fetch that saw a later watermark.
	fresh := mustRead(t, c, baseKey(), 6, r.read)
	if r.calls.Load() != 2 {
		t.Fatal("a stale retained result was served")
	}
	fresh.Release()
}

func TestRetentionIsBoundedAndShedOldestFirst(t *testing.T) {
	freed := &freeLog{}
	// Three bytes a result: room for two.
	c := newEnabled(t, Options{Shards: 1, RetainBytes: 7, Free: freed.free})
	for i, p := range []string{"aaa", "bbb", "ccc"} {
		mustRead(t, c, keyAt(int64(i)), 0, exact(p)).Release()
	}
	if freed.count() != 1 || c.RetainedBytes() != 6 {
		t.Fatalf("freed %d, retained %d bytes: want the oldest gone and two kept", freed.count(), c.RetainedBytes())
	}
	var calls int
	again := func(ctx context.Context) ([]byte, int64, error) { calls++; return exact("xxx")(ctx) }
	mustRead(t, c, keyAt(0), 0, again).Release() // the oldest: read again
	if calls != 1 {
		t.Fatal("the result shed for the bound was still served")
	}
	// The new keyAt(0) result is retained and bbb dropped for it: ccc,
	// then it, remain.
	if got := c.Shed(1); got != 3 {
		t.Fatalf("Shed(1) let %d bytes go, want the oldest result's 3", got)
	}
	held := mustRead(t, c, keyAt(0), 0, again) // still retained
	if calls != 1 {
		t.Fatal("Shed let more than the oldest go")
	}
	c.SetEnabled(false)
	if c.RetainedBytes() != 0 {
		t.Fatalf("%d bytes retained after switching off", c.RetainedBytes())
	}
	before := freed.count()
	held.Release() // the fetch's reference was the last
	if freed.count() != before+1 {
		t.Fatal("a result held by a fetch was freed when retention let it go, or not freed when the fetch released it")
	}
}

func TestRetainedResultsExpire(t *testing.T) {
	freed := &freeLog{}
	c := newEnabled(t, Options{Shards: 1, RetainBytes: 1 << 20, RetainFor: time.Millisecond, Free: freed.free})
	mustRead(t, c, keyAt(1), 0, exact("aaa")).Release()
	mustRead(t, c, keyAt(2), 0, exact("bbb")).Release()
	if c.RetainedBytes() != 6 {
		t.Fatalf("%d bytes retained, want both results", c.RetainedBytes())
	}
	time.Sleep(5 * time.Millisecond)
	c.Expire()
	if c.RetainedBytes() != 0 || freed.count() != 2 {
		t.Fatalf("after expiry: %d bytes retained, %d freed; want none and both", c.RetainedBytes(), freed.count())
	}
	// A newer result pushes out what aged, without Expire.
	mustRead(t, c, keyAt(1), 0, exact("ccc")).Release()
	time.Sleep(5 * time.Millisecond)
	mustRead(t, c, keyAt(2), 0, exact("ddd")).Release()
	if c.RetainedBytes() != 3 {
		t.Fatalf("%d bytes retained, want only the newest result", c.RetainedBytes())
	}
}

func TestReadCompletingAfterSwitchOffIsNotRetained(t *testing.T) {
	freed := &freeLog{}
	c := newEnabled(t, Options{Shards: 1, RetainBytes: 1 << 20, Free: freed.free})
	held := &reader{payload: "late", hold: make(chan struct{})}
	out := readAsync(c, context.Background(), baseKey(), 0, held.read)
	waitUntil(t, "the read starts", func() bool { return held.calls.Load() == 1 })
	c.SetEnabled(false)
	close(held.hold)
	o := receive(t, out)
	if o.err != nil {
		t.Fatal(o.err)
	}
	o.res.Release()
	if c.RetainedBytes() != 0 || freed.count() != 1 {
		t.Fatalf("%d bytes retained, %d freed after switching off: the late read must not be kept", c.RetainedBytes(), freed.count())
	}
}
