package memory

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

func TestSoftLimitGivesHeadroomOnlyOutsideTheBudgets(t *testing.T) {
	const mib = 1 << 20
	const busy = 1 << 40 // allocating more than any headroom
	s := &SoftLimit{Floor: 100 * mib, Slack: 10 * mib, MinSlack: 4 * mib, Ceiling: 1000 * mib}
	for _, tt := range []struct {
		name string
		u    Usage
		want int64
	}{
		{"nothing charged: half the live heap again", Usage{Live: 300 * mib, Allocating: busy}, 460 * mib},
		{"a full fetch budget gets no headroom", Usage{Live: 306 * mib, Charged: 256 * mib, Allocating: busy}, 341 * mib},
		{"charged ahead of the last collection's live heap", Usage{Live: 50 * mib, Charged: 256 * mib, Allocating: busy}, 100 * mib},
		{"small heap: the floor", Usage{Live: 20 * mib, Allocating: busy}, 100 * mib},
		{"large heap: the ceiling", Usage{Live: 900 * mib, Charged: 100 * mib, Allocating: busy}, 1000 * mib},
		{"stacks and runtime metadata on top, without headroom", Usage{Live: 60 * mib, Other: 150 * mib, Allocating: busy}, 250 * mib},
		{"idle: a quarter of what a collection scans", Usage{Live: 300 * mib, Other: 100 * mib, Allocating: mib}, 500 * mib},
		{"allocating more than that: that much", Usage{Live: 300 * mib, Other: 100 * mib, Allocating: 130 * mib}, 530 * mib},
	} {
		if got := s.Limit(tt.u); got != tt.want {
			t.Errorf("%s: Limit(%+v MiB) = %d MiB, want %d MiB", tt.name, tt.u, got/mib, tt.want/mib)
		}
	}
	var defaults SoftLimit
	if got := defaults.Limit(Usage{}); got != DefaultSoftLimitFloor {
		t.Errorf("zero SoftLimit, empty heap: %d, want the default floor", got)
	}
	if got := defaults.Limit(Usage{Live: 1 << 30, Allocating: busy}); got != 3<<29+DefaultSoftLimitSlack {
		t.Errorf("zero SoftLimit has a ceiling: %d", got)
	}
	if got := defaults.Limit(Usage{Live: 1 << 30}); got != 1<<30+1<<28 {
		t.Errorf("zero SoftLimit, idle: %d, want the live heap and a quarter of it", got)
	}
	small := &SoftLimit{Floor: mib, MinSlack: 4 * mib}
	if got := small.Limit(Usage{Live: 8 * mib}); got != 12*mib {
		t.Errorf("idle, small heap: %d MiB, want the live heap and the least headroom (12 MiB)", got/mib)
	}
}

func TestSoftLimitFollowsTheHeapAndLiftsTheLimitWhenDone(t *testing.T) {
	const mib = 1 << 20
	var mu sync.Mutex
	live, charged, allocs := int64(200*mib), int64(0), int64(0)
	var set []int64
	s := &SoftLimit{Floor: mib, Slack: mib, MinSlack: mib, Interval: time.Millisecond,
		AllocationWindow: time.Second, AllocationDecay: 20 * time.Millisecond,
		Charged: func() int64 { mu.Lock(); defer mu.Unlock(); return charged },
		usage: func() runtimeFigures {
			mu.Lock()
			defer mu.Unlock()
			return runtimeFigures{live: live, allocs: allocs}
		},
		set: func(n int64) int64 { mu.Lock(); defer mu.Unlock(); set = append(set, n); return 0 },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	last := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(set) == 0 {
			return 0
		}
		return set[len(set)-1]
	}
	waitFor := func(what string, ok func(int64) bool, during func()) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(last()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: limit %d MiB", what, last()/mib)
			}
			if during != nil {
				during()
			}
			time.Sleep(time.Millisecond)
		}
	}
	is := func(want int64) func(int64) bool { return func(n int64) bool { return n == want } }
	// Allocating far over the headroom's bound per window.
	allocate := func() { mu.Lock(); allocs += 64 * mib; mu.Unlock() }
	waitFor("idle", is(250*mib), nil) // a quarter of the live heap
	waitFor("allocating", is(301*mib), allocate)
	mu.Lock()
	live, charged = 456*mib, 256*mib // a fetch budget filled up
	mu.Unlock()
	waitFor("allocating, budget full", is(557*mib), allocate)
	mu.Lock()
	live, charged = 200*mib, 0 // the budget emptied
	mu.Unlock()
	// Back within the updates' hysteresis (a 32nd of the limit) of the
	// live heap and a quarter of it.
	waitFor("idle again", func(n int64) bool { return n <= 250*mib+301*mib/32 }, nil)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if got := last(); got != math.MaxInt64 {
		t.Fatalf("limit after Run: %d, want none (MaxInt64)", got)
	}
}

func TestAllocationRateRisesAtOnceAndDecays(t *testing.T) {
	r := allocationRate{window: int64(2 * time.Second), decay: 0.5}
	at := time.Unix(0, 0)
	r.update(0, at)
	if got := r.update(10<<20, at.Add(time.Second)); got != 20<<20 {
		t.Fatalf("10 MiB in 1 s: %d per 2 s window, want 20 MiB", got)
	}
	if got := r.update(10<<20, at.Add(2*time.Second)); got != 10<<20 {
		t.Fatalf("a second without allocation: %d, want half the peak", got)
	}
	if got := r.update(110<<20, at.Add(3*time.Second)); got != 200<<20 {
		t.Fatalf("a burst: %d, want it at once", got)
	}
}

// The limit covers what the runtime counts against it that collecting
// does not free: with goroutine stacks (a broker's Raft groups park
// thousands of goroutines) well above the floor and slack, the limit
// from the runtime's own figures stays above all the memory the runtime
// holds. Leaving them out made the limit lower than the process's
// memory and the collector run without pause.
func TestSoftLimitCoversGoroutineStacks(t *testing.T) {
	const mib = 1 << 20
	const goroutines = 4000
	release := make(chan struct{})
	var parked sync.WaitGroup
	parked.Add(goroutines)
	for range goroutines {
		go func() {
			growStack(64) // about 64 KiB of stack each: ~250 MiB in all
			parked.Done()
			<-release
		}()
	}
	defer close(release)
	parked.Wait()
	runtime.GC()
	f := runtimeUsage()()
	live, other := f.live, f.other
	if other < 100*mib {
		t.Fatalf("runtime reports %d MiB outside the heap objects with %d goroutines' stacks; want at least 100", other/mib, goroutines)
	}
	s := &SoftLimit{Floor: mib, Slack: mib}
	limit := s.Limit(Usage{Live: live, Other: other})
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	held := int64(sample[0].Value.Uint64() - sample[1].Value.Uint64())
	// The heap's free pages are not in other: the collector returns them
	// when the limit presses. Everything else must fit.
	free := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(free)
	if need := held - int64(free[0].Value.Uint64()); limit < need {
		t.Fatalf("limit %d MiB is below the %d MiB the runtime holds besides free pages (live %d MiB, other %d MiB)", limit/mib, need/mib, live/mib, other/mib)
	}
}

// growStack recurses through frames of about 1 KiB, kb of them, so the
// goroutine's stack grows to hold them; it stays that size while parked.
//
//go:noinline
func growStack(kb int) byte {
	var frame [1024]byte
	frame[kb%len(frame)] = byte(kb)
	if kb <= 1 {
		return frame[0]
	}
	return growStack(kb-1) + frame[kb%len(frame)]
}
