package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names weirctl reads from a broker's /metrics.
const (
	metricCPUSeconds    = "process_cpu_seconds_total"
	metricAllocBytes    = "go_memstats_alloc_bytes_total"
	metricKafkaRequests = "weir_kafka_requests_total"
	metricTopicBytesOut = "weir_kafka_topic_bytes_out_total"
	// metricLogReadBytes counts record bytes read from partition logs
	// for consumer fetches (one read per coalesced read).
	metricLogReadBytes = "weir_log_read_bytes_total"

	metricCoalescerInsertions   = "vectorized_kafka_fetch_read_coalescer_insertions_total"
	metricCoalescerReinsertions = "vectorized_kafka_fetch_read_coalescer_reinsertions_total"
	metricCoalescerReadyHits    = "vectorized_kafka_fetch_read_coalescer_ready_hits_total"
	metricCoalescerInflightHits = "vectorized_kafka_fetch_read_coalescer_inflight_hits_total"
	metricCoalescerSharedBytes  = "weir_fetch_read_coalescer_shared_bytes_total"
	metricCoalescerReads        = "weir_fetch_read_coalescer_reads_total"
	metricCoalescerReadSeconds  = "weir_fetch_read_coalescer_read_seconds_total"

	// fetchAPILabel is the api label of Fetch in weir_kafka_requests_total:
	// the API names of kafka/apis.go.
	fetchAPILabel = "Fetch"

	// acceptMetricsText asks for the Prometheus text format, the one
	// format every exporter speaks and expfmt parses; protobuf is
	// accepted as a fallback, OpenMetrics is not (expfmt cannot read it).
	acceptMetricsText = "text/plain;version=0.0.4;q=1.0," +
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5," +
		"*/*;q=0.1"

	// maxMetricsResponse bounds a scrape. A broker with thousands of
	// partitions has per-group Raft series, so this is larger than
	// maxAdminResponse; a page beyond it is refused, not parsed cut short.
	maxMetricsResponse = 64 << 20
)

// metricFamilies is one scrape of a broker: family name → family.
type metricFamilies map[string]*dto.MetricFamily

// scrapeMetrics fetches and parses GET /metrics with the admin client's
// timeout, so one unresponsive broker cannot hold up a command.
func (c *adminClient) scrapeMetrics(ctx context.Context) (metricFamilies, error) {
	url := c.base + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	req.Header.Set("Accept", acceptMetricsText)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxMetricsResponse+1)
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(body, 4<<10))
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("scraping %s: 404: metrics are off on this broker (disable_metrics) or this is not a weir admin API", url)
		}
		return nil, fmt.Errorf("scraping %s: %w", url, c.refusal(resp.StatusCode, data))
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: reading the answer: %w", url, err)
	}
	if len(data) > maxMetricsResponse {
		return nil, fmt.Errorf("scraping %s: the page is larger than %d MiB", url, maxMetricsResponse>>20)
	}
	fams, err := parseMetrics(resp.Header.Get("Content-Type"), data)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return fams, nil
}

// parseMetrics decodes a /metrics answer by its Content-Type: the text
// format (any version: expfmt's own negotiation would refuse a text
// version it does not know, though the format is compatible), delimited
// protobuf, or no type at all, which simple exporters send for text.
func parseMetrics(contentType string, data []byte) (metricFamilies, error) {
	mediaType, params := "", map[string]string{}
	if contentType != "" {
		var err error
		if mediaType, params, err = mime.ParseMediaType(contentType); err != nil {
			return nil, fmt.Errorf("unreadable Content-Type %q: %w", contentType, err)
		}
	}
	switch mediaType {
	case "", "text/plain":
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("parsing the Prometheus text format: %w", err)
		}
		return fams, nil
	case expfmt.ProtoType:
		if params["encoding"] != "delimited" {
			break
		}
		return decodeMetrics(expfmt.NewDecoder(bytes.NewReader(data), expfmt.FmtProtoDelim))
	}
	return nil, fmt.Errorf("answered Content-Type %q, want the Prometheus text format (text/plain); is this a broker's admin API?", contentType)
}

