// Package admin is weirctl's client for a broker's admin HTTP API: the
// --admin-url and credential flags, requests and the errors they answer,
// the cluster's brokers (GET /v1/brokers) and each broker's /metrics,
// parsed, with the names of the series weirctl reads.
//
// The cluster commands and the benchmarks that report broker figures
// share it.
package admin
