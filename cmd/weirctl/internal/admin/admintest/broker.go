package admintest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
)

// BrokerPage is what a fake broker's /metrics reports.
type BrokerPage struct {
	CPUSeconds float64
	AllocBytes float64
	Fetches    int
	// BytesOut is weir_kafka_topic_bytes_out_total per topic.
	BytesOut map[string]int
	// Shards are the coalescer counters per shard: insertions,
	// reinsertions, ready hits, inflight hits. nil: no coalescer.
	Shards [][4]uint64
	// Saved are weir's own coalescer counters per shard: shared bytes,
	// reads, read seconds. nil: not exported (an older broker).
	Saved [][3]float64
}

// Text renders the page as client_golang would: families with HELP and
// TYPE lines, plus unrelated series a real broker also exports.
func (p BrokerPage) Text() string {
	var b strings.Builder
	family := func(name, typ string) { fmt.Fprintf(&b, "# HELP %s test.\n# TYPE %s %s\n", name, name, typ) }
	family("go_gc_duration_seconds", "summary")
	b.WriteString("go_gc_duration_seconds{quantile=\"0.5\"} 1e-05\ngo_gc_duration_seconds_sum 0.1\ngo_gc_duration_seconds_count 7\n")
	family(admin.MetricAllocBytes, "counter")
	fmt.Fprintf(&b, "%s %g\n", admin.MetricAllocBytes, p.AllocBytes)
	family(admin.MetricCPUSeconds, "counter")
	fmt.Fprintf(&b, "%s %g\n", admin.MetricCPUSeconds, p.CPUSeconds)
	family(admin.MetricKafkaRequests, "counter")
	fmt.Fprintf(&b, "%s{api=\"Fetch\"} %d\n%s{api=\"Produce\"} 999\n%s{api=\"OffsetFetch\"} 5\n", admin.MetricKafkaRequests, p.Fetches, admin.MetricKafkaRequests, admin.MetricKafkaRequests)
	if len(p.BytesOut) > 0 {
		family(admin.MetricTopicBytesOut, "counter")
		for _, topic := range slices.Sorted(maps.Keys(p.BytesOut)) {
			fmt.Fprintf(&b, "%s{topic=%q} %d\n", admin.MetricTopicBytesOut, topic, p.BytesOut[topic])
		}
	}
	if p.Shards != nil {
		for i, name := range []string{admin.MetricCoalescerInsertions, admin.MetricCoalescerReinsertions, admin.MetricCoalescerReadyHits, admin.MetricCoalescerInflightHits} {
			family(name, "counter")
			for shard, c := range p.Shards {
				fmt.Fprintf(&b, "%s{shard=\"%d\"} %d\n", name, shard, c[i])
			}
		}
	}
	if p.Saved != nil {
		for i, name := range []string{admin.MetricCoalescerSharedBytes, admin.MetricCoalescerReads, admin.MetricCoalescerReadSeconds} {
			family(name, "counter")
			for shard, c := range p.Saved {
				fmt.Fprintf(&b, "%s{shard=\"%d\"} %g\n", name, shard, c[i])
			}
		}
	}
	return b.String()
}

// FakeBroker is one broker's admin API: /metrics serves its page and
// /v1/brokers the cluster's broker list.
type FakeBroker struct {
	Server *httptest.Server

	mu      sync.Mutex
	page    string
	brokers []admin.Broker
	accept  string
	// user and password, when set, are the only basic credentials
	// answered; anything else is 401, as a broker requiring them does.
	user, password string
}

// NewFakeBroker serves page until the test ends.
func NewFakeBroker(t *testing.T, page BrokerPage) *FakeBroker {
	t.Helper()
	fb := &FakeBroker{page: page.Text()}
	fb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	t.Cleanup(fb.Server.Close)
	return fb
}

// Addr is the broker's host:port, as admin_addr gives it in /v1/brokers.
func (fb *FakeBroker) Addr() string { return strings.TrimPrefix(fb.Server.URL, "http://") }

// SetPage serves p as /metrics from now on.
func (fb *FakeBroker) SetPage(p BrokerPage) { fb.SetPageText(p.Text()) }

// SetPageText serves text, which need not be a BrokerPage's, as /metrics.
func (fb *FakeBroker) SetPageText(text string) {
	fb.mu.Lock()
	fb.page = text
	fb.mu.Unlock()
}

// LastAccept is the Accept header of the last /metrics request.
func (fb *FakeBroker) LastAccept() string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.accept
}

// RequireCredentials makes every request without these basic
// credentials a 401.
func (fb *FakeBroker) RequireCredentials(user, password string) {
	fb.mu.Lock()
	fb.user, fb.password = user, password
	fb.mu.Unlock()
}

// SetBrokers is what GET /v1/brokers lists from now on.
func (fb *FakeBroker) SetBrokers(b ...admin.Broker) {
	fb.mu.Lock()
	fb.brokers = b
	fb.mu.Unlock()
}

// Client is an admin API client pointed at this broker.
func (fb *FakeBroker) Client() *admin.Client {
	return admin.NewClient(fb.Server.URL, 5*time.Second)
}

// SamplePage is one broker with two coalescer shards and traffic on two
// topics.
func SamplePage() BrokerPage {
	return BrokerPage{
		CPUSeconds: 12.5, AllocBytes: 4e9, Fetches: 300,
		BytesOut: map[string]int{"fan": 1000, "other": 7},
		Shards:   [][4]uint64{{10, 2, 30, 8}, {0, 0, 0, 0}},
	}
}
