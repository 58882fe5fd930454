package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// brokerPage is what a fake broker's /metrics reports.
type brokerPage struct {
	cpuSeconds float64
	allocBytes float64
	fetches    int
	// bytesOut is weir_kafka_topic_bytes_out_total per topic.
	bytesOut map[string]int
	// shards are the coalescer counters per shard: insertions,
	// reinsertions, ready hits, inflight hits. nil: no coalescer.
	shards [][4]uint64
	// saved are weir's own coalescer counters per shard: shared bytes,
	// reads, read seconds. nil: not exported (an older broker).
	saved [][3]float64
}

// text renders the page as client_golang would: families with HELP and
// TYPE lines, plus unrelated series a real broker also exports.
func (p brokerPage) text() string {
	var b strings.Builder
	family := func(name, typ string) { fmt.Fprintf(&b, "# HELP %s test.\n# TYPE %s %s\n", name, name, typ) }
	family("go_gc_duration_seconds", "summary")
	b.WriteString("go_gc_duration_seconds{quantile=\"0.5\"} 1e-05\ngo_gc_duration_seconds_sum 0.1\ngo_gc_duration_seconds_count 7\n")
	family(metricAllocBytes, "counter")
	fmt.Fprintf(&b, "%s %g\n", metricAllocBytes, p.allocBytes)
	family(metricCPUSeconds, "counter")
	fmt.Fprintf(&b, "%s %g\n", metricCPUSeconds, p.cpuSeconds)
	family(metricKafkaRequests, "counter")
	fmt.Fprintf(&b, "%s{api=\"Fetch\"} %d\n%s{api=\"Produce\"} 999\n%s{api=\"OffsetFetch\"} 5\n", metricKafkaRequests, p.fetches, metricKafkaRequests, metricKafkaRequests)
	if len(p.bytesOut) > 0 {
		family(metricTopicBytesOut, "counter")
		for _, topic := range sortedNames(p.bytesOut) {
			fmt.Fprintf(&b, "%s{topic=%q} %d\n", metricTopicBytesOut, topic, p.bytesOut[topic])
		}
	}
	if p.shards != nil {
		for i, name := range []string{metricCoalescerInsertions, metricCoalescerReinsertions, metricCoalescerReadyHits, metricCoalescerInflightHits} {
			family(name, "counter")
			for shard, c := range p.shards {
				fmt.Fprintf(&b, "%s{shard=\"%d\"} %d\n", name, shard, c[i])
			}
		}
	}
	if p.saved != nil {
		for i, name := range []string{metricCoalescerSharedBytes, metricCoalescerReads, metricCoalescerReadSeconds} {
			family(name, "counter")
			for shard, c := range p.saved {
				fmt.Fprintf(&b, "%s{shard=\"%d\"} %g\n", name, shard, c[i])
			}
		}
	}
	return b.String()
}

// fakeBroker is one broker's admin API: /metrics serves its page and
// /v1/brokers the cluster's broker list.
type fakeBroker struct {
	srv *httptest.Server

	mu      sync.Mutex
	page    string
	brokers []adminBroker
	accept  string
	// user and password, when set, are the only basic credentials
	// answered; anything else is 401, as a broker requiring them does.
	user, password string
}

func newFakeBroker(t *testing.T, page brokerPage) *fakeBroker {
	t.Helper()
	fb := &fakeBroker{page: page.text()}
	fb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		if user, password, _ := r.BasicAuth(); fb.user != "" && (user != fb.user || password != fb.password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"message":"authentication required"}`))
			return
		}
		switch r.URL.Path {
		case "/metrics":
			fb.accept = r.Header.Get("Accept")
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8; escaping=underscores")
			w.Write([]byte(fb.page))
		case "/v1/brokers":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(fb.brokers)
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"not found"}`))
		}
	}))
	t.Cleanup(fb.srv.Close)
	return fb
}

func (fb *fakeBroker) addr() string { return strings.TrimPrefix(fb.srv.URL, "http://") }

func (fb *fakeBroker) setPage(p brokerPage) {
	fb.mu.Lock()
	fb.page = p.text()
	fb.mu.Unlock()
}

func (fb *fakeBroker) requireCredentials(user, password string) {
	fb.mu.Lock()
	fb.user, fb.password = user, password
	fb.mu.Unlock()
}

func (fb *fakeBroker) setBrokers(b ...adminBroker) {
	fb.mu.Lock()
	fb.brokers = b
	fb.mu.Unlock()
}

func (fb *fakeBroker) client() *adminClient {
	return &adminClient{base: fb.srv.URL, http: &http.Client{Timeout: 5 * time.Second}}
}

func testPage() brokerPage {
	return brokerPage{
		cpuSeconds: 12.5, allocBytes: 4e9, fetches: 300,
		bytesOut: map[string]int{"fan": 1000, "other": 7},
		shards:   [][4]uint64{{10, 2, 30, 8}, {0, 0, 0, 0}},
	}
}

func TestScrapeMetrics(t *testing.T) {
	fb := newFakeBroker(t, testPage())
	fams, err := fb.client().scrapeMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fb.accept, "text/plain;version=0.0.4") {
		t.Errorf("Accept should prefer the text format: %q", fb.accept)
	}
	for _, tc := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{metricCPUSeconds, nil, 12.5},
		{metricAllocBytes, nil, 4e9},
		{metricKafkaRequests, map[string]string{"api": fetchAPILabel}, 300},
		{metricKafkaRequests, nil, 300 + 999 + 5},
		{metricTopicBytesOut, map[string]string{"topic": "fan"}, 1000},
	} {
		if got, ok := fams.sum(tc.name, tc.match); !ok || got != tc.want {
			t.Errorf("%s%v: got %v, %v; want %v", tc.name, tc.match, got, ok, tc.want)
		}
	}
	if _, ok := fams.sum(metricTopicBytesOut, map[string]string{"topic": "nope"}); ok {
		t.Error("a label value no sample has must not be found")
	}
	if _, ok := fams.sum("weir_missing_total", nil); ok {
		t.Error("a missing family must not be found")
	}
	// A summary has no single value; summing it finds nothing.
	if _, ok := fams.sum("go_gc_duration_seconds", nil); ok {
		t.Error("summary summed")
	}
}

