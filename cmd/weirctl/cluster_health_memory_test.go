package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

// healthMemoryPage renders a broker's memory series in the Prometheus text
// format; a series whose value is absent from vals is not exported.
// Values are given per shard so that summing over series is exercised.
func healthMemoryPage(vals map[string][]float64) string {
	var b strings.Builder
	// An unrelated family, as every real page has.
	b.WriteString("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n")
	for _, name := range sortedNames(vals) {
		typ := "gauge"
		if strings.HasSuffix(name, "_total") {
			typ = "counter"
		}
		fmt.Fprintf(&b, "# HELP %s test.\n# TYPE %s %s\n", name, name, typ)
		for shard, v := range vals[name] {
			fmt.Fprintf(&b, "%s{shard=\"%d\"} %g\n", name, shard, v)
		}
	}
	return b.String()
}

func healthParsePage(t *testing.T, page string) admin.MetricFamilies {
	t.Helper()
	f, err := admin.ParseMetrics("", []byte(page))
	if err != nil {
		t.Fatalf("%v\n%s", err, page)
	}
	return f
}

func healthScrape(t *testing.T, id int32, vals map[string][]float64) admin.BrokerScrape {
	return admin.BrokerScrape{Broker: admin.Broker{NodeID: id, IsAlive: true}, Metrics: healthParsePage(t, healthMemoryPage(vals))}
}

func healthFailedScrape(id int32, err error) admin.BrokerScrape {
	return admin.BrokerScrape{Broker: admin.Broker{NodeID: id}, Err: err}
}

func healthU64(n uint64) *uint64 { return &n }

func healthI64(n int64) *int64 { return &n }

