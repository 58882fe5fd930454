// Package broker is the node: the topic table and its metadata, the
// partitions with their logs, high watermarks and idempotent-producer
// state, the fetch planner that applies KIP-74's budget, and the
// background work (retention) that keeps logs within their limits.
//
// It speaks weir's own types; the kafka package translates the wire
// protocol into calls here. Errors that a Kafka client must see are
// returned as *kerr.Error values so that the protocol layer can put their
// codes on the wire unchanged.
//
// Lock order: Broker.mu (topic table) before Partition.appendMu before
// Partition.waitMu. Partition.leadMu is a leaf. No lock is held while
// waiting for new data.
package broker
