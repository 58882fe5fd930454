package fanout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-broker/weir/cmd/weirctl/internal/admin"
	"github.com/weir-broker/weir/cmd/weirctl/internal/bench/harness"
)

// errFanoutMaxDuration ends a run that outlived --max-duration.
var errFanoutMaxDuration = errors.New("the run lasted longer than --max-duration")

// run performs every run of the plan and returns the summary of those
// that completed; on an error the summary holds the runs before it.
func (f *fanoutBench) run(ctx context.Context) (sum *fanoutSummary, err error) {
	o := f.o
	if brokers, lerr := f.admin.ListBrokers(ctx); lerr != nil {
		if o.coalescing != "" {
			return nil, fmt.Errorf("--coalescing sets %s through the admin API: %w", coalescingProperty, lerr)
		}
		f.brokerNote = lerr.Error()
		fmt.Fprintf(f.errOut, "note: broker figures unavailable: %v\n", lerr)
	} else {
		f.brokers = brokers
	}

	cl, err := f.g.NewClient(f.producerOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := harness.EnsureTopic(ctx, f.g, cl, f.errOut, f.topic, o.partitions, o.replicas); err != nil {
		return nil, err
	}

	// The property's value before the bench: restored at the end when the
	// bench changes it, and the label of the runs when it does not.
	unchanged := "unknown"
	var sw *coalescingSwitch
	if f.brokers != nil {
		sw, err = readCoalescing(ctx, f.admin, f.g.Timeout)
		switch {
		case err != nil && o.coalescing != "":
			return nil, err
		case err != nil:
			fmt.Fprintf(f.errOut, "note: cannot tell whether coalescing is on: %v\n", err)
		default:
			unchanged = onOff(sw.effective)
		}
	}
	if o.coalescing != "" {
		defer func() {
			// Restore even after Ctrl-C: the cluster must not be left
			// in the bench's setting.
			if !sw.changed {
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*f.g.Timeout)
			defer cancel()
			if rerr := sw.restore(rctx); rerr != nil {
				err = errors.Join(err, rerr)
				return
			}
			fmt.Fprintf(f.errOut, "restored %s (%s)\n", coalescingProperty, sw.describeOriginal())
		}()
	}

	var backlog harness.OffsetRange
	if o.mode == fanoutPreload {
		if backlog, err = f.prepareBacklog(ctx, cl); err != nil {
			return nil, err
		}
	}

	sum = f.newSummary()
	seen := map[string]int{}
	for _, setting := range coalescingPlan(o.coalescing, o.runs) {
		label := setting
		if setting == "" {
			label = unchanged
		} else if err := sw.set(ctx, setting == coalescingOn); err != nil {
			return sum, err
		}
		seen[label]++
		r, err := f.runOnce(ctx, cl, label, seen[label], backlog)
		if err != nil {
			return sum, fmt.Errorf("run %s: %w", runName(label, seen[label], o.runs), err)
		}
		sum.Runs = append(sum.Runs, *r)
	}
	if o.coalescing == coalescingBoth {
		sum.Comparison = compareRuns(sum.Runs)
	}
	return sum, nil
}

// runName is how progress, errors and the table name a run: the
// setting, numbered when each setting runs more than once.
func runName(label string, n, runs int) string {
	if runs == 1 {
		return label
	}
	return fmt.Sprintf("%s #%d", label, n)
}

func onOff(b bool) string {
	if b {
		return coalescingOn
	}
	return coalescingOff
}

// producerOpts are those of bench produce with acks=all, writing to
// partition 0 only. A tail run's producer lingers --linger, as a real
// producer at a steady rate does (the Java client's linger.ms is 5 ms by
// default since 4.0); its latency includes that wait, with coalescing on
// and off alike.
func (f *fanoutBench) producerOpts() []kgo.Opt {
	opts := append(f.g.ProducerOpts(kgo.NoCompression(), kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(f.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if f.o.mode == fanoutTail {
		opts = append(opts, kgo.ProducerLinger(f.o.linger))
	}
	return opts
}

// runOnce measures one run: it starts the consumers together, feeds
// them (tail) or lets them read the backlog (preload), waits until each
// has every record, and reads the brokers' counters around that phase.
func (f *fanoutBench) runOnce(parent context.Context, cl *kgo.Client, label string, n int, backlog harness.OffsetRange) (*fanoutRun, error) {
	o := f.o
	tail := o.mode == fanoutTail
	name := runName(label, n, o.runs)
	consumers, err := f.newConsumers(parent)
	if err != nil {
		return nil, err
	}
	defer closeConsumers(consumers)

	rng := backlog
	if tail {
		_, end, err := partitionOffsets(parent, f.g, cl, f.topic, fanoutPartition)
		if err != nil {
			return nil, err
		}
		rng = harness.OffsetRange{Start: end, End: end + o.tailRecords()}
	}

	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, o.maxDuration, errFanoutMaxDuration)
	defer stop()
	run := &harness.Run{Target: int64(len(consumers)) * rng.Records(), Cancel: cancel}

	before := f.scrape(parent)
	run.Started = time.Now()
	for _, c := range consumers {
		c.track = newFanoutTracker(rng)
		c.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {fanoutPartition: kgo.NewOffset().At(rng.Start)}})
	}
	var producer sync.WaitGroup
	if tail {
		// Producing before every consumer is fetching would charge
		// the first records' latency with consumer start-up.
		if err := waitFirstFetches(ctx, consumers, f.g.Timeout); err != nil {
			return nil, err
		}
		run.Started = time.Now()
		producer.Go(func() { f.produceTail(ctx, cl, rng.Records(), func(err error) { cancel(err) }) })
	}

	monCtx, stopMon := context.WithCancel(ctx)
	var monitor sync.WaitGroup
	monitor.Go(func() { run.Monitor(monCtx, f.errOut, "bench fanout "+name, f.g.Timeout) })
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Go(func() { c.consume(ctx, rng, tail, run) })
	}
	wg.Wait()
	// The progress line must not land in the middle of the summary.
	stopMon()
	monitor.Wait()
	// Consumers that have every record let the producer finish too, so
	// this wait is bounded by its flush timeout.
	producer.Wait()
	if err := runFailure(parent, ctx, consumers, rng); err != nil {
		return nil, err
	}
	after := f.scrape(parent)
	return f.newRun(label, n, consumers, run.Started, run.Elapsed(), before, after), nil
}

