package coalescer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDisabledReadsOnCallerGoroutineWithoutCounters(t *testing.T) {
	var freed freeLog
	c, err := New(Options{Free: freed.free})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Enabled() {
		t.Fatal("a coalescer starts disabled unless Options.Enabled")
	}

	caller := goroutineID()
	var readOn uint64
	var calls int
	read := func(context.Context) ([]byte, int64, error) {
		calls++
		readOn = goroutineID()
		return []byte("direct"), 9, nil
	}
	a := mustRead(t, c, baseKey(), 9, read)
	if readOn != caller {
		t.Fatalf("read ran on goroutine %d, caller is %d", readOn, caller)
	}
	b := mustRead(t, c, baseKey(), 9, read)
	if calls != 2 || a == b {
		t.Fatalf("disabled reads shared: calls %d", calls)
	}
	if a.refs.Load() != 1 || a.Watermark != 9 || string(a.Data) != "direct" {
		t.Fatalf("result = %+v, refs %d", a, a.refs.Load())
	}
	if got := SumStats(c.Stats()); got != (ShardStats{}) {
		t.Fatalf("disabled reads counted: %+v", got)
	}
	for i, s := range c.shards {
		if s.index != nil {
			t.Fatalf("shard %d has an index while disabled", i)
		}
	}
	a.Release()
	b.Release()
	if freed.count() != 2 {
		t.Fatalf("Free called %d times, want 2", freed.count())
	}

	boom := errors.New("boom")
	if _, err := c.Read(context.Background(), baseKey(), 0, func(context.Context) ([]byte, int64, error) {
		return nil, 0, boom
	}); err != boom {
		t.Fatalf("disabled read error = %v", err)
	}
}

func TestEnabledReadRunsOnTheInitiatorsGoroutine(t *testing.T) {
	c := newEnabled(t, Options{})
	caller := goroutineID()
	var readOn uint64
	res := mustRead(t, c, baseKey(), 0, func(context.Context) ([]byte, int64, error) {
		readOn = goroutineID()
		return []byte("x"), 0, nil
	})
	res.Release()
	if readOn != caller {
		t.Fatal("the read was handed to another goroutine: a miss must cost no more than reading in place")
	}
}

func TestSetEnabledAllocatesAndFreesIndexes(t *testing.T) {
	c := newEnabled(t, Options{Shards: 3})
	first := c.shards[1].index
	for i, s := range c.shards {
		if s.index == nil || len(s.index.slots) != DefaultIndexBytes/slotSize {
			t.Fatalf("shard %d index not allocated at full size", i)
		}
	}
	c.SetEnabled(true)
	if c.shards[1].index != first {
		t.Fatal("enabling twice replaced the index")
	}
	c.SetEnabled(false)
	for i, s := range c.shards {
		if s.index != nil {
			t.Fatalf("shard %d index kept after disable", i)
		}
	}
	c.SetEnabled(true)
	if !c.Enabled() || c.shards[1].index == nil || c.shards[1].index == first {
		t.Fatal("re-enabling did not allocate a fresh index")
	}
}

func TestDisableWhileInFlightDeliversToWaiters(t *testing.T) {
	c := newEnabled(t, Options{})
	r := &reader{payload: "batch", hold: make(chan struct{})}

	a := readAsync(c, context.Background(), baseKey(), 0, r.read)
	waitUntil(t, "the read starts", func() bool { return r.calls.Load() == 1 })
	b := readAsync(c, context.Background(), baseKey(), 0, r.read)
	waitUntil(t, "the waiter joins", func() bool { return statsOf(c, baseKey()).InflightHits == 1 })

	c.SetEnabled(false)
	straight := &reader{payload: "straight"}
	direct := mustRead(t, c, baseKey(), 0, straight.read)
	if string(direct.Data) != "straight#1" {
		t.Fatalf("read after disable did not go straight: %q", direct.Data)
	}
	direct.Release()

	c.SetEnabled(true)
	close(r.hold)
	oa, ob := receive(t, a), receive(t, b)
	if oa.err != nil || ob.err != nil || oa.res != ob.res || string(oa.res.Data) != "batch#1" {
		t.Fatalf("in-flight read not delivered: %v %v", oa.err, ob.err)
	}
	// The fresh index never saw the old flight's result.
	again := mustRead(t, c, baseKey(), 0, r.read)
	if again == oa.res {
		t.Fatal("old index entry leaked into the new index")
	}
	for _, res := range []*Result{oa.res, ob.res, again} {
		res.Release()
	}
}

// TestToggleStress switches coalescing on and off while readers hammer a
// few keys, some reads failing, some empty, some callers giving up early.
// No Read may fail because of a switch, every caller must get its own key's
// data, and every buffer a read produced must be freed exactly once.
func TestToggleStress(t *testing.T) {
	var freed freeLog
	c, err := New(Options{Shards: 2, IndexBytes: 2 * ways * slotSize, Free: freed.free, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected")
	var produced atomic.Int64
	read := func(key Key) ReadFunc {
		return func(ctx context.Context) ([]byte, int64, error) {
			switch rand.IntN(10) {
			case 0:
				return nil, 0, injected
			case 1:
				time.Sleep(100 * time.Microsecond)
			case 2:
				produced.Add(1)
				return make([]byte, 0, 1), key.Offset, nil
			}
			produced.Add(1)
			return fmt.Appendf(nil, "%d/%d", key.Partition, key.Offset), key.Offset, nil
		}
	}

	const readers, perReader = 16, 300
	var wg sync.WaitGroup
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 5 {
			t.Errorf(format, args...)
		}
	}
	for g := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range perReader {
				key := baseKey()
				key.Partition = int32(rng.IntN(4))
				key.Offset = int64(rng.IntN(6))
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if rng.IntN(8) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
				}
				res, err := c.Read(ctx, key, key.Offset, read(key))
				switch {
				case err == injected:
				case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
				case err != nil:
					fail("read %+v failed: %v", key, err)
				case len(res.Data) > 0 && string(res.Data) != fmt.Sprintf("%d/%d", key.Partition, key.Offset):
					fail("read %+v got %q", key, res.Data)
				}
				cancel()
				if res != nil {
					if rng.IntN(4) == 0 {
						time.Sleep(50 * time.Microsecond)
					}
					res.Release()
				}
			}
		})
	}
	stop := make(chan struct{})
	toggled := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				toggled <- n
				return
			default:
			}
			c.SetEnabled(n%2 == 1)
			n++
			time.Sleep(50 * time.Microsecond)
		}
	}()
	waitGroup(t, &wg)
	close(stop)
	n := <-toggled
	c.Close()

	t.Logf("%d toggles, stats %+v, %d buffers", n, SumStats(c.Stats()), produced.Load())
	freed.mu.Lock()
	defer freed.mu.Unlock()
	if int64(freed.calls) != produced.Load() {
		t.Fatalf("%d buffers produced, %d freed", produced.Load(), freed.calls)
	}
	for p, times := range freed.freed {
		if times != 1 {
			t.Fatalf("buffer %p freed %d times", p, times)
		}
	}
}
