package fanout

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/admin/admintest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/benchtest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestBenchFanoutFlagValidation(t *testing.T) {
	// All of these fail locally, before any broker or admin API is asked.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "stream"}, "--mode must be preload or tail"},
		{[]string{"--consumers", "0"}, "--consumers must be >= 1"},
		{[]string{"--records", "0"}, "--records must be positive"},
		{[]string{"--rate", "10"}, "--rate applies to --mode tail"},
		{[]string{"--mode", "tail", "--records", "10"}, "--records applies to --mode preload"},
		{[]string{"--mode", "tail", "--record-size", "4"}, "at least 8"},
		{[]string{"--mode", "tail", "--rate", "0"}, "--rate must be at least 1"},
		{[]string{"--mode", "tail", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"--mode", "tail", "--rate", "1", "--duration", "500ms"}, "produces no record"},
		{[]string{"--mode", "tail", "--rate", "1", "--timeout", "500ms"}, "less often than --timeout"},
		{[]string{"--mode", "tail", "--duration", "10m"}, "--max-duration (5m0s) must be longer than --duration"},
		{[]string{"--partitions", "0"}, "--partitions must be >= 1"},
		{[]string{"-r", "0"}, "--replication-factor must be positive or -1"},
		{[]string{"--fetch-max-bytes", "0"}, "--fetch-max-bytes"},
		{[]string{"--fetch-max-partition-bytes", "-1"}, "--fetch-max-partition-bytes"},
		{[]string{"--fetch-max-wait", "100us"}, "--fetch-max-wait"},
		{[]string{"--fetch-min-bytes", "-1"}, "--fetch-min-bytes"},
		{[]string{"--coalescing", "maybe"}, "--coalescing must be on, off or both"},
		{[]string{"--runs", "0"}, "--runs must be >= 1"},
		{[]string{"--max-duration", "0s"}, "--max-duration must be positive"},
	} {
		args := append([]string{"--brokers", "127.0.0.1:1", "--admin-url", "127.0.0.1:1", "bench", "fanout", "t"}, tc.args...)
		// --timeout is a global flag; keep it before the command.
		if tc.args[len(tc.args)-2] == "--timeout" {
			args = append([]string{"--timeout", tc.args[len(tc.args)-1]}, args[:len(args)-2]...)
		}
		_, _, err := benchtest.Run(t, NewCommand, "", args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want error mentioning %q, got %v", tc.args, tc.want, err)
		}
	}
	if _, _, err := benchtest.Run(t, NewCommand, "", "bench", "fanout"); err == nil {
		t.Error("TOPIC is required")
	}
}

func TestBenchFanoutDefaults(t *testing.T) {
	cmd := NewCommand(&cli.Options{})
	for flag, want := range map[string]string{
		"mode": "preload", "consumers": "8", "records": "100000", "record-size": "1024",
		"rate": "1000", "duration": "10s", "partitions": "1", "replication-factor": "-1",
		"fetch-max-bytes": "52428800", "fetch-max-partition-bytes": "1048576",
		"fetch-max-wait": "500ms", "fetch-min-bytes": "1", "coalescing": "", "runs": "1", "max-duration": "5m0s",
	} {
		if got := cmd.Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s default: got %s, want %s", flag, got, want)
		}
	}
}

func TestBenchFanoutAgainstDeadBrokerFailsFast(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "fanout", "t", "--admin-url", "127.0.0.1:1"},
		{"bench", "fanout", "t", "--admin-url", "127.0.0.1:1", "--mode", "tail", "--duration", "1s"},
		{"bench", "fanout", "t", "--admin-url", "127.0.0.1:1", "--coalescing", "both"},
	} {
		start := time.Now()
		_, stderr, err := benchtest.Run(t, NewCommand, "", append([]string{"--brokers", "127.0.0.1:1", "--timeout", "500ms"}, args...)...)
		if err == nil {
			t.Errorf("%v: want error", args)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%v: took %s", args, el)
		}
		if strings.Contains(strings.Join(args, " "), "--coalescing") {
			clitest.WantErrContains(t, err, "--coalescing sets kafka_fetch_read_coalescing_enabled through the admin API")
		} else if !strings.Contains(stderr, "broker figures unavailable") {
			t.Errorf("%v: an unreachable admin API must be pointed out: %q", args, stderr)
		}
	}
}

