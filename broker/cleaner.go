package broker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-broker/weir/config"
	"github.com/weir-broker/weir/log"
)

// The log cleaner compacts this broker's replicas of topics whose
// cleanup.policy includes compact, as Kafka's LogCleaner does: each
// replica on its own (records keep their offsets, so replicas stay
// interchangeable), on log_cleaner_threads goroutines that each take the
// partition most in need and clean it with log.Log.Clean.
//
// A partition needs cleaning when its dirty ratio (dirty bytes over the
// cleanable bytes, closed segments only) reaches min.cleanable.dirty.ratio,
// or when a dirty segment's first batch is older than
// max.compaction.lag.ms; those come first, the most overdue first, then
// the dirtiest. A thread with nothing to do sleeps log_cleaner_backoff_ms.
//
// What may be cleaned ends at the replica's last stable offset (at most
// its high watermark, on every replica the end of what it applied, which
// is committed: an open transaction's data is not decided, so it is
// neither compacted nor deduplicated against) and at its durable
// checkpoint: a restart truncates the log to the checkpoint and
// replays the Raft log from there, so cleaning never reaches past it (the
// checkpoint is written just before a clean, as before retention).
//
// The dedupe buffer (log_cleaner_dedupe_buffer_size) and the I/O rate
// (log_cleaner_io_max_bytes_per_second) are shared by the threads in equal
// parts. A partition whose clean failed is left alone for
// uncleanableRetry (Kafka marks it uncleanable until a restart) and
// counted in weir_log_cleaner_uncleanable_partitions.

// uncleanableRetry is how long a partition whose clean failed waits
// before the next try.
const uncleanableRetry = 10 * time.Minute

// compaction is a compacted topic's cleaner settings, from its effective
// configs.
type compaction struct {
	minDirtyRatio   float64
	minLag, maxLag  time.Duration
	deleteRetention time.Duration
}

// compactionOf returns the cleaner settings of a topic with these
// effective configs, false when its cleanup.policy does not compact.
func compactionOf(entries []ConfigEntry) (compaction, bool) {
	if !policyHas(configValue(entries, "cleanup.policy"), "compact") {
		return compaction{}, false
	}
	ratio, _ := strconv.ParseFloat(configValue(entries, "min.cleanable.dirty.ratio"), 64)
	return compaction{
		minDirtyRatio:   ratio,
		minLag:          msDuration(configInt(entries, "min.compaction.lag.ms")),
		maxLag:          msDuration(configInt(entries, "max.compaction.lag.ms")),
		deleteRetention: msDuration(configInt(entries, "delete.retention.ms")),
	}, true
}

// msDuration converts milliseconds, saturating where a Duration ends
// (max.compaction.lag.ms defaults to Long.MAX_VALUE).
func msDuration(ms int64) time.Duration {
	if ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 1<<63 - 1
	}
	return time.Duration(ms) * time.Millisecond
}

// cleanTarget is one local replica of a compacted topic.
type cleanTarget struct {
	topic *Topic
	p     *Partition
	c     compaction
}

// cleanerState is what the last look at a partition found, for the
// choice and the metrics.
type cleanerState struct {
	topic      string
	partition  int32
	dirtyRatio float64
	delay      time.Duration // how far past max.compaction.lag.ms
}

type logCleaner struct {
	targets func() []cleanTarget
	props   *config.Values
	now     func() time.Time
	logger  *slog.Logger
	wake    chan struct{}

	mu          sync.Mutex
	busy        map[*Partition]bool
	uncleanable map[*Partition]time.Time // retry after
	seen        map[*Partition]cleanerState

	bytesRead, bytesWritten        prometheus.Counter
	recordsRemoved, tombstones     prometheus.Counter
	abortedRemoved, markersRemoved prometheus.Counter
	runs, failures                 prometheus.Counter
}

