package kafka

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/broker/memory"
)

type metrics struct {
	connections prometheus.Gauge
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	bytesIn     prometheus.Counter
	bytesOut    prometheus.Counter
	topics      *topicTraffic
	quota       quotaMetrics
}

func newMetrics(reg prometheus.Registerer, topics topicCatalog, pool *memory.Pool, sessions *fetchSessionCache) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_kafka_connections", Help: "Open Kafka client connections."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_kafka_requests_total", Help: "Kafka requests handled, by API."}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "weir_kafka_request_duration_seconds", Help: "Time from reading a request to writing its response, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_kafka_request_bytes_total", Help: "Bytes of Kafka requests read."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_kafka_response_bytes_total", Help: "Bytes of Kafka responses written."}),
		topics: newTopicTraffic(topics),
	}
	quota, quotaCollectors := newQuotaMetrics()
	m.quota = quota
	if reg == nil {
		return m, nil
	}
	cs := append([]prometheus.Collector{m.connections, m.requests, m.latency, m.bytesIn, m.bytesOut, m.topics}, quotaCollectors...)
	cs = append(cs,
		memory.NewCollector(pool, memory.MetricNames{
			What: "requests read and not yet answered (queued_max_request_bytes)",
			Size: "weir_request_memory_pool_bytes", InUse: "weir_request_memory_in_use_bytes",
			Peak: "weir_request_memory_peak_bytes", Waits: "weir_request_memory_waits_total",
			WaitSeconds: "weir_request_memory_wait_seconds_total",
		}))
	cs = append(cs, fetchSessionCollectors(sessions)...)
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			// Leave the registry as it was, so a retry (or another
			// server on the same registry) is not refused for ours.
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("registering kafka metrics: %w", err)
		}
	}
	return m, nil
}

// topicTraffic counts, per topic, the record bytes Produce accepts and
// Fetch returns, and the records Produce accepts.
//
// The counters are atomics found through a lock-free map keyed by the
// broker's *Topic, so counting neither takes a lock nor allocates on the
// produce and fetch paths (a CounterVec label lookup would hash the name
// under a lock, and may allocate). Topics are reported by a collector that asks the broker at
// scrape time: a deleted topic, or one deleted and created again (a new
// *Topic with the same name), drops out of the map then, so its series
// disappear with it and two series never share a name.
type topicTraffic struct {
	topics  topicCatalog
	byTopic sync.Map // *broker.Topic -> *topicCounters

	bytesIn, bytesOut, recordsIn *prometheus.Desc
}

type topicCounters struct {
	bytesIn, bytesOut, recordsIn atomic.Uint64
}

func newTopicTraffic(topics topicCatalog) *topicTraffic {
	labels := []string{"topic"}
	return &topicTraffic{
		topics: topics,
		bytesIn: prometheus.NewDesc("weir_kafka_topic_bytes_in_total",
			"Bytes of record batches accepted by Produce for the topic (retries of an idempotent batch included).", labels, nil),
		bytesOut: prometheus.NewDesc("weir_kafka_topic_bytes_out_total",
			"Bytes of record batches returned by Fetch for the topic.", labels, nil),
		recordsIn: prometheus.NewDesc("weir_kafka_topic_records_in_total",
			"Records accepted by Produce for the topic, from the batches' record counts.", labels, nil),
	}
}

// counters returns t's counters, creating them on the topic's first
// produce or fetch here.
func (tt *topicTraffic) counters(t *broker.Topic) *topicCounters {
	if c, ok := tt.byTopic.Load(t); ok {
		return c.(*topicCounters)
	}
	c, _ := tt.byTopic.LoadOrStore(t, &topicCounters{})
	return c.(*topicCounters)
}

// produced counts a batch set Produce accepted for t.
func (tt *topicTraffic) produced(t *broker.Topic, bytes int, records uint64) {
	c := tt.counters(t)
	c.bytesIn.Add(uint64(bytes))
	c.recordsIn.Add(records)
}

// fetched counts record bytes Fetch returned from t.
func (tt *topicTraffic) fetched(t *broker.Topic, bytes int) {
	tt.counters(t).bytesOut.Add(uint64(bytes))
}

func (tt *topicTraffic) Describe(ch chan<- *prometheus.Desc) {
	ch <- tt.bytesIn
	ch <- tt.bytesOut
	ch <- tt.recordsIn
}

func (tt *topicTraffic) Collect(ch chan<- prometheus.Metric) {
	tt.byTopic.Range(func(k, v any) bool {
		t := k.(*broker.Topic)
		if tt.topics.Topic(t.Name()) != t {
			tt.byTopic.Delete(t)
			return true
		}
		c := v.(*topicCounters)
		ch <- prometheus.MustNewConstMetric(tt.bytesIn, prometheus.CounterValue, float64(c.bytesIn.Load()), t.Name())
		ch <- prometheus.MustNewConstMetric(tt.bytesOut, prometheus.CounterValue, float64(c.bytesOut.Load()), t.Name())
		ch <- prometheus.MustNewConstMetric(tt.recordsIn, prometheus.CounterValue, float64(c.recordsIn.Load()), t.Name())
		return true
	})
}

// Offsets in a v2 record batch (KIP-98): the length after the base
// offset, and the record count that ends the fixed header.
const (
	batchLengthOffset = 8
	batchPrefixLen    = 12 // base offset and length
	recordCountOffset = 57
	batchHeaderLen    = 61
)

// batchRecords sums the record counts in the headers of the record
// batches in b, which Produce validated; the bounds checks only keep a
// bug elsewhere from becoming a panic here.
func batchRecords(b []byte) uint64 {
	var n uint64
	for len(b) >= batchHeaderLen {
		n += uint64(binary.BigEndian.Uint32(b[recordCountOffset:]))
		size := batchPrefixLen + int(int32(binary.BigEndian.Uint32(b[batchLengthOffset:])))
		if size < batchHeaderLen || size > len(b) {
			break
		}
		b = b[size:]
	}
	return n
}

// fetchSessionCollectors report the fetch session cache, read without its
// lock at scrape time (Kafka's NumIncrementalFetchSessions,
// NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec).
func fetchSessionCollectors(c *fetchSessionCache) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_kafka_fetch_sessions", Help: "Incremental fetch sessions (KIP-227) in this broker's cache."},
			func() float64 { return float64(c.count.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_kafka_fetch_session_partitions", Help: "Partitions cached over this broker's fetch sessions."},
			func() float64 { return float64(c.partitions.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_kafka_fetch_session_evictions_total", Help: "Fetch sessions evicted to make room for new ones."},
			func() float64 { return float64(c.evictions.Load()) }),
	}
}