func TestCoalescingPlan(t *testing.T) {
	for _, tc := range []struct {
		coalescing string
		runs       int
		want       string
	}{
		{"", 1, "[]"},
		{"", 2, "[ ]"},
		{"on", 2, "[on on]"},
		{"off", 1, "[off]"},
		{"both", 1, "[off on]"},
		{"both", 3, "[off on on off off on]"},
	} {
		if got := fmt.Sprint(coalescingPlan(tc.coalescing, tc.runs)); got != tc.want {
			t.Errorf("%q x%d: got %s, want %s", tc.coalescing, tc.runs, got, tc.want)
		}
	}
}

func stampedRecord(offset int64, sent time.Time, size int) *kgo.Record {
	v := make([]byte, size)
	binary.BigEndian.PutUint64(v, uint64(sent.UnixNano()))
	return &kgo.Record{Offset: offset, Value: v}
}

func TestFanoutTracker(t *testing.T) {
	rng := harness.OffsetRange{Start: 5, End: 8}
	tr := newFanoutTracker(rng)
	now := time.Now()
	for off := int64(5); off < 8; off++ {
		if tr.done(rng) {
			t.Fatalf("done before offset %d", off)
		}
		if err := tr.add(stampedRecord(off, now.Add(-time.Duration(off)*time.Millisecond), 16), now, true); err != nil {
			t.Fatal(err)
		}
	}
	if !tr.done(rng) || tr.received != 3 || tr.bytes != 48 || !tr.lastAt.Equal(now) {
		t.Fatalf("tracker: %+v", tr)
	}
	if fmt.Sprint(tr.latencies) != "[5ms 6ms 7ms]" {
		t.Errorf("latencies: %v", tr.latencies)
	}

	for _, tc := range []struct {
		offsets []int64
		want    string
	}{
		{[]int64{6}, "offset 6 delivered where 5 was due: 1 records missing"},
		{[]int64{5, 7}, "offset 7 delivered where 6 was due"},
		{[]int64{5, 5}, "offset 5 delivered again or out of order"},
		{[]int64{4}, "offset 4 delivered again or out of order"},
	} {
		tr := newFanoutTracker(rng)
		var err error
		for _, off := range tc.offsets {
			if err = tr.add(&kgo.Record{Offset: off}, now, false); err != nil {
				break
			}
		}
		clitest.WantErrContains(t, err, tc.want)
	}
	tr = newFanoutTracker(rng)
	clitest.WantErrContains(t, tr.add(&kgo.Record{Offset: 5, Value: []byte("abc")}, now, true), "without a send time")
}

func TestRunFailure(t *testing.T) {
	rng := harness.OffsetRange{Start: 0, End: 10}
	complete := &fanoutConsumer{id: 0, track: fanoutTracker{next: 10, received: 10}}
	short := func(id int, got int64) *fanoutConsumer {
		return &fanoutConsumer{id: id, track: fanoutTracker{next: got, received: got}}
	}
	bg := context.Background()
	if err := runFailure(bg, bg, []*fanoutConsumer{complete, complete}, rng); err != nil {
		t.Errorf("complete run: %v", err)
	}

	// A complete run stays complete even if the deadline came right after.
	late, cancel := context.WithCancelCause(bg)
	cancel(errFanoutMaxDuration)
	if err := runFailure(bg, late, []*fanoutConsumer{complete}, rng); err != nil {
		t.Errorf("complete run past the deadline: %v", err)
	}
	err := runFailure(bg, late, []*fanoutConsumer{complete, short(1, 3), short(2, 0), short(3, 9), short(4, 1)}, rng)
	clitest.WantErrContains(t, err, "longer than --max-duration: consumer 1 got 3 of 10 records, consumer 2 got 0 of 10 records, consumer 3 got 9 of 10 records (and 1 more)")

	stalled, cancel := context.WithCancelCause(bg)
	cancel(fmt.Errorf("%w: no record completed for 1s", harness.ErrStall))
	err = runFailure(bg, stalled, []*fanoutConsumer{short(0, 2)}, rng)
	if !errors.Is(err, harness.ErrStall) {
		t.Errorf("stall: %v", err)
	}

	failed := short(1, 4)
	failed.err = errors.New("consumer 1: offset 7 delivered where 4 was due")
	clitest.WantErrContains(t, runFailure(bg, stalled, []*fanoutConsumer{complete, failed}, rng), "offset 7 delivered where 4 was due")

	parent, cancelParent := context.WithCancel(bg)
	cancelParent()
	clitest.WantErrContains(t, runFailure(parent, parent, []*fanoutConsumer{short(0, 1)}, rng), "interrupted")
}

