package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
)

// Memory series a broker exports on its admin API's /metrics. Older
// brokers export none of them, which means there is nothing to say.
const (
	healthMetricRequestMemoryWaitSeconds = "weir_request_memory_wait_seconds_total"
	healthMetricRequestMemoryWaits       = "weir_request_memory_waits_total"
	healthMetricRequestMemoryPool        = "weir_request_memory_pool_bytes"
	healthMetricRequestMemoryInUse       = "weir_request_memory_in_use_bytes"

	healthMetricFetchMemoryWaitSeconds  = "weir_fetch_memory_wait_seconds_total"
	healthMetricFetchMemoryWaits        = "weir_fetch_memory_waits_total"
	healthMetricFetchMemoryBudget       = "weir_fetch_memory_budget_bytes"
	healthMetricFetchMemoryInUse        = "weir_fetch_memory_in_use_bytes"
	healthMetricFetchMemoryTrimmedReads = "weir_fetch_memory_trimmed_reads_total"

	// healthNoBroker is a warning's node_id when it is about no one broker,
	// as Kafka uses -1 for "no node".
	healthNoBroker = -1
)

// healthMemoryPool names one memory pool's series.
type healthMemoryPool struct {
	name  string // the "pool" field of a warning
	title string // how a warning line names the pool
	who   string // what waits for it

	waitSeconds, waits, size, inUse string
	// trimmedReads is the counter of reads cut short for the pool; ""
	// when the pool has none.
	trimmedReads string
	// zeroIsUnbounded: a size of 0 means the pool has no bound.
	zeroIsUnbounded bool
}

// healthMemoryPools lists the pools health checks; a function rather than a
// package variable so nothing can modify the list.
func healthMemoryPools() []healthMemoryPool {
	return []healthMemoryPool{
		{
			name: "request", title: "request memory pool (queued_max_request_bytes)", who: "requests",
			waitSeconds: healthMetricRequestMemoryWaitSeconds, waits: healthMetricRequestMemoryWaits,
			size: healthMetricRequestMemoryPool, inUse: healthMetricRequestMemoryInUse,
		},
		{
			name: "fetch", title: "fetch memory budget", who: "fetches",
			waitSeconds: healthMetricFetchMemoryWaitSeconds, waits: healthMetricFetchMemoryWaits,
			size: healthMetricFetchMemoryBudget, inUse: healthMetricFetchMemoryInUse,
			trimmedReads: healthMetricFetchMemoryTrimmedReads, zeroIsUnbounded: true,
		},
	}
}

// healthMemoryWarning is one line of the memory check, in `cluster health`'s
// memory_warnings. A pool warning fills the figures; a broker that could
// not be judged has only node_id and message.
type healthMemoryWarning struct {
	NodeID int32 `json:"node_id"` // -1: not about one broker
	// Pool is "request" or "fetch".
	Pool string `json:"pool,omitempty"`
	// WaitSeconds is the growth of the pool's wait-seconds counter over
	// IntervalSeconds, summed over waiters; WaitFraction is their ratio,
	// which passes 1 when several wait at once.
	WaitSeconds     float64 `json:"wait_seconds,omitempty"`
	IntervalSeconds float64 `json:"interval_seconds,omitempty"`
	WaitFraction    float64 `json:"wait_fraction,omitempty"`
	// Waits is how many waits began in the interval, when exported.
	Waits *uint64 `json:"waits,omitempty"`
	// InUseBytes and SizeBytes are the pool's gauges at the second read;
	// a fetch budget of 0 is unbounded.
	InUseBytes   *int64  `json:"in_use_bytes,omitempty"`
	SizeBytes    *int64  `json:"size_bytes,omitempty"`
	TrimmedReads *uint64 `json:"trimmed_reads,omitempty"`
	Message      string  `json:"message"`
}

// checkBrokerMemory reads every broker's /metrics twice, sample apart,
// and judges the change. Only an interruption is an error: a cluster
// whose admin API cannot be reached gets a warning saying so, since the
// memory check must not fail a health check that passed.
func checkBrokerMemory(ctx context.Context, c *admin.Client, sample time.Duration) ([]healthMemoryWarning, error) {
	brokers, err := c.ListBrokers(ctx)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("memory check: %w", context.Cause(ctx))
	}
	if err != nil {
		return []healthMemoryWarning{{NodeID: healthNoBroker,
			Message: fmt.Sprintf("memory not checked: %v (set --admin-url, or --memory-sample 0 to skip the check)", err)}}, nil
	}
	first, firstAt := scrapeBrokersTimed(ctx, c, brokers)
	t := time.NewTimer(sample)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("memory check: %w", context.Cause(ctx))
	case <-t.C:
	}
	second, secondAt := scrapeBrokersTimed(ctx, c, brokers)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("memory check: %w", context.Cause(ctx))
	}
	return healthMemoryWarnings(first, second, secondAt.Sub(firstAt)), nil
}

// scrapeBrokersTimed scrapes and returns the midpoint of the scrapes, the
// best single time for counters read concurrently at slightly different
// moments.
func scrapeBrokersTimed(ctx context.Context, c *admin.Client, brokers []admin.Broker) ([]admin.BrokerScrape, time.Time) {
	start := time.Now()
	s := c.ScrapeBrokers(ctx, brokers)
	return s, start.Add(time.Since(start) / 2)
}

