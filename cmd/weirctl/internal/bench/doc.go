// Package bench is weirctl bench: the command that holds the benchmarks,
// and bench produce and bench consume, which measure plain produce and
// consume throughput and latency.
//
// Each larger benchmark is a package of its own below this one (fanout,
// idlefetch, memory, soak, scale), and what several of them run on is in
// harness. They speak the Kafka protocol through franz-go, like the rest of
// weirctl, and those that report broker figures read them from the admin
// API (internal/admin).
//
// Their output is what the scripts in .ci read: progress on stderr, and
// on stdout a table or, with --format json or yaml, one document whose
// field names do not change.
package bench
