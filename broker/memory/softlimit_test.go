package memory

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

func TestSoftLimitGivesHeadroomOnlyOutsideTheBudgets(t *testing.T) {
	const mib = 1 << 20
	s := &SoftLimit{Floor: 100 * mib, Slack: 10 * mib, Ceiling: 1000 * mib}
	for _, tt := range []struct {
		name          string
		live, charged int64
		want          int64
	}{
		{"nothing charged: half the live heap again", 300 * mib, 0, 460 * mib},
		{"a full fetch budget gets no headroom", 306 * mib, 256 * mib, 341 * mib},
		{"charged ahead of the last collection's live heap", 50 * mib, 256 * mib, 100 * mib},
		{"small heap: the floor", 20 * mib, 0, 100 * mib},
		{"large heap: the ceiling", 900 * mib, 100 * mib, 1000 * mib},
	} {
		if got := s.Limit(tt.live, tt.charged); got != tt.want {
			t.Errorf("%s: Limit(%d MiB, %d MiB) = %d MiB, want %d MiB", tt.name, tt.live/mib, tt.charged/mib, got/mib, tt.want/mib)
		}
	}
	var defaults SoftLimit
	if got := defaults.Limit(0, 0); got != DefaultSoftLimitFloor {
		t.Errorf("zero SoftLimit, empty heap: %d, want the default floor", got)
	}
	if got := defaults.Limit(1<<30, 0); got != 3<<29+DefaultSoftLimitSlack {
		t.Errorf("zero SoftLimit has a ceiling: %d", got)
	}
}

func TestSoftLimitFollowsTheHeapAndLiftsTheLimitWhenDone(t *testing.T) {
	const mib = 1 << 20
	var mu sync.Mutex
	live, charged := int64(200*mib), int64(0)
	var set []int64
	s := &SoftLimit{Floor: mib, Slack: mib, Interval: time.Millisecond,
		Charged:  func() int64 { mu.Lock(); defer mu.Unlock(); return charged },
		liveHeap: func() int64 { mu.Lock(); defer mu.Unlock(); return live },
		set:      func(n int64) int64 { mu.Lock(); defer mu.Unlock(); set = append(set, n); return 0 },
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
