package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/admin/admintest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestLatencyHistogramBuckets(t *testing.T) {
	// Buckets are contiguous: each starts right after the previous
	// ends, and every value maps to the bucket whose bound covers it.
	prevUpper := int64(-1)
	for i := range latencyBuckets {
		upper := latencyBucketUpper(i)
		if i < 200 && int64(upper) <= prevUpper {
			t.Fatalf("bucket %d ends at %d, before bucket %d (%d)", i, upper, i-1, prevUpper)
		}
		lower := uint64(prevUpper + 1)
		if i > 0 && i < latencyBuckets-1 {
			if latencyBucket(lower) != i || latencyBucket(upper) != i {
				t.Fatalf("bucket %d [%d, %d]: values map to %d and %d", i, lower, upper, latencyBucket(lower), latencyBucket(upper))
			}
			// At most about 3% wide.
			if lower >= 64 && float64(upper-lower+1) > float64(lower)/latencySubBuckets+1e-9 {
				t.Fatalf("bucket %d [%d, %d] is too wide", i, lower, upper)
			}
		}
		prevUpper = int64(upper)
	}
	if latencyBucket(math.MaxUint64) != latencyBuckets-1 {
		t.Errorf("the largest value maps to %d", latencyBucket(math.MaxUint64))
	}
}

