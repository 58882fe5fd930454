package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-broker/weir/broker"
)

// adminHandler serves the admin HTTP API, shaped like Redpanda's so that
// operators' habits carry over.
func adminHandler(b *broker.Broker, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	if !b.Properties().Bool("disable_metrics") {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	}
	mux.HandleFunc("GET /v1/status/ready", func(w http.ResponseWriter, r *http.Request) {
		if !b.Ready() {
			http.Error(w, `{"status":"shutting down"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ready"}` + "\n"))
	})
	registerClusterConfig(mux, b)
	return mux
}