// scrapeOf parses a page as a scrape of broker id.
func scrapeOf(t *testing.T, id int32, p admintest.BrokerPage) admin.BrokerScrape {
	t.Helper()
	fams, err := admin.ParseMetrics("text/plain; version=0.0.4", []byte(p.Text()))
	if err != nil {
		t.Fatal(err)
	}
	return admin.BrokerScrape{Broker: admin.Broker{NodeID: id, IsAlive: true}, Metrics: fams}
}

func TestComputeBrokerFigures(t *testing.T) {
	b0 := admintest.BrokerPage{CPUSeconds: 10, AllocBytes: 1e9, Fetches: 100, BytesOut: map[string]int{"fan": 0, "other": 5},
		Shards: [][4]uint64{{10, 0, 0, 0}, {5, 1, 2, 0}}}
	a0 := admintest.BrokerPage{CPUSeconds: 12.5, AllocBytes: 1e9 + 4e6, Fetches: 300, BytesOut: map[string]int{"fan": 1 << 30, "other": 5},
		Shards: [][4]uint64{{20, 1, 60, 9}, {15, 1, 22, 10}}}
	// Broker 1 served nothing, and exports no coalescer.
	b1 := admintest.BrokerPage{CPUSeconds: 3, AllocBytes: 5e8, Fetches: 7}
	a1 := admintest.BrokerPage{CPUSeconds: 3.5, AllocBytes: 5e8 + 1e6, Fetches: 7}
	// Broker 2 restarted during the run; broker 3 did not answer after it.
	b2 := admintest.BrokerPage{CPUSeconds: 100, AllocBytes: 1e12, Fetches: 1000}
	a2 := admintest.BrokerPage{CPUSeconds: 1, AllocBytes: 1e6, Fetches: 10}
	// Broker 4 is down throughout.
	down := admin.BrokerScrape{Broker: admin.Broker{NodeID: 4}, Err: admin.ErrBrokerNotAlive}
	before := []admin.BrokerScrape{scrapeOf(t, 0, b0), scrapeOf(t, 1, b1), scrapeOf(t, 2, b2), scrapeOf(t, 3, b1), down}
	after := []admin.BrokerScrape{scrapeOf(t, 0, a0), scrapeOf(t, 1, a1), scrapeOf(t, 2, a2),
		{Broker: admin.Broker{NodeID: 3}, Err: errors.New("connection refused")}, down}

	fig, notes := computeBrokerFigures(before, after, "fan", 2<<30)
	if fig == nil {
		t.Fatalf("no figures: %v", notes)
	}
	if fig.Brokers != 2 || fig.CPUSeconds != 3 || fig.FetchRequests != 200 || fig.AllocBytes != 5e6 || fig.TopicBytesOut != 1<<30 {
		t.Errorf("figures: %+v", fig)
	}
	if fig.CPUSecondsPerGiB == nil || *fig.CPUSecondsPerGiB != 1.5 {
		t.Errorf("CPU s/GiB: %v", fig.CPUSecondsPerGiB)
	}
	if fig.AllocBytesPerFetch == nil || *fig.AllocBytesPerFetch != 25000 {
		t.Errorf("alloc/fetch: %v", fig.AllocBytesPerFetch)
	}
	want := admin.CoalescerCounts{Insertions: 20, Reinsertions: 1, ReadyHits: 80, InflightHits: 19, HitRatio: 99.0 / 120}
	if fig.Coalescer == nil || *fig.Coalescer != want {
		t.Errorf("coalescer: got %+v, want %+v", fig.Coalescer, want)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "broker 2 left out: counters went backwards") || !strings.Contains(joined, "broker 3 left out: after the run: connection refused") ||
		!strings.Contains(joined, "broker 4 left out: not alive (not asked)") {
		t.Errorf("notes: %q", notes)
	}

	// Nothing delivered and no Fetch: per-unit figures are undefined.
	fig, _ = computeBrokerFigures([]admin.BrokerScrape{scrapeOf(t, 1, b1)}, []admin.BrokerScrape{scrapeOf(t, 1, b1)}, "fan", 0)
	if fig == nil || fig.CPUSecondsPerGiB != nil || fig.AllocBytesPerFetch != nil || fig.Coalescer != nil {
		t.Errorf("idle: %+v", fig)
	}

	fig, notes = computeBrokerFigures(nil, []admin.BrokerScrape{scrapeOf(t, 0, a0)}, "fan", 1)
	if fig != nil || !strings.Contains(strings.Join(notes, "\n"), "broker 0 left out: not read before the run") {
		t.Errorf("no before: %+v %q", fig, notes)
	}
}

