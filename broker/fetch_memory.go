package broker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/broker/memory"
	"github.com/weir-broker/weir/log"
)

// fetchMemoryWait is how long an obligatory read waits for the fetch
// budget before it reads its one batch regardless: long enough to ride
// out a burst, short against a consumer's max wait.
const fetchMemoryWait = 100 * time.Millisecond

// openFetchMemory creates the fetch response budget and exports it.
func (b *Broker) openFetchMemory() {
	budget := b.node.FetchMemoryBudget()
	b.fetchMemory = memory.NewPool(budget)
	b.readBuffers.Budget = b.fetchMemory
	b.readBuffers.MaxHeld = readBuffersHeld(budget)
	if b.registerer == nil || b.props.Bool("disable_metrics") {
		return
	}
	if err := b.registerer.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_fetch_read_buffers_held_bytes",
		Help: "Read buffers kept for reuse by later fetches (counted in weir_fetch_memory_in_use_bytes).",
	}, func() float64 { return float64(b.readBuffers.Stats().Held) })); err != nil {
		b.logger.Warn("registering fetch memory metrics", "err", err)
	}
	err := b.registerer.Register(memory.NewCollector(b.fetchMemory, memory.MetricNames{
		What: "fetch responses read and not yet written (fetch_memory_budget_bytes)",
		Size: "weir_fetch_memory_budget_bytes", InUse: "weir_fetch_memory_in_use_bytes",
		Peak: "weir_fetch_memory_peak_bytes", Waits: "weir_fetch_memory_waits_total",
		WaitSeconds: "weir_fetch_memory_wait_seconds_total", Trimmed: "weir_fetch_memory_trimmed_reads_total",
		Overdraft: "weir_fetch_memory_overdraft_bytes_total",
	}))
	if err != nil {
		b.logger.Warn("registering fetch memory metrics", "err", err)
	}
}

// readBuffersHeld is how many bytes of read buffers are kept for reuse: a
// quarter of the fetch budget (they count against it, and readers trim
// them when it runs short), 64 MiB when the budget is unbounded.
func readBuffersHeld(budget int64) int64 {
	if budget <= 0 {
		return 64 << 20
	}
	return budget / 4
}

// FetchMemoryStats reports the fetch response budget's state.
func (b *Broker) FetchMemoryStats() memory.Stats { return b.fetchMemory.Stats() }

// readBudgeted reads from a partition's log with the bytes drawn from the
// fetch budget; they stay charged until the result is released (for a
// coalesced read, once, when its last reader releases it).
//
// When the budget is short a strict read gets what is free (possibly
// nothing: the response carries fewer partitions' data), and an
// obligatory read waits up to fetchMemoryWait for its limit, then reads
// its first batch regardless, charged past the budget, so that every
// consumer still progresses.
func (b *Broker) readBudgeted(ctx context.Context, p *Partition, offset int64, limit int, mode log.ReadMode, upTo int64) ([]byte, error) {
	pool := b.fetchMemory
	granted := pool.TryAcquireUpTo(int64(limit))
	if short := int64(limit) - granted; short > 0 {
		// Reads the coalescer retains and buffers kept for reuse count
		// against the budget: a read comes first. Shed results' buffers
		// are recycled, so they are lent on too: their bytes go to this
		// read, and most likely a buffer with them.
		shed := b.coalescer.Shed(short)
		if b.readBuffers.Lend(short) > 0 || shed > 0 {
			granted += pool.TryAcquireUpTo(short)
		}
	}
	if granted < int64(limit) {
		switch {
		case mode == log.Strict && granted == 0:
			return nil, nil
		case mode == log.Strict:
			limit = int(granted)
		default:
			pool.Release(granted)
			granted = 0
			want := min(int64(limit), max(pool.Size(), 1))
			wctx, cancel := context.WithTimeout(ctx, fetchMemoryWait)
			if pool.Acquire(wctx, want) == nil {
				granted = want
			}
			cancel()
			if err := ctx.Err(); err != nil {
				pool.Release(granted)
				return nil, err
			}
			limit = max(int(granted), 1)
		}
	}
	data, err := b.readLog(p, offset, limit, mode, upTo)
	if err != nil {
		pool.Release(granted)
		return nil, err
	}
	if len(data) == 0 {
		data = nil // nothing to hold, nothing to charge
	}
	// Charged by capacity: what the read allocated, a partial last batch
	// it dropped included.
	if n := int64(cap(data)); n > granted {
		pool.Charge(n - granted)
	} else {
		pool.Release(granted - n)
	}
	return data, err
}