func TestMemoryWarnings(t *testing.T) {
	first := []admin.BrokerScrape{
		// 0: requests waited; the fetch pool is exported but idle.
		healthScrape(t, 0, map[string][]float64{
			healthMetricRequestMemoryWaitSeconds: {1, 2}, healthMetricRequestMemoryWaits: {10, 0},
			healthMetricRequestMemoryPool: {50 << 20, 50 << 20}, healthMetricRequestMemoryInUse: {40 << 20, 50 << 20},
			healthMetricFetchMemoryWaitSeconds: {7}, healthMetricFetchMemoryWaits: {3},
			healthMetricFetchMemoryBudget: {64 << 20}, healthMetricFetchMemoryInUse: {0}, healthMetricFetchMemoryTrimmedReads: {5},
		}),
		// 1: fetches waited, several at once, and reads were trimmed.
		healthScrape(t, 1, map[string][]float64{
			healthMetricFetchMemoryWaitSeconds: {10}, healthMetricFetchMemoryWaits: {100},
			healthMetricFetchMemoryBudget: {64 << 20}, healthMetricFetchMemoryInUse: {1 << 20}, healthMetricFetchMemoryTrimmedReads: {0},
		}),
		// 2: an older broker, without the series.
		healthScrape(t, 2, nil),
		// 3: read once, then not.
		healthScrape(t, 3, map[string][]float64{healthMetricFetchMemoryWaitSeconds: {1}}),
		// 4: restarted between the reads.
		healthScrape(t, 4, map[string][]float64{healthMetricRequestMemoryWaitSeconds: {100}, healthMetricFetchMemoryWaitSeconds: {1}}),
		// 5: only the wait seconds, and an unbounded budget.
		healthScrape(t, 5, map[string][]float64{healthMetricFetchMemoryWaitSeconds: {0}, healthMetricFetchMemoryBudget: {0}}),
		// 6: down.
		healthFailedScrape(6, admin.ErrBrokerNotAlive),
		// 7: exported wait seconds, nothing waited.
		healthScrape(t, 7, map[string][]float64{healthMetricRequestMemoryWaitSeconds: {4}, healthMetricFetchMemoryWaitSeconds: {4}}),
	}
	second := []admin.BrokerScrape{
		healthScrape(t, 0, map[string][]float64{
			healthMetricRequestMemoryWaitSeconds: {1.25, 2.25}, healthMetricRequestMemoryWaits: {15, 2},
			healthMetricRequestMemoryPool: {50 << 20, 50 << 20}, healthMetricRequestMemoryInUse: {48 << 20, 49 << 20},
			healthMetricFetchMemoryWaitSeconds: {7}, healthMetricFetchMemoryWaits: {3},
			healthMetricFetchMemoryBudget: {64 << 20}, healthMetricFetchMemoryInUse: {1 << 20}, healthMetricFetchMemoryTrimmedReads: {5},
		}),
		healthScrape(t, 1, map[string][]float64{
			healthMetricFetchMemoryWaitSeconds: {13}, healthMetricFetchMemoryWaits: {130},
			healthMetricFetchMemoryBudget: {64 << 20}, healthMetricFetchMemoryInUse: {60 << 20}, healthMetricFetchMemoryTrimmedReads: {12},
		}),
		healthScrape(t, 2, nil),
		healthFailedScrape(3, errors.New("scraping http://h3/metrics: timeout")),
		healthScrape(t, 4, map[string][]float64{healthMetricRequestMemoryWaitSeconds: {2}, healthMetricFetchMemoryWaitSeconds: {5}}),
		healthScrape(t, 5, map[string][]float64{healthMetricFetchMemoryWaitSeconds: {0.0001}, healthMetricFetchMemoryBudget: {0}}),
		healthFailedScrape(6, admin.ErrBrokerNotAlive),
		healthScrape(t, 7, map[string][]float64{healthMetricRequestMemoryWaitSeconds: {4}, healthMetricFetchMemoryWaitSeconds: {4}}),
		// 8: not in the first read.
		healthScrape(t, 8, map[string][]float64{healthMetricFetchMemoryWaitSeconds: {1}}),
	}
	got := healthMemoryWarnings(first, second, 2*time.Second)

	want := []healthMemoryWarning{
		{NodeID: 0, Pool: "request", WaitSeconds: 0.5, IntervalSeconds: 2, WaitFraction: 0.25, Waits: healthU64(7), InUseBytes: healthI64(97 << 20), SizeBytes: healthI64(100 << 20),
			Message: "broker 0: request memory pool (queued_max_request_bytes): requests waited 25% of the 2.00s sample (0.50s summed over 7 waits); in use 97.0 MiB of 100.0 MiB"},
		{NodeID: 1, Pool: "fetch", WaitSeconds: 3, IntervalSeconds: 2, WaitFraction: 1.5, Waits: healthU64(30), InUseBytes: healthI64(60 << 20), SizeBytes: healthI64(64 << 20), TrimmedReads: healthU64(12),
			Message: "broker 1: fetch memory budget: fetches waited 150% of the 2.00s sample (3.00s summed over 30 waits); in use 60.0 MiB of 64.0 MiB; 12 partition reads trimmed"},
		{NodeID: 3, Message: "broker 3: memory not checked: scraping http://h3/metrics: timeout"},
		{NodeID: 4, Message: "broker 4: memory not checked: its counters went backwards between the reads (restarted?)"},
		{NodeID: 5, Pool: "fetch", WaitSeconds: 0.0001, IntervalSeconds: 2, WaitFraction: 0.00005, SizeBytes: healthI64(0),
			Message: "broker 5: fetch memory budget: fetches waited <0.1% of the 2.00s sample (0.00s summed over waiters); in use ? of unbounded"},
		{NodeID: 6, Message: "broker 6: memory not checked: not alive (not asked)"},
		{NodeID: 8, Message: "broker 8: memory not checked: not in the first read"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d warnings, want %d:\n%s", len(got), len(want), healthWarningLines(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		// Floats from subtraction: compare to a tolerance, then the rest
		// exactly through JSON, which also follows the pointers.
		if !healthNear(g.WaitSeconds, w.WaitSeconds) || !healthNear(g.WaitFraction, w.WaitFraction) {
			t.Errorf("warning %d: waited %g (%g), want %g (%g)", i, g.WaitSeconds, g.WaitFraction, w.WaitSeconds, w.WaitFraction)
		}
		g.WaitSeconds, g.WaitFraction = w.WaitSeconds, w.WaitFraction
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if !bytes.Equal(gj, wj) {
			t.Errorf("warning %d:\n got %s\nwant %s", i, gj, wj)
		}
	}
}

func healthNear(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func healthWarningLines(ws []healthMemoryWarning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.Message + "\n")
	}
	return b.String()
}