func decodeMetrics(dec expfmt.Decoder) (metricFamilies, error) {
	fams := metricFamilies{}
	for {
		var f dto.MetricFamily
		err := dec.Decode(&f)
		if errors.Is(err, io.EOF) {
			return fams, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parsing metrics: %w", err)
		}
		if have := fams[f.GetName()]; have != nil {
			have.Metric = append(have.Metric, f.Metric...)
			continue
		}
		fams[f.GetName()] = &f
	}
}

// sampleValue reads a counter, gauge or untyped sample; other types (a
// histogram, a summary) have no single value and give NaN.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// hasLabels reports whether m carries every label of match with its value.
func hasLabels(m *dto.Metric, match map[string]string) bool {
	for name, want := range match {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				found = l.GetValue() == want
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sum adds up the samples of family name whose labels include match (nil
// matches all). found is false when the family is absent or no sample
// matched, which callers must tell apart from a counter that is zero: an
// older broker simply does not export a family.
func (f metricFamilies) sum(name string, match map[string]string) (total float64, found bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, match) {
			continue
		}
		if v := sampleValue(m); !math.IsNaN(v) {
			total += v
			found = true
		}
	}
	return total, found
}

// coalescerCounts are the fetch read coalescer's counters: a read either
// inserts an entry (insertion, or reinsertion of an evicted key) and reads
// the log, or is served from an entry that is ready or still being read.
type coalescerCounts struct {
	Insertions   uint64  `json:"insertions"`
	Reinsertions uint64  `json:"reinsertions"`
	ReadyHits    uint64  `json:"ready_hits"`
	InflightHits uint64  `json:"inflight_hits"`
	HitRatio     float64 `json:"hit_ratio"`
	// SharedBytes: record bytes hits took from others' reads. Reads and
	// ReadSeconds: the log reads misses made and their time; a hit saves
	// one such read (SecondsPerRead), so SavedSeconds estimates the
	// broker time the hits saved. Zero from brokers that do not export
	// them.
	SharedBytes    uint64  `json:"shared_bytes"`
	Reads          uint64  `json:"reads"`
	ReadSeconds    float64 `json:"read_seconds"`
	SecondsPerRead float64 `json:"seconds_per_read"`
	SavedSeconds   float64 `json:"saved_seconds"`
}

// withHitRatio fills the derived fields: HitRatio, the share of
// coalesced reads served without reading the log (0, not NaN, when there
// were none), and the time a read takes and the hits saved.
func (c coalescerCounts) withHitRatio() coalescerCounts {
	hits := c.ReadyHits + c.InflightHits
	all := c.Insertions + c.Reinsertions + hits
	c.HitRatio, c.SecondsPerRead, c.SavedSeconds = 0, 0, 0
	if all > 0 {
		c.HitRatio = float64(hits) / float64(all)
	}
	if c.Reads > 0 {
		c.SecondsPerRead = c.ReadSeconds / float64(c.Reads)
		c.SavedSeconds = c.SecondsPerRead * float64(hits)
	}
	return c
}

func (c coalescerCounts) plus(o coalescerCounts) coalescerCounts {
	return coalescerCounts{
		Insertions:   c.Insertions + o.Insertions,
		Reinsertions: c.Reinsertions + o.Reinsertions,
		ReadyHits:    c.ReadyHits + o.ReadyHits,
		InflightHits: c.InflightHits + o.InflightHits,
		SharedBytes:  c.SharedBytes + o.SharedBytes,
		Reads:        c.Reads + o.Reads,
		ReadSeconds:  c.ReadSeconds + o.ReadSeconds,
	}.withHitRatio()
}

// minus is the change from an earlier reading; a counter that went
// backwards (the broker restarted) makes ok false.
func (c coalescerCounts) minus(earlier coalescerCounts) (delta coalescerCounts, ok bool) {
	if c.Insertions < earlier.Insertions || c.Reinsertions < earlier.Reinsertions ||
		c.ReadyHits < earlier.ReadyHits || c.InflightHits < earlier.InflightHits {
		return coalescerCounts{}, false
	}
	return coalescerCounts{
		Insertions:   c.Insertions - earlier.Insertions,
		Reinsertions: c.Reinsertions - earlier.Reinsertions,
		ReadyHits:    c.ReadyHits - earlier.ReadyHits,
		InflightHits: c.InflightHits - earlier.InflightHits,
	}.withHitRatio(), true
}

// shardCoalescerCounts is one shard's counters.
type shardCoalescerCounts struct {
	Shard string `json:"shard"`
	coalescerCounts
}

// errNoCoalescerMetrics means the broker answered but exports none of
// the coalescer's families.
var errNoCoalescerMetrics = errors.New("no fetch read coalescer metrics (a broker without the coalescer, or one with disable_metrics set)")

// coalescerShards reads the four coalescer counters per shard label,
// in shard order.
func (f metricFamilies) coalescerShards() ([]shardCoalescerCounts, error) {
	byShard := map[string]*coalescerCounts{}
	fields := []struct {
		name string
		add  func(*coalescerCounts, float64)
		// optional: weir's own families, absent from older brokers
		optional bool
	}{
		{name: metricCoalescerInsertions, add: func(c *coalescerCounts, v float64) { c.Insertions += uint64(math.Round(v)) }},
		{name: metricCoalescerReinsertions, add: func(c *coalescerCounts, v float64) { c.Reinsertions += uint64(math.Round(v)) }},
		{name: metricCoalescerReadyHits, add: func(c *coalescerCounts, v float64) { c.ReadyHits += uint64(math.Round(v)) }},
		{name: metricCoalescerInflightHits, add: func(c *coalescerCounts, v float64) { c.InflightHits += uint64(math.Round(v)) }},
		{name: metricCoalescerSharedBytes, optional: true, add: func(c *coalescerCounts, v float64) { c.SharedBytes += uint64(math.Round(v)) }},
		{name: metricCoalescerReads, optional: true, add: func(c *coalescerCounts, v float64) { c.Reads += uint64(math.Round(v)) }},
		{name: metricCoalescerReadSeconds, optional: true, add: func(c *coalescerCounts, v float64) { c.ReadSeconds += v }},
	}
	found := false
	for _, field := range fields {
		fam := f[field.name]
		if fam == nil {
			continue
		}
		found = found || !field.optional
		for _, m := range fam.GetMetric() {
			v := sampleValue(m)
			if math.IsNaN(v) || v < 0 {
				continue
			}
			shard := labelValue(m, "shard")
			c := byShard[shard]
			if c == nil {
				c = &coalescerCounts{}
				byShard[shard] = c
			}
			field.add(c, v)
		}
	}
	if !found {
		return nil, errNoCoalescerMetrics
	}
	out := make([]shardCoalescerCounts, 0, len(byShard))
	for shard, c := range byShard {
		out = append(out, shardCoalescerCounts{Shard: shard, coalescerCounts: c.withHitRatio()})
	}
	slices.SortFunc(out, func(a, b shardCoalescerCounts) int { return compareShards(a.Shard, b.Shard) })
	return out, nil
}

// coalescerTotal sums the coalescer counters over shards.
func (f metricFamilies) coalescerTotal() (coalescerCounts, error) {
	shards, err := f.coalescerShards()
	if err != nil {
		return coalescerCounts{}, err
	}
	return sumShards(shards), nil
}

func sumShards(shards []shardCoalescerCounts) coalescerCounts {
	var total coalescerCounts
	for _, s := range shards {
		total = total.plus(s.coalescerCounts)
	}
	return total.withHitRatio()
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// compareShards orders shard labels numerically ("2" before "10"), and
// anything that is not a number after the numbers, by text.
func compareShards(a, b string) int {
	ai, aerr := strconv.Atoi(a)
	bi, berr := strconv.Atoi(b)
	switch {
	case aerr == nil && berr == nil:
		return cmp.Compare(ai, bi)
	case aerr == nil:
		return -1
	case berr == nil:
		return 1
	}
	return cmp.Compare(a, b)
}
