package admin

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
	MetricCPUSeconds    = "process_cpu_seconds_total"
	MetricAllocBytes    = "go_memstats_alloc_bytes_total"
	MetricKafkaRequests = "weir_kafka_requests_total"
	MetricTopicBytesOut = "weir_kafka_topic_bytes_out_total"
	// MetricLogReadBytes counts record bytes read from partition logs
	// for consumer fetches (one read per coalesced read).
	MetricLogReadBytes = "weir_log_read_bytes_total"

	MetricCoalescerInsertions   = "vectorized_kafka_fetch_read_coalescer_insertions_total"
	MetricCoalescerReinsertions = "vectorized_kafka_fetch_read_coalescer_reinsertions_total"
	MetricCoalescerReadyHits    = "vectorized_kafka_fetch_read_coalescer_ready_hits_total"
	MetricCoalescerInflightHits = "vectorized_kafka_fetch_read_coalescer_inflight_hits_total"
	MetricCoalescerSharedBytes  = "weir_fetch_read_coalescer_shared_bytes_total"
	MetricCoalescerReads        = "weir_fetch_read_coalescer_reads_total"
	MetricCoalescerReadSeconds  = "weir_fetch_read_coalescer_read_seconds_total"

	// MetricResidentMemory and MetricGoroutines are read by more than
	// one benchmark.
	MetricResidentMemory = "process_resident_memory_bytes"
	MetricGoroutines     = "go_goroutines"

	// FetchAPILabel is the api label of Fetch in weir_kafka_requests_total:
	// the API names of kafka/apis.go.
	FetchAPILabel = "Fetch"

	// acceptMetricsText asks for the Prometheus text format, the one
	// format every exporter speaks and expfmt parses; protobuf is
	// accepted as a fallback, OpenMetrics is not (expfmt cannot read it).
	acceptMetricsText = "text/plain;version=0.0.4;q=1.0," +
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5," +
		"*/*;q=0.1"

	// maxMetricsResponse bounds a scrape. A broker with thousands of
	// partitions has per-group Raft series, so this is larger than
	// maxResponse; a page beyond it is refused, not parsed cut short.
	maxMetricsResponse = 64 << 20
)

// MetricFamilies is one scrape of a broker: family name → family.
type MetricFamilies map[string]*dto.MetricFamily

// ScrapeMetrics fetches and parses GET /metrics with the admin client's
// timeout, so one unresponsive broker cannot hold up a command.
func (c *Client) ScrapeMetrics(ctx context.Context) (MetricFamilies, error) {
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
	fams, err := ParseMetrics(resp.Header.Get("Content-Type"), data)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	return fams, nil
}

