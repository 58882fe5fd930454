// Package integration holds tests that build the real weir and weirctl
// binaries, start weir processes on loopback ports with their own data
// directories, and drive them with real Kafka clients: franz-go (kgo,
// kadm, raw kmsg requests for exact versions), kcat, the other clients'
// compatibility programs under compat/, and Apache Kafka's own Java tools,
// Kafka Connect worker and Kafka Streams (jars fetched by .ci/kafka.sh).
//
// Every wait is bounded, every process started is stopped by its test,
// and all traffic stays on 127.0.0.1. The harness is in harness_test.go.
package integration
