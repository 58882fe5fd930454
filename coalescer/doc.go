// Package coalescer shares fetch reads of one partition between the
// consumers that ask for exactly the same data at about the same time: one
// read, one buffer, N consumers. It reproduces Redpanda's fetch read
// coalescing.
//
// # Sharding
//
// A partition (topic id and partition index) hashes to one shard, so every
// read of a partition, whatever its offset or limits, meets the other reads
// of that partition in one place. A shard owns a mutex and a cache index.
//
// # Who reads
//
// The fetch that misses reads, on its own goroutine, exactly as it would
// with coalescing off; fetches that arrive while it reads wait for it.
// With the log in the page cache a read is a cheap pread, so a miss must
// not cost more than that read: it pays an index lookup, no hand-off to a
// worker and back. Reads are as concurrent as the fetches that make them,
// which the connections' in-flight limit and the fetch memory budget
// bound, with coalescing on or off.
//
// # Index
//
// Each shard's index is a fixed-size, set-associative table: IndexBytes
// divided into buckets of eight 64-byte slots, allocated when coalescing is
// switched on and dropped when it is switched off, so a disabled coalescer
// costs no memory and an enabled one costs a known amount however many keys
// pass through. A key's bucket is chosen by a hash of the whole key. When a
// bucket is full, the new key takes a slot that is neither in flight nor
// holding a live result; failing that, the least recently used ready slot
// (whose holders keep their references: the result only stops being
// findable); failing that, when every way is in flight, the read runs
// uncached. Keys share through the index only when every field is equal,
// so obligatory and strict reads, different byte limits, isolation levels
// or offsets never serve each other there (range hits, below, can).
//
// # States and reference counting
//
// A slot is empty, in flight or ready. Callers that find a read in flight
// wait for it (an in-flight hit). When the read completes, its Result is
// created with exactly one reference per waiter still waiting, plus one
// for the retainer (below), and the slot becomes ready. A ready slot points
// at the Result but owns no reference. A later caller takes a reference
// only if the result still has a holder (a compare-and-swap from refs > 0
// to refs+1, so a result whose last holder released it is never revived)
// and is fresh: a ready hit. Otherwise it re-reads in the same slot: a
// reinsertion. The last Release drops Data and hands it to Options.Free,
// so pooled buffers return to their pool exactly once. Empty results and
// errors reach every waiter of their read but are not retained.
//
// # Retention
//
// With Options.RetainBytes the newest results keep one reference of the
// coalescer's own after their fetches released them, up to that many
// bytes, oldest let go first: consumers that read a backlog together
// drift apart by a few fetches, and a result that lived only as long as
// the fetch that read it would be gone before the next one asked. The
// bytes stay charged to whatever budget the owner charges them to, and
// Shed lets retained results go when that budget needs them.
//
// # Range hits
//
// With Options.Within a read that finds no result of its own key looks at
// the partition's few latest results (same isolation level) still held by
// someone; if one contains exactly the bytes this read would return
// (log.Within decides, from the batch framing), the caller gets a view of
// that part, holding a reference to the whole: a range hit, counted as a
// ready hit too. A consumer a few batches behind another, or asking for
// less, is then answered from bytes already read.
//
// # Freshness
//
// A caller passes the partition's watermark as it sees it now; a result is
// fresh for it when its watermark is at least that. Ready hits and waiters
// that joined a read already in flight when they arrived check freshness
// and re-read when stale. A read that started after a caller arrived is as
// fresh as anything the caller could get and is accepted as is, which
// bounds every caller to at most one stale retry.
//
// # Cancellation
//
// A read runs with the context of the fetch that started it. If that
// context ends, the read's failure is that fetch's business alone: when the
// error is (or wraps) context.Canceled or context.DeadlineExceeded and the
// initiating context is done, waiters whose own context is still alive
// retry, and the first of them starts a new read. An initiator whose
// context has already ended when it is about to read does not read, with
// the same effect. Any other error goes to every waiter, as the same
// value. A waiter whose own context ends returns its context's error at
// once and leaves the others undisturbed.
//
// # Switching on and off
//
// SetEnabled(false) drops every index at once; reads in flight still
// complete and deliver to their waiters, and later reads call their
// ReadFunc directly (no index, no counters), wrapped in a Result with one reference so callers handle both
// modes alike. No read fails because of a switch.
package coalescer
