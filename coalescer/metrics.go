package coalescer

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ShardStats are one shard's counters. Each lookup counts once, so a Read
// that retries (after a stale in-flight result or an initiator's
// cancellation) counts once per attempt.
type ShardStats struct {
	// Insertions are lookups that missed and started a new read,
	// including reads that ran uncached because every way was in flight.
	Insertions uint64
	// Reinsertions are lookups that found their key stale or with its
	// last holder gone, and read it again in place.
	Reinsertions uint64
	// ReadyHits are lookups served from a retained, completed read.
	ReadyHits uint64
	// InflightHits are lookups that waited for a read in flight.
	InflightHits uint64
	// RangeHits are the ready hits answered with part of another key's
	// result (Options.Within).
	RangeHits uint64
	// SharedBytes are the record bytes hits took from other fetches'
	// reads: what the log was not read for.
	SharedBytes uint64
	// Reads, ReadBytes and ReadNanos are the reads misses made: how
	// many, the bytes they returned and the time they took. ReadNanos /
	// Reads is what a hit saves.
	Reads     uint64
	ReadBytes uint64
	ReadNanos uint64
}

// HitRatio is the share of lookups served without a read of their own:
// (ready + in-flight hits) / all lookups, 0 when there were none.
func HitRatio(s ShardStats) float64 {
	hits := s.ReadyHits + s.InflightHits
	total := s.Insertions + s.Reinsertions + hits
	if total == 0 {
		return 0
	}
	return float64(hits) / float64(total)
}

// SumStats adds up per-shard stats, e.g. for HitRatio(SumStats(c.Stats())).
func SumStats(stats []ShardStats) ShardStats {
	var sum ShardStats
	for _, s := range stats {
		sum.Insertions += s.Insertions
		sum.Reinsertions += s.Reinsertions
		sum.ReadyHits += s.ReadyHits
		sum.InflightHits += s.InflightHits
		sum.RangeHits += s.RangeHits
		sum.SharedBytes += s.SharedBytes
		sum.Reads += s.Reads
		sum.ReadBytes += s.ReadBytes
		sum.ReadNanos += s.ReadNanos
	}
	return sum
}

// counters are a shard's live stats. Plain atomics keep the hot path free
// of metric-library calls; the collector reads them at scrape time.
type counters struct {
	insertions   atomic.Uint64
	reinsertions atomic.Uint64
	readyHits    atomic.Uint64
	inflightHits atomic.Uint64
	rangeHits    atomic.Uint64
	sharedBytes  atomic.Uint64
	reads        atomic.Uint64
	readBytes    atomic.Uint64
	readNanos    atomic.Uint64
}

func (c *counters) snapshot() ShardStats {
	return ShardStats{
		Insertions:   c.insertions.Load(),
		Reinsertions: c.reinsertions.Load(),
		ReadyHits:    c.readyHits.Load(),
		InflightHits: c.inflightHits.Load(),
		RangeHits:    c.rangeHits.Load(),
		SharedBytes:  c.sharedBytes.Load(),
		Reads:        c.reads.Load(),
		ReadBytes:    c.readBytes.Load(),
		ReadNanos:    c.readNanos.Load(),
	}
}

// Metric names, as Redpanda exports them.
const (
	insertionsName   = "vectorized_kafka_fetch_read_coalescer_insertions_total"
	reinsertionsName = "vectorized_kafka_fetch_read_coalescer_reinsertions_total"
	readyHitsName    = "vectorized_kafka_fetch_read_coalescer_ready_hits_total"
	inflightHitsName = "vectorized_kafka_fetch_read_coalescer_inflight_hits_total"
)

// weir's own: what the hits saved.
const (
	rangeHitsName   = "weir_fetch_read_coalescer_range_hits_total"
	sharedBytesName = "weir_fetch_read_coalescer_shared_bytes_total"
	readsName       = "weir_fetch_read_coalescer_reads_total"
	readBytesName   = "weir_fetch_read_coalescer_read_bytes_total"
	readSecondsName = "weir_fetch_read_coalescer_read_seconds_total"
)

// collector exposes every shard's counters, one series per shard.
type collector struct {
	shards []*shard
	labels []string

	insertions   *prometheus.Desc
	reinsertions *prometheus.Desc
	readyHits    *prometheus.Desc
	inflightHits *prometheus.Desc
	rangeHits    *prometheus.Desc
	sharedBytes  *prometheus.Desc
	reads        *prometheus.Desc
	readBytes    *prometheus.Desc
	readSeconds  *prometheus.Desc
}

func newCollector(shards []*shard) *collector {
	labels := make([]string, len(shards))
	for i := range shards {
		labels[i] = strconv.Itoa(i)
	}
	shard := []string{"shard"}
	return &collector{
		shards: shards,
		labels: labels,
		insertions: prometheus.NewDesc(insertionsName,
			"Fetch reads that missed and performed a new read.", shard, nil),
		reinsertions: prometheus.NewDesc(reinsertionsName,
			"Fetch reads that re-read an existing stale or expired entry.", shard, nil),
		readyHits: prometheus.NewDesc(readyHitsName,
			"Fetch reads served from a retained, already-completed read.", shard, nil),
		inflightHits: prometheus.NewDesc(inflightHitsName,
			"Fetch reads served by awaiting an in-flight read.", shard, nil),
		rangeHits: prometheus.NewDesc(rangeHitsName,
			"Ready hits answered with part of a recent result of another offset or limit (counted in ready hits too).", shard, nil),
		sharedBytes: prometheus.NewDesc(sharedBytesName,
			"Record bytes fetches took from other fetches' reads (ready and in-flight hits).", shard, nil),
		reads: prometheus.NewDesc(readsName,
			"Log reads made by coalesced fetches that missed.", shard, nil),
		readBytes: prometheus.NewDesc(readBytesName,
			"Record bytes returned by those reads.", shard, nil),
		readSeconds: prometheus.NewDesc(readSecondsName,
			"Time spent in those reads; divided by their count, what one hit saves.", shard, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.insertions
	ch <- c.reinsertions
	ch <- c.readyHits
	ch <- c.inflightHits
	ch <- c.rangeHits
	ch <- c.sharedBytes
	ch <- c.reads
	ch <- c.readBytes
	ch <- c.readSeconds
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for i, s := range c.shards {
		st := s.counters.snapshot()
		label := c.labels[i]
		ch <- prometheus.MustNewConstMetric(c.insertions, prometheus.CounterValue, float64(st.Insertions), label)
		ch <- prometheus.MustNewConstMetric(c.reinsertions, prometheus.CounterValue, float64(st.Reinsertions), label)
		ch <- prometheus.MustNewConstMetric(c.readyHits, prometheus.CounterValue, float64(st.ReadyHits), label)
		ch <- prometheus.MustNewConstMetric(c.inflightHits, prometheus.CounterValue, float64(st.InflightHits), label)
		ch <- prometheus.MustNewConstMetric(c.rangeHits, prometheus.CounterValue, float64(st.RangeHits), label)
		ch <- prometheus.MustNewConstMetric(c.sharedBytes, prometheus.CounterValue, float64(st.SharedBytes), label)
		ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(st.Reads), label)
		ch <- prometheus.MustNewConstMetric(c.readBytes, prometheus.CounterValue, float64(st.ReadBytes), label)
		ch <- prometheus.MustNewConstMetric(c.readSeconds, prometheus.CounterValue, float64(st.ReadNanos)/1e9, label)
	}
}
