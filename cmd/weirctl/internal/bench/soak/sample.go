package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
)

// Metric names bench soak reads from a broker's /metrics, besides
// admin.MetricResidentMemory and admin.MetricGoroutines.
const (
	metricHeapInUse        = "go_memstats_heap_inuse_bytes"
	metricNextGC           = "go_memstats_next_gc_bytes"
	metricGOGC             = "go_gc_gogc_percent"
	metricKafkaConnections = "weir_kafka_connections"

	// defaultGOGC is the Go runtime's GOGC when a broker does not export
	// it.
	defaultGOGC = 100
)

const (
	// latencySubBuckets is how many buckets each power of two of
	// microseconds is split into: a bucket is at most 1/32 (about 3%)
	// as wide as its lower bound.
	latencySubBuckets = 32
	// latencyBuckets covers every uint64 of microseconds: exact below
	// 2*latencySubBuckets, then latencySubBuckets per power of two up
	// to 2^64.
	latencyBuckets = 2*latencySubBuckets + (64-6)*latencySubBuckets
)

// latencyHistogram counts latencies in buckets about 3% wide, so that
// an hour of deliveries takes the same 15 KiB as a second.
type latencyHistogram struct {
	counts [latencyBuckets]uint64
	n      uint64
	max    time.Duration
}

func latencyBucket(us uint64) int {
	if us < 2*latencySubBuckets {
		return int(us)
	}
	e := bits.Len64(us) - 6 // us>>e is in [32, 63]
	return 2*latencySubBuckets + (e-1)*latencySubBuckets + int(us>>e) - latencySubBuckets
}

// latencyBucketUpper is the largest number of microseconds bucket i
// counts.
func latencyBucketUpper(i int) uint64 {
	if i < 2*latencySubBuckets {
		return uint64(i)
	}
	j := i - 2*latencySubBuckets
	e := j/latencySubBuckets + 1
	m := uint64(j%latencySubBuckets + latencySubBuckets)
	return (m+1)<<e - 1
}

// add counts d; a negative latency (a clock step) counts as 0.
func (h *latencyHistogram) add(d time.Duration) {
	d = max(d, 0)
	h.counts[latencyBucket(uint64(d/time.Microsecond))]++
	h.n++
	h.max = max(h.max, d)
}

func (h *latencyHistogram) merge(o *latencyHistogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile is the nearest-rank q-quantile, as the upper bound of its
// bucket (never more than the largest latency counted); false when
// nothing was counted.
func (h *latencyHistogram) quantile(q float64) (time.Duration, bool) {
	if h.n == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(latencyBucketUpper(i))*time.Microsecond, h.max), true
		}
	}
	return h.max, true
}

// quantileMs is quantile in milliseconds, nil when nothing was counted.
func (h *latencyHistogram) quantileMs(q float64) *float64 {
	d, ok := h.quantile(q)
	if !ok {
		return nil
	}
	v := harness.Milliseconds(d)
	return &v
}

// soakWindow collects the deliveries of one sample interval; consumers
// add to it, the sampler takes it.
type soakWindow struct {
	mu        sync.Mutex
	delivered int64
	latency   latencyHistogram
}

// add counts one poll's first deliveries.
func (w *soakWindow) add(latencies []time.Duration) {
	if len(latencies) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delivered += int64(len(latencies))
	for _, d := range latencies {
		w.latency.add(d)
	}
}

// take returns the interval's deliveries and starts the next interval.
func (w *soakWindow) take(into *latencyHistogram) (delivered int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delivered = w.delivered
	*into = w.latency
	w.delivered, w.latency = 0, latencyHistogram{}
	return delivered
}

// soakBrokerReading is one broker's series in one sample; null when it
// does not export one (or, for all, when its scrape failed).
type soakBrokerReading struct {
	NodeID         int32  `json:"node_id"`
	RSSBytes       *int64 `json:"rss_bytes"`
	HeapInUseBytes *int64 `json:"heap_inuse_bytes"`
	HeapLiveBytes  *int64 `json:"heap_live_bytes"`
	Goroutines     *int64 `json:"goroutines"`
	Connections    *int64 `json:"connections"`
	Error          string `json:"error,omitempty"`
}

