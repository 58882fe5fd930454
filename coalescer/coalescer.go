package coalescer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReadFunc performs one read; it runs on the goroutine of the fetch that
// started it, with that fetch's context. watermark is the partition's high
// watermark (last stable offset for read_committed) the read was bounded
// by. The coalescer owns the returned data from then on: it goes to the
// callers, or to Options.Free if none takes it. Read never keeps the
// function past its own return, so a closure passed to it stays on the
// caller's stack.
type ReadFunc func(ctx context.Context) (data []byte, watermark int64, err error)

// Coalescer shares identical partition reads between concurrent and
// back-to-back fetches. It is safe for concurrent use.
type Coalescer struct {
	shards     []*shard
	free       func([]byte)
	registerer prometheus.Registerer
	collector  *collector
	retain     *retainer // nil: results are kept only while held

	enabled atomic.Bool
	closed  atomic.Bool
	// stateMu serializes SetEnabled and Close, so concurrent switches
	// leave every shard in the state of the last one.
	stateMu sync.Mutex
}

// New creates a coalescer and registers its metrics on opts.Registerer, if
// set. It starts no goroutines: every read runs on a fetch's own.
func New(opts Options) (*Coalescer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coalescer{free: opts.Free, registerer: opts.Registerer}
	if opts.RetainBytes > 0 {
		c.retain = &retainer{max: opts.RetainBytes, maxAge: opts.RetainFor}
	}
	c.shards = make([]*shard, opts.Shards)
	for i := range c.shards {
		c.shards[i] = newShard(opts, c.retain)
	}
	c.collector = newCollector(c.shards)
	if c.registerer != nil {
		if err := c.registerer.Register(c.collector); err != nil {
			return nil, fmt.Errorf("coalescer: registering metrics: %w", err)
		}
	}
	if opts.Enabled {
		c.SetEnabled(true)
	}
	return c, nil
}

// SetEnabled switches coalescing. On allocates every shard's index; off
// frees them at once, while reads in flight still complete and deliver to
// their waiters. After Close it does nothing.
func (c *Coalescer) SetEnabled(on bool) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.closed.Load() {
		return
	}
	if on {
		// Indexes first, so a reader that sees enabled finds one.
		for _, s := range c.shards {
			s.enable()
		}
		if c.retain != nil {
			c.retain.switchOn(true)
		}
		c.enabled.Store(true)
		return
	}
	c.enabled.Store(false)
	for _, s := range c.shards {
		s.disable()
	}
	if c.retain != nil {
		c.retain.switchOn(false)
	}
}

// Shed lets the oldest retained results go (Options.RetainBytes) until at
// least n bytes were let go or none is retained, and returns the bytes
// let go: their buffers are freed unless a fetch still holds them. The
// owner of the memory calls it when a read needs the bytes.
func (c *Coalescer) Shed(n int64) int64 {
	if c == nil || c.retain == nil {
		return 0
	}
	return c.retain.shed(n)
}

// Expire lets go of the retained results that aged past
// Options.RetainFor; the owner calls it now and then (a result is also
// let go when a newer one is retained after it aged).
func (c *Coalescer) Expire() {
	if c == nil || c.retain == nil {
		return
	}
	c.retain.expire(time.Now())
}

// RetainedBytes reports the bytes of results retained after their
// fetches released them.
func (c *Coalescer) RetainedBytes() int64 {
	if c.retain == nil {
		return 0
	}
	return c.retain.size()
}

// Enabled reports whether coalescing is on.
func (c *Coalescer) Enabled() bool { return c.enabled.Load() }

// Read returns a result for key whose Watermark >= current (current is the
// partition's watermark now, as the caller sees it), sharing with an
// in-flight or retained read of the same key on the key's shard. Errors:
// the read's error (every coalesced waiter gets the same error), or ctx's
// error if ctx ends while waiting. The caller must Release the result.
//
// A read that starts after the caller arrived is accepted whatever its
// watermark, since nothing fresher exists; only results of earlier reads
// are checked against current.
func (c *Coalescer) Read(ctx context.Context, key Key, current int64, read ReadFunc) (*Result, error) {
	if read == nil {
		return nil, ErrNilRead
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !c.enabled.Load() {
		return readDirect(ctx, read, c.free)
	}
	return c.shards[c.ShardOf(key)].read(ctx, key, current, read)
}

// ShardOf returns the shard that serves key: a hash of its topic id and
// partition, so all keys of one partition map to one shard.
func (c *Coalescer) ShardOf(key Key) int {
	return reduce(key.partitionHash(), len(c.shards))
}

// Stats returns every shard's counters, indexed by shard.
func (c *Coalescer) Stats() []ShardStats {
	stats := make([]ShardStats, len(c.shards))
	for i, s := range c.shards {
		stats[i] = s.counters.snapshot()
	}
	return stats
}

// Close drops the indexes and unregisters the metrics; reads in flight
// still complete and deliver to their waiters. Read after Close returns
// ErrClosed. Close is idempotent.
func (c *Coalescer) Close() {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.closed.Swap(true) {
		return
	}
	c.enabled.Store(false)
	for _, s := range c.shards {
		s.disable()
	}
	if c.retain != nil {
		c.retain.switchOn(false)
	}
	if c.registerer != nil {
		c.registerer.Unregister(c.collector)
	}
}
