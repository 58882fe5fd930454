// Package harness is what the benchmarks run on: a run's shared counters,
// its progress line and stall watchdog and how it stopped; latency
// percentiles and the summary of bench produce and bench consume; the
// produce loop; creating the topic and reading its leaders; and the cells
// of a report's tables.
package harness