// TestMemoryWarningsNothingToSay: brokers without the series, or whose
// pools never waited, give an empty list (not nil: JSON shows []).
func TestMemoryWarningsNothingToSay(t *testing.T) {
	quiet := map[string][]float64{healthMetricRequestMemoryWaitSeconds: {3}, healthMetricFetchMemoryWaitSeconds: {0}}
	first := []admin.BrokerScrape{healthScrape(t, 0, nil), healthScrape(t, 1, quiet)}
	second := []admin.BrokerScrape{healthScrape(t, 0, nil), healthScrape(t, 1, quiet)}
	got := healthMemoryWarnings(first, second, time.Second)
	if got == nil || len(got) != 0 {
		t.Fatalf("got %#v, want an empty list", got)
	}
	// A zero interval (a clock that did not move) must not put NaN or
	// Inf in the document.
	grew := map[string][]float64{healthMetricRequestMemoryWaitSeconds: {4}}
	got = healthMemoryWarnings(first[1:], []admin.BrokerScrape{healthScrape(t, 1, grew)}, 0)
	if len(got) != 1 || got[0].WaitFraction != 0 {
		t.Fatalf("zero interval: %+v", got)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatal(err)
	}
}

func TestHealthPercent(t *testing.T) {
	for f, want := range map[float64]string{0: "0.0%", 0.00001: "<0.1%", 0.0123: "1.2%", 0.1: "10%", 0.994: "99%", 2.5: "250%"} {
		if got := healthPercent(f); got != want {
			t.Errorf("%g: got %q, want %q", f, got, want)
		}
	}
}

func testClusterHealth() clusterHealth {
	return clusterHealth{
		clusterSummary: summarizeCluster(testMetadata()),
		MemoryWarnings: []healthMemoryWarning{
			{NodeID: 1, Pool: "fetch", WaitSeconds: 3, IntervalSeconds: 2, WaitFraction: 1.5, Waits: healthU64(30), InUseBytes: healthI64(60 << 20), SizeBytes: healthI64(64 << 20),
				Message: "broker 1: fetch memory budget: fetches waited 150% of the 2.00s sample (3.00s summed over 30 waits); in use 60.0 MiB of 64.0 MiB"},
			{NodeID: 2, Message: "broker 2: memory not checked: not alive (not asked)"},
		},
	}
}

func TestPrintClusterHealthMemoryWarnings(t *testing.T) {
	h := testClusterHealth()
	var buf bytes.Buffer
	if err := h.write(&buf, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	tail := lines[len(lines)-2:]
	want := []string{
		"WARNING                      broker 1: fetch memory budget: fetches waited 150% of the 2.00s sample (3.00s summed over 30 waits); in use 60.0 MiB of 64.0 MiB",
		"WARNING                      broker 2: memory not checked: not alive (not asked)",
	}
	for i := range want {
		if tail[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, tail[i], want[i])
		}
	}
	// The warnings come after the verdict, which they do not change.
	if !strings.HasPrefix(out, "HEALTHY                      false\n") || !strings.Contains(out, "PROBLEM") {
		t.Errorf("summary lines:\n%s", out)
	}

	buf.Reset()
	if err := h.write(&buf, cli.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Healthy        bool             `json:"healthy"`
		Leaderless     []string         `json:"leaderless_partitions"`
		MemoryWarnings []map[string]any `json:"memory_warnings"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	// The summary's fields stay at the top level, as before.
	if doc.Healthy || len(doc.Leaderless) != 1 || len(doc.MemoryWarnings) != 2 {
		t.Fatalf("health json: %+v\n%s", doc, buf.String())
	}
	w := doc.MemoryWarnings[0]
	for key, v := range map[string]any{"node_id": 1.0, "pool": "fetch", "wait_fraction": 1.5, "wait_seconds": 3.0, "interval_seconds": 2.0,
		"waits": 30.0, "in_use_bytes": float64(60 << 20), "size_bytes": float64(64 << 20), "message": h.MemoryWarnings[0].Message} {
		if w[key] != v {
			t.Errorf("memory_warnings[0].%s = %v, want %v", key, w[key], v)
		}
	}
	if _, ok := doc.MemoryWarnings[1]["pool"]; ok || doc.MemoryWarnings[1]["message"] == "" {
		t.Errorf("unreadable broker: %v", doc.MemoryWarnings[1])
	}

	buf.Reset()
	if err := h.write(&buf, cli.FormatYAML); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "memory_warnings:") || !strings.Contains(out, "wait_fraction: 1.5") || !strings.Contains(out, "healthy: false") {
		t.Errorf("health yaml:\n%s", out)
	}

	// Without warnings the documents still carry the field, empty.
	buf.Reset()
	if err := printClusterHealth(&buf, cli.FormatJSON, h.clusterSummary); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"memory_warnings": []`) {
		t.Errorf("no warnings:\n%s", buf.String())
	}
}

