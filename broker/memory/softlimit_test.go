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
	s := &SoftLimit{Floor: 100 * mib, Slack: 10 * mib, Ceiling: 1000 * mib}
	for _, tt := range []struct {
		name                 string
		live, other, charged int64
		want                 int64
	}{
		{"nothing charged: half the live heap again", 300 * mib, 0, 0, 460 * mib},
		{"a full fetch budget gets no headroom", 306 * mib, 0, 256 * mib, 341 * mib},
		{"charged ahead of the last collection's live heap", 50 * mib, 0, 256 * mib, 100 * mib},
		{"small heap: the floor", 20 * mib, 0, 0, 100 * mib},
		{"large heap: the ceiling", 900 * mib, 0, 100 * mib, 1000 * mib},
		{"stacks and runtime metadata on top, without headroom", 60 * mib, 150 * mib, 0, 250 * mib},
	} {
		if got := s.Limit(tt.live, tt.other, tt.charged); got != tt.want {
			t.Errorf("%s: Limit(%d MiB, %d MiB, %d MiB) = %d MiB, want %d MiB", tt.name, tt.live/mib, tt.other/mib, tt.charged/mib, got/mib, tt.want/mib)
		}
	}
	var defaults SoftLimit
	if got := defaults.Limit(0, 0, 0); got != DefaultSoftLimitFloor {
		t.Errorf("zero SoftLimit, empty heap: %d, want the default floor", got)
	}
	if got := defaults.Limit(1<<30, 0, 0); got != 3<<29+DefaultSoftLimitSlack {
		t.Errorf("zero SoftLimit has a ceiling: %d", got)
	}
}

func TestSoftLimitFollowsTheHeapAndLiftsTheLimitWhenDone(t *testing.T) {
	const mib = 1 << 20
	var mu sync.Mutex
	live, charged := int64(200*mib), int64(0)
	var set []int64
	s := &SoftLimit{Floor: mib, Slack: mib, Interval: time.Millisecond,
		Charged: func() int64 { mu.Lock(); defer mu.Unlock(); return charged },
		usage:   func() (int64, int64) { mu.Lock(); defer mu.Unlock(); return live, 0 },
		set:     func(n int64) int64 { mu.Lock(); defer mu.Unlock(); set = append(set, n); return 0 },
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
	waitFor := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for last() != want {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d, want %d", last(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(301 * mib)
	mu.Lock()
	live, charged = 456*mib, 256*mib // a fetch budget filled up
	mu.Unlock()
	waitFor(557 * mib)
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
	usage := runtimeUsage()
	live, other := usage()
	if other < 100*mib {
		t.Fatalf("runtime reports %d MiB outside the heap objects with %d goroutines' stacks; want at least 100", other/mib, goroutines)
	}
	s := &SoftLimit{Floor: mib, Slack: mib}
	limit := s.Limit(live, other, 0)
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
