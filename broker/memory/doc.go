// Package memory holds weir's byte budgets: a Pool is a fixed number of
// bytes that holders reserve before they allocate and give back when the
// memory is no longer theirs. The Kafka server draws requests read from
// sockets from one pool (queued_max_request_bytes, KIP-72) and the fetch
// path draws fetch responses built and not yet written from another
// (fetch_memory_budget_bytes).
//
// A Pool only counts; it never allocates. Waiters are served in arrival
// order, so a large reservation is not starved by a stream of small ones.
// Charge lets a holder go past the size for memory it must have (the one
// batch an obligatory fetch read returns whatever the budget says), so
// that a spent budget slows consumers down without stopping them.
//
// Reads owns the fetch path's read buffers from the read that charges one
// to the Return that gives it back (recycled through Buffers, a free list
// the collector does not empty, or dropped), counting both, so that a
// leak or a second return shows; SoftLimit sets the runtime's soft memory
// limit from what the broker holds.
package memory
