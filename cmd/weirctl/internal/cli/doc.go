// Package cli is what weirctl's commands share to reach a cluster over
// the Kafka protocol and to print what they found: the global flags
// (--brokers, --format, --timeout and the SASL and TLS flags) and the
// clients they configure, the flag values that produce, consume and the
// benchmarks read alike, and the output formats (aligned tables, and JSON
// or YAML documents with the same keys).
//
// It is a package of its own so that the operator commands (package main)
// and the benchmarks (internal/bench) build on one copy of it.
package cli