func TestBrokerFigureWarnings(t *testing.T) {
	busy := func(c *admin.CoalescerCounts) *brokerFigures { return &brokerFigures{CPUSeconds: 5, Coalescer: c} }
	for _, tc := range []struct {
		label string
		fig   *brokerFigures
		want  string
	}{
		{coalescingOn, busy(&admin.CoalescerCounts{Insertions: 3, ReadyHits: 9}), ""},
		{coalescingOn, busy(&admin.CoalescerCounts{}), "counted no reads"},
		{coalescingOff, busy(&admin.CoalescerCounts{Insertions: 1}), "was off but the coalescer counted 1 reads"},
		{coalescingOff, busy(&admin.CoalescerCounts{}), ""},
		{coalescingOn, busy(nil), "no broker exports coalescer metrics"},
		{"unknown", busy(nil), ""},
		{coalescingOff, &brokerFigures{CPUSeconds: 0.2, Coalescer: &admin.CoalescerCounts{}}, "too few to compare"},
		{coalescingOn, nil, ""},
	} {
		got := strings.Join(brokerFigureWarnings(tc.label, tc.fig), "\n")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %+v: got %q, want %q", tc.label, tc.fig, got, tc.want)
		}
	}
}

func ptr(v float64) *float64 { return &v }

func TestCompareRuns(t *testing.T) {
	run := func(coalescing string, mbps float64, cpu, alloc *float64) fanoutRun {
		r := fanoutRun{Coalescing: coalescing, MBPerSec: mbps}
		if cpu != nil || alloc != nil {
			r.Broker = &brokerFigures{CPUSecondsPerGiB: cpu, AllocBytesPerFetch: alloc}
		}
		return r
	}
	c := compareRuns([]fanoutRun{
		run("off", 100, ptr(4), ptr(1000)),
		run("on", 300, ptr(1), ptr(100)),
	})
	if c == nil || *c.MBPerSec != 3 || *c.CPUSecondsPerGiB != 0.25 || *c.AllocBytesPerFetch != 0.1 {
		t.Fatalf("one each: %+v", c)
	}

	// Medians: odd and even counts, and a run without broker figures
	// (skipped, not counted as zero).
	c = compareRuns([]fanoutRun{
		run("off", 100, ptr(4), ptr(1000)),
		run("on", 200, ptr(1), nil),
		run("on", 400, ptr(3), ptr(100)),
		run("off", 300, nil, nil),
		run("off", 200, ptr(6), ptr(3000)),
	})
	if c == nil || *c.MBPerSec != 1.5 || *c.CPUSecondsPerGiB != 0.4 || *c.AllocBytesPerFetch != 0.05 {
		t.Fatalf("medians: mb/s %v cpu %v alloc %v", *c.MBPerSec, *c.CPUSecondsPerGiB, *c.AllocBytesPerFetch)
	}

	c = compareRuns([]fanoutRun{run("off", 0, nil, ptr(0)), run("on", 10, nil, ptr(5))})
	if c.MBPerSec != nil || c.CPUSecondsPerGiB != nil || c.AllocBytesPerFetch != nil {
		t.Errorf("undefined ratios must be nil: %+v", c)
	}
	if compareRuns([]fanoutRun{run("on", 1, nil, nil)}) != nil {
		t.Error("no off run: no comparison")
	}
}

