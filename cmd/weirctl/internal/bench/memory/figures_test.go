package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/admin/admintest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestMemorySamplerFigures(t *testing.T) {
	page := func(rss, inUse, waits, trimmed float64) string {
		return fmt.Sprintf(`# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %g
# TYPE weir_fetch_memory_budget_bytes gauge
weir_fetch_memory_budget_bytes 268435456
# TYPE weir_fetch_memory_in_use_bytes gauge
weir_fetch_memory_in_use_bytes %g
# TYPE weir_fetch_memory_waits_total counter
weir_fetch_memory_waits_total %g
# TYPE weir_fetch_memory_wait_seconds_total counter
weir_fetch_memory_wait_seconds_total %g
# TYPE weir_fetch_memory_trimmed_reads_total counter
weir_fetch_memory_trimmed_reads_total %g
# TYPE weir_request_memory_in_use_bytes gauge
weir_request_memory_in_use_bytes 1024
`, rss, inUse, waits, waits/10, trimmed)
	}
	// Broker 1 exports everything; broker 2 predates the budget (RSS
	// only) and fails one scrape; broker 3 is down.
	brokers := []admin.Broker{{NodeID: 1, IsAlive: true}, {NodeID: 2, IsAlive: true}, {NodeID: 3}}
	s := newMemorySampler(brokers)
	old := admintest.ParseMetricsText(t, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1e8\n")
	for i, sc := range [][3]admin.BrokerScrape{
		{{Metrics: admintest.ParseMetricsText(t, page(100<<20, 0, 10, 1))}, {Metrics: old}, {Err: admin.ErrBrokerNotAlive}},
		{{Metrics: admintest.ParseMetricsText(t, page(900<<20, 256<<20, 40, 3))}, {Err: errors.New("timeout")}, {Err: admin.ErrBrokerNotAlive}},
		{{Metrics: admintest.ParseMetricsText(t, page(700<<20, 128<<20, 50, 7))}, {Metrics: old}, {Err: admin.ErrBrokerNotAlive}},
	} {
		for k := range sc {
			sc[k].Broker = brokers[k]
		}
		s.record(sc[:])
		if i == 1 {
			if rss, inUse := s.latest(); rss.v != 900<<20 || inUse.v != 256<<20 {
				t.Errorf("latest: rss %v, in use %v", rss, inUse)
			}
		}
	}
	figs := s.figures()
	if len(figs) != 3 {
		t.Fatalf("%d brokers", len(figs))
	}
	b1, b2, b3 := figs[0], figs[1], figs[2]
	if *b1.RSSBefore != 100<<20 || *b1.PeakRSS != 900<<20 || *b1.FetchBudget != 256<<20 || *b1.PeakFetchInUse != 256<<20 ||
		*b1.PeakFetchInUseOfBudget != 1 || *b1.FetchWaits != 40 || *b1.FetchTrimmedReads != 6 || *b1.PeakRequestInUse != 1024 ||
		*b1.FetchWaitSeconds != 4 || b1.RequestWaits != nil || len(b1.Notes) != 0 {
		t.Errorf("broker 1: %s", clitest.JSONOf(t, b1))
	}
	if *b2.PeakRSS != 1e8 || b2.FetchBudget != nil || b2.PeakFetchInUse != nil || b2.FetchWaits != nil || b2.PeakFetchInUseOfBudget != nil ||
		b2.FailedScrapes != 1 || len(b2.Notes) != 1 || !strings.Contains(b2.Notes[0], "1 of 3 scrapes failed (last: timeout)") {
		t.Errorf("broker 2: %s", clitest.JSONOf(t, b2))
	}
	if b3.PeakRSS != nil || b3.Scrapes != 3 || b3.FailedScrapes != 3 {
		t.Errorf("broker 3: %s", clitest.JSONOf(t, b3))
	}

	// A counter going backwards (a restart) voids the deltas, not the peaks.
	s = newMemorySampler(brokers[:1])
	for _, p := range []string{page(1, 1, 50, 5), page(2, 2, 3, 0)} {
		s.record([]admin.BrokerScrape{{Broker: brokers[0], Metrics: admintest.ParseMetricsText(t, p)}})
	}
	f := s.figures()[0]
	if f.FetchWaits != nil || f.FetchTrimmedReads != nil || *f.PeakRSS != 2 || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "restarted") {
		t.Errorf("reset: %s", clitest.JSONOf(t, f))
	}

	// An unbounded budget (0) has no ratio.
	s = newMemorySampler(brokers[:1])
	s.record([]admin.BrokerScrape{{Broker: brokers[0], Metrics: admintest.ParseMetricsText(t, strings.Replace(page(1, 5, 0, 0), "268435456", "0", 1))}})
	if f := s.figures()[0]; f.PeakFetchInUseOfBudget != nil || *f.FetchBudget != 0 || budgetCell(f.FetchBudget) != "unbounded" {
		t.Errorf("unbounded: %s", clitest.JSONOf(t, f))
	}

	var sum memorySummary
	sum.addBrokers(figs)
	if *sum.PeakRSS != 900<<20 || *sum.PeakFetchInUse != 256<<20 {
		t.Errorf("highest peaks: %d %d", *sum.PeakRSS, *sum.PeakFetchInUse)
	}
}