func TestCoalescerShards(t *testing.T) {
	p := testPage()
	p.shards = make([][4]uint64, 12)
	p.shards[2] = [4]uint64{1, 0, 3, 0}
	p.shards[10] = [4]uint64{4, 1, 0, 5}
	fams, err := parseMetrics("text/plain; version=0.0.4", []byte(p.text()))
	if err != nil {
		t.Fatal(err)
	}
	shards, err := fams.coalescerShards()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 12 || shards[2].Shard != "2" || shards[10].Shard != "10" || shards[11].Shard != "11" {
		t.Fatalf("shards not in numeric order: %+v", shards)
	}
	if c := shards[2].coalescerCounts; c.Insertions != 1 || c.ReadyHits != 3 || c.HitRatio != 0.75 {
		t.Errorf("shard 2: %+v", c)
	}
	if shards[0].HitRatio != 0 {
		t.Errorf("an idle shard's ratio must be 0, got %v", shards[0].HitRatio)
	}
	total, err := fams.coalescerTotal()
	if err != nil {
		t.Fatal(err)
	}
	want := coalescerCounts{Insertions: 5, Reinsertions: 1, ReadyHits: 3, InflightHits: 5, HitRatio: 8.0 / 14}
	if total != want {
		t.Errorf("total: got %+v, want %+v", total, want)
	}

	p.shards = nil
	fams, _ = parseMetrics("", []byte(p.text()))
	if _, err := fams.coalescerShards(); err != errNoCoalescerMetrics {
		t.Errorf("no coalescer: got %v", err)
	}
}

func TestHitRatio(t *testing.T) {
	for _, tc := range []struct {
		c    coalescerCounts
		want float64
	}{
		{coalescerCounts{}, 0},
		{coalescerCounts{Insertions: 1}, 0},
		{coalescerCounts{Insertions: 1, Reinsertions: 1, ReadyHits: 1, InflightHits: 1}, 0.5},
		{coalescerCounts{ReadyHits: 3, InflightHits: 1}, 1},
		{coalescerCounts{Insertions: 3, InflightHits: 1}, 0.25},
	} {
		if got := tc.c.withHitRatio().HitRatio; got != tc.want {
			t.Errorf("%+v: got %v, want %v", tc.c, got, tc.want)
		}
	}
	later := coalescerCounts{Insertions: 10, Reinsertions: 2, ReadyHits: 30, InflightHits: 8}
	d, ok := later.minus(coalescerCounts{Insertions: 4, Reinsertions: 2, ReadyHits: 10, InflightHits: 4})
	if !ok || d != (coalescerCounts{Insertions: 6, ReadyHits: 20, InflightHits: 4, HitRatio: 0.8}) {
		t.Errorf("delta: %+v %v", d, ok)
	}
	if _, ok := (coalescerCounts{Insertions: 1}).minus(later); ok {
		t.Error("a counter going backwards must be refused")
	}
}

func TestParseMetricsContentTypes(t *testing.T) {
	text := []byte(testPage().text())
	for _, ct := range []string{
		"text/plain; version=0.0.4; charset=utf-8; escaping=underscores",
		"text/plain; version=1.0.0; charset=utf-8",
		"text/plain",
		"",
	} {
		fams, err := parseMetrics(ct, text)
		if err != nil {
			t.Errorf("%q: %v", ct, err)
			continue
		}
		if v, _ := fams.sum(metricCPUSeconds, nil); v != 12.5 {
			t.Errorf("%q: cpu %v", ct, v)
		}
	}

	// Delimited protobuf, in case a proxy negotiated it.
	fams, _ := parseMetrics("", text)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.FmtProtoDelim)
	for _, name := range sortedNames(fams) {
		if err := enc.Encode(fams[name]); err != nil {
			t.Fatal(err)
		}
	}
	back, err := parseMetrics(string(expfmt.FmtProtoDelim), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if total, err := back.coalescerTotal(); err != nil || total.ReadyHits != 30 {
		t.Errorf("protobuf: %+v %v", total, err)
	}

	for _, tc := range []struct{ ct, body, want string }{
		{"text/html; charset=utf-8", "<html>login</html>", "want the Prometheus text format"},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", "# EOF\n", "want the Prometheus text format"},
		{"text/plain", "this is { not metrics\n", "parsing the Prometheus text format"},
		{"text/plain; =broken", "", "unreadable Content-Type"},
	} {
		_, err := parseMetrics(tc.ct, []byte(tc.body))
		wantErrContains(t, err, tc.want)
	}
}

func TestScrapeMetricsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("x") == "" && r.URL.Path == "/metrics" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &adminClient{base: srv.URL, http: &http.Client{Timeout: 5 * time.Second}}
	_, err := c.scrapeMetrics(context.Background())
	wantErrContains(t, err, "disable_metrics")

	// Nothing listens on port 1, and the error names the URL tried.
	c = &adminClient{base: "http://127.0.0.1:1", http: &http.Client{Timeout: time.Second}}
	_, err = c.scrapeMetrics(context.Background())
	wantErrContains(t, err, "http://127.0.0.1:1/metrics")
}
