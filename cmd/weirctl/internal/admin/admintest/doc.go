// Package admintest fakes a broker's admin API for tests: GET /v1/brokers
// and a /metrics page built from a few figures.
//
// It is a package rather than test files of package admin because the
// tests of the cluster commands and of the benchmarks use it too.
package admintest
