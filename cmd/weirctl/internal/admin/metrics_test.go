package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestHitRatio(t *testing.T) {
	for _, tc := range []struct {
		c    CoalescerCounts
		want float64
	}{
		{CoalescerCounts{}, 0},
		{CoalescerCounts{Insertions: 1}, 0},
		{CoalescerCounts{Insertions: 1, Reinsertions: 1, ReadyHits: 1, InflightHits: 1}, 0.5},
		{CoalescerCounts{ReadyHits: 3, InflightHits: 1}, 1},
		{CoalescerCounts{Insertions: 3, InflightHits: 1}, 0.25},
	} {
		if got := tc.c.WithHitRatio().HitRatio; got != tc.want {
			t.Errorf("%+v: got %v, want %v", tc.c, got, tc.want)
		}
	}
	later := CoalescerCounts{Insertions: 10, Reinsertions: 2, ReadyHits: 30, InflightHits: 8}
	d, ok := later.Minus(CoalescerCounts{Insertions: 4, Reinsertions: 2, ReadyHits: 10, InflightHits: 4})
	if !ok || d != (CoalescerCounts{Insertions: 6, ReadyHits: 20, InflightHits: 4, HitRatio: 0.8}) {
		t.Errorf("delta: %+v %v", d, ok)
	}
	if _, ok := (CoalescerCounts{Insertions: 1}).Minus(later); ok {
		t.Error("a counter going backwards must be refused")
	}
}

func TestScrapeMetricsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("x") == "" && r.URL.Path == "/metrics" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &Client{base: srv.URL, http: &http.Client{Timeout: 5 * time.Second}}
	_, err := c.ScrapeMetrics(context.Background())
	clitest.WantErrContains(t, err, "disable_metrics")

	// Nothing listens on port 1, and the error names the URL tried.
	c = &Client{base: "http://127.0.0.1:1", http: &http.Client{Timeout: time.Second}}
	_, err = c.ScrapeMetrics(context.Background())
	clitest.WantErrContains(t, err, "http://127.0.0.1:1/metrics")
}