func TestNewFanoutRun(t *testing.T) {
	started := time.Now()
	consumer := func(id int, took time.Duration, received, bytes int64, lat ...time.Duration) *fanoutConsumer {
		return &fanoutConsumer{id: id, track: fanoutTracker{received: received, bytes: bytes, lastAt: started.Add(took), latencies: lat}}
	}
	cs := []*fanoutConsumer{
		consumer(0, 100*time.Millisecond, 1000, 1<<20),
		consumer(1, 400*time.Millisecond, 1000, 1<<20),
		consumer(2, 200*time.Millisecond, 1000, 1<<20),
		consumer(3, 300*time.Millisecond, 1000, 1<<20),
	}
	f := &fanoutBench{o: &fanoutOptions{mode: fanoutPreload}, topic: "fan"}
	r := f.newRun("off", 1, cs, started, 400*time.Millisecond, nil, nil)
	if r.DeliveredRecords != 4000 || r.DeliveredBytes != 4<<20 || r.MBPerSec != 10 || !r.Verified || r.Broker != nil {
		t.Errorf("run: %+v", r)
	}
	// Preload: percentiles of the consumers' times to their last record.
	if r.P50Ms != 200 || r.P99Ms != 400 {
		t.Errorf("time to last record: p50 %v p99 %v", r.P50Ms, r.P99Ms)
	}

	f.o.mode = fanoutTail
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	cs = []*fanoutConsumer{consumer(0, time.Second, 50, 50, lat[:50]...), consumer(1, time.Second, 50, 50, lat[50:]...)}
	r = f.newRun("on", 1, cs, started, time.Second, nil, nil)
	if r.P50Ms != 50 || r.P99Ms != 99 {
		t.Errorf("end to end: p50 %v p99 %v", r.P50Ms, r.P99Ms)
	}

	// The latency splits into each record's first delivery (1..50 ms)
	// and how far the other consumer came after it (7 ms on every
	// record, so 0 for half the deliveries and 7 for the rest).
	late := make([]time.Duration, 50)
	for i := range late {
		late[i] = lat[i] + 7*time.Millisecond
	}
	cs = []*fanoutConsumer{consumer(0, time.Second, 50, 50, late...), consumer(1, time.Second, 50, 50, lat[:50]...)}
	r = f.newRun("on", 1, cs, started, time.Second, nil, nil)
	if r.FirstDeliveryP99Ms == nil || *r.FirstDeliveryP99Ms != 50 || r.BehindFirstP99Ms == nil || *r.BehindFirstP99Ms != 7 {
		t.Errorf("first delivery p99 %v, behind it p99 %v; want 50 and 7", harness.FloatCell(r.FirstDeliveryP99Ms, 3), harness.FloatCell(r.BehindFirstP99Ms, 3))
	}
	// A consumer that got fewer records bounds the records compared.
	cs = []*fanoutConsumer{consumer(0, time.Second, 50, 50, late...), consumer(1, time.Second, 10, 10, lat[:10]...)}
	r = f.newRun("on", 1, cs, started, time.Second, nil, nil)
	if r.FirstDeliveryP99Ms == nil || *r.FirstDeliveryP99Ms != 10 {
		t.Errorf("first delivery p99 over the records all got: %v, want 10", harness.FloatCell(r.FirstDeliveryP99Ms, 3))
	}
	f.o.mode = fanoutPreload
	if r = f.newRun("off", 1, cs, started, time.Second, nil, nil); r.FirstDeliveryP99Ms != nil || r.BehindFirstP99Ms != nil {
		t.Error("preload runs have no send times to split")
	}
}