func TestMemorySummaryConsumers(t *testing.T) {
	ok := func(id int, took time.Duration) consumerResult {
		return consumerResult{id: id, completed: true, took: took, records: 100, bytes: 1 << 20, checksum: 0xabc}
	}
	var s memorySummary
	s.Consumers = 4
	s.addConsumers([]consumerResult{ok(0, 3*time.Second), ok(1, time.Second), ok(2, 4*time.Second), ok(3, 2*time.Second)}, 5*time.Second)
	if !s.Verified || s.ConsumersCompleted != 4 || s.DeliveredRecords != 400 || s.DeliveredBytes != 4<<20 || s.BacklogBytes != 1<<20 ||
		s.Checksum != "0000000000000abc" || len(s.Failures) != 0 {
		t.Errorf("summary: %s", clitest.JSONOf(t, s))
	}
	// Complete: the run lasted until the slowest consumer.
	if s.Seconds != 4 || s.MBPerSec != 1 || *s.FastestConsumerSeconds != 1 || *s.MedianConsumerSeconds != 2.5 || *s.SlowestConsumerSeconds != 4 {
		t.Errorf("times: %s", clitest.JSONOf(t, s))
	}
	if err := memoryRunFailure(context.Background(), context.Background(), &s); err != nil {
		t.Errorf("complete run: %v", err)
	}

	// One incomplete, one failed, one different: not verified, and the
	// run lasted as long as the phase.
	bad := ok(2, time.Second)
	bad.checksum = 0xdef
	s = memorySummary{Consumers: 4}
	s.addConsumers([]consumerResult{
		ok(0, 2*time.Second), {id: 1, records: 10, bytes: 100}, bad,
		{id: 3, records: 5, err: errors.New("consumer 3: partition 0: gap")},
	}, 10*time.Second)
	if s.Verified || s.ConsumersCompleted != 2 || s.DeliveredRecords != 215 || s.Seconds != 10 || *s.MedianConsumerSeconds != 1.5 || len(s.Failures) != 2 ||
		!strings.Contains(s.Failures[0], "consumer 2 received different batches") {
		t.Errorf("failed summary: %s", clitest.JSONOf(t, s))
	}
	err := memoryRunFailure(context.Background(), context.Background(), &s)
	clitest.WantErrContains(t, err, "2 of 4 consumers got every record; consumer 2 received different batches")
	clitest.WantErrContains(t, err, "and 1 more failures")

	// Out of time.
	s = memorySummary{Consumers: 2}
	s.addConsumers([]consumerResult{ok(0, time.Second), {id: 1}}, time.Minute)
	ctx, cancel := context.WithTimeoutCause(context.Background(), time.Nanosecond, errMemoryMaxDuration)
	defer cancel()
	<-ctx.Done()
	if err := memoryRunFailure(context.Background(), ctx, &s); !errors.Is(err, errMemoryMaxDuration) || !strings.Contains(err.Error(), "1 of 2 consumers") {
		t.Errorf("max duration: %v", err)
	}
	if s.FastestConsumerSeconds == nil || s.Verified {
		t.Errorf("partial: %s", clitest.JSONOf(t, s))
	}

	// No consumer completed: no completion times.
	s = memorySummary{Consumers: 1}
	s.addConsumers([]consumerResult{{id: 0}}, time.Second)
	if s.FastestConsumerSeconds != nil || s.SlowestConsumerSeconds != nil || s.Verified {
		t.Errorf("none complete: %s", clitest.JSONOf(t, s))
	}
}

func TestMemorySummaryOutput(t *testing.T) {
	rss, budget, inUse := int64(300<<20), int64(256<<20), int64(200<<20)
	ratio, waits := 200.0/256, uint64(12)
	s := &memorySummary{
		Topic: "bench", Partitions: 8, Consumers: 2, Stalled: 1, Producers: 4, Fetch: memoryFetch{MaxBytes: 1, MaxPartitionBytes: 2, MaxWaitMs: 500, MinBytes: 1},
		ConsumersCompleted: 2, Verified: true, Stopped: memoryStoppedCompleted, PeakRSS: &rss,
		Brokers:  []memoryBrokerFigures{{NodeID: 1, Scrapes: 10, PeakRSS: &rss, FetchBudget: &budget, PeakFetchInUse: &inUse, PeakFetchInUseOfBudget: &ratio, FetchWaits: &waits}},
		Failures: []string{"a", "b", "c", "d", "e", "f", "g"},
	}
	var out bytes.Buffer
	if err := s.write(&out, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CONSUMERS COMPLETED       2/2", "PEAK BROKER RSS           300.0 MiB", "FETCH BUDGET                256.0 MiB",
		"PEAK FETCH IN USE           200.0 MiB (78% of budget)", "FETCH WAITS                 12", "FETCH TRIMMED READS         n/a",
		"max-wait 500ms", "NOTE  FAILED: e\nNOTE  FAILED: and 2 more",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := s.write(&out, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"consumers_completed", "delivered_bytes", "mb_per_sec", "slowest_consumer_seconds", "peak_rss_bytes", "brokers", "stopped", "failures"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	if b := doc["brokers"].([]any)[0].(map[string]any); b["fetch_trimmed_reads"] != nil || b["peak_fetch_in_use_of_budget"] == nil {
		t.Errorf("broker JSON: %v", b)
	}
}
