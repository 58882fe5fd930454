// Package integration holds tests that build the real weir and weirctl
// binaries, start weir processes on loopback ports with their own data
// directories, and drive them with real Kafka clients: franz-go (kgo,
// kadm, raw kmsg requests for exact versions), kcat, the other clients'
// compatibility programs under compat/, and Apache Kafka's own Java tools,
// Kafka Connect worker and Kafka Streams (jars fetched by .ci/kafka.sh).
//
// Every wait is bounded, every process started is stopped by its test,
// and all traffic stays on 127.0.0.1. The harness is in harness_test.go.
//
// The longer tests (about ten seconds or more: clusters with kills and
// restarts, the Java, Connect and Streams tests) call t.Parallel, so go
// test runs them -parallel at a time after the others: each starts its
// own brokers on ports the harness reserves, in its own directories, and
// what they share is built or fetched once (sync.Once; the Kafka jars by
// .ci/test-deps.sh before the tests start). A test that measures time or
// rates against a bound (the quota tests) stays sequential.
package integration