func newLogCleaner(targets func() []cleanTarget, props *config.Values, now func() time.Time, logger *slog.Logger) *logCleaner {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &logCleaner{
		targets: targets, props: props, now: now, logger: logger,
		wake:           make(chan struct{}, 1),
		busy:           map[*Partition]bool{},
		uncleanable:    map[*Partition]time.Time{},
		seen:           map[*Partition]cleanerState{},
		bytesRead:      counter("weir_log_cleaner_read_bytes_total", "Bytes of segments the log cleaner read."),
		bytesWritten:   counter("weir_log_cleaner_written_bytes_total", "Bytes of cleaned segments the log cleaner wrote."),
		recordsRemoved: counter("weir_log_cleaner_removed_records_total", "Records the log cleaner removed: superseded by a later record of their key, or tombstones past delete.retention.ms."),
		tombstones:     counter("weir_log_cleaner_removed_tombstones_total", "Tombstones the log cleaner removed once delete.retention.ms had passed (also counted in weir_log_cleaner_removed_records_total)."),
		abortedRemoved: counter("weir_log_cleaner_removed_aborted_records_total", "Records of aborted transactions the log cleaner removed (also counted in weir_log_cleaner_removed_records_total)."),
		markersRemoved: counter("weir_log_cleaner_removed_txn_markers_total", "Transaction markers the log cleaner removed: no data of their transaction was left and delete.retention.ms had passed."),
		runs:           counter("weir_log_cleaner_runs_total", "Cleans of a partition that finished."),
		failures:       counter("weir_log_cleaner_errors_total", "Cleans of a partition that failed (the partition is retried after 10 minutes)."),
	}
}

// start runs threads cleaner goroutines until ctx ends, each counted in
// wg.
func (c *logCleaner) start(ctx context.Context, wg *sync.WaitGroup, threads int) {
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, threads)
		}()
	}
}

// poke makes a sleeping thread look for work now (a topic became
// compacted, tests).
func (c *logCleaner) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *logCleaner) run(ctx context.Context, threads int) {
	for {
		if ctx.Err() != nil {
			// A clean cut short by the stop leaves its partition dirty:
			// grab would hand it out again at once, for ever.
			return
		}
		if c.props.Bool("log_cleaner_enabled") {
			if t, ok := c.grab(); ok {
				c.clean(ctx, t, threads)
				c.mu.Lock()
				delete(c.busy, t.p)
				c.mu.Unlock()
				continue
			}
		}
		timer := time.NewTimer(time.Duration(c.props.Int("log_cleaner_backoff_ms")) * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// grab picks the partition most in need of cleaning and marks it busy.
func (c *logCleaner) grab() (cleanTarget, bool) {
	now := c.now()
	targets := c.targets()
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[*Partition]cleanerState, len(targets))
	var best cleanTarget
	var bestState cleanerState
	found := false
	for _, t := range targets {
		if t.p.failure() != nil || t.p.deleted.Load() {
			continue
		}
		cb, err := t.p.log.Cleanable(log.CleanOptions{UpTo: t.p.LastStableOffset(), MinCompactionLag: t.c.minLag, Now: c.now})
		if err != nil {
			continue
		}
		st := cleanerState{topic: t.topic.Name(), partition: t.p.Index, dirtyRatio: cb.DirtyRatio()}
		if cb.DirtySince >= 0 && t.c.maxLag < msDuration(now.UnixMilli()) {
			if d := now.Sub(time.UnixMilli(cb.DirtySince)) - t.c.maxLag; d > 0 {
				st.delay = d
			}
		}
		seen[t.p] = st
		if c.busy[t.p] || cb.Dirty == 0 {
			continue
		}
		if until, ok := c.uncleanable[t.p]; ok {
			if now.Before(until) {
				continue
			}
			delete(c.uncleanable, t.p)
		}
		if st.delay == 0 && st.dirtyRatio < t.c.minDirtyRatio {
			continue
		}
		if !found || st.delay > bestState.delay || st.delay == bestState.delay && st.dirtyRatio > bestState.dirtyRatio {
			best, bestState, found = t, st, true
		}
	}
	c.seen = seen
	if found {
		c.busy[best.p] = true
	}
	return best, found
}

// clean compacts one partition.
func (c *logCleaner) clean(ctx context.Context, t cleanTarget, threads int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.p.stop: // the replica closes: leave its log alone
			cancel()
		case <-ctx.Done():
		}
	}()
	upTo, err := t.p.prepareClean()
	if err != nil {
		return
	}
	opts := log.CleanOptions{
		UpTo:              upTo,
		MinCompactionLag:  t.c.minLag,
		DeleteRetention:   t.c.deleteRetention,
		DedupeBufferBytes: c.props.Int("log_cleaner_dedupe_buffer_size") / int64(threads),
		IOBytesPerSecond:  c.props.Int("log_cleaner_io_max_bytes_per_second") / int64(threads),
		Now:               c.now,
	}
	start := time.Now()
	st, err := t.p.log.Clean(ctx, opts)
	c.bytesRead.Add(float64(st.BytesRead))
	c.bytesWritten.Add(float64(st.BytesWritten))
	c.recordsRemoved.Add(float64(st.RecordsRemoved))
	c.tombstones.Add(float64(st.TombstonesRemoved))
	c.abortedRemoved.Add(float64(st.AbortedRecordsRemoved))
	c.markersRemoved.Add(float64(st.MarkersRemoved))
	// Even a failed clean may have swapped passes in.
	t.p.forgetEmptyAborted(st.EmptyAbortedTxns)
	switch {
	case err == nil:
		c.runs.Inc()
		if st.Passes > 0 {
			c.logger.Info("log cleaned", "topic", t.topic.Name(), "partition", t.p.Index,
				"cleaned_to", st.CleanedTo, "read_bytes", st.BytesRead, "written_bytes", st.BytesWritten,
				"removed_records", st.RecordsRemoved, "passes", st.Passes, "took", time.Since(start).Round(time.Millisecond))
		}
	case errors.Is(err, log.ErrCleanAborted), ctx.Err() != nil, errors.Is(err, log.ErrClosed):
		// Retention, a truncation or a reset changed the log, or it is
		// closing: the next look decides again.
	default:
		c.failures.Inc()
		c.logger.Warn("log cleaner failed; partition left alone for a while", "topic", t.topic.Name(), "partition", t.p.Index, "err", err, "retry_in", uncleanableRetry)
		if errors.Is(err, log.ErrLogFailed) {
			t.p.fail(err)
		}
		c.mu.Lock()
		c.uncleanable[t.p] = c.now().Add(uncleanableRetry)
		c.mu.Unlock()
	}
}

