package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli"
)

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
	if err := s.write(&out, cli.FormatTable); err != nil {
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
	if err := s.write(&out, cli.FormatJSON); err != nil {
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
	if err := s.write(&out, cli.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VERDICT  left behind: 1200 goroutines, 2 connections", "NOTE  latest error: connection 5: boom", "NOTE  FAILED: group g, soak-0/3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