// ParseMetrics decodes a /metrics answer by its Content-Type: the text
// format (any version: expfmt's own negotiation would refuse a text
// version it does not know, though the format is compatible), delimited
// protobuf, or no type at all, which simple exporters send for text.
func ParseMetrics(contentType string, data []byte) (MetricFamilies, error) {
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

func decodeMetrics(dec expfmt.Decoder) (MetricFamilies, error) {
	fams := MetricFamilies{}
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

// Sum adds up the samples of family name whose labels include match (nil
// matches all). found is false when the family is absent or no sample
// matched, which callers must tell apart from a counter that is zero: an
// older broker simply does not export a family.
func (f MetricFamilies) Sum(name string, match map[string]string) (total float64, found bool) {
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

// CoalescerCounts are the fetch read coalescer's counters: a read either
// inserts an entry (insertion, or reinsertion of an evicted key) and reads
// the log, or is served from an entry that is ready or still being read.
type CoalescerCounts struct {
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

// WithHitRatio fills the derived fields: HitRatio, the share of
// coalesced reads served without reading the log (0, not NaN, when there
// were none), and the time a read takes and the hits saved.
func (c CoalescerCounts) WithHitRatio() CoalescerCounts {
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

// Plus adds two readings, such as two shards' or two brokers'.
func (c CoalescerCounts) Plus(o CoalescerCounts) CoalescerCounts {
	return CoalescerCounts{
		Insertions:   c.Insertions + o.Insertions,
		Reinsertions: c.Reinsertions + o.Reinsertions,
		ReadyHits:    c.ReadyHits + o.ReadyHits,
		InflightHits: c.InflightHits + o.InflightHits,
		SharedBytes:  c.SharedBytes + o.SharedBytes,
		Reads:        c.Reads + o.Reads,
		ReadSeconds:  c.ReadSeconds + o.ReadSeconds,
	}.WithHitRatio()
}

// Minus is the change from an earlier reading; a counter that went
// backwards (the broker restarted) makes ok false.
func (c CoalescerCounts) Minus(earlier CoalescerCounts) (delta CoalescerCounts, ok bool) {
	if c.Insertions < earlier.Insertions || c.Reinsertions < earlier.Reinsertions ||
		c.ReadyHits < earlier.ReadyHits || c.InflightHits < earlier.InflightHits {
		return CoalescerCounts{}, false
	}
	return CoalescerCounts{
		Insertions:   c.Insertions - earlier.Insertions,
		Reinsertions: c.Reinsertions - earlier.Reinsertions,
		ReadyHits:    c.ReadyHits - earlier.ReadyHits,
		InflightHits: c.InflightHits - earlier.InflightHits,
	}.WithHitRatio(), true
}

// ShardCoalescerCounts is one shard's counters.
type ShardCoalescerCounts struct {
	Shard string `json:"shard"`
	CoalescerCounts
}

// ErrNoCoalescerMetrics means the broker answered but exports none of
// the coalescer's families.
var ErrNoCoalescerMetrics = errors.New("no fetch read coalescer metrics (a broker without the coalescer, or one with disable_metrics set)")

// CoalescerShards reads the four coalescer counters per shard label,
// in shard order.
func (f MetricFamilies) CoalescerShards() ([]ShardCoalescerCounts, error) {
	byShard := map[string]*CoalescerCounts{}
	fields := []struct {
		name string
		add  func(*CoalescerCounts, float64)
		// optional: weir's own families, absent from older brokers
		optional bool
	}{
		{name: MetricCoalescerInsertions, add: func(c *CoalescerCounts, v float64) { c.Insertions += uint64(math.Round(v)) }},
		{name: MetricCoalescerReinsertions, add: func(c *CoalescerCounts, v float64) { c.Reinsertions += uint64(math.Round(v)) }},
		{name: MetricCoalescerReadyHits, add: func(c *CoalescerCounts, v float64) { c.ReadyHits += uint64(math.Round(v)) }},
		{name: MetricCoalescerInflightHits, add: func(c *CoalescerCounts, v float64) { c.InflightHits += uint64(math.Round(v)) }},
		{name: MetricCoalescerSharedBytes, optional: true, add: func(c *CoalescerCounts, v float64) { c.SharedBytes += uint64(math.Round(v)) }},
		{name: MetricCoalescerReads, optional: true, add: func(c *CoalescerCounts, v float64) { c.Reads += uint64(math.Round(v)) }},
		{name: MetricCoalescerReadSeconds, optional: true, add: func(c *CoalescerCounts, v float64) { c.ReadSeconds += v }},
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
				c = &CoalescerCounts{}
				byShard[shard] = c
			}
			field.add(c, v)
		}
	}
	if !found {
		return nil, ErrNoCoalescerMetrics
	}
	out := make([]ShardCoalescerCounts, 0, len(byShard))
	for shard, c := range byShard {
		out = append(out, ShardCoalescerCounts{Shard: shard, CoalescerCounts: c.WithHitRatio()})
	}
	slices.SortFunc(out, func(a, b ShardCoalescerCounts) int { return compareShards(a.Shard, b.Shard) })
	return out, nil
}

// CoalescerTotal sums the coalescer counters over shards.
func (f MetricFamilies) CoalescerTotal() (CoalescerCounts, error) {
	shards, err := f.CoalescerShards()
	if err != nil {
		return CoalescerCounts{}, err
	}
	return SumShards(shards), nil
}

// SumShards is a broker's counters over all its shards.
func SumShards(shards []ShardCoalescerCounts) CoalescerCounts {
	var total CoalescerCounts
	for _, s := range shards {
		total = total.Plus(s.CoalescerCounts)
	}
	return total.WithHitRatio()
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