// prepareClean checkpoints the replica and returns the offset a clean may
// reach: its last stable offset (at most its high watermark), which the
// new checkpoint covers. An open transaction's data must be neither
// compacted nor deduplicated against: whether it stays is not decided.
func (p *Partition) prepareClean() (upTo int64, err error) {
	err = p.checkpointed(func() error {
		p.ckptMu.Lock()
		end := p.checkpoint.End
		p.ckptMu.Unlock()
		upTo = min(end, p.LastStableOffset())
		return nil
	})
	return upTo, err
}

var (
	cleanerDirtyRatioDesc = prometheus.NewDesc("weir_log_cleaner_dirty_ratio",
		"Dirty share of the cleanable bytes of each local replica of a compacted topic, at the cleaner's last look (Kafka's max-dirty-percent, per partition).",
		[]string{"topic", "partition"}, nil)
	cleanerMaxDelayDesc = prometheus.NewDesc("weir_log_cleaner_max_compaction_delay_seconds",
		"How far past max.compaction.lag.ms the most overdue partition was at the cleaner's last look (Kafka's max-compaction-delay-secs).", nil, nil)
	cleanerUncleanableDesc = prometheus.NewDesc("weir_log_cleaner_uncleanable_partitions",
		"Partitions whose last clean failed, left alone until their retry (Kafka's uncleanable-partitions-count).", nil, nil)
)

func (c *logCleaner) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.counters() {
		m.Describe(ch)
	}
	ch <- cleanerDirtyRatioDesc
	ch <- cleanerMaxDelayDesc
	ch <- cleanerUncleanableDesc
}

func (c *logCleaner) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.counters() {
		m.Collect(ch)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var maxDelay time.Duration
	for _, st := range c.seen {
		ch <- prometheus.MustNewConstMetric(cleanerDirtyRatioDesc, prometheus.GaugeValue, st.dirtyRatio, st.topic, strconv.Itoa(int(st.partition)))
		maxDelay = max(maxDelay, st.delay)
	}
	ch <- prometheus.MustNewConstMetric(cleanerMaxDelayDesc, prometheus.GaugeValue, maxDelay.Seconds())
	ch <- prometheus.MustNewConstMetric(cleanerUncleanableDesc, prometheus.GaugeValue, float64(len(c.uncleanable)))
}

func (c *logCleaner) counters() []prometheus.Counter {
	return []prometheus.Counter{c.bytesRead, c.bytesWritten, c.recordsRemoved, c.tombstones, c.abortedRemoved, c.markersRemoved, c.runs, c.failures}
}
