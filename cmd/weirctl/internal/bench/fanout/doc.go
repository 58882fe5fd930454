// Package fanout is weirctl bench fanout: many consumers reading one
// partition from the same offset, with fetch read coalescing off and on,
// every delivery verified, and what serving them cost the brokers read
// from their /metrics.
package fanout
