package kafka

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-broker/weir/broker"
	"github.com/weir-broker/weir/log/logtest"
)

// startMetricsServer is startServer with the protocol metrics registered
// on a registry of the test's own.
func startMetricsServer(t *testing.T) (*broker.Broker, string, *prometheus.Registry) {
	t.Helper()
	_, b, _ := startServer(t)
	reg := prometheus.NewRegistry()
	_, addr := serveKafka(t, b, Options{AdvertisedAddr: "127.0.0.1:9092", Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return b, addr, reg
}

// series gathers reg and returns the series of family name labelled
// label=value, or nil.
func series(t *testing.T, reg prometheus.Gatherer, name, label, value string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m
				}
			}
		}
	}
	return nil
}

func counterValue(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	m := series(t, reg, name, label, value)
	if m == nil {
		t.Fatalf("no %s{%s=%q} series", name, label, value)
	}
	return m.GetCounter().GetValue()
}

func TestTopicTrafficCounters(t *testing.T) {
	b, addr, reg := startMetricsServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "traffic", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "quiet", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, addr)

	first := logtest.Batch{Records: 3, ValueSize: 100}.Encode()
	second := logtest.Batch{Records: 5, ValueSize: 10}.Encode()
	if resp := c.roundTrip(produceRequest(9, -1, "traffic", first)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	// acks=0 has no response; the ApiVersions answered after it on the
	// same connection says it was handled.
	c.send(produceRequest(9, 0, "traffic", second))
	c.roundTrip(kmsg.NewPtrApiVersionsRequest())

	// A refused batch counts nothing: the topic does not exist.
	if resp := c.roundTrip(produceRequest(9, -1, "missing", first)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}

	if got, want := counterValue(t, reg, "weir_kafka_topic_bytes_in_total", "topic", "traffic"), float64(len(first)+len(second)); got != want {
		t.Errorf("bytes in %v, want %v", got, want)
	}
	if got := counterValue(t, reg, "weir_kafka_topic_records_in_total", "topic", "traffic"); got != 8 {
		t.Errorf("records in %v, want 8", got)
	}
	if got := counterValue(t, reg, "weir_kafka_topic_bytes_out_total", "topic", "traffic"); got != 0 {
		t.Errorf("bytes out %v before any fetch, want 0", got)
	}

	// Fetch by name (v12) and by topic ID (v13): each returns both batches.
	var fetched int
	for _, v := range []int16{12, 13} {
		resp := c.roundTrip(fetchRequest(v, "traffic", tp.ID(), 0, 1<<20)).(*kmsg.FetchResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || len(sp.RecordBatches) != len(first)+len(second) {
			t.Fatalf("fetch v%d: error %d, %d bytes, want both batches", v, sp.ErrorCode, len(sp.RecordBatches))
		}
		fetched += len(sp.RecordBatches)
	}
	if got := counterValue(t, reg, "weir_kafka_topic_bytes_out_total", "topic", "traffic"); got != float64(fetched) {
		t.Errorf("bytes out %v, want %d", got, fetched)
	}
	if m := series(t, reg, "weir_kafka_topic_bytes_in_total", "topic", "quiet"); m != nil {
		t.Errorf("a topic nobody used has series: %v", m)
	}
	if m := series(t, reg, "weir_kafka_topic_bytes_in_total", "topic", "missing"); m != nil {
		t.Errorf("a topic that does not exist has series: %v", m)
	}

	// Deleted, the topic's series go; created again, it starts from zero.
	if err := b.DeleteTopic("traffic"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"weir_kafka_topic_bytes_in_total", "weir_kafka_topic_bytes_out_total", "weir_kafka_topic_records_in_total"} {
		if m := series(t, reg, name, "topic", "traffic"); m != nil {
			t.Errorf("%s of a deleted topic: %v", name, m)
		}
	}
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: "traffic", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if resp := c.roundTrip(produceRequest(9, -1, "traffic", second)).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce to the new topic: error %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	if got := counterValue(t, reg, "weir_kafka_topic_records_in_total", "topic", "traffic"); got != 5 {
		t.Errorf("records in of the re-created topic %v, want 5", got)
	}
}

// TestRequestMetricsCountErrorResponses: a request answered with an error
// code is a request like any other in the per-API count and latency.
func TestRequestMetricsCountErrorResponses(t *testing.T) {
	_, addr, reg := startMetricsServer(t)
	c := dial(t, addr)
	requests := func(api string) float64 {
		m := series(t, reg, "weir_kafka_requests_total", "api", api)
		if m == nil {
			return 0
		}
		return m.GetCounter().GetValue()
	}
	observed := func(api string) uint64 {
		m := series(t, reg, "weir_kafka_request_duration_seconds", "api", api)
		if m == nil {
			return 0
		}
		return m.GetHistogram().GetSampleCount()
	}

	resp := c.roundTrip(produceRequest(9, -1, "missing", logtest.Batch{Records: 1, ValueSize: 1}.Encode())).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to a missing topic: error %d", code)
	}
	fresp := c.roundTrip(fetchRequest(12, "missing", [16]byte{}, 0, 1<<20)).(*kmsg.FetchResponse)
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch from a missing topic: error %d", code)
	}
	// An ApiVersions above the supported range is answered with
	// UNSUPPORTED_VERSION (and the versions that are) rather than refused.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(5)
	c.send(av)
	if _, _, err := c.readFrame(); err != nil {
		t.Fatalf("ApiVersions v5: %v", err)
	}

	// The server counts a request after writing its response, so the
	// last one may still be counting when its answer arrives.
	for deadline := time.Now().Add(5 * time.Second); requests("ApiVersions") == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	for _, api := range []string{"Produce", "Fetch", "ApiVersions"} {
		if got := requests(api); got != 1 {
			t.Errorf("weir_kafka_requests_total{api=%q} %v, want 1", api, got)
		}
		if got := observed(api); got != 1 {
			t.Errorf("weir_kafka_request_duration_seconds{api=%q} count %d, want 1", api, got)
		}
	}
}

