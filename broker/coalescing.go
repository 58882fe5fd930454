package broker

import (
	"context"
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/coalescer"
	"github.com/weir-broker/weir/log"
)

// coalescingProperty switches fetch read coalescing (an enterprise feature).
const coalescingProperty = "kafka_fetch_read_coalescing_enabled"

// openCoalescer creates the fetch read coalescer, registers its metrics
// (unless disable_metrics is set) and lets the cluster property, as it
// takes effect, switch it on and off: on allocates the shards' cache
// indexes, off frees them at once; reads in flight finish either way.
func (fe *FetchPath) openCoalescer() error {
	// A shared result's bytes were charged to the fetch budget once, by
	// the read; its buffer is recycled, or its bytes go back, when its
	// last reader releases it.
	opts := coalescer.Options{Shards: fe.node.FetchCoalescerShards, Free: fe.fetchReads.Return, Within: readWithin,
		RetainBytes: coalescerRetainBytes(fe.fetchReads.Budget().Size())}
	if !fe.props.Bool("disable_metrics") {
		opts.Registerer = fe.registerer
	}
	c, err := coalescer.New(opts)
	if err != nil {
		return fmt.Errorf("fetch read coalescer: %w", err)
	}
	fe.coalescer = c
	if fe.registerer != nil {
		for _, m := range []prometheus.Collector{
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_log_reads_total",
				Help: "Partition log reads made for consumer fetches (one per coalesced read)."},
				func() float64 { return float64(fe.logReads.Load()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weir_log_read_bytes_total",
				Help: "Record bytes read from partition logs for consumer fetches."},
				func() float64 { return float64(fe.logReadBytes.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weir_fetch_read_coalescer_retained_bytes",
				Help: "Bytes of coalesced reads kept for later fetches after every fetch released them (counted in weir_fetch_memory_in_use_bytes)."},
				func() float64 { return float64(c.RetainedBytes()) }),
		} {
			if err := fe.registerer.Register(m); err != nil {
				fe.logger.Warn("registering log read metrics", "err", err)
			}
		}
	}
	fe.watchProperty(coalescingProperty, func(value string) {
		on := parseBool(value)
		if on != c.Enabled() {
			fe.logger.Info("fetch read coalescing", "enabled", on)
		}
		c.SetEnabled(on)
	})
	return nil
}

// coalescerRetainBytes is how many bytes of finished reads the coalescer
// keeps (for at most coalescer.DefaultRetainFor) for fetches that come a
// little later (consumers reading a backlog together drift apart by a few
// fetches): a quarter of the fetch budget, at most 64 MiB. They count
// against the budget, and reads that find it short shed them first.
func coalescerRetainBytes(budget int64) int64 {
	if budget <= 0 {
		return 64 << 20
	}
	return min(budget/4, 64<<20)
}

// CoalescerStats reports the coalescer's counters per shard.
func (fe *FetchPath) CoalescerStats() []coalescer.ShardStats {
	if fe.coalescer == nil {
		return nil
	}
	return fe.coalescer.Stats()
}

// readPartition reads one partition's records for a fetch: through the
// coalescer while coalescing is in effect, so that identical reads
// (same partition, offset, byte limit, isolation and obligatory or
// strict) share one read and one buffer, else straight from the log.
// shared, when set, holds data and must be released.
func (fe *FetchPath) readPartition(ctx context.Context, p *Partition, offset int64, limit int, mode log.ReadMode, upTo int64, isolation int8) (data []byte, shared *coalescer.Result, err error) {
	c := fe.coalescer
	if c == nil || !c.Enabled() {
		data, err = fe.readBudgeted(ctx, p, offset, limit, mode, upTo)
		return data, nil, err
	}
	key := coalescer.Key{
		TopicID: p.topic.ID(), Partition: p.Index, Offset: offset, MaxBytes: int32(limit),
		Isolation: isolation, Obligatory: mode == log.Obligatory,
	}
	res, err := c.Read(ctx, key, upTo, func(ctx context.Context) ([]byte, int64, error) {
		data, err := fe.readBudgeted(ctx, p, offset, limit, mode, upTo)
		return data, freshUntil(data, upTo), err
	})
	if err != nil {
		return nil, nil, err
	}
	return res.Data, res, nil
}

// LogReadStats reports the log reads made for consumer fetches and the
// bytes they returned, since the broker started.
func (fe *FetchPath) LogReadStats() (reads, bytes uint64) {
	return fe.logReads.Load(), fe.logReadBytes.Load()
}

// readLog reads from a partition's log, counting the reads and bytes.
func (fe *FetchPath) readLog(p *Partition, offset int64, limit int, mode log.ReadMode, upTo int64) ([]byte, error) {
	data, err := p.log.ReadWith(offset, limit, mode, upTo, fe.fetchReads.Get)
	fe.logReads.Add(1)
	fe.logReadBytes.Add(uint64(len(data)))
	return data, err
}

// readWithin finds, in a recent read's records, exactly what a read of
// key up to upTo would return (log.Within), so that a fetch at another
// offset or limit is answered from bytes already read: a range hit.
func readWithin(records []byte, key coalescer.Key, upTo int64) (start, end int, ok bool) {
	mode := log.Strict
	if key.Obligatory {
		mode = log.Obligatory
	}
	return log.Within(records, key.Offset, int(key.MaxBytes), mode, upTo)
}

// freshUntil is the watermark a shared read stays fresh up to. A read
// that stopped short of its watermark upTo (at its byte limit, or at a
// segment's end) returns the same bytes whatever the watermark becomes:
// the records below it never change. Only a read that reached upTo can
// be outgrown by new records.
func freshUntil(data []byte, upTo int64) int64 {
	if end, ok := log.EndOffset(data); ok && end < upTo {
		return math.MaxInt64
	}
	return upTo
}