// readSoakBroker reads a broker's series from a scrape.
func readSoakBroker(nodeID int32, m admin.MetricFamilies) soakBrokerReading {
	get := func(name string) *int64 {
		v, ok := m.Sum(name, nil)
		if !ok {
			return nil
		}
		n := int64(math.Round(v))
		return &n
	}
	return soakBrokerReading{
		NodeID:         nodeID,
		RSSBytes:       get(admin.MetricResidentMemory),
		HeapInUseBytes: get(metricHeapInUse),
		HeapLiveBytes:  heapLive(m),
		Goroutines:     get(admin.MetricGoroutines),
		Connections:    get(metricKafkaConnections),
	}
}

// heapLive is the heap the last garbage collection found live, from the
// goal it set for the next: live * (1 + GOGC/100). Heap in use swings
// with every collection, between the live heap and that goal, so a
// sample of it says as much about when the sample fell in the cycle as
// about the heap; the goal moves only when the live heap does. (Under a
// binding GOMEMLIMIT the goal is lower, and so is this estimate.) nil
// when the broker exports no goal, or its collector is off.
func heapLive(m admin.MetricFamilies) *int64 {
	goal, ok := m.Sum(metricNextGC, nil)
	if !ok {
		return nil
	}
	gogc, ok := m.Sum(metricGOGC, nil)
	if !ok {
		gogc = defaultGOGC
	}
	if gogc <= 0 {
		return nil
	}
	n := int64(math.Round(goal / (1 + gogc/100)))
	return &n
}

// procRSS reads VmRSS from /proc/PID/status.
func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the resident memory of process %d: %w", pid, err)
	}
	rss, err := parseVmRSS(data)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return rss, nil
}

// parseVmRSS finds "VmRSS: N kB" in a /proc/PID/status and returns N KiB
// in bytes.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unreadable VmRSS line %q", sc.Text())
		}
		kib, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kib < 0 {
			return 0, fmt.Errorf("unreadable VmRSS line %q", sc.Text())
		}
		return kib << 10, nil
	}
	return 0, fmt.Errorf("no VmRSS line (a kernel thread, or a process that is exiting?)")
}

// soakSample is one sample: rates over the interval that ends at
// Seconds, and the brokers' series at its end. The totals are sums over
// the brokers, null unless every broker gave the series.
type soakSample struct {
	Seconds         float64  `json:"seconds"`
	Phase           string   `json:"phase"`
	ProducedPerSec  float64  `json:"produced_per_sec"`
	DeliveredPerSec float64  `json:"delivered_per_sec"`
	P50Ms           *float64 `json:"p50_ms"`
	P99Ms           *float64 `json:"p99_ms"`
	RSSBytes        *int64   `json:"rss_bytes"`
	HeapInUseBytes  *int64   `json:"heap_inuse_bytes"`
	HeapLiveBytes   *int64   `json:"heap_live_bytes"`
	Goroutines      *int64   `json:"goroutines"`
	Connections     *int64   `json:"connections"`
	// RawConnectionsOpen is the soak's own raw connections that were up.
	RawConnectionsOpen int64 `json:"raw_connections_open"`
	// Errors is the count so far, of every kind.
	Errors  int64               `json:"errors"`
	Brokers []soakBrokerReading `json:"brokers"`
}

// sumReadings fills the sample's totals from the brokers' readings.
func (s *soakSample) sumReadings() {
	total := func(get func(soakBrokerReading) *int64) *int64 {
		var sum int64
		for _, r := range s.Brokers {
			v := get(r)
			if v == nil {
				return nil
			}
			sum += *v
		}
		if len(s.Brokers) == 0 {
			return nil
		}
		return &sum
	}
	s.RSSBytes = total(func(r soakBrokerReading) *int64 { return r.RSSBytes })
	s.HeapInUseBytes = total(func(r soakBrokerReading) *int64 { return r.HeapInUseBytes })
	s.HeapLiveBytes = total(func(r soakBrokerReading) *int64 { return r.HeapLiveBytes })
	s.Goroutines = total(func(r soakBrokerReading) *int64 { return r.Goroutines })
	s.Connections = total(func(r soakBrokerReading) *int64 { return r.Connections })
}

