package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestBenchSoakFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker or admin API is asked.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--sample", "1ms"}, "--sample must be at least 100ms"},
		{[]string{"--warmup", "10m"}, "--warmup (10m0s) must be shorter than --duration"},
		{[]string{"--warmup", "100%"}, "invalid argument"},
		{[]string{"--warmup", "soon"}, "invalid argument"},
		{[]string{"--duration", "30s", "--sample", "10s"}, "leaves 2 samples after warm-up"},
		{[]string{"--topic-prefix", ""}, "--topic-prefix must not be empty"},
		{[]string{"--topics", "0"}, "--topics must be >= 1"},
		{[]string{"--topics", "10", "--partitions", "5"}, "must be at least --topics"},
		{[]string{"-r", "0"}, "--replication-factor must be positive or -1"},
		{[]string{"--connections", "-1"}, "--connections must be >= 0"},
		{[]string{"--churn", "-1"}, "--churn must be >= 0"},
		{[]string{"--connections", "0"}, "there are none"},
		{[]string{"--connection-fetch-wait", "100us"}, "--connection-fetch-wait must be between"},
		{[]string{"--rate", "0"}, "--rate must be at least 1"},
		{[]string{"--record-size", "15"}, "--record-size must be at least 16"},
		{[]string{"--producers", "0"}, "--producers must be >= 1"},
		{[]string{"--producers", "301"}, "must not exceed --partitions"},
		{[]string{"--groups", "0"}, "--groups must be >= 1"},
		{[]string{"-c", "0"}, "--consumers must be >= 1"},
		{[]string{"--pid", "-2"}, "--pid must be a process ID"},
		{[]string{"--tolerance", "0"}, "--tolerance must be a positive percentage"},
		{[]string{"--drain", "0s"}, "--drain must be positive"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "bench", "soak", "--admin-url", "127.0.0.1:1"}, tc.args...)
		_, _, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := run(t, "", "bench", "soak", "extra"); err == nil {
		t.Error("bench soak takes no arguments")
	}
	// --churn 0 needs no connections.
	o := soakDefaults(t)
	o.connections, o.churn = 0, 0
	if err := o.validate(); err != nil {
		t.Errorf("--connections 0 --churn 0: %v", err)
	}
}

// soakDefaults returns the options as the command's defaults set them.
func soakDefaults(t *testing.T) *soakOptions {
	t.Helper()
	cmd := newBenchSoakCommand(&globalOptions{})
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	o := &soakOptions{}
	fl := cmd.Flags()
	get := func(name string) string { return fl.Lookup(name).Value.String() }
	parse := func(name string, dst any) {
		if _, err := fmt.Sscan(get(name), dst); err != nil {
			t.Fatalf("--%s default %q: %v", name, get(name), err)
		}
	}
	dur := func(name string) time.Duration {
		d, err := time.ParseDuration(get(name))
		if err != nil {
			t.Fatalf("--%s default: %v", name, err)
		}
		return d
	}
	o.duration, o.sample, o.connWait, o.drain = dur("duration"), dur("sample"), dur("connection-fetch-wait"), dur("drain")
	if err := o.warmup.Set(get("warmup")); err != nil {
		t.Fatal(err)
	}
	o.topicPrefix = get("topic-prefix")
	parse("topics", &o.topics)
	parse("partitions", &o.partitions)
	parse("replication-factor", &o.replicas)
	parse("connections", &o.connections)
	parse("churn", &o.churn)
	parse("rate", &o.rate)
	parse("record-size", &o.recordSize)
	parse("producers", &o.producers)
	parse("groups", &o.groups)
	parse("consumers", &o.consumers)
	parse("pid", &o.pid)
	parse("tolerance", &o.tolerance)
	return o
}

func TestBenchSoakDefaults(t *testing.T) {
	cmd := newBenchSoakCommand(&globalOptions{})
	for flag, want := range map[string]string{
		"duration": "10m0s", "warmup": "20%", "sample": "10s", "topic-prefix": "soak", "topics": "10", "partitions": "300",
		"replication-factor": "-1", "connections": "2000", "churn": "10", "connection-fetch-wait": "5s", "rate": "1000",
		"record-size": "512", "producers": "4", "groups": "2", "consumers": "3", "pid": "0", "tolerance": "10", "drain": "1m0s",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
	o := soakDefaults(t)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults must be valid: %v", err)
	}
	if w := o.warmup.of(o.duration); w != 2*time.Minute {
		t.Errorf("warm-up: %s", w)
	}
	if n := o.judgedSamples(); n != 48 {
		t.Errorf("samples after warm-up: %d", n)
	}
}

