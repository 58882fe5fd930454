// These tests read the pages of admintest, which imports admin, so they
// are an external test package.
package admin_test

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/admin/admintest"
	"github.com/weir-broker/weir/cmd/weirctl/internal/cli/clitest"
)

func TestScrapeMetrics(t *testing.T) {
	fb := admintest.NewFakeBroker(t, admintest.SamplePage())
	fams, err := fb.Client().ScrapeMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if accept := fb.LastAccept(); !strings.HasPrefix(accept, "text/plain;version=0.0.4") {
		t.Errorf("Accept should prefer the text format: %q", accept)
	}
	for _, tc := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{admin.MetricCPUSeconds, nil, 12.5},
		{admin.MetricAllocBytes, nil, 4e9},
		{admin.MetricKafkaRequests, map[string]string{"api": admin.FetchAPILabel}, 300},
		{admin.MetricKafkaRequests, nil, 300 + 999 + 5},
		{admin.MetricTopicBytesOut, map[string]string{"topic": "fan"}, 1000},
	} {
		if got, ok := fams.Sum(tc.name, tc.match); !ok || got != tc.want {
			t.Errorf("%s%v: got %v, %v; want %v", tc.name, tc.match, got, ok, tc.want)
		}
	}
	if _, ok := fams.Sum(admin.MetricTopicBytesOut, map[string]string{"topic": "nope"}); ok {
		t.Error("a label value no sample has must not be found")
	}
	if _, ok := fams.Sum("weir_missing_total", nil); ok {
		t.Error("a missing family must not be found")
	}
	// A summary has no single value; summing it finds nothing.
	if _, ok := fams.Sum("go_gc_duration_seconds", nil); ok {
		t.Error("summary summed")
	}
}

func TestCoalescerShards(t *testing.T) {
	p := admintest.SamplePage()
	p.Shards = make([][4]uint64, 12)
	p.Shards[2] = [4]uint64{1, 0, 3, 0}
	p.Shards[10] = [4]uint64{4, 1, 0, 5}
	fams, err := admin.ParseMetrics("text/plain; version=0.0.4", []byte(p.Text()))
	if err != nil {
		t.Fatal(err)
	}
	shards, err := fams.CoalescerShards()
	if err != nil {
		t.Fatal(err)
	}
	if len(shards) != 12 || shards[2].Shard != "2" || shards[10].Shard != "10" || shards[11].Shard != "11" {
		t.Fatalf("shards not in numeric order: %+v", shards)
	}
	if c := shards[2].CoalescerCounts; c.Insertions != 1 || c.ReadyHits != 3 || c.HitRatio != 0.75 {
		t.Errorf("shard 2: %+v", c)
	}
	if shards[0].HitRatio != 0 {
		t.Errorf("an idle shard's ratio must be 0, got %v", shards[0].HitRatio)
	}
	total, err := fams.CoalescerTotal()
	if err != nil {
		t.Fatal(err)
	}
	want := admin.CoalescerCounts{Insertions: 5, Reinsertions: 1, ReadyHits: 3, InflightHits: 5, HitRatio: 8.0 / 14}
	if total != want {
		t.Errorf("total: got %+v, want %+v", total, want)
	}

	p.Shards = nil
	fams, _ = admin.ParseMetrics("", []byte(p.Text()))
	if _, err := fams.CoalescerShards(); err != admin.ErrNoCoalescerMetrics {
		t.Errorf("no coalescer: got %v", err)
	}
}

func TestParseMetricsContentTypes(t *testing.T) {
	text := []byte(admintest.SamplePage().Text())
	for _, ct := range []string{
		"text/plain; version=0.0.4; charset=utf-8; escaping=underscores",
		"text/plain; version=1.0.0; charset=utf-8",
		"text/plain",
		"",
	} {
		fams, err := admin.ParseMetrics(ct, text)
		if err != nil {
			t.Errorf("%q: %v", ct, err)
			continue
		}
		if v, _ := fams.Sum(admin.MetricCPUSeconds, nil); v != 12.5 {
			t.Errorf("%q: cpu %v", ct, v)
		}
	}

	// Delimited protobuf, in case a proxy negotiated it.
	fams, _ := admin.ParseMetrics("", text)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.FmtProtoDelim)
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		if err := enc.Encode(fams[name]); err != nil {
			t.Fatal(err)
		}
	}
	back, err := admin.ParseMetrics(string(expfmt.FmtProtoDelim), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if total, err := back.CoalescerTotal(); err != nil || total.ReadyHits != 30 {
		t.Errorf("protobuf: %+v %v", total, err)
	}

	for _, tc := range []struct{ ct, body, want string }{
		{"text/html; charset=utf-8", "<html>login</html>", "want the Prometheus text format"},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", "# EOF\n", "want the Prometheus text format"},
		{"text/plain", "this is { not metrics\n", "parsing the Prometheus text format"},
		{"text/plain; =broken", "", "unreadable Content-Type"},
	} {
		_, err := admin.ParseMetrics(tc.ct, []byte(tc.body))
		clitest.WantErrContains(t, err, tc.want)
	}
}