// assignPhases marks the samples taken before warmup ended, and splits
// the others into thirds.
func assignPhases(samples []soakSample, warmup time.Duration) {
	var after []int
	for i := range samples {
		if samples[i].Seconds < warmup.Seconds() {
			samples[i].Phase = phaseWarmup
			continue
		}
		after = append(after, i)
	}
	for k, i := range after {
		samples[i].Phase = phaseOf(k, len(after))
	}
}

// soakSampler takes the samples: it diffs the counters since the last
// one and scrapes the brokers.
type soakSampler struct {
	b       *soakBench
	traffic *soakTraffic
	conns   *soakConnStats
	started time.Time
	warmup  time.Duration

	lastAt    time.Time
	lastAcked int64
	window    latencyHistogram
	samples   []soakSample

	// Totals over the intervals after warm-up.
	overall              latencyHistogram
	deliveredAfterWarmup int64
	ackedAfterWarmup     int64
	secondsAfterWarmup   float64

	scrapes, failedScrapes int
	lastScrapeErr          error
	procErr                error
}

func newSoakSampler(b *soakBench, traffic *soakTraffic, conns *soakConnStats, started time.Time, warmup time.Duration) *soakSampler {
	return &soakSampler{b: b, traffic: traffic, conns: conns, started: started, warmup: warmup, lastAt: started}
}

// take samples now; the interval is since the previous sample.
func (s *soakSampler) take(ctx context.Context) soakSample {
	now := time.Now()
	secs := now.Sub(s.lastAt).Seconds()
	delivered := s.traffic.window.take(&s.window)
	acked := s.traffic.acked.Load()
	sm := soakSample{
		Seconds:            now.Sub(s.started).Seconds(),
		P50Ms:              s.window.quantileMs(0.50),
		P99Ms:              s.window.quantileMs(0.99),
		RawConnectionsOpen: s.conns.open.Load(),
		Errors:             s.traffic.errorTotal(),
	}
	if secs > 0 {
		sm.ProducedPerSec = float64(acked-s.lastAcked) / secs
		sm.DeliveredPerSec = float64(delivered) / secs
	}
	// An interval that began in warm-up is left out of the after-warm-up
	// figures, like the sample itself.
	if s.lastAt.Sub(s.started) >= s.warmup {
		s.overall.merge(&s.window)
		s.deliveredAfterWarmup += delivered
		s.ackedAfterWarmup += acked - s.lastAcked
		s.secondsAfterWarmup += secs
	}
	s.lastAt, s.lastAcked = now, acked

	sm.Brokers = s.readBrokers(ctx)
	sm.sumReadings()
	s.samples = append(s.samples, sm)
	return sm
}

// readBrokers scrapes every broker; with --pid, resident memory comes
// from /proc instead.
func (s *soakSampler) readBrokers(ctx context.Context) []soakBrokerReading {
	scrapes := s.b.admin.ScrapeBrokers(ctx, s.b.brokers)
	out := make([]soakBrokerReading, 0, len(scrapes))
	for _, sc := range scrapes {
		s.scrapes++
		if sc.Err != nil {
			s.failedScrapes++
			s.lastScrapeErr = sc.Err
			out = append(out, soakBrokerReading{NodeID: sc.Broker.NodeID, Error: sc.Err.Error()})
			continue
		}
		r := readSoakBroker(sc.Broker.NodeID, sc.Metrics)
		if s.b.o.pid > 0 {
			r.RSSBytes = nil
			if rss, err := procRSS(s.b.o.pid); err != nil {
				s.procErr = err
			} else {
				r.RSSBytes = &rss
			}
		}
		out = append(out, r)
	}
	return out
}
