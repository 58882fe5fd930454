package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weir-broker/weir/broker"
)

// adminHandler serves the admin HTTP API, shaped like Redpanda's so that
// operators' habits carry over, behind its authentication (admin_auth.go),
// which covers /metrics too, as Redpanda's does.
func adminHandler(b *broker.Broker, reg *prometheus.Registry, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	if !b.Properties().Bool("disable_metrics") {
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	}
	mux.HandleFunc("GET "+readinessPath, func(w http.ResponseWriter, r *http.Request) {
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
		// the admin API is open unless admin_api_require_auth is set (and
		// then only superusers may profile).
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return newAdminAuth(b, logger).wrap(mux)
}

// brokerJSON is one broker in GET /v1/brokers.
type brokerJSON struct {
	NodeID    int32  `json:"node_id"`
	KafkaAddr string `json:"kafka_addr"`
	// Listeners are every Kafka listener's advertised address; absent for
	// a broker registered before named listeners (kafka_addr only).
	Listeners []listenerJSON `json:"listeners,omitempty"`
	AdminAddr string         `json:"admin_addr,omitempty"`
	Rack      string         `json:"rack,omitempty"`
	IsAlive   bool           `json:"is_alive"`
}

// listenerJSON is one Kafka listener of a broker in GET /v1/brokers.
type listenerJSON struct {
	Name             string `json:"name"`
	Address          string `json:"address"` // advertised host:port
	SecurityProtocol string `json:"security_protocol,omitempty"`
}

// listBrokers answers GET /v1/brokers: every registered broker with its
// addresses, so tools can reach each broker's admin API (and /metrics).
func listBrokers(b *broker.Broker) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := []brokerJSON{}
		for _, cb := range b.ClusterBrokers() {
			bj := brokerJSON{NodeID: cb.NodeID, KafkaAddr: cb.KafkaAddr, AdminAddr: cb.AdminAddr, Rack: cb.Rack, IsAlive: cb.Alive}
			for _, l := range cb.Listeners {
				bj.Listeners = append(bj.Listeners, listenerJSON{Name: l.Name, Address: l.Addr, SecurityProtocol: l.SecurityProtocol})
			}
			out = append(out, bj)
		}
		writeJSON(w, http.StatusOK, out)
	}
}
