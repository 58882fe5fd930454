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
func (fe *FetchPath) openFetchMemory() {
	budget := fe.node.FetchMemoryBudget()
	// Reads kept by the coalescer for later fetches are let go first
	// when a read finds the budget short.
	shed := func(short int64) int64 { return fe.coalescer.Shed(short) }
	fe.fetchReads = memory.NewReads(memory.NewPool(budget), readBuffersHeld(budget), fetchMemoryWait, shed)
	if fe.registerer == nil || fe.props.Bool("disable_metrics") {
		return
	}
	if err := fe.registerer.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_fetch_read_buffers_held_bytes",
		Help: "Read buffers kept for reuse by later fetches (counted in weir_fetch_memory_in_use_bytes).",
	}, func() float64 { return float64(fe.fetchReads.Held().Held) })); err != nil {
		fe.logger.Warn("registering fetch memory metrics", "err", err)
	}
	err := fe.registerer.Register(memory.NewCollector(fe.fetchReads.Budget(), memory.MetricNames{
		What: "fetch responses read and not yet written (fetch_memory_budget_bytes)",
		Size: "weir_fetch_memory_budget_bytes", InUse: "weir_fetch_memory_in_use_bytes",
		Peak: "weir_fetch_memory_peak_bytes", Waits: "weir_fetch_memory_waits_total",
		WaitSeconds: "weir_fetch_memory_wait_seconds_total", Trimmed: "weir_fetch_memory_trimmed_reads_total",
		Overdraft: "weir_fetch_memory_overdraft_bytes_total",
	}))
	if err != nil {
		fe.logger.Warn("registering fetch memory metrics", "err", err)
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
func (fe *FetchPath) FetchMemoryStats() memory.Stats { return fe.fetchReads.Budget().Stats() }

// readBudgeted reads from a partition's log into a buffer charged to the
// fetch budget (memory.Reads.Read: a strict read short of budget gets what
// is free, an obligatory one waits up to fetchMemoryWait and then reads
// its first batch regardless). The caller hands the buffer on and it goes
// back through fe.fetchReads.Return once, when its last holder is done.
func (fe *FetchPath) readBudgeted(ctx context.Context, p *Partition, offset int64, limit int, mode log.ReadMode, upTo int64) ([]byte, error) {
	return fe.fetchReads.Read(ctx, limit, mode == log.Obligatory, func(limit int) ([]byte, error) {
		return fe.readLog(p, offset, limit, mode, upTo)
	})
}