func TestLatencyHistogramQuantiles(t *testing.T) {
	var h latencyHistogram
	if _, ok := h.quantile(0.5); ok || h.quantileMs(0.5) != nil {
		t.Error("an empty histogram has no quantiles")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var exact []time.Duration
	for range 20000 {
		d := time.Duration(rng.ExpFloat64() * float64(20*time.Millisecond))
		exact = append(exact, d)
		h.add(d)
	}
	h.add(-time.Second) // counted as 0
	exact = append(exact, 0)
	p := harness.ComputePercentiles(exact)
	for _, q := range []struct {
		q     float64
		exact time.Duration
	}{{0.5, p.P50}, {0.99, p.P99}, {1, p.Max}} {
		got, _ := h.quantile(q.q)
		if got < q.exact || float64(got) > float64(q.exact)*1.04+float64(time.Microsecond) {
			t.Errorf("q%v: %s, exact %s", q.q, got, q.exact)
		}
	}
	// Merging two halves gives the same quantiles as one histogram.
	var a, b latencyHistogram
	for i, d := range exact {
		if i%2 == 0 {
			a.add(d)
		} else {
			b.add(d)
		}
	}
	a.merge(&b)
	if a.n != h.n || a.max != h.max || a.counts != h.counts {
		t.Error("merged halves differ from the whole")
	}
}

func TestHeapLive(t *testing.T) {
	page := func(extra string) admin.MetricFamilies {
		return admintest.ParseMetricsText(t, "# TYPE go_memstats_next_gc_bytes gauge\ngo_memstats_next_gc_bytes 300\n"+extra)
	}
	for _, tc := range []struct {
		name string
		m    admin.MetricFamilies
		want *int64
	}{
		{"GOGC 100", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 100\n"), i64(150)},
		{"GOGC 200", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 200\n"), i64(100)},
		{"GOGC not exported", page(""), i64(150)},
		{"GC off", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent -1\n"), nil},
		{"no goal", admintest.ParseMetricsText(t, "# TYPE go_goroutines gauge\ngo_goroutines 5\n"), nil},
	} {
		got := heapLive(tc.m)
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, countPtrCell(got), countPtrCell(tc.want))
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tweir\nVmPeak:\t 2000 kB\nVmRSS:\t  123456 kB\nThreads:\t12\n"
	if got, err := parseVmRSS([]byte(status)); err != nil || got != 123456<<10 {
		t.Errorf("got %d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tweir\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// This process's own status parses.
	if rss, err := procRSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("own RSS: %d, %v", rss, err)
	}
	if _, err := procRSS(1 << 30); err == nil {
		t.Error("a process that does not exist has no RSS")
	}
}

func soakMetricsPage(goroutines, heap, rss, conns int) string {
	return fmt.Sprintf(`# TYPE go_goroutines gauge
go_goroutines %d
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes %d
# TYPE go_memstats_next_gc_bytes gauge
go_memstats_next_gc_bytes %d
# TYPE go_gc_gogc_percent gauge
go_gc_gogc_percent 100
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %d
# TYPE weir_kafka_connections gauge
weir_kafka_connections %d
`, goroutines, heap, 2*heap, rss, conns)
}

func TestSoakSamplerAgainstFakeBrokers(t *testing.T) {
	b1, b2 := admintest.NewFakeBroker(t, admintest.BrokerPage{}), admintest.NewFakeBroker(t, admintest.BrokerPage{})
	b1.SetPageText(soakMetricsPage(100, 10<<20, 50<<20, 7))
	b2.SetPageText(soakMetricsPage(200, 20<<20, 60<<20, 3))
	brokers := []admin.Broker{{NodeID: 1, AdminAddr: b1.Addr(), IsAlive: true}, {NodeID: 2, AdminAddr: b2.Addr(), IsAlive: true}}
	b1.SetBrokers(brokers...)

	tr := testSoakTraffic()
	conns := &soakConnStats{}
	conns.open.Store(42)
	started := time.Now().Add(-time.Minute)
	b := &soakBench{g: &cli.Options{Timeout: 5 * time.Second}, o: &soakOptions{}, admin: b1.Client(), brokers: brokers}
	s := newSoakSampler(b, tr, conns, started, 30*time.Second)
	// An interval that began before the end of warm-up: counted in the
	// sample, not in the figures after warm-up.
	tr.acked.Add(600)
	tr.window.add([]time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
	tr.produceErrs.add(errors.New("boom"))
	sm := s.take(context.Background())
	// Quantiles are their bucket's upper bound, at most the largest.
	if sm.ProducedPerSec < 9 || sm.ProducedPerSec > 11 || sm.DeliveredPerSec <= 0 || *sm.P50Ms < 2 || *sm.P50Ms > 2.07 || *sm.P99Ms != 3 ||
		*sm.Goroutines != 300 || *sm.HeapInUseBytes != 30<<20 || *sm.HeapLiveBytes != 30<<20 || *sm.RSSBytes != 110<<20 || *sm.Connections != 10 ||
		sm.RawConnectionsOpen != 42 || sm.Errors != 1 || len(sm.Brokers) != 2 {
		t.Errorf("first sample: %s", clitest.JSONOf(t, sm))
	}
	if s.overall.n != 0 || s.ackedAfterWarmup != 0 {
		t.Error("the warm-up interval counted after warm-up")
	}
	// The next interval is after warm-up; broker 2 is down, so no totals.
	tr.window.add([]time.Duration{5 * time.Millisecond})
	tr.acked.Add(1)
	brokers[1].IsAlive = false
	sm = s.take(context.Background())
	if sm.P50Ms == nil || *sm.P50Ms != 5 || sm.Goroutines != nil || sm.RSSBytes != nil || sm.Brokers[1].Error == "" || *sm.Brokers[0].Goroutines != 100 {
		t.Errorf("second sample: %s", clitest.JSONOf(t, sm))
	}
	if s.overall.n != 1 || s.ackedAfterWarmup != 1 || s.deliveredAfterWarmup != 1 || s.failedScrapes != 1 || len(s.samples) != 2 {
		t.Errorf("after warm-up: %d latencies, %d acked, %d delivered, %d failed scrapes", s.overall.n, s.ackedAfterWarmup, s.deliveredAfterWarmup, s.failedScrapes)
	}

	// With --pid, resident memory is the process's VmRSS.
	b.o.pid = os.Getpid()
	brokers[1].IsAlive = true
	b.brokers = brokers[:1]
	if sm := s.take(context.Background()); sm.RSSBytes == nil || *sm.RSSBytes == 50<<20 || s.procErr != nil {
		t.Errorf("--pid: %s (%v)", clitest.JSONOf(t, sm), s.procErr)
	}
	// The brokers at rest.
	b.brokers = brokers
	if r, err := b.readRest(context.Background()); err != nil || r.Goroutines != 300 || r.Connections != 10 {
		t.Errorf("at rest: %+v, %v", r, err)
	}
}
