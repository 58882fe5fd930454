package kafka

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	connections prometheus.Gauge
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	bytesIn     prometheus.Counter
	bytesOut    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
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
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.connections, m.requests, m.latency, m.bytesIn, m.bytesOut} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
