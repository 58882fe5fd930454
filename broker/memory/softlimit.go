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
// SoftLimit therefore gives the collector no headroom for the bytes the
// budgets hold, and for memory outside them only as much as the broker
// is allocating:
//
//	limit = live + other + headroom,  within [Floor, Ceiling]
//	headroom = min(max(allocating, (live + other)/4, MinSlack), max(live - charged, 0)/2 + Slack)
//
// where live is the heap live at the last collection, other the memory
// the runtime holds besides heap objects and free pages (goroutine
// stacks, its own metadata), charged what the budgets hold now, and
// allocating what the heap allocated over the last AllocationWindow, held
// at its peak and let down by half every AllocationDecay; all recomputed
// every Interval.
//
// The runtime's limit covers all of its memory, and other is not the
// collector's to free: a broker of 3,000 partition replicas holds ~100
// MiB of Raft goroutine stacks, and a limit that left them out sat below
// what the process needed and kept the collector running flat out.
//
// The headroom's upper bound is half the memory outside the budgets (as
// GOGC=50 would give) plus Slack, for a broker under load. An idle broker
// allocates a few MiB a second, and headroom it does not allocate into is
// memory held for nothing: a broker of thousands of idle partition
// replicas kept 50–80 MiB of garbage-to-be above its live heap, 15–25
// KiB per replica. The least headroom is a quarter of what a collection
// scans (the live heap, and the goroutine stacks in other), as GOGC=25
// would give: a collection's cost grows with what it scans, and a broker
// of 3,000 replicas allocating 4–7 MiB a second idle, collecting every 16
// MiB (~300 ms of CPU each), spent 10–14% of a core on it. A burst raises
// the headroom at the next update; one that fills a budget faster than
// that only makes the collector run more often until then (the runtime
// caps its CPU at half the process while over the limit); the memory is
// never refused.
type SoftLimit struct {
	// Ceiling is the highest limit ever set: a share of the memory the
	// process may use (the cgroup's limit or the machine's). 0: none.
	Ceiling int64
	// Floor is the lowest limit ever set; default 64 MiB.
	Floor int64
	// Slack is added to the headroom's upper bound; default 64 MiB.
	Slack int64
	// MinSlack is the least headroom, however little the heap allocates;
	// default 16 MiB.
	MinSlack int64
	// AllocationWindow is how much of the heap's allocation, at its
	// current rate, the headroom may hold; default 2 s.
	AllocationWindow time.Duration
	// AllocationDecay is the half-life of a past peak of allocation;
	// default 5 s.
	AllocationDecay time.Duration
	// Interval between updates; default 100 ms.
	Interval time.Duration
	// Charged reports the bytes the budgets hold now (fetch responses,
	// requests, recycled read buffers).
	Charged func() int64

	// For tests: the runtime's figures (see above) and its setter.
	usage func() runtimeFigures
	set   func(int64) int64
}

// Usage is what a limit is computed from.
type Usage struct {
	// Live is the heap the last collection found live, Other the memory
	// the runtime holds besides heap objects and free pages.
	Live, Other int64
	// Charged is what the budgets hold now.
	Charged int64
	// Allocating is the heap's allocation over the last
	// AllocationWindow, at its recent peak.
	Allocating int64
}

// Defaults of SoftLimit's zero fields.
const (
	DefaultSoftLimitFloor    = 64 << 20
	DefaultSoftLimitSlack    = 64 << 20
	DefaultSoftLimitMinSlack = 16 << 20
	DefaultAllocationWindow  = 2 * time.Second
	DefaultAllocationDecay   = 5 * time.Second
	DefaultSoftLimitInterval = 100 * time.Millisecond
)

// Limit is the soft limit for u.
func (s *SoftLimit) Limit(u Usage) int64 {
	floor := orDefault(s.Floor, DefaultSoftLimitFloor)
	slack := orDefault(s.Slack, DefaultSoftLimitSlack)
	minSlack := orDefault(s.MinSlack, DefaultSoftLimitMinSlack)
	headroom := min(max(u.Allocating, (u.Live+u.Other)/4, minSlack), max(u.Live-u.Charged, 0)/2+slack)
	limit := max(u.Live+u.Other+headroom, floor)
	if s.Ceiling > 0 {
		limit = min(limit, s.Ceiling)
	}
	return limit
}

func orDefault(n, def int64) int64 {
	if n <= 0 {
		return def
	}
	return n
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
	rate := allocationRate{
		window: orDefault(int64(s.AllocationWindow), int64(DefaultAllocationWindow)),
		decay:  math.Exp2(-float64(interval) / float64(orDefault(int64(s.AllocationDecay), int64(DefaultAllocationDecay)))),
	}
	defer set(math.MaxInt64)
	t := time.NewTicker(interval)
	defer t.Stop()
	last := int64(-1)
	for {
		f := usage()
		u := Usage{Live: f.live, Other: f.other, Charged: charged(), Allocating: rate.update(f.allocs, time.Now())}
		// A new limit makes the runtime recompute its pacing and wake
		// its scavenger: not worth doing for the few KiB an idle heap
		// moves by between updates.
		if limit := s.Limit(u); last < 0 || abs(limit-last) > last/32 {
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

// allocationRate turns the heap's cumulative allocation into the bytes
// it allocates per window, held at its peak and decaying from it by decay
// per update, so a burst raises the headroom at once and a lull lowers it
// only gradually.
type allocationRate struct {
	window    int64 // ns
	decay     float64
	allocs    int64
	at        time.Time
	allocated float64
}

func (r *allocationRate) update(allocs int64, now time.Time) int64 {
	if !r.at.IsZero() {
		if dt := now.Sub(r.at); dt > 0 {
			perWindow := float64(max(allocs-r.allocs, 0)) * float64(r.window) / float64(dt)
			r.allocated = max(perWindow, r.allocated*r.decay)
		}
	}
	r.allocs, r.at = allocs, now
	return int64(r.allocated)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// runtimeFigures are the runtime's own figures a limit is computed from.
type runtimeFigures struct {
	live, other int64
	allocs      int64 // cumulative bytes allocated on the heap
}

// runtimeUsage reads the heap the last collection found live, the
// memory the runtime holds besides heap objects and heap pages free or
// returned to the system (what the limit counts that collecting does not
// free), and the heap's cumulative allocation.
func runtimeUsage() func() runtimeFigures {
	names := [...]string{
		"/gc/heap/live:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
		"/gc/heap/allocs:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	return func() runtimeFigures {
		metrics.Read(samples)
		var v [len(names)]int64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				v[i] = int64(s.Value.Uint64())
			}
		}
		return runtimeFigures{live: v[0], other: max(v[1]-v[2]-v[3]-v[4]-v[5], 0), allocs: v[6]}
	}
}
