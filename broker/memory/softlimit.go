package memory

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// SoftLimit keeps the Go runtime's soft memory limit where the broker's
// memory actually is. Left alone, the collector lets the heap grow to
// twice what was live at the last collection (GOGC=100), and that
// doubling applies to the budgets too: with a 256 MiB fetch budget full,
// the heap may reach 512 MiB of fetch buffers before anything is
// collected, and fan-out consumers keep it full. The budgets already
// bound those bytes, so doubling them buys nothing.
//
// SoftLimit therefore gives the collector headroom only for memory
// outside the budgets, half of it (as GOGC=50 would, once that memory is
// large enough for Slack not to cover it), and none for the bytes the
// budgets hold:
//
//	limit = live + other + max(live - charged, 0)/2 + Slack,  within [Floor, Ceiling]
//
// where live is the heap live at the last collection, other the memory
// the runtime holds besides heap objects and free pages (goroutine
// stacks, its own metadata), and charged what the budgets hold now,
// recomputed every Interval. The runtime's limit covers all of its
// memory, and other is not the collector's to free: a broker of 3,000
// partition replicas holds ~100 MiB of Raft goroutine stacks, and a limit
// that left them out sat below what the process needed and kept the
// collector running flat out. A burst that fills a budget
// faster than that only makes the collector run more often until the next
// update (the runtime caps its CPU at half the process while over the
// limit); the memory is never refused.
type SoftLimit struct {
	// Ceiling is the highest limit ever set: a share of the memory the
	// process may use (the cgroup's limit or the machine's). 0: none.
	Ceiling int64
	// Floor is the lowest limit ever set; default 128 MiB.
	Floor int64
	// Slack is added on top; default 64 MiB.
	Slack int64
	// Interval between updates; default 100 ms.
	Interval time.Duration
	// Charged reports the bytes the budgets hold now (fetch responses,
	// requests, recycled read buffers).
	Charged func() int64

	// For tests: the live heap and the other memory (see above), and the
	// runtime's setter.
	usage func() (live, other int64)
	set   func(int64) int64
}

// Defaults of SoftLimit's zero fields.
const (
	DefaultSoftLimitFloor    = 128 << 20
	DefaultSoftLimitSlack    = 64 << 20
	DefaultSoftLimitInterval = 100 * time.Millisecond
)

// Limit is the soft limit for a live heap, the runtime's other memory and
// the bytes the budgets hold.
func (s *SoftLimit) Limit(live, other, charged int64) int64 {
	floor, slack := s.Floor, s.Slack
	if floor <= 0 {
		floor = DefaultSoftLimitFloor
	}
	if slack <= 0 {
		slack = DefaultSoftLimitSlack
	}
	limit := max(live+other+max(live-charged, 0)/2+slack, floor)
	if s.Ceiling > 0 {
		limit = min(limit, s.Ceiling)
	}
	return limit
}

// Run sets the limit at once and then every Interval until ctx ends, when
// it lifts the limit again (the runtime's default, none).
func (s *SoftLimit) Run(ctx context.Context) {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultSoftLimitInterval
	}
	usage, set := s.usage, s.set
	if usage == nil {
		usage = runtimeUsage()
	}
	if set == nil {
		set = debug.SetMemoryLimit
	}
	charged := s.Charged
	if charged == nil {
		charged = func() int64 { return 0 }
	}
	defer set(math.MaxInt64)
	t := time.NewTicker(interval)
	defer t.Stop()
	last := int64(-1)
	for {
		// A new limit makes the runtime recompute its pacing and wake
		// its scavenger: not worth doing for the few KiB an idle heap
		// moves by between updates.
		live, other := usage()
		if limit := s.Limit(live, other, charged()); last < 0 || abs(limit-last) > last/32 {
			set(limit)
			last = limit
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// runtimeUsage reads the heap the last collection found live, and the
// memory the runtime holds besides heap objects and heap pages free or
// returned to the system: what the limit counts that collecting does not
// free.
func runtimeUsage() func() (live, other int64) {
	names := [...]string{
		"/gc/heap/live:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	return func() (live, other int64) {
		metrics.Read(samples)
		var v [len(names)]int64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				v[i] = int64(s.Value.Uint64())
			}
		}
		return v[0], max(v[1]-v[2]-v[3]-v[4]-v[5], 0)
	}
}