func TestBatchRecords(t *testing.T) {
	one := logtest.Batch{Records: 7, ValueSize: 5}.Encode()
	two := append(append([]byte(nil), one...), logtest.Batch{Records: 2, ValueSize: 50}.Encode()...)
	for _, tc := range []struct {
		name string
		b    []byte
		want uint64
	}{
		{"one batch", one, 7},
		{"two batches", two, 9},
		{"empty", nil, 0},
		{"shorter than a header", one[:batchHeaderLen-1], 0},
		{"second batch cut short", two[:len(one)+batchHeaderLen-1], 7},
	} {
		if got := batchRecords(tc.b); got != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTopicTrafficHooksDoNotAllocate: once a topic has counters, counting
// a produce or a fetch allocates nothing, so the handlers' allocations
// (BenchmarkProduceRequest, BenchmarkFetchRequest) stay what they were.
func TestTopicTrafficHooksDoNotAllocate(t *testing.T) {
	s, b, _ := startServer(t)
	tp, err := b.CreateTopic(broker.CreateTopicRequest{Name: "allocs", Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	batch := logtest.Batch{Records: 4, ValueSize: 10}.Encode()
	plan := &fetchScratch{
		req: broker.FetchRequest{Partitions: []broker.FetchPartition{
			{Topic: tp, Partition: 0}, {Topic: tp, Partition: 1}, {Topic: nil, Partition: 0},
		}},
		results: []broker.FetchResult{{Records: batch}, {Records: batch}, {}},
	}
	tt := s.metrics.topics
	tt.produced(tp, len(batch), batchRecords(batch)) // the topic's first use makes its counters
	if n := testing.AllocsPerRun(100, func() { tt.produced(tp, len(batch), batchRecords(batch)) }); n != 0 {
		t.Errorf("counting a produce: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { s.countFetched(plan) }); n != 0 {
		t.Errorf("counting a fetch: %v allocations, want 0", n)
	}
	// AllocsPerRun calls once more than it measures; produced ran once
	// before it too.
	c := tt.counters(tp)
	if got, want := c.bytesOut.Load(), uint64(101*2*len(batch)); got != want {
		t.Errorf("bytes out %d, want %d", got, want)
	}
	if got := c.recordsIn.Load(); got != 102*4 {
		t.Errorf("records in %d, want %d", got, 102*4)
	}
}