func TestBenchSoakAgainstDeadAdminAPIFailsFast(t *testing.T) {
	start := time.Now()
	out, _, err := run(t, "", "--brokers", "127.0.0.1:1", "--timeout", "500ms", "bench", "soak", "--admin-url", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "judges growth") {
		t.Errorf("want the admin API's absence pointed out, got %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
	if out != "" {
		t.Errorf("no summary without a load, got %q", out)
	}
}

func TestSoakWarmup(t *testing.T) {
	var w soakWarmup
	for _, tc := range []struct {
		in   string
		want time.Duration // of a 10m run
		str  string
	}{
		{"20%", 2 * time.Minute, "20%"},
		{" 12.5 % ", 75 * time.Second, "12.5%"},
		{"0%", 0, "0%"},
		{"90s", 90 * time.Second, "1m30s"},
		{"0s", 0, "0s"},
	} {
		if err := w.Set(tc.in); err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := w.of(10 * time.Minute); got != tc.want || w.String() != tc.str {
			t.Errorf("%q: %s (%s), want %s (%s)", tc.in, got, w.String(), tc.want, tc.str)
		}
	}
	for _, bad := range []string{"100%", "-5%", "x%", "-1s", "soon", ""} {
		if err := w.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSoakTopicPartitions(t *testing.T) {
	o := &soakOptions{topicPrefix: "s", topics: 3, partitions: 8}
	if got := o.topicPartitions(); !slices.Equal(got, []int32{3, 3, 2}) {
		t.Errorf("8 over 3: %v", got)
	}
	if got := o.topicNames(); !slices.Equal(got, []string{"s-0", "s-1", "s-2"}) {
		t.Errorf("names: %v", got)
	}
	o.topics, o.partitions = 10, 300
	for _, n := range o.topicPartitions() {
		if n != 30 {
			t.Fatalf("300 over 10: %v", o.topicPartitions())
		}
	}
}

// line returns n points a second apart of v(i).
func line(n int, v func(i int) float64) []growthPoint {
	pts := make([]growthPoint, n)
	for i := range pts {
		pts[i] = growthPoint{at: float64(i), v: v(i)}
	}
	return pts
}

func TestCheckGrowth(t *testing.T) {
	// Rising 2 a second from 1000: the slope is 120 a minute exactly,
	// and the last third (mean 1000+2*9.5) exceeds the first (1000+2*1.5)
	// by 16, more than the 1% tolerance (10.03) and the floor (5).
	c := checkGrowth("goroutines", "count", line(12, func(i int) float64 { return 1000 + 2*float64(i) }), 0.01, 5)
	if !c.Judged || !c.Grew || math.Abs(c.SlopePerMinute-120) > 1e-9 || c.FirstThird != 1003 || c.LastThird != 1019 || c.Allowed != 10.03 {
		t.Errorf("rising: %+v", c)
	}
	// The same rise under a 10% tolerance is no growth.
	if c := checkGrowth("goroutines", "count", line(12, func(i int) float64 { return 1000 + 2*float64(i) }), 0.10, 5); c.Grew {
		t.Errorf("within tolerance: %+v", c)
	}
	// A large relative rise of a small series stays under the floor.
	if c := checkGrowth("heap", "bytes", line(9, func(i int) float64 { return 100 + 10*float64(i) }), 0.10, 1000); c.Grew || c.Allowed != 1000 {
		t.Errorf("under the floor: %+v", c)
	}
	// Noise around a level: no growth, whatever the order.
	rng := rand.New(rand.NewPCG(1, 2))
	noisy := line(30, func(int) float64 { return 500 + 20*rng.Float64() })
	if c := checkGrowth("rss", "bytes", noisy, 0.10, 0); c.Grew {
		t.Errorf("noise: %+v", c)
	}
	// Falling: the last third is lower.
	if c := checkGrowth("rss", "bytes", line(9, func(i int) float64 { return 900 - 50*float64(i) }), 0.10, 0); c.Grew || c.Change >= 0 || c.SlopePerMinute >= 0 {
		t.Errorf("falling: %+v", c)
	}
	// The last third above the first, but a falling trend over all the
	// samples (a peak early, in the first third and the middle): the
	// slope must agree before it is growth.
	peak := []growthPoint{{0, 2000}, {1, 100}, {2, 100}, {3, 1500}, {4, 1500}, {5, 1500}, {6, 900}, {7, 900}, {8, 900}}
	if c := checkGrowth("x", "count", peak, 0.10, 0); c.LastThird <= c.FirstThird*1.1 || c.SlopePerMinute >= 0 || c.Grew {
		t.Errorf("falling trend, thirds apart: %+v", c)
	}
	// Too few points to have thirds.
	if c := checkGrowth("x", "count", line(2, func(i int) float64 { return float64(i) }), 0.1, 0); c.Judged || c.Grew || c.Samples != 2 {
		t.Errorf("two points: %+v", c)
	}
	if s := leastSquaresSlope([]growthPoint{{5, 1}, {5, 9}}); s != 0 {
		t.Errorf("points at one time: slope %v", s)
	}
}

func TestSoakVerdict(t *testing.T) {
	ok := growthCheck{Series: "rss", Judged: true}
	grew := growthCheck{Series: "goroutines", Judged: true, Grew: true}
	unjudged := growthCheck{Series: "heap_live"}
	for _, tc := range []struct {
		checks []growthCheck
		want   string
	}{
		{[]growthCheck{ok, ok}, "no growth"},
		{[]growthCheck{ok, grew, {Series: "connections", Judged: true, Grew: true}}, "grew: goroutines, connections"},
		{[]growthCheck{ok, unjudged}, "inconclusive: too few samples of heap_live"},
		{[]growthCheck{grew, unjudged}, "grew: goroutines"},
	} {
		if got := soakVerdict(tc.checks); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func i64(v int64) *int64 { return &v }

func TestAssignPhasesAndGrowthChecks(t *testing.T) {
	var samples []soakSample
	for i := range 11 {
		// Heap in use swings; it is shown, not judged.
		s := soakSample{Seconds: float64(10 * (i + 1)), RSSBytes: i64(100 << 20), HeapInUseBytes: i64(int64(i) << 30), HeapLiveBytes: i64(50 << 20),
			Goroutines: i64(1000 + 100*int64(i)), Connections: i64(2000)}
		if i == 5 {
			s.RSSBytes = nil // a failed scrape
		}
		samples = append(samples, s)
	}
	// Warm-up ends at 20s: samples at 10s are warm-up, the 10 from 20s
	// are split 3, 4, 3.
	assignPhases(samples, 20*time.Second)
	var phases []string
	for _, s := range samples {
		phases = append(phases, s.Phase)
	}
	want := []string{"warmup", "first", "first", "first", "middle", "middle", "middle", "middle", "last", "last", "last"}
	if !slices.Equal(phases, want) {
		t.Fatalf("phases: %v", phases)
	}
	checks := growthChecks(samples, 0.10)
	by := map[string]growthCheck{}
	for _, c := range checks {
		by[c.Series] = c
	}
	if c := by[seriesRSS]; c.Samples != 9 || c.Grew {
		t.Errorf("rss (one sample missing): %+v", c)
	}
	if c := by[seriesGoroutines]; c.Samples != 10 || !c.Grew || c.FirstThird != 1200 {
		t.Errorf("goroutines (warm-up left out): %+v", c)
	}
	if c := by[seriesHeapLive]; c.Grew || !c.Judged || len(checks) != 4 {
		t.Errorf("heap: %+v", c)
	}
	if soakVerdict(checks) != "grew: goroutines" {
		t.Errorf("verdict %q", soakVerdict(checks))
	}
}

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
	p := computePercentiles(exact)
	for _, q := range []struct {
		q     float64
		exact time.Duration
	}{{0.5, p.p50}, {0.99, p.p99}, {1, p.max}} {
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
	page := func(extra string) metricFamilies {
		return metricsText(t, "# TYPE go_memstats_next_gc_bytes gauge\ngo_memstats_next_gc_bytes 300\n"+extra)
	}
	for _, tc := range []struct {
		name string
		m    metricFamilies
		want *int64
	}{
		{"GOGC 100", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 100\n"), i64(150)},
		{"GOGC 200", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent 200\n"), i64(100)},
		{"GOGC not exported", page(""), i64(150)},
		{"GC off", page("# TYPE go_gc_gogc_percent gauge\ngo_gc_gogc_percent -1\n"), nil},
		{"no goal", metricsText(t, "# TYPE go_goroutines gauge\ngo_goroutines 5\n"), nil},
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

func TestSoakAcks(t *testing.T) {
	var a soakAcks
	for _, off := range []int64{10, 11, 12, 20, 21, 13} {
		a.add(off)
	}
	if a.total() != 6 || len(a.runs) != 3 {
		t.Fatalf("total %d, runs %v", a.total(), a.runs)
	}
	for _, tc := range []struct{ next, count, first int64 }{
		{0, 6, 10}, {12, 4, 12}, {14, 2, 20}, {21, 1, 21}, {22, 0, -1},
	} {
		if count, first := a.from(tc.next); count != tc.count || first != tc.first {
			t.Errorf("from %d: %d from %d, want %d from %d", tc.next, count, first, tc.count, tc.first)
		}
	}
}

// soakValue encodes a value as the soak's producers do.
func soakValue(sent time.Time, seq int64, size int) []byte {
	v := make([]byte, size)
	binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
	binary.BigEndian.PutUint64(v[8:], uint64(seq))
	return v
}

func TestSoakDeliveryTake(t *testing.T) {
	at := time.Unix(1700000000, 0)
	d := newSoakDelivery(100)
	take := func(offset, seq int64) bool {
		t.Helper()
		sent, first := d.take(offset, soakValue(at, seq, 32))
		if first && !sent.Equal(at) {
			t.Fatalf("offset %d: send time %s", offset, sent)
		}
		return first
	}
	if take(99, 0) || d.preexisting != 1 {
		t.Fatal("a record before the base is not the soak's")
	}
	if !take(100, 0) || !take(101, 1) || take(100, 0) || d.redelivered != 1 {
		t.Fatalf("in order, then again: %+v", d)
	}
	if d.problem != "" {
		t.Fatalf("no problem yet: %s", d.problem)
	}
	// Sequence 2 never written (its producer gave up): a skip, not a
	// problem.
	if !take(102, 3) || d.seqSkips != 1 || d.problem != "" {
		t.Fatalf("sequence skip: %+v", d)
	}
	// Offset 103 skipped.
	if !take(104, 4) || d.gapRecords != 1 || !strings.Contains(d.problem, "offset 104 delivered where 103 was due") {
		t.Fatalf("gap: %+v", d)
	}
	// Sequence 4 again at a new offset: written twice.
	if !take(105, 4) || d.backwards != 1 {
		t.Fatalf("written twice: %+v", d)
	}
	if _, first := d.take(106, []byte("short")); first || d.foreign != 1 || d.next != 107 {
		t.Fatalf("foreign: %+v", d)
	}
	if d.delivered != 5 {
		t.Errorf("delivered %d", d.delivered)
	}
}

func testSoakTraffic() *soakTraffic {
	parts := []*soakPartition{{topic: "a", partition: 0, base: 0}, {topic: "a", partition: 1, base: 5}, {topic: "b", partition: 0, base: 0}}
	return newSoakTraffic(parts, []string{"g0", "g1"})
}

func TestSoakTrafficVerify(t *testing.T) {
	tr := testSoakTraffic()
	if tr.groups[0].delivery("a", 2) != nil || tr.groups[0].delivery("c", 0) != nil || tr.groups[0].delivery("a", -1) != nil {
		t.Fatal("unknown partitions have no delivery")
	}
	at := time.Now()
	// Partition a/1 starts at 5; b/0 gets an acknowledged record no group
	// reads, and one record nobody acknowledged.
	for off := int64(5); off < 8; off++ {
		tr.parts[1].acks.add(off)
	}
	tr.parts[2].acks.add(0)
	tr.parts[2].acks.add(1)
	for _, g := range tr.groups {
		for off := int64(5); off < 8; off++ {
			g.delivery("a", 1).take(off, soakValue(at, off-5, 16))
		}
	}
	tr.groups[0].delivery("b", 0).take(0, soakValue(at, 0, 16))
	tr.groups[0].delivery("b", 0).take(1, soakValue(at, 1, 16))
	tr.groups[0].delivery("b", 0).take(2, soakValue(at, 2, 16))
	tr.groups[1].delivery("b", 0).take(0, soakValue(at, 0, 16))
	if got := tr.behind(); got != 1 {
		t.Errorf("behind: %d", got)
	}
	c := tr.verify()
	if c.Verified || c.Acknowledged != 5 || c.Delivered != 10 || c.Missing != 1 || c.Unacknowledged != 1 || len(c.Problems) != 1 ||
		!strings.Contains(c.Problems[0], "group g1, b/0: 1 acknowledged records not received, from offset 1 (received up to 0)") {
		t.Errorf("%s", mustJSON(t, c))
	}
	tr.groups[1].delivery("b", 0).take(1, soakValue(at, 1, 16))
	if c := tr.verify(); !c.Verified || c.Missing != 0 || tr.behind() != 0 {
		t.Errorf("caught up: %s", mustJSON(t, c))
	}
	tr.unexpected.Add(2)
	if c := tr.verify(); c.Verified || c.Unexpected != 2 {
		t.Errorf("unexpected partitions: %s", mustJSON(t, c))
	}
}

func TestDealPartitions(t *testing.T) {
	parts := testSoakTraffic().parts
	shares := dealPartitions(parts, 2)
	if len(shares) != 2 || len(shares[0]) != 2 || len(shares[1]) != 1 || shares[0][1] != parts[2] {
		t.Errorf("shares: %v", shares)
	}
}

func TestSoakErrorsKeepsTheLatest(t *testing.T) {
	var e soakErrors
	e.add(errors.New("first"))
	e.add(errors.New("second"))
	if e.n.Load() != 2 || e.latest() != "second" {
		t.Errorf("%d, %q", e.n.Load(), e.latest())
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
	b1, b2 := newFakeBroker(t, brokerPage{}), newFakeBroker(t, brokerPage{})
	set := func(fb *fakeBroker, page string) {
		fb.mu.Lock()
		fb.page = page
		fb.mu.Unlock()
	}
	set(b1, soakMetricsPage(100, 10<<20, 50<<20, 7))
	set(b2, soakMetricsPage(200, 20<<20, 60<<20, 3))
	brokers := []adminBroker{{NodeID: 1, AdminAddr: b1.addr(), IsAlive: true}, {NodeID: 2, AdminAddr: b2.addr(), IsAlive: true}}
	b1.setBrokers(brokers...)

	tr := testSoakTraffic()
	conns := &soakConnStats{}
	conns.open.Store(42)
	started := time.Now().Add(-time.Minute)
	b := &soakBench{g: &globalOptions{timeout: 5 * time.Second}, o: &soakOptions{}, admin: b1.client(), brokers: brokers}
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
		t.Errorf("first sample: %s", mustJSON(t, sm))
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
		t.Errorf("second sample: %s", mustJSON(t, sm))
	}
	if s.overall.n != 1 || s.ackedAfterWarmup != 1 || s.deliveredAfterWarmup != 1 || s.failedScrapes != 1 || len(s.samples) != 2 {
		t.Errorf("after warm-up: %d latencies, %d acked, %d delivered, %d failed scrapes", s.overall.n, s.ackedAfterWarmup, s.deliveredAfterWarmup, s.failedScrapes)
	}

	// With --pid, resident memory is the process's VmRSS.
	b.o.pid = os.Getpid()
	brokers[1].IsAlive = true
	b.brokers = brokers[:1]
	if sm := s.take(context.Background()); sm.RSSBytes == nil || *sm.RSSBytes == 50<<20 || s.procErr != nil {
		t.Errorf("--pid: %s (%v)", mustJSON(t, sm), s.procErr)
	}
	// The brokers at rest.
	b.brokers = brokers
	if r, err := b.readRest(context.Background()); err != nil || r.Goroutines != 300 || r.Connections != 10 {
		t.Errorf("at rest: %+v, %v", r, err)
	}
}

func testSoakSummary() *soakSummary {
	p := func(v float64) *float64 { return &v }
	s := &soakSummary{
		Brokers: 1, DurationSeconds: 120, WarmupSeconds: 24, SampleSeconds: 10, Topics: []string{"soak-0", "soak-1"}, Partitions: 300,
		Connections: 2000, ChurnPerSec: 10, ConnectionsOpened: 3200, ConnectionsChurned: 1200, ConnectionRequests: 90000, ConnectionFetchWait: 5,
		Rate: 1000, RecordSize: 512, Producers: 4, Groups: 2, ConsumersPerGroup: 3,
		ProducedPerSec: 1000, DeliveredPerSec: 2000, P50Ms: p(3.25), P99Ms: p(40), MaxMs: p(90),
		soakCheck:  soakCheck{Acknowledged: 120000, Delivered: 240000, Verified: true},
		CaughtUp:   true,
		RestBefore: soakRest{Goroutines: 2500, Connections: 1},
		Tolerance:  0.1,
		Stopped:    "duration",
	}
	for i := range 6 {
		s.Samples = append(s.Samples, soakSample{Seconds: float64(20 * (i + 1)), ProducedPerSec: 1000, DeliveredPerSec: 2000, P50Ms: p(3), P99Ms: p(40),
			RSSBytes: i64(300 << 20), HeapInUseBytes: i64(100 << 20), HeapLiveBytes: i64(60 << 20), Goroutines: i64(6500), Connections: i64(2060), RawConnectionsOpen: 2000})
	}
	assignPhases(s.Samples, 24*time.Second)
	s.Growth = growthChecks(s.Samples, s.Tolerance)
	s.Verdict = soakVerdict(s.Growth)
	s.addRest(s.RestBefore, &soakRest{Goroutines: 2510, Connections: 0})
	return s
}

func TestSoakSummaryOutput(t *testing.T) {
	s := testSoakSummary()
	if s.Verdict != "no growth" || s.failure(context.Background()) != nil {
		t.Fatalf("verdict %q, failure %v", s.Verdict, s.failure(context.Background()))
	}
	var out bytes.Buffer
	if err := s.write(&out, formatTable); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"SECONDS  PHASE", "40       first", "120      last", "300.0 MiB", "6500",
		"2 (soak-0 .. soak-1), 300 partitions", "1200 churned (10/s)", "p50 3.2 ms, p99 40.0 ms",
		"VERIFIED       yes: 0 missing", "2500 goroutines before the load, 2510 once every client left (+10); connections 1 and 0",
		"goroutines   6500", "heap_live    60.0 MiB", "+0.0%", "VERDICT  no growth", "NOTE  a series grew when", "NOTE  live heap is",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	out.Reset()
	if err := s.write(&out, formatJSON); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"samples", "growth", "verdict", "verified", "acknowledged_records", "missing_records", "at_rest_before", "at_rest_after", "errors", "p99_ms"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if g := doc["growth"].([]any)[0].(map[string]any); g["series"] != "rss" || g["grew"] != false {
		t.Errorf("growth: %v", g)
	}

	// Goroutines left behind, a missing record and an error each fail
	// the soak, and all are said.
	s = testSoakSummary()
	s.Verdict = "no growth"
	s.LeftBehind = nil
	s.addRest(soakRest{Goroutines: 2500, Connections: 1}, &soakRest{Goroutines: 3700, Connections: 3})
	s.Verified, s.Missing = false, 7
	s.Problems = []string{"group g, soak-0/3: 7 acknowledged records not received, from offset 10 (received up to 9)"}
	s.Errors = soakErrorCounts{Connection: 2, Latest: []string{"connection 5: boom"}}
	err := s.failure(context.Background())
	if err == nil {
		t.Fatal("want a failure")
	}
	for _, want := range []string{"left behind: 1200 goroutines, 2 connections", "7 acknowledged records missing", "2 errors (0 produce, 0 consume, 2 connection)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("failure lacks %q: %v", want, err)
		}
	}
	out.Reset()
	if err := s.write(&out, formatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VERDICT  left behind: 1200 goroutines, 2 connections", "NOTE  latest error: connection 5: boom", "NOTE  FAILED: group g, soak-0/3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestApplyLeader(t *testing.T) {
	resp := func(leader int32, code int16) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		for _, id := range []int32{1, 2} {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = id, "127.0.0.1", 9090+id
			r.Brokers = append(r.Brokers, b)
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("t")
		for p := range int32(2) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader, mp.ErrorCode = p, leader, code
			mt.Partitions = append(mt.Partitions, mp)
		}
		r.Topics = append(r.Topics, mt)
		return r
	}
	target := soakTarget{topic: "t", partition: 1, leader: 1, addr: "127.0.0.1:9091"}
	if err := applyLeader(&target, resp(1, 0)); err != nil {
		t.Errorf("same leader: %v", err)
	}
	if err := applyLeader(&target, resp(2, 0)); !errors.Is(err, errLeaderMoved) || target.leader != 2 || target.addr != "127.0.0.1:9092" {
		t.Errorf("moved: %v, %+v", err, target)
	}
	if err := applyLeader(&target, resp(-1, kerr.LeaderNotAvailable.Code)); !errors.Is(err, errLeaderMoved) {
		t.Errorf("election: %v", err)
	}
	if err := applyLeader(&target, resp(7, 0)); err == nil || !strings.Contains(err.Error(), "leader 7 is not among the brokers") {
		t.Errorf("unknown leader: %v", err)
	}
	r := resp(1, 0)
	r.Topics[0].ErrorCode = kerr.UnknownTopicOrPartition.Code
	if err := applyLeader(&target, r); err == nil || errors.Is(err, errLeaderMoved) {
		t.Errorf("topic error: %v", err)
	}
	if err := applyLeader(&soakTarget{topic: "t", partition: 5}, resp(1, 0)); err == nil {
		t.Error("a partition missing from the answer")
	}
	if err := applyLeader(&soakTarget{topic: "u"}, resp(1, 0)); err == nil {
		t.Error("a topic missing from the answer")
	}
}

// encodeResponse frames resp as a broker does: size, correlation ID,
// header tags when flexible (not for ApiVersions), body.
func encodeResponse(resp kmsg.Response, corr int32) []byte {
	out := binary.BigEndian.AppendUint32(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func TestDecodeSoakResponse(t *testing.T) {
	for _, req := range []kmsg.Request{
		&kmsg.ApiVersionsRequest{Version: 3},
		&kmsg.MetadataRequest{Version: 12},
		&kmsg.FetchRequest{Version: 12},
		&kmsg.FetchRequest{Version: 4}, // not flexible: no header tags
	} {
		want := req.ResponseKind()
		want.SetVersion(req.GetVersion())
		if f, ok := want.(*kmsg.FetchResponse); ok {
			f.ThrottleMillis = 7
		}
		frame := encodeResponse(want, 42)[4:]
		got := req.ResponseKind()
		if err := decodeSoakResponse(req, got, 42, frame); err != nil {
			t.Errorf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
			continue
		}
		if f, ok := got.(*kmsg.FetchResponse); ok && f.ThrottleMillis != 7 {
			t.Errorf("fetch v%d decoded throttle %d", req.GetVersion(), f.ThrottleMillis)
		}
		if err := decodeSoakResponse(req, req.ResponseKind(), 41, frame); err == nil || !strings.Contains(err.Error(), "response to request 42 where 41 was due") {
			t.Errorf("wrong correlation ID: %v", err)
		}
	}
	if err := decodeSoakResponse(&kmsg.MetadataRequest{Version: 12}, kmsg.NewPtrMetadataResponse(), 1, []byte{0, 0}); err == nil {
		t.Error("a truncated frame decoded")
	}
}

// fakeSoakBroker answers the raw connections' requests: ApiVersions,
// Metadata naming itself leader of t/0, ListOffsets with offset 5, and
// Fetch after a pause, with a high watermark that grows by one a poll.
type fakeSoakBroker struct {
	ln       net.Listener
	polls    atomic.Int64
	accepted atomic.Int64
	// fetchCode, when set, is every Fetch answer's partition error.
	fetchCode atomic.Int32
}

func newFakeSoakBroker(t *testing.T) *fakeSoakBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSoakBroker{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.accepted.Add(1)
			go f.serve(conn)
		}
	}()
	return f
}

func (f *fakeSoakBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, msg); err != nil {
			return
		}
		rd := kbin.Reader{Src: msg}
		key, version, corr := rd.Int16(), rd.Int16(), rd.Int32()
		rd.NullableString() // client ID
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&rd)
		}
		if err := req.ReadFrom(rd.Src); err != nil {
			return
		}
		resp := req.ResponseKind()
		resp.SetVersion(version)
		switch rq := req.(type) {
		case *kmsg.MetadataRequest:
			m := resp.(*kmsg.MetadataResponse)
			host, port, _ := net.SplitHostPort(f.ln.Addr().String())
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host = 1, host
			fmt.Sscan(port, &b.Port)
			m.Brokers = append(m.Brokers, b)
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rq.Topics[0].Topic
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Leader = 1
			mt.Partitions = append(mt.Partitions, mp)
			m.Topics = append(m.Topics, mt)
		case *kmsg.ListOffsetsRequest:
			l := resp.(*kmsg.ListOffsetsResponse)
			lt := kmsg.NewListOffsetsResponseTopic()
			lt.Topic = rq.Topics[0].Topic
			lp := kmsg.NewListOffsetsResponseTopicPartition()
			lp.Offset = 5
			lt.Partitions = append(lt.Partitions, lp)
			l.Topics = append(l.Topics, lt)
		case *kmsg.FetchRequest:
			if rq.MinBytes != soakConnMinBytes || rq.MaxBytes < rq.MinBytes || rq.Topics[0].Partitions[0].PartitionMaxBytes != 1 {
				return // not the long poll the soak means to send
			}
			time.Sleep(10 * time.Millisecond)
			fr := resp.(*kmsg.FetchResponse)
			ft := kmsg.NewFetchResponseTopic()
			ft.Topic = rq.Topics[0].Topic
			fp := kmsg.NewFetchResponseTopicPartition()
			fp.ErrorCode = int16(f.fetchCode.Load())
			fp.HighWatermark = rq.Topics[0].Partitions[0].FetchOffset + 1
			ft.Partitions = append(ft.Partitions, fp)
			fr.Topics = append(fr.Topics, ft)
			f.polls.Add(1)
		}
		if _, err := conn.Write(encodeResponse(resp, corr)); err != nil {
			return
		}
	}
}

// waitFor polls cond until it holds or a 10s deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSoakConnsAgainstFakeBroker(t *testing.T) {
	f := newFakeSoakBroker(t)
	b := &soakBench{g: &globalOptions{timeout: 5 * time.Second}, o: &soakOptions{connWait: 10 * time.Millisecond}}
	var errs soakErrors
	target := soakTarget{topic: "t", partition: 0, leader: 1, addr: f.ln.Addr().String()}
	cs := newSoakConns(b, []soakTarget{target}, 4, &errs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs.start(ctx)
	if cs.stats.open.Load() != 4 || cs.stats.opened.Load() != 4 || errs.n.Load() != 0 {
		t.Fatalf("open %d, opened %d, errors %d (%s)", cs.stats.open.Load(), cs.stats.opened.Load(), errs.n.Load(), errs.latest())
	}
	// Polls go on, past a Metadata request every soakMetadataEvery.
	waitFor(t, "long polls", func() bool { return f.polls.Load() >= 4*2*soakMetadataEvery })

	// A churned connection, FIN or RST, is replaced and is no error.
	for i, reset := range []bool{false, true} {
		if !cs.slots[i].churn(reset) {
			t.Fatalf("slot %d had no connection to churn", i)
		}
	}
	waitFor(t, "replacements", func() bool { return cs.stats.opened.Load() == 6 && cs.stats.open.Load() == 4 })
	if errs.n.Load() != 0 {
		t.Errorf("churn counted as errors: %s", errs.latest())
	}

	// A partition error is an error, and the slot keeps trying.
	f.fetchCode.Store(int32(kerr.CorruptMessage.Code))
	waitFor(t, "a Fetch error", func() bool { return errs.n.Load() > 0 })
	if !strings.Contains(errs.latest(), "CORRUPT_MESSAGE") {
		t.Errorf("latest error: %s", errs.latest())
	}
	f.fetchCode.Store(0)

	cs.close()
	if cs.stats.open.Load() != 0 {
		t.Errorf("%d connections open after close", cs.stats.open.Load())
	}
	if cs.slots[0].churn(false) {
		t.Error("a closed slot churned")
	}
}

func TestSoakConnsDialFailureDoesNotHang(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	b := &soakBench{g: &globalOptions{timeout: time.Second}, o: &soakOptions{connWait: time.Second}}
	var errs soakErrors
	cs := newSoakConns(b, []soakTarget{{topic: "t", addr: addr}}, 3, &errs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs.start(ctx) // returns once every slot failed its first attempt
	if errs.n.Load() < 3 || cs.stats.open.Load() != 0 || !strings.Contains(errs.latest(), "connecting to "+addr) {
		t.Errorf("%d errors (%s), %d open", errs.n.Load(), errs.latest(), cs.stats.open.Load())
	}
	cancel()
	cs.close()
}
