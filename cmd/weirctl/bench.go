package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bytesPerMB follows kafka-producer-perf-test, which divides by 2^20, so
// numbers can be compared with what people already measured on Kafka.
const bytesPerMB = 1 << 20

// Reasons a bench run ended; reported in the summary so that a run cut
// short is never mistaken for a complete one.
const (
	stopRecords     = "records"
	stopDuration    = "duration"
	stopInterrupted = "interrupted"
	stopStalled     = "stalled"
	stopFailed      = "failed"
)

var (
	errBenchDone = errors.New("bench reached its record target")
	errStall     = errors.New("stalled")
)

func newBenchCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency",
		Long: "Benchmarks stop when --records are done, when --duration elapses, on\n" +
			"Ctrl-C, or when no record completes for --timeout. Progress goes to\n" +
			"stderr once a second; the summary goes to stdout. MB means 2^20 bytes.",
	}
	cmd.AddCommand(newBenchProduceCommand(g), newBenchConsumeCommand(g), newBenchFanoutCommand(g), newBenchMemoryCommand(g), newBenchSoakCommand(g), newBenchScaleCommand(g))
	return cmd
}

// benchSummary is the result of a run; field names are a stable contract
// for scripts reading --format json.
type benchSummary struct {
	Mode          string  `json:"mode"`
	Topic         string  `json:"topic"`
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Errors        int64   `json:"errors"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	Stopped       string  `json:"stopped"`
}

func newSummary(mode, topic string, records, bytes, errs int64, elapsed time.Duration, lat []time.Duration) benchSummary {
	s := benchSummary{Mode: mode, Topic: topic, Records: records, Bytes: bytes, Errors: errs, Seconds: elapsed.Seconds()}
	if s.Seconds > 0 {
		s.RecordsPerSec = float64(records) / s.Seconds
		s.MBPerSec = float64(bytes) / bytesPerMB / s.Seconds
	}
	p := computePercentiles(lat)
	s.P50Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs = ms(p.p50), ms(p.p95), ms(p.p99), ms(p.p999), ms(p.max)
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (s benchSummary) write(w io.Writer, format string) error {
	if format != formatTable {
		return writeDocument(w, format, s)
	}
	t := newTable()
	t.row("MODE", s.Mode)
	t.row("TOPIC", s.Topic)
	t.row("RECORDS", s.Records)
	t.row("BYTES", s.Bytes)
	t.row("ERRORS", s.Errors)
	t.row("SECONDS", fmt.Sprintf("%.3f", s.Seconds))
	t.row("RECORDS/SEC", fmt.Sprintf("%.0f", s.RecordsPerSec))
	t.row("MB/SEC", fmt.Sprintf("%.2f", s.MBPerSec))
	t.row("P50 MS", fmt.Sprintf("%.3f", s.P50Ms))
	t.row("P95 MS", fmt.Sprintf("%.3f", s.P95Ms))
	t.row("P99 MS", fmt.Sprintf("%.3f", s.P99Ms))
	t.row("P99.9 MS", fmt.Sprintf("%.3f", s.P999Ms))
	t.row("MAX MS", fmt.Sprintf("%.3f", s.MaxMs))
	t.row("STOPPED", s.Stopped)
	return t.write(w)
}

type percentiles struct{ p50, p95, p99, p999, max time.Duration }

// computePercentiles uses the nearest-rank method: every reported value is a
// latency that was actually observed, which interpolation would not
// guarantee. It sorts its argument in place.
func computePercentiles(d []time.Duration) percentiles {
	if len(d) == 0 {
		return percentiles{}
	}
	slices.Sort(d)
	return percentiles{
		p50:  nearestRank(d, 0.50),
		p95:  nearestRank(d, 0.95),
		p99:  nearestRank(d, 0.99),
		p999: nearestRank(d, 0.999),
		max:  d[len(d)-1],
	}
}

func nearestRank(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// benchRun holds the counters shared by workers, the progress printer and
// the stall watchdog.
type benchRun struct {
	target  int64
	done    atomic.Int64
	bytes   atomic.Int64
	errs    atomic.Int64
	started time.Time
	// last is when the most recent record completed. Measuring up to it,
	// not to when the run stopped, keeps a stall or a wait for stragglers
	// from diluting the rate.
	last   atomic.Int64
	cancel context.CancelCauseFunc
}

// completed records a completion time; promises and workers run
// concurrently, so it keeps the maximum rather than the last store.
func (r *benchRun) completed(at time.Time) {
	n := at.UnixNano()
	for {
		old := r.last.Load()
		if n <= old || r.last.CompareAndSwap(old, n) {
			return
		}
	}
}

func (r *benchRun) elapsed() time.Duration {
	if l := r.last.Load(); l != 0 {
		return time.Duration(l - r.started.UnixNano())
	}
	return 0
}

// monitor prints progress to w once a second and cancels the run when
// nothing completes for stallAfter; it returns when ctx ends.
func (r *benchRun) monitor(ctx context.Context, w io.Writer, label string, stallAfter time.Duration) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastDone, lastBytes := int64(0), int64(0)
	lastAt, lastProgress := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			// Consumers may overshoot the target by a poll; clamp so
			// progress never reads above 100%.
			d, b := min(r.done.Load(), r.target), r.bytes.Load()
			secs := now.Sub(lastAt).Seconds()
			fmt.Fprintf(w, "%s: %d/%d records (%.1f%%), %.0f rec/s, %.2f MB/s\n",
				label, d, r.target, 100*float64(d)/float64(r.target),
				float64(d-lastDone)/secs, float64(b-lastBytes)/bytesPerMB/secs)
			if d != lastDone {
				lastProgress = now
			} else if now.Sub(lastProgress) >= stallAfter {
				r.cancel(fmt.Errorf("%w: no record completed for %s", errStall, stallAfter))
			}
			lastDone, lastBytes, lastAt = d, b, now
		}
	}
}

// stopReason classifies how the run context ended.
func stopReason(parent, run context.Context) (string, error) {
	cause := context.Cause(run)
	switch {
	case cause == nil || errors.Is(cause, errBenchDone):
		return stopRecords, nil
	case parent.Err() != nil:
		return stopInterrupted, errors.New("interrupted")
	case errors.Is(cause, context.DeadlineExceeded):
		return stopDuration, nil
	case errors.Is(cause, errStall):
		return stopStalled, cause
	default:
		return stopFailed, cause
	}
}

type benchProduceOptions struct {
	records       int64
	recordSize    int
	batchMaxBytes int32
	linger        time.Duration
	compression   string
	acks          string
	partitions    int32
	replicas      int16
	duration      time.Duration
}

func (o *benchProduceOptions) validate() error {
	switch {
	case o.records <= 0:
		return fmt.Errorf("--records must be positive, got %d", o.records)
	case o.recordSize < 0:
		return fmt.Errorf("--record-size must be >= 0, got %d", o.recordSize)
	case o.batchMaxBytes < 0:
		return fmt.Errorf("--batch-max-bytes must be >= 0, got %d", o.batchMaxBytes)
	case o.partitions < 0:
		return fmt.Errorf("--partitions must be >= 0, got %d", o.partitions)
	case o.replicas == 0 || o.replicas < -1:
		return fmt.Errorf("--replication-factor must be positive or -1, got %d", o.replicas)
	case o.replicas != -1 && o.partitions == 0:
		return errors.New("--replication-factor only applies when creating the topic; give --partitions too")
	case o.duration < 0:
		return fmt.Errorf("--duration must be >= 0, got %s", o.duration)
	case o.linger < 0:
		return fmt.Errorf("--linger must be >= 0, got %s", o.linger)
	}
	return nil
}

func newBenchProduceCommand(g *globalOptions) *cobra.Command {
	o := &benchProduceOptions{}
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce --records records as fast as possible",
		Long: "Produce --records records of --record-size bytes and report throughput\n" +
			"and ack latency (time from handing a record to the client until its\n" +
			"produce promise fires). With --partitions, creates TOPIC if missing,\n" +
			"with --replication-factor replicas per partition (default: the broker's).",
		Example: "  weirctl bench produce bench -p 6 --records 1000000 --record-size 1024 --compression lz4\n" +
			"  weirctl bench produce bench-rf3 -p 3 --replication-factor 3 --acks all --records 200000 --record-size 1024",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			codec, err := parseCompression(o.compression)
			if err != nil {
				return err
			}
			acks, err := parseAcks(o.acks)
			if err != nil {
				return err
			}
			topic := args[0]
			opts := append(g.producerOpts(codec, acks), kgo.DefaultProduceTopic(topic))
			if o.batchMaxBytes > 0 {
				opts = append(opts, kgo.ProducerBatchMaxBytes(o.batchMaxBytes))
			}
			if cmd.Flags().Changed("linger") {
				opts = append(opts, kgo.ProducerLinger(o.linger))
			}
			cl, err := g.newClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			if err := ensureBenchTopic(cmd.Context(), g, cl, cmd.ErrOrStderr(), topic, o.partitions, o.replicas); err != nil {
				return err
			}
			sum, runErr := benchProduce(cmd.Context(), g, cl, cmd.ErrOrStderr(), topic, o)
			if err := sum.write(cmd.OutOrStdout(), g.format); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.records, "records", 0, "number of records to produce (required)")
	f.IntVar(&o.recordSize, "record-size", 100, "value size in bytes")
	f.Int32Var(&o.batchMaxBytes, "batch-max-bytes", 0, "max bytes per partition batch (0: client default)")
	f.DurationVar(&o.linger, "linger", 0, "how long to wait to fill batches (default: client default)")
	f.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	f.StringVar(&o.acks, "acks", "-1", "required acks: -1 (all), 1 (leader), 0 (none)")
	f.Int32VarP(&o.partitions, "partitions", "p", 0, "create TOPIC with this many partitions if it is missing (0: topic must exist)")
	f.Int16VarP(&o.replicas, "replication-factor", "r", -1, "replication factor when --partitions creates TOPIC (-1: broker default)")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long even if --records are not done (0: no limit)")
	_ = cmd.MarkFlagRequired("records")
	return cmd
}

// ensureBenchTopic creates the topic only when asked to, because silently
// benchmarking against an auto-created one-partition topic measures the
// wrong thing. An existing topic is used as it is; a shape other than the
// one asked for is pointed out, since it changes what is measured.
func ensureBenchTopic(ctx context.Context, g *globalOptions, cl *kgo.Client, errOut io.Writer, topic string, partitions int32, replicas int16) error {
	if partitions == 0 {
		_, err := topicPartitions(ctx, g, cl, topic)
		return err
	}
	actx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(g.timeout.Milliseconds()))
	resp, err := adm.CreateTopic(actx, partitions, replicas, nil, topic)
	switch {
	case err == nil:
		// The factor asked for, not resp.ReplicationFactor, which weir's
		// CreateTopics answer set to 1 for every topic when this was
		// written.
		rf := "broker default"
		if replicas > 0 {
			rf = fmt.Sprint(replicas)
		}
		fmt.Fprintf(errOut, "created topic %s with %d partitions, replication factor %s\n", topic, resp.NumPartitions, rf)
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		have, rf, derr := benchTopicShape(ctx, g, cl, topic)
		if derr != nil {
			return derr
		}
		if have != int(partitions) {
			fmt.Fprintf(errOut, "note: topic %s already exists with %d partitions, not %d\n", topic, have, partitions)
		}
		if replicas > 0 && rf != int(replicas) {
			fmt.Fprintf(errOut, "note: topic %s already exists with replication factor %d, not %d\n", topic, rf, replicas)
		}
		return nil
	default:
		return fmt.Errorf("creating topic %s: %s", topic, statusCell(err, resp.ErrMessage))
	}
}

// benchTopicShape returns an existing topic's partition count and
// replication factor (the replica count of its partitions).
func benchTopicShape(ctx context.Context, g *globalOptions, cl *kgo.Client, topic string) (partitions, replicas int, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return 0, 0, g.describeCallErr("loading metadata for "+topic, err)
	}
	d, ok := details[topic]
	if !ok {
		return 0, 0, fmt.Errorf("topic %s: broker returned no metadata for it", topic)
	}
	if d.Err != nil {
		return 0, 0, fmt.Errorf("topic %s: %s", topic, statusCell(d.Err, ""))
	}
	return len(d.Partitions), d.Partitions.NumReplicas(), nil
}

func benchProduce(parent context.Context, g *globalOptions, cl *kgo.Client, errOut io.Writer, topic string, o *benchProduceOptions) (benchSummary, error) {
	run := &benchRun{target: o.records}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	run.cancel = cancel
	if o.duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.duration, context.DeadlineExceeded)
		defer stop()
	}

	// One shared random payload, as kafka-producer-perf-test does: random
	// letters keep compression honest-ish without paying to generate N
	// values, and franz-go never mutates a record's value.
	payload := make([]byte, o.recordSize)
	for i := range payload {
		payload[i] = byte('a' + rand.IntN(26))
	}

	var (
		latMu sync.Mutex
		lat   = make([]time.Duration, 0, min(o.records, 1<<24))
	)
	monCtx, stopMon := context.WithCancel(ctx)
	run.started = time.Now()
	go run.monitor(monCtx, errOut, "bench produce", g.timeout)

	for i := int64(0); i < o.records && ctx.Err() == nil; i++ {
		start := time.Now()
		cl.Produce(ctx, &kgo.Record{Value: payload}, func(r *kgo.Record, err error) {
			if err != nil {
				// Records failed because we stopped on purpose are
				// unsent, not broker errors.
				if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
					return
				}
				run.errs.Add(1)
				cancel(fmt.Errorf("produce to %s: %s", topic, statusCell(err, "")))
				return
			}
			now := time.Now()
			latMu.Lock()
			lat = append(lat, now.Sub(start))
			latMu.Unlock()
			run.bytes.Add(int64(len(r.Key) + len(r.Value)))
			run.done.Add(1)
			run.completed(now)
		})
	}

	flushCtx, cancelFlush := context.WithTimeout(context.WithoutCancel(ctx), g.timeout+time.Second)
	flushErr := cl.Flush(flushCtx)
	cancelFlush()
	stopMon()

	reason, runErr := stopReason(parent, ctx)
	if run.done.Load() >= o.records {
		// The last acks can land just as --duration or Ctrl-C fires;
		// a complete run is complete regardless.
		reason, runErr = stopRecords, nil
	}
	if runErr == nil && flushErr != nil {
		reason, runErr = stopFailed, g.describeCallErr("waiting for acks", flushErr)
	}
	latMu.Lock()
	defer latMu.Unlock()
	sum := newSummary("produce", topic, run.done.Load(), run.bytes.Load(), run.errs.Load(), run.elapsed(), lat)
	sum.Stopped = reason
	return sum, runErr
}

type benchConsumeOptions struct {
	records   int64
	consumers int
	duration  time.Duration
	offset    string
}

func (o *benchConsumeOptions) validate() error {
	switch {
	case o.records <= 0:
		return fmt.Errorf("--records must be positive, got %d", o.records)
	case o.consumers < 1:
		return fmt.Errorf("--consumers must be >= 1, got %d", o.consumers)
	case o.duration < 0:
		return fmt.Errorf("--duration must be >= 0, got %s", o.duration)
	}
	return nil
}

func newBenchConsumeCommand(g *globalOptions) *cobra.Command {
	o := &benchConsumeOptions{}
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Consume --records records as fast as possible",
		Long: "Consume --records records with --consumers clients, each reading a\n" +
			"disjoint share of TOPIC's partitions (no consumer group, so the group\n" +
			"protocol does not skew the numbers). Latency is end-to-end: consume time\n" +
			"minus the record's timestamp, so it is meaningful while a producer runs\n" +
			"(e.g. with -o end) and is simply the data's age otherwise.",
		Example: "  weirctl bench consume bench --records 1000000 --consumers 3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			start, err := parseOffset(o.offset)
			if err != nil {
				return err
			}
			sum, runErr := benchConsume(cmd.Context(), g, cmd.ErrOrStderr(), args[0], start, o)
			if sum == nil {
				return runErr
			}
			if err := sum.write(cmd.OutOrStdout(), g.format); err != nil {
				return err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.records, "records", 0, "number of records to consume (required)")
	f.IntVarP(&o.consumers, "consumers", "c", 1, "number of concurrent consumer clients")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long even if --records are not done (0: no limit)")
	f.StringVarP(&o.offset, "offset", "o", "start", "where to start: start, end, or an exact OFFSET")
	_ = cmd.MarkFlagRequired("records")
	return cmd
}

// assignPartitions deals partitions round-robin so consumer loads differ by
// at most one partition; it never returns an empty share.
func assignPartitions(parts []int32, consumers int) [][]int32 {
	n := min(consumers, len(parts))
	shares := make([][]int32, n)
	for i, p := range parts {
		shares[i%n] = append(shares[i%n], p)
	}
	return shares
}

func benchConsume(parent context.Context, g *globalOptions, errOut io.Writer, topic string, start kgo.Offset, o *benchConsumeOptions) (*benchSummary, error) {
	meta, err := g.newClient()
	if err != nil {
		return nil, err
	}
	parts, err := topicPartitions(parent, g, meta, topic)
	meta.Close()
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("topic %s has no partitions", topic)
	}
	shares := assignPartitions(parts, o.consumers)
	if len(shares) < o.consumers {
		fmt.Fprintf(errOut, "note: only %d partitions, using %d consumers\n", len(parts), len(shares))
	}

	run := &benchRun{target: o.records}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	run.cancel = cancel
	if o.duration > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, o.duration, context.DeadlineExceeded)
		defer stop()
	}

	clients := make([]*kgo.Client, 0, len(shares))
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for _, share := range shares {
		offsets := make(map[int32]kgo.Offset, len(share))
		for _, p := range share {
			offsets[p] = start
		}
		cl, err := g.newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
	}

	monCtx, stopMon := context.WithCancel(ctx)
	defer stopMon()
	run.started = time.Now()
	go run.monitor(monCtx, errOut, "bench consume", g.timeout)

	// Each worker keeps its own latencies so the hot path takes no lock.
	lats := make([][]time.Duration, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { lats[i] = consumeWorker(ctx, cl, run) })
	}
	wg.Wait()
	stopMon()

	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	reason, runErr := stopReason(parent, ctx)
	done := min(run.done.Load(), o.records)
	if done == o.records {
		reason, runErr = stopRecords, nil
	}
	sum := newSummary("consume", topic, done, run.bytes.Load(), run.errs.Load(), run.elapsed(), all)
	sum.Stopped = reason
	return &sum, runErr
}

func consumeWorker(ctx context.Context, cl *kgo.Client, run *benchRun) []time.Duration {
	var lat []time.Duration
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return lat
		}
		if err := firstFetchError(fetches); err != nil {
			run.errs.Add(1)
			run.cancel(err)
			return lat
		}
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			n := run.done.Add(1)
			// Workers race past the target by up to one poll; records
			// beyond it are not counted so the totals are exact.
			if n > run.target {
				return
			}
			lat = append(lat, now.Sub(r.Timestamp))
			run.bytes.Add(int64(len(r.Key) + len(r.Value)))
			run.completed(now)
			if n == run.target {
				run.cancel(errBenchDone)
			}
		})
	}
	return lat
}