// healthMemoryWarnings compares two reads of the same brokers, interval apart:
// a pool whose wait-seconds counter grew gets a warning; so does a broker
// that was not read both times, or whose counters went backwards (it
// restarted). A pool that is not exported is not mentioned.
func healthMemoryWarnings(first, second []admin.BrokerScrape, interval time.Duration) []healthMemoryWarning {
	out := []healthMemoryWarning{}
	earlier := map[int32]admin.BrokerScrape{}
	for _, s := range first {
		earlier[s.Broker.NodeID] = s
	}
	for _, after := range second {
		id := after.Broker.NodeID
		before, ok := earlier[id]
		var err error
		switch {
		case !ok:
			err = fmt.Errorf("not in the first read")
		case before.Err != nil:
			err = before.Err
		case after.Err != nil:
			err = after.Err
		}
		if err != nil {
			out = append(out, healthMemoryWarning{NodeID: id, Message: fmt.Sprintf("broker %d: memory not checked: %v", id, err)})
			continue
		}
		// A restart resets every counter, so one that went backwards
		// discredits the growth of the others too.
		var pools []healthMemoryWarning
		reset := false
		for _, p := range healthMemoryPools() {
			w, grew, wentBack := healthPoolWarning(id, p, before.Metrics, after.Metrics, interval)
			reset = reset || wentBack
			if grew {
				pools = append(pools, w)
			}
		}
		if reset {
			pools = []healthMemoryWarning{{NodeID: id, Message: fmt.Sprintf("broker %d: memory not checked: its counters went backwards between the reads (restarted?)", id)}}
		}
		out = append(out, pools...)
	}
	return out
}

// healthPoolWarning judges one pool of one broker: grew when its waiters spent
// time waiting in the interval, wentBack when its wait counter decreased.
func healthPoolWarning(id int32, p healthMemoryPool, before, after admin.MetricFamilies, interval time.Duration) (w healthMemoryWarning, grew, wentBack bool) {
	w0, ok0 := before.Sum(p.waitSeconds, nil)
	w1, ok1 := after.Sum(p.waitSeconds, nil)
	if !ok0 || !ok1 {
		return healthMemoryWarning{}, false, false
	}
	waited := w1 - w0
	if waited < 0 {
		return healthMemoryWarning{}, false, true
	}
	if waited == 0 {
		return healthMemoryWarning{}, false, false
	}
	w = healthMemoryWarning{NodeID: id, Pool: p.name, WaitSeconds: waited, IntervalSeconds: interval.Seconds()}
	if interval > 0 {
		w.WaitFraction = waited / interval.Seconds()
	}
	w.Waits = healthCounterGrowth(before, after, p.waits)
	if p.trimmedReads != "" {
		w.TrimmedReads = healthCounterGrowth(before, after, p.trimmedReads)
	}
	w.InUseBytes = healthGaugeBytes(after, p.inUse)
	w.SizeBytes = healthGaugeBytes(after, p.size)
	w.Message = healthPoolMessage(p, w)
	return w, true, false
}

// healthCounterGrowth is how much a counter grew, or nil when it is missing
// from either read or went backwards.
func healthCounterGrowth(before, after admin.MetricFamilies, name string) *uint64 {
	v0, ok0 := before.Sum(name, nil)
	v1, ok1 := after.Sum(name, nil)
	if !ok0 || !ok1 || v1 < v0 {
		return nil
	}
	n := uint64(math.Round(v1 - v0))
	return &n
}

// healthGaugeBytes reads a byte gauge, summed over its series (one per shard,
// say), or nil when it is not exported.
func healthGaugeBytes(f admin.MetricFamilies, name string) *int64 {
	v, ok := f.Sum(name, nil)
	if !ok {
		return nil
	}
	n := int64(math.Round(v))
	return &n
}

// healthPoolMessage is the line a pool warning prints, for example:
//
//	broker 1: fetch memory budget: fetches waited 150% of the 1.00s sample (1.50s summed over 30 waits); in use 60.0 MiB of 64.0 MiB; 12 partition reads trimmed
func healthPoolMessage(p healthMemoryPool, w healthMemoryWarning) string {
	var b strings.Builder
	fmt.Fprintf(&b, "broker %d: %s: %s waited %s of the %.2fs sample (%.2fs summed over ",
		w.NodeID, p.title, p.who, healthPercent(w.WaitFraction), w.IntervalSeconds, w.WaitSeconds)
	if w.Waits != nil {
		fmt.Fprintf(&b, "%d waits", *w.Waits)
	} else {
		b.WriteString("waiters")
	}
	inUse, size := "?", "?"
	if w.InUseBytes != nil {
		inUse = formatByteSize(*w.InUseBytes)
	}
	if w.SizeBytes != nil {
		size = formatByteSize(*w.SizeBytes)
		if *w.SizeBytes == 0 && p.zeroIsUnbounded {
			size = "unbounded"
		}
	}
	fmt.Fprintf(&b, "); in use %s of %s", inUse, size)
	if w.TrimmedReads != nil && *w.TrimmedReads > 0 {
		fmt.Fprintf(&b, "; %d partition reads trimmed", *w.TrimmedReads)
	}
	return b.String()
}

// percent prints a fraction as a percentage, keeping a tiny wait visible
// rather than rounding it to 0%.
func healthPercent(f float64) string {
	switch {
	case f > 0 && f < 0.001:
		return "<0.1%"
	case f < 0.1:
		return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + "%"
}