func testFanoutSummary() *fanoutSummary {
	fig := func(cpu, alloc float64, fetches uint64, c admin.CoalescerCounts) *brokerFigures {
		c = c.WithHitRatio()
		return &brokerFigures{Brokers: 3, CPUSeconds: cpu * 2, CPUSecondsPerGiB: ptr(cpu), AllocBytes: uint64(alloc) * fetches,
			FetchRequests: fetches, AllocBytesPerFetch: ptr(alloc), TopicBytesOut: 2 << 30, Coalescer: &c}
	}
	s := &fanoutSummary{
		Mode: fanoutPreload, Topic: "fan", Consumers: 16, Records: 131072, RecordSize: 1024,
		Fetch:   fanoutFetch{MaxBytes: 50 << 20, MaxPartitionBytes: 1 << 20, MaxWaitMs: 500, MinBytes: 1},
		Latency: latencyTimeToLastRecord,
		Runs: []fanoutRun{
			{Coalescing: "off", Run: 1, DeliveredRecords: 16 * 131072, DeliveredBytes: 2 << 30, Seconds: 4, MBPerSec: 512,
				P50Ms: 3900, P99Ms: 4000, Verified: true, Broker: fig(4, 20000, 2048, admin.CoalescerCounts{})},
			{Coalescing: "on", Run: 1, DeliveredRecords: 16 * 131072, DeliveredBytes: 2 << 30, Seconds: 2, MBPerSec: 1024,
				P50Ms: 1900, P99Ms: 2000, Verified: true, Broker: fig(1, 5000, 2048, admin.CoalescerCounts{Insertions: 128, ReadyHits: 1536, InflightHits: 384}),
				BrokerNotes: []string{"broker 2 left out: after the run: timeout"}},
		},
	}
	s.Comparison = compareRuns(s.Runs)
	return s
}

func TestFanoutSummaryTable(t *testing.T) {
	var buf bytes.Buffer
	if err := testFanoutSummary().write(&buf, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	// Column widths follow the longest label: compare with runs of
	// spaces squeezed.
	squeeze := func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			lines[i] = strings.Join(strings.Fields(l), " ")
		}
		return strings.Join(lines, "\n")
	}
	out := squeeze(buf.String())
	for _, want := range []string{
		"MODE       preload (P50/P99: each consumer's time from the start to its last record)",
		"RECORDS    131072 per consumer per run, 1024 bytes each",
		"FETCH      max-bytes 52428800, max-partition-bytes 1048576, max-wait 500ms, min-bytes 1",
		"COALESCING                  off         on          ON/OFF",
		"DELIVERED MB/SEC            512.00      1024.00     2.00x",
		"TIME-TO-LAST-RECORD P99 MS  4000.000    2000.000",
		"BROKER CPU SEC/GIB          4.000       1.000       0.25x",
		"BROKER ALLOC BYTES/FETCH    20000       5000        0.25x",
		"COALESCER HIT RATIO         0.000       0.938",
		"NOTE  on: broker 2 left out: after the run: timeout",
	} {
		if !strings.Contains(out, squeeze(want)) {
			t.Errorf("table lacks %q", want)
		}
	}

	// Without broker figures the cells say so, and so does a note.
	s := testFanoutSummary()
	s.Runs = s.Runs[:1]
	s.Runs[0].Broker, s.Runs[0].BrokerNotes, s.Runs[0].Coalescing = nil, nil, "unknown"
	s.Comparison, s.BrokerNote = nil, "listing brokers: connection refused"
	buf.Reset()
	if err := s.write(&buf, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	out = squeeze(buf.String())
	if !strings.Contains(out, "BROKER CPU SEC/GIB n/a") || !strings.Contains(out, "NOTE broker figures unavailable: listing brokers: connection refused") || strings.Contains(out, "ON/OFF") {
		t.Errorf("no broker figures:\n%s", out)
	}
}

func TestFanoutSummaryJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := testFanoutSummary().write(&buf, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if doc["latency"] != latencyTimeToLastRecord || doc["mode"] != "preload" {
		t.Errorf("header: %v", doc)
	}
	cmp := doc["comparison"].(map[string]any)
	if cmp["mb_per_sec"] != 2.0 || cmp["cpu_seconds_per_gib"] != 0.25 || cmp["alloc_bytes_per_fetch"] != 0.25 {
		t.Errorf("comparison: %v", cmp)
	}
	on := doc["runs"].([]any)[1].(map[string]any)
	broker := on["broker"].(map[string]any)
	co := broker["coalescer"].(map[string]any)
	if on["coalescing"] != "on" || broker["fetch_requests"] != 2048.0 || co["ready_hits"] != 1536.0 || math.Abs(co["hit_ratio"].(float64)-0.9375) > 1e-12 {
		t.Errorf("on run: %v", on)
	}

	buf.Reset()
	if err := testFanoutSummary().write(&buf, cli.FormatYAML); err != nil || !strings.Contains(buf.String(), "cpu_seconds_per_gib: 0.25") {
		t.Errorf("yaml: %v\n%s", err, buf.String())
	}
}