// scrape reads every known broker's /metrics; none without the admin API.
func (f *fanoutBench) scrape(ctx context.Context) []admin.BrokerScrape {
	if f.brokers == nil {
		return nil
	}
	return f.admin.ScrapeBrokers(ctx, f.brokers)
}

// runFailure says why a run is incomplete, or nil when every consumer
// got every record. A complete run is complete even when Ctrl-C or the
// deadline arrived just after its last record.
func runFailure(parent, run context.Context, consumers []*fanoutConsumer, rng harness.OffsetRange) error {
	var short []string
	for _, c := range consumers {
		if c.err != nil {
			return c.err
		}
		if !c.track.done(rng) {
			short = append(short, fmt.Sprintf("consumer %d got %d of %d records", c.id, c.track.received, rng.Records()))
		}
	}
	if len(short) == 0 {
		return nil
	}
	const shown = 3
	detail := strings.Join(short[:min(len(short), shown)], ", ")
	if len(short) > shown {
		detail += fmt.Sprintf(" (and %d more)", len(short)-shown)
	}
	cause := context.Cause(run)
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("interrupted: %s", detail)
	case errors.Is(cause, errFanoutMaxDuration):
		return fmt.Errorf("%w: %s", cause, detail)
	case cause != nil:
		return fmt.Errorf("%w (%s)", cause, detail)
	}
	return fmt.Errorf("consumers stopped early: %s", detail)
}
