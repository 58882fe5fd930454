package main

import (
	"net/http"
	"net/http/pprof"

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
	registerFeatures(mux, b)
	mux.HandleFunc("/v1/brokers", getOnly(listBrokers(b)))
	if b.Node().AdminPprof {
		// Profiles for diagnosing CPU and memory; off by default, since
		// the admin API has no authentication yet.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// brokerJSON is one broker in GET /v1/brokers.
type brokerJSON struct {
	NodeID    int32  `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	Rack      string `json:"rack,omitempty"`
	IsAlive   bool   `json:"is_alive"`
}

// listBrokers answers GET /v1/brokers: every registered broker with its
// addresses, so tools can reach each broker's admin API (and /metrics).
func listBrokers(b *broker.Broker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := []brokerJSON{}
		for _, cb := range b.ClusterBrokers() {
			out = append(out, brokerJSON{NodeID: cb.NodeID, KafkaAddr: cb.KafkaAddr, AdminAddr: cb.AdminAddr, Rack: cb.Rack, IsAlive: cb.Alive})
		}
		writeJSON(w, http.StatusOK, out)
	}
}