// healthMemoryAdmin is a one-broker cluster's admin API whose request pool
// wait counter grows by a quarter second per read of /metrics.
type healthMemoryAdmin struct {
	srv *httptest.Server

	mu    sync.Mutex
	reads int
}

func newHealthMemoryAdmin(t *testing.T) *healthMemoryAdmin {
	t.Helper()
	m := &healthMemoryAdmin{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		switch r.URL.Path {
		case "/v1/brokers":
			json.NewEncoder(w).Encode([]admin.Broker{
				{NodeID: 0, AdminAddr: strings.TrimPrefix(m.srv.URL, "http://"), IsAlive: true},
				{NodeID: 1, IsAlive: true},
			})
		case "/metrics":
			m.reads++
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, healthMemoryPage(map[string][]float64{
				healthMetricRequestMemoryWaitSeconds: {0.25 * float64(m.reads)}, healthMetricRequestMemoryWaits: {float64(m.reads)},
				healthMetricRequestMemoryPool: {100 << 20}, healthMetricRequestMemoryInUse: {100 << 20},
			}))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *healthMemoryAdmin) client() *admin.Client {
	return admin.NewClient(m.srv.URL, 5*time.Second)
}

func TestCheckBrokerMemory(t *testing.T) {
	m := newHealthMemoryAdmin(t)
	start := time.Now()
	got, err := checkBrokerMemory(context.Background(), m.client(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("took %s, less than the sample", el)
	}
	if len(got) != 2 {
		t.Fatalf("got:\n%s", healthWarningLines(got))
	}
	w := got[0]
	if w.NodeID != 0 || w.Pool != "request" || w.WaitSeconds != 0.25 || w.Waits == nil || *w.Waits != 1 ||
		w.IntervalSeconds < 0.05 || w.WaitFraction <= 0 || w.WaitFraction > 5 ||
		!strings.Contains(w.Message, "in use 100.0 MiB of 100.0 MiB") {
		t.Errorf("request pool warning: %+v", w)
	}
	if got[1].NodeID != 1 || !strings.Contains(got[1].Message, "broker 1: memory not checked: unreachable: the broker registered no admin_addr") {
		t.Errorf("broker without admin_addr: %+v", got[1])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reads != 2 {
		t.Errorf("/metrics read %d times, want 2", m.reads)
	}
}

// TestCheckBrokerMemoryWithoutAdminAPI: a health check whose admin API
// cannot be reached warns and goes on.
func TestCheckBrokerMemoryWithoutAdminAPI(t *testing.T) {
	m := newHealthMemoryAdmin(t)
	m.srv.Close()
	got, err := checkBrokerMemory(context.Background(), m.client(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].NodeID != healthNoBroker || !strings.Contains(got[0].Message, "memory not checked: listing brokers at") ||
		!strings.Contains(got[0].Message, "--memory-sample 0") {
		t.Fatalf("got %+v", got)
	}
}

// TestCheckBrokerMemoryInterrupted: Ctrl-C during the sample stops the
// command rather than waiting it out.
func TestCheckBrokerMemoryInterrupted(t *testing.T) {
	m := newHealthMemoryAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := checkBrokerMemory(ctx, m.client(), time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("took %s", el)
	}
}

func TestHealthMemorySampleFlag(t *testing.T) {
	_, _, err := run(t, "", "--brokers", "127.0.0.1:1", "cluster", "health", "--memory-sample", "-1s")
	clitest.WantErrContains(t, err, "--memory-sample must be >= 0")
}
